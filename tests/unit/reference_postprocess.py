"""The straightforward post-processors, kept as the oracle the fast ones are checked against.

One frozen object per step and per trace entry, hit reasons merged by rescanning the kept tuple:
quadratic in copies of one key and slow at large retrieve-k, but short enough to read against the
design (D2, D3, D4 and the two legacies). ``test_postprocess_reference.py`` holds the production
processors (and the content-dedup what-if) equal to these on generated hit lists.
"""

from __future__ import annotations

import math
from collections.abc import Iterable

from rag_eval.content import content_sha
from rag_eval.core.identity import RANK_PREFIX, VECTOR_PREFIX
from rag_eval.core.postprocess import PostProcessOutcome, SelectedEvidence, Stage, TraceEntry
from rag_eval.core.types import HitReason, RetrievedEvidenceCandidate


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


def sort_candidates(candidates: Iterable[RetrievedEvidenceCandidate]) -> list[RetrievedEvidenceCandidate]:
    return sorted(candidates, key=lambda c: (math.isnan(c.score), -_finite_or_0(c.score), c.original_rank, c.key))


def _finite_or_0(score: float) -> float:
    return 0.0 if math.isnan(score) else score


def merge_reasons(a: tuple[HitReason, ...], b: tuple[HitReason, ...]) -> tuple[HitReason, ...]:
    return a + tuple(r for r in b if r not in a)


def entry(
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


def trace_order(entries: list[TraceEntry]) -> tuple[TraceEntry, ...]:
    return tuple(sorted(entries, key=lambda e: (e.original_rank, e.key)))


def dedup_by_key(
    ordered: Iterable[RetrievedEvidenceCandidate],
) -> tuple[list[SelectedEvidence], list[RetrievedEvidenceCandidate]]:
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
                hit_reasons=merge_reasons(existing.hit_reasons, cand.hit_reasons),
            )
            duplicates.append(cand)
    return list(kept.values()), duplicates


def cap_and_return_n(
    selections: Iterable[SelectedEvidence], *, return_n: int, max_chunks_per_document: int
) -> tuple[list[SelectedEvidence], list[TraceEntry]]:
    per_doc: dict[str, int] = {}
    selected: list[SelectedEvidence] = []
    trace: list[TraceEntry] = []
    for sel in selections:
        bucket = sel.primary.doc_id or f"\x00{sel.key}"
        if per_doc.get(bucket, 0) >= max_chunks_per_document:
            trace.append(entry(sel.primary, Stage.CAP))
            continue
        per_doc[bucket] = per_doc.get(bucket, 0) + 1
        if len(selected) >= return_n:
            trace.append(entry(sel.primary, Stage.TRUNCATION))
            continue
        selected.append(sel)
        trace.append(entry(sel.primary, Stage.RETURNED, position=len(selected)))
    return selected, trace


def duplicate_trace(
    duplicates: Iterable[RetrievedEvidenceCandidate], selected: Iterable[SelectedEvidence]
) -> list[TraceEntry]:
    position_of = {sel.key: i for i, sel in enumerate(selected, start=1)}
    return [entry(c, Stage.DEDUP, position=position_of.get(c.key), merged_into=c.key) for c in duplicates]


def evidence(
    candidates: Iterable[RetrievedEvidenceCandidate], *, return_n: int, max_chunks_per_document: int
) -> PostProcessOutcome:
    unique, duplicates = dedup_by_key(sort_candidates(candidates))
    selected, trace = cap_and_return_n(unique, return_n=return_n, max_chunks_per_document=max_chunks_per_document)
    trace.extend(duplicate_trace(duplicates, selected))
    return PostProcessOutcome(selected=tuple(selected), trace=trace_order(trace))


def _by_document(candidates: Iterable[RetrievedEvidenceCandidate]) -> dict[str, list[RetrievedEvidenceCandidate]]:
    groups: dict[str, list[RetrievedEvidenceCandidate]] = {}
    for cand in sort_candidates(candidates):
        groups.setdefault(legacy_document_key(cand), []).append(cand)
    return groups


def legacy(candidates: Iterable[RetrievedEvidenceCandidate], *, top_k: int, merge: bool) -> PostProcessOutcome:
    """``legacy-merge`` (``merge``) or ``legacy-first``."""
    selected: list[SelectedEvidence] = []
    trace: list[TraceEntry] = []
    for key, members in _by_document(candidates).items():
        primary = members[0]
        if len(selected) >= top_k:
            trace.extend(entry(m, Stage.TRUNCATION) for m in members)
            continue
        reasons: tuple[HitReason, ...] = ()
        for m in members:
            reasons = merge_reasons(reasons, m.hit_reasons)
        kept = tuple(members) if merge else (primary,)
        selected.append(SelectedEvidence(key=key, primary=primary, members=kept, hit_reasons=reasons))
        pos = len(selected)
        trace.append(entry(primary, Stage.RETURNED, position=pos))
        if merge:
            trace.extend(entry(m, Stage.MERGED, position=pos, merged_into=key) for m in members[1:])
        else:
            trace.extend(entry(m, Stage.DOCUMENT_DEDUP, merged_into=key) for m in members[1:])
    return PostProcessOutcome(selected=tuple(selected), trace=trace_order(trace))


def content_dedup(
    candidates: Iterable[RetrievedEvidenceCandidate], *, return_n: int, max_chunks_per_document: int
) -> PostProcessOutcome:
    unique, duplicates = dedup_by_key(sort_candidates(candidates))
    kept: list[SelectedEvidence] = []
    index_of_sha: dict[str, int] = {}
    dropped: list[tuple[SelectedEvidence, str]] = []
    for sel in unique:
        sha = content_sha(sel.primary.hit.content)
        at = index_of_sha.get(sha)
        if at is None:
            index_of_sha[sha] = len(kept)
            kept.append(sel)
            continue
        first = kept[at]
        reasons = merge_reasons(first.hit_reasons, sel.hit_reasons)
        kept[at] = SelectedEvidence(key=first.key, primary=first.primary, members=first.members, hit_reasons=reasons)
        dropped.append((sel, first.key))
    selected, trace = cap_and_return_n(kept, return_n=return_n, max_chunks_per_document=max_chunks_per_document)
    trace.extend(duplicate_trace(duplicates, selected))
    trace.extend(entry(sel.primary, Stage.CONTENT_DEDUP, merged_into=into) for sel, into in dropped)
    trace.sort(key=lambda e: (e.original_rank, e.key))
    return PostProcessOutcome(selected=tuple(selected), trace=tuple(trace))
