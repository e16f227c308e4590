"""EvidenceGuard: every reference an answer or report cites must map 1:1 to an excerpt.

A reference maps 1:1 when exactly one excerpt of the payload has it as
``document_id``. With D5 (``document_id`` = evidence key) that holds for every
returned chunk; with the legacy ``document_id = source`` a chunk reference does not
map, and a document reference maps to a block of several merged chunks.
L0 hints are not excerpts, so citing one is reported as unmapped.

>>> from rag_eval.core.transform import KnowledgeQueryTransformer
>>> from rag_eval.core.projector import ProjectedExcerpt, ProjectedPayload
>>> ex = ProjectedExcerpt(document_id="d#chunk-1", source="d.md", title="D", content="x", score=1.0,
...                       rank=1, truncated=False, delivered_members=("d#chunk-1",))
>>> payload = ProjectedPayload(query="q", excerpts=(ex,), hints=KnowledgeQueryTransformer().transform("q"), cuts=())
>>> EvidenceGuard().check(payload, ["d#chunk-1", "d#chunk-2"]).unmapped
('d#chunk-2',)
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from rag_eval.core.projector import ProjectedPayload


@dataclass(frozen=True, slots=True, kw_only=True)
class GuardReport:
    unmapped: tuple[str, ...]  # cited, but no excerpt has this document_id
    ambiguous: tuple[str, ...]  # cited, and several excerpts share this document_id

    @property
    def ok(self) -> bool:
        return not self.unmapped and not self.ambiguous

    @property
    def violations(self) -> tuple[str, ...]:
        return self.unmapped + self.ambiguous


@dataclass(frozen=True, slots=True)
class EvidenceGuard:
    def check(self, payload: ProjectedPayload, references: Iterable[str]) -> GuardReport:
        counts: dict[str, int] = {}  # excerpts by document_id (a dict: a Counter costs more on a few)
        for e in payload.excerpts:
            counts[e.document_id] = counts.get(e.document_id, 0) + 1
        unmapped: list[str] = []
        ambiguous: list[str] = []
        for ref in dict.fromkeys(references):  # each reference once, in citation order
            n = counts.get(ref, 0)
            if n == 0:
                unmapped.append(ref)
            elif n > 1:
                ambiguous.append(ref)
        return GuardReport(unmapped=tuple(unmapped), ambiguous=tuple(ambiguous))
