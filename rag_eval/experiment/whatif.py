"""Evaluation-only "what if" post-processors: measure what a change would buy before anyone
builds it. Production never runs these; the design's D2 stays exactly as it is.

``content-dedup``  D2 (dedup by evidence key), then drop every block whose normalised
                   content equals an earlier kept block's (stage ``content_dedup``, its hit
                   reasons merged into the kept one), then D3 and D4. It closes the gap D1's
                   fallback leaves: a re-ingested copy of a row without chunk_index gets a
                   new ``vector:`` key, so D2 keeps both copies.

>>> from rag_eval.core.types import KnowledgeSearchHit, to_candidates
>>> hits = [KnowledgeSearchHit(id="1", content="Restart the SQL thread.", score=0.9, doc_id="d", vector_id="1"),
...         KnowledgeSearchHit(id="7", content="restart the  SQL thread.", score=0.9, doc_id="d", vector_id="7")]
>>> outcome = ContentDedupPostProcessor(return_n=5, max_chunks_per_document=2)(to_candidates(hits))
>>> [s.key for s in outcome.selected], [e.stage.value for e in outcome.trace]
(['vector:1'], ['returned', 'content_dedup'])
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass

from rag_eval.content import content_sha
from rag_eval.core.config import RagConfig
from rag_eval.core.lookup import PostProcessor
from rag_eval.core.postprocess import (
    PostProcessOutcome,
    SelectedEvidence,
    Stage,
    TraceEntry,
    cap_and_return_n,
    dedup_by_key,
    duplicate_trace,
    sort_candidates,
)
from rag_eval.core.types import RetrievedEvidenceCandidate


@dataclass(frozen=True, slots=True)
class ContentDedupPostProcessor:
    """D2, then dedup by normalised content (the first after sorting is kept), then D3 and D4."""

    return_n: int
    max_chunks_per_document: int

    def __call__(self, candidates: Iterable[RetrievedEvidenceCandidate]) -> PostProcessOutcome:
        unique, duplicates = dedup_by_key(sort_candidates(candidates))
        by_sha: dict[str, list[SelectedEvidence]] = {}  # first of a text, then the ones dropped into it
        for sel in unique:
            by_sha.setdefault(content_sha(sel.primary.hit.content), []).append(sel)
        kept = [_merged(same) for same in by_sha.values()]
        dropped = [(sel, same[0].key) for same in by_sha.values() for sel in same[1:]]
        selected, trace = cap_and_return_n(
            kept, return_n=self.return_n, max_chunks_per_document=self.max_chunks_per_document
        )
        trace.extend(duplicate_trace(duplicates, selected))
        trace.extend(
            TraceEntry(
                key=sel.key,
                original_rank=sel.primary.original_rank,
                vector_id=sel.primary.hit.vector_id,
                stage=Stage.CONTENT_DEDUP,
                merged_into=into,
            )
            for sel, into in dropped
        )
        trace.sort(key=lambda e: (e.original_rank, e.key))
        return PostProcessOutcome(selected=tuple(selected), trace=tuple(trace))


def _merged(same: list[SelectedEvidence]) -> SelectedEvidence:
    """The first selection of a text, with the hit reasons of the others with that text added (each once)."""
    first = same[0]
    if len(same) == 1:
        return first
    reasons = list(first.hit_reasons)
    seen = set(reasons)
    for sel in same[1:]:
        new = [r for r in sel.hit_reasons if r not in seen]
        reasons.extend(new)
        seen.update(new)
    return SelectedEvidence(key=first.key, primary=first.primary, members=first.members, hit_reasons=tuple(reasons))


WhatIf = Callable[[RagConfig], PostProcessor]

WHAT_IFS: dict[str, WhatIf] = {
    "content-dedup": lambda c: ContentDedupPostProcessor(
        return_n=c.return_n, max_chunks_per_document=c.max_chunks_per_document
    ),
}
WHAT_IF_NOTES: dict[str, str] = {
    "content-dedup": "what if: D2, then dedup by normalised content, then D3/D4 (evaluation only, not production)",
}
