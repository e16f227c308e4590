"""Post-processing (D2, D3, D4): sort, dedup by evidence key, per-document cap, return-n.

Ordering rule (documented, total, deterministic): score descending (NaN last), then
original rank ascending (the port's own order), then evidence key ascending. Inputs
that tie on score are therefore ordered as the search engine ordered them, and the
result does not depend on the order in which candidates are handed in.

Stages, in order, each recorded in the trace for every candidate:

``dedup``       a later candidate with an evidence key already kept (a true duplicate):
                its hit reasons are merged into the kept one, its content is dropped
``cap``         its document already has ``max_chunks_per_document`` blocks; a candidate
                without docId is a bucket of its own (its evidence key)
``truncation``  beyond ``return_n`` blocks
``returned``    kept, with its final 1-based position

The legacy processors (what D1-D5 replace) are here too, so all run on the same hits:
``legacy-merge`` merges every chunk of a source into one block (stage ``merged``),
``legacy-first`` keeps a source's top-scored chunk and drops the others as document
duplicates (stage ``document_dedup``).
"""

from __future__ import annotations

import enum
import math
from collections.abc import Iterable
from dataclasses import dataclass

from rag_eval.core.identity import RANK_PREFIX, VECTOR_PREFIX
from rag_eval.core.types import HitReason, RetrievedEvidenceCandidate, sort_score


class Stage(enum.StrEnum):
    RETURNED = "returned"
    DEDUP = "dedup"
    CAP = "cap"
    TRUNCATION = "truncation"
    MERGED = "merged"  # legacy-merge: merged into its document's block (delivered with it)
    DOCUMENT_DEDUP = "document_dedup"  # legacy-first: another chunk of its document came first (dropped)
    CONTENT_DEDUP = "content_dedup"  # harness what-if only (same text as a kept block); production never emits it


@dataclass(frozen=True, slots=True, kw_only=True)
class TraceEntry:
    """What post-processing did with one candidate.

    ``position`` is the 1-based position of the block that carries the candidate
    (``returned``, ``merged``, or ``dedup`` into a returned key), else None.
    ``merged_into`` names the kept key for ``dedup`` and ``merged``.
    """

    key: str
    original_rank: int
    vector_id: str | None
    stage: Stage
    position: int | None = None
    merged_into: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class SelectedEvidence:
    """One block-to-be: its key, the candidate whose content it keeps (the first after
    sorting) and every candidate it stands for (primary first)."""

    key: str
    primary: RetrievedEvidenceCandidate
    members: tuple[RetrievedEvidenceCandidate, ...]
    hit_reasons: tuple[HitReason, ...]

    def as_candidate(self) -> RetrievedEvidenceCandidate:
        """This selection as one candidate again (merged hit reasons kept)."""
        return RetrievedEvidenceCandidate(
            key=self.key, hit=self.primary.hit, original_rank=self.primary.original_rank, hit_reasons=self.hit_reasons
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class PostProcessOutcome:
    selected: tuple[SelectedEvidence, ...]
    trace: tuple[TraceEntry, ...]  # one entry per input candidate, in original-rank order

    def stage_counts(self) -> dict[str, int]:
        counts = {s.value: 0 for s in Stage}
        for entry in self.trace:
            counts[entry.stage.value] += 1
        return counts


def sort_candidates(candidates: Iterable[RetrievedEvidenceCandidate]) -> list[RetrievedEvidenceCandidate]:
    """The documented order: score desc (NaN last, after minus infinity too), original rank asc, key asc."""
    return sorted(candidates, key=lambda c: (math.isnan(c.score), -sort_score(c.score), c.original_rank, c.key))


def _merge_reasons(a: tuple[HitReason, ...], b: tuple[HitReason, ...]) -> tuple[HitReason, ...]:
    return a + tuple(r for r in b if r not in a)


def _trace_order(entries: list[TraceEntry]) -> tuple[TraceEntry, ...]:
    return tuple(sorted(entries, key=lambda e: (e.original_rank, e.key)))


def dedup_by_key(
    ordered: Iterable[RetrievedEvidenceCandidate],
) -> tuple[list[SelectedEvidence], list[RetrievedEvidenceCandidate]]:
    """D2 on candidates already in the documented order: one selection per evidence key
    (the first keeps its content, later ones add their hit reasons), and the later
    candidates that were merged into one (the true duplicates)."""
    kept: dict[str, SelectedEvidence] = {}
    duplicates: list[RetrievedEvidenceCandidate] = []
    for cand in ordered:
        existing = kept.get(cand.key)
        if existing is None:
            kept[cand.key] = SelectedEvidence(key=cand.key, primary=cand, members=(cand,), hit_reasons=cand.hit_reasons)
        else:
            kept[cand.key] = SelectedEvidence(
                key=existing.key,
                primary=existing.primary,
                members=(*existing.members, cand),
                hit_reasons=_merge_reasons(existing.hit_reasons, cand.hit_reasons),
            )
            duplicates.append(cand)
    return list(kept.values()), duplicates  # dicts keep first-seen (= sorted) order


def cap_and_return_n(
    selections: Iterable[SelectedEvidence], *, return_n: int, max_chunks_per_document: int
) -> tuple[list[SelectedEvidence], list[TraceEntry]]:
    """D3 then D4 on deduplicated selections in order: at most ``max_chunks_per_document``
    per docId (a selection without docId is a bucket of its own), then the first
    ``return_n``. Returns the selected ones and a trace entry for every input."""
    per_doc: dict[str, int] = {}
    selected: list[SelectedEvidence] = []
    trace: list[TraceEntry] = []
    for sel in selections:
        bucket = sel.primary.doc_id or f"\x00{sel.key}"  # missing docId: own bucket
        if per_doc.get(bucket, 0) >= max_chunks_per_document:
            trace.append(_entry(sel.primary, Stage.CAP))
            continue
        per_doc[bucket] = per_doc.get(bucket, 0) + 1
        if len(selected) >= return_n:
            trace.append(_entry(sel.primary, Stage.TRUNCATION))
            continue
        selected.append(sel)
        trace.append(_entry(sel.primary, Stage.RETURNED, position=len(selected)))
    return selected, trace


def duplicate_trace(
    duplicates: Iterable[RetrievedEvidenceCandidate], selected: Iterable[SelectedEvidence]
) -> list[TraceEntry]:
    """Trace entries of true duplicates: merged into their key, positioned where that key was returned."""
    position_of = {sel.key: i for i, sel in enumerate(selected, start=1)}
    return [
        _entry(cand, Stage.DEDUP, position=position_of.get(cand.key), merged_into=cand.key) for cand in duplicates
    ]


@dataclass(frozen=True, slots=True)
class EvidencePostProcessor:
    """D2 + D3 + D4 on one lookup's candidates.

    >>> from rag_eval.core.types import KnowledgeSearchHit, to_candidates
    >>> hits = [KnowledgeSearchHit(id=str(i), content=f"c{i}", score=1 - i / 10, doc_id="d", chunk_index=i)
    ...         for i in range(3)]
    >>> outcome = EvidencePostProcessor(return_n=5, max_chunks_per_document=2)(to_candidates(hits))
    >>> [s.key for s in outcome.selected], [e.stage.value for e in outcome.trace]
    (['d#chunk-0', 'd#chunk-1'], ['returned', 'returned', 'cap'])
    """

    return_n: int
    max_chunks_per_document: int

    def __call__(self, candidates: Iterable[RetrievedEvidenceCandidate]) -> PostProcessOutcome:
        unique, duplicates = dedup_by_key(sort_candidates(candidates))  # D2
        selected, trace = cap_and_return_n(  # D3, D4
            unique, return_n=self.return_n, max_chunks_per_document=self.max_chunks_per_document
        )
        trace.extend(duplicate_trace(duplicates, selected))
        return PostProcessOutcome(selected=tuple(selected), trace=_trace_order(trace))


def legacy_document_key(candidate: RetrievedEvidenceCandidate) -> str:
    """Legacy identity: the document (``source``, else docId), else the row itself."""
    hit = candidate.hit
    if hit.source:
        return hit.source
    if hit.doc_id:
        return hit.doc_id
    if hit.vector_id:
        return f"{VECTOR_PREFIX}{hit.vector_id}"
    return f"{RANK_PREFIX}{candidate.original_rank}"


@dataclass(frozen=True, slots=True)
class LegacyPostProcessor:
    """``legacy-merge``, the behaviour D1-D5 replace: one width (``rag.top-k``) for
    retrieval and return, and document-level identity: every chunk of a document is
    merged into that document's block (in score order), no per-document cap, and the
    first ``top_k`` document blocks are returned.

    >>> from rag_eval.core.types import KnowledgeSearchHit, to_candidates
    >>> hits = [KnowledgeSearchHit(id=str(i), content=f"c{i}", score=1 - i / 10, doc_id="d", chunk_index=i,
    ...         source="kb/d.md") for i in range(3)]
    >>> outcome = LegacyPostProcessor(top_k=5)(to_candidates(hits))
    >>> [(s.key, len(s.members)) for s in outcome.selected]
    [('kb/d.md', 3)]
    """

    top_k: int

    def __call__(self, candidates: Iterable[RetrievedEvidenceCandidate]) -> PostProcessOutcome:
        selected: list[SelectedEvidence] = []
        trace: list[TraceEntry] = []
        for key, members in _by_document(candidates).items():
            primary = members[0]
            if len(selected) >= self.top_k:
                trace.extend(_entry(m, Stage.TRUNCATION) for m in members)
                continue
            reasons: tuple[HitReason, ...] = ()
            for m in members:
                reasons = _merge_reasons(reasons, m.hit_reasons)
            selected.append(SelectedEvidence(key=key, primary=primary, members=tuple(members), hit_reasons=reasons))
            pos = len(selected)
            trace.append(_entry(primary, Stage.RETURNED, position=pos))
            trace.extend(_entry(m, Stage.MERGED, position=pos, merged_into=key) for m in members[1:])
        return PostProcessOutcome(selected=tuple(selected), trace=_trace_order(trace))


@dataclass(frozen=True, slots=True)
class LegacyFirstPostProcessor:
    """``legacy-first``: the design's duplicate rule applied to document identity. Hits of
    one source (else docId) are "duplicates": the top-scored chunk keeps its content,
    the others are dropped (stage ``document_dedup``, hit reasons merged into the kept
    one); the first ``top_k`` document blocks are returned. This is how a lookup loses
    the other relevant chunks of a document, which D1-D5 set out to keep.

    >>> from rag_eval.core.types import KnowledgeSearchHit, to_candidates
    >>> hits = [KnowledgeSearchHit(id=str(i), content=f"c{i}", score=1 - i / 10, doc_id="d", chunk_index=i,
    ...         source="kb/d.md") for i in range(3)]
    >>> outcome = LegacyFirstPostProcessor(top_k=5)(to_candidates(hits))
    >>> [(s.key, s.primary.key, len(s.hit_reasons)) for s in outcome.selected]
    [('kb/d.md', 'd#chunk-0', 3)]
    >>> [e.stage.value for e in outcome.trace]
    ['returned', 'document_dedup', 'document_dedup']
    """

    top_k: int

    def __call__(self, candidates: Iterable[RetrievedEvidenceCandidate]) -> PostProcessOutcome:
        selected: list[SelectedEvidence] = []
        trace: list[TraceEntry] = []
        for key, members in _by_document(candidates).items():
            primary = members[0]
            if len(selected) >= self.top_k:
                trace.extend(_entry(m, Stage.TRUNCATION) for m in members)
                continue
            reasons: tuple[HitReason, ...] = ()
            for m in members:
                reasons = _merge_reasons(reasons, m.hit_reasons)
            selected.append(SelectedEvidence(key=key, primary=primary, members=(primary,), hit_reasons=reasons))
            pos = len(selected)
            trace.append(_entry(primary, Stage.RETURNED, position=pos))
            trace.extend(_entry(m, Stage.DOCUMENT_DEDUP, merged_into=key) for m in members[1:])
        return PostProcessOutcome(selected=tuple(selected), trace=_trace_order(trace))


def _by_document(candidates: Iterable[RetrievedEvidenceCandidate]) -> dict[str, list[RetrievedEvidenceCandidate]]:
    """Candidates grouped by legacy document identity, groups and members in the documented order."""
    groups: dict[str, list[RetrievedEvidenceCandidate]] = {}
    for cand in sort_candidates(candidates):
        groups.setdefault(legacy_document_key(cand), []).append(cand)
    return groups  # dicts keep first-seen (= score) order


def _entry(
    cand: RetrievedEvidenceCandidate, stage: Stage, *, position: int | None = None, merged_into: str | None = None
) -> TraceEntry:
    return TraceEntry(
        key=cand.key,
        original_rank=cand.original_rank,
        vector_id=cand.hit.vector_id,
        stage=stage,
        position=position,
        merged_into=merged_into,
    )
