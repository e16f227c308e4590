"""Pack selected evidence into EvidenceBlocks, and assemble the lookup's RagResult.

The evidence packer makes one block per selection with the primary's content (D2:
different chunks of one document are never merged); ``legacy-first`` uses it too, its
blocks keyed by document. The legacy packer joins the contents of every chunk of a
document into one block, as ``legacy-merge`` did.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from rag_eval.core.postprocess import PostProcessOutcome, SelectedEvidence
from rag_eval.core.transform import QueryHints
from rag_eval.core.types import EvidenceBlock, MemberSpan, fast_constructor

LEGACY_JOINER = "\n\n"


_new_block = fast_constructor(EvidenceBlock)
_new_span = fast_constructor(MemberSpan)


def _block(sel: SelectedEvidence, position: int, content: str, members: tuple[MemberSpan, ...]) -> EvidenceBlock:
    hit = sel.primary.hit
    return _new_block(
        sel.key,
        position,
        content,
        hit.score,
        hit.doc_id,
        hit.source,
        hit.title,
        hit.category,
        sel.hit_reasons,
        members,
        hit.metadata,
    )


@dataclass(frozen=True, slots=True)
class EvidencePacker:
    """One block per selection, content of the first after sorting; its one member is
    that candidate's evidence key (the block key too, in the evidence pipeline)."""

    def pack(self, selected: Iterable[SelectedEvidence]) -> tuple[EvidenceBlock, ...]:
        out = []
        for pos, sel in enumerate(selected, start=1):
            primary = sel.primary
            hit = primary.hit
            content = hit.content
            span = _new_span(primary.key, 0, len(content))
            out.append(
                _new_block(
                    sel.key,
                    pos,
                    content,
                    hit.score,
                    hit.doc_id,
                    hit.source,
                    hit.title,
                    hit.category,
                    sel.hit_reasons,
                    (span,),
                    hit.metadata,
                )
            )
        return tuple(out)


@dataclass(frozen=True, slots=True)
class LegacyPacker:
    """One block per document: member contents joined in score order."""

    joiner: str = LEGACY_JOINER

    def pack(self, selected: Iterable[SelectedEvidence]) -> tuple[EvidenceBlock, ...]:
        out = []
        for pos, sel in enumerate(selected, start=1):
            parts: list[str] = []
            spans: list[MemberSpan] = []
            offset = 0
            for m in sel.members:
                if parts:
                    offset += len(self.joiner)
                text = m.hit.content
                spans.append(_new_span(m.key, offset, offset + len(text)))
                parts.append(text)
                offset += len(text)
            out.append(_block(sel, pos, self.joiner.join(parts), tuple(spans)))
        return tuple(out)


@dataclass(frozen=True, slots=True, kw_only=True)
class RagResult:
    """What the pipeline hands the projector: L0 hints beside L1 evidence blocks."""

    hints: QueryHints
    blocks: tuple[EvidenceBlock, ...]
    outcome: PostProcessOutcome


@dataclass(frozen=True, slots=True)
class RagResultAssembler:
    """Puts hints and blocks side by side; hints never enter ``blocks``."""

    def assemble(self, hints: QueryHints, blocks: tuple[EvidenceBlock, ...], outcome: PostProcessOutcome) -> RagResult:
        return _new_result(hints, blocks, outcome)


_new_result = fast_constructor(RagResult)
