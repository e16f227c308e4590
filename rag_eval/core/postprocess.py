"""Post-processing (D2, D3, D4): sort, dedup by evidence key, per-document cap, return-n.

One total, deterministic order (score descending, NaN last, then original rank, then evidence key), so the
result does not depend on the order candidates are handed in; every candidate's stage (``dedup``, ``cap``,
``truncation``, ``returned``) is recorded in the trace. The legacy processors (``legacy-merge``,
``legacy-first``) are here too, so all run on the same hits. It runs on every lookup, so it works on
:class:`Candidates` columns and builds the trace only when read. Stages, legacy and speed: docs/pipeline.md.
"""

from __future__ import annotations

import enum
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from itertools import compress, islice
from operator import ge

from rag_eval.core.identity import RANK_PREFIX, VECTOR_PREFIX
from rag_eval.core.types import (
    Candidates,
    HitReason,
    KnowledgeSearchHit,
    RetrievedEvidenceCandidate,
    deferred,
    fast_constructor,
)


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
    sorting) and every candidate it stands for (primary first). With several members,
    ``members`` and ``hit_reasons`` may be :class:`Deferred` tuples (built when read)."""

    key: str
    primary: RetrievedEvidenceCandidate
    members: Sequence[RetrievedEvidenceCandidate]
    hit_reasons: Sequence[HitReason]

    def as_candidate(self) -> RetrievedEvidenceCandidate:
        """This selection as one candidate again (merged hit reasons kept)."""
        return RetrievedEvidenceCandidate(
            key=self.key,
            hit=self.primary.hit,
            original_rank=self.primary.original_rank,
            hit_reasons=tuple(self.hit_reasons),
        )


_STAGE_VALUES = tuple(s.value for s in Stage)
_new_entry = fast_constructor(TraceEntry)
_new_selection = fast_constructor(SelectedEvidence)


@dataclass(frozen=True, slots=True, kw_only=True)
class PostProcessOutcome:
    """What post-processing selected, and its trace: one entry per input candidate, in
    original-rank order. The processors give the trace as a :class:`Deferred` tuple, built
    when first read: a production lookup never reads it, and at retrieve-k 10,000 building
    it costs more than post-processing itself.

    >>> PostProcessOutcome(selected=(), trace=()).stage_counts()["returned"]
    0
    """

    selected: tuple[SelectedEvidence, ...]
    trace: Sequence[TraceEntry]
    # (stage, count) pairs counted without building the trace (Deferred, like it); None: count the trace
    tally: Sequence[tuple[str, int]] | None = field(default=None, repr=False, compare=False)

    def stage_counts(self) -> dict[str, int]:
        counts = dict.fromkeys(_STAGE_VALUES, 0)
        if self.tally is not None:
            counts.update(self.tally)
            return counts
        for entry in self.trace:
            counts[entry.stage] += 1  # a Stage is its value (a str enum): the same key
        return counts


_new_outcome = fast_constructor(PostProcessOutcome)


# -- the steps, on columns ------------------------------------------------------------------------------


def _order(cands: Candidates) -> list[int]:
    """Indices of ``cands`` in the documented order: score desc (NaN last, after minus infinity
    too), original rank asc, key asc; a stable sort on plain tuples (``s != s`` is the NaN test,
    without a call).

    When the ranks rise by one in index order (the port's hits are ranked 1, 2, 3, ...,
    :meth:`Candidates.from_hits`), no two candidates share a rank, so the key never decides and
    index order is rank order: stable sorts on plain floats then give the same order without a
    tuple per candidate (at retrieve-k 10,000 those tuples cost more in garbage collection than the
    sort itself), and hits already in that order (as a port returns them: scores non-increasing,
    no NaN, checked by one comparison of neighbours in C) are not sorted at all."""
    ranks = cands.ranks
    if isinstance(ranks, range) and ranks.step == 1:
        scores = [h.score for h in cands.hits]
        if all(map(ge, scores, islice(scores, 1, None))):  # already in order (the port's), no NaN: as they are
            return list(range(len(scores)))
        order = sorted(range(len(scores)), key=(negated := [-s for s in scores]).__getitem__)
        if (total := sum(negated)) != total:  # a NaN (or both infinities): NaN last, after minus infinity
            nan = [s != s for s in negated]
            inf = math.inf
            negated = [inf if s != s else s for s in negated]
            order = sorted(range(len(negated)), key=negated.__getitem__)
            order.sort(key=nan.__getitem__)
        return order
    sort_keys = [
        (True, 0.0, r, k) if (s := h.score) != s else (False, -s, r, k)
        for h, r, k in zip(cands.hits, ranks, cands.keys, strict=True)
    ]
    return sorted(range(len(sort_keys)), key=sort_keys.__getitem__)


def _first_and_more(order: Iterable[int], keys: Sequence[str]) -> tuple[dict[str, int], dict[str, list[int]]]:
    """:func:`_group` without a list per key: each key's first index (keys in first-seen order),
    and the further members, in ``order``, of the keys seen more than once."""
    first: dict[str, int] = {}
    more: dict[str, list[int]] = {}
    setdefault = first.setdefault
    for i in order:
        key = keys[i]
        if setdefault(key, i) != i:
            extra = more.get(key)
            if extra is None:
                more[key] = [i]
            else:
                extra.append(i)
    return first, more


def _group(order: Iterable[int], keys: Sequence[str]) -> dict[str, list[int]]:
    """Indices by key: groups in first-seen order, members in ``order``."""
    groups: dict[str, list[int]] = {}
    for i in order:
        members = groups.get(keys[i])
        if members is None:
            groups[keys[i]] = [i]
        else:
            members.append(i)
    return groups


def _cap_and_return_n(
    heads: Iterable[int], cands: Candidates, return_n: int, cap: int
) -> tuple[list[Stage], list[int]]:
    """D3 then D4 over deduplicated candidates in order, to the end: the stage of each (the trace
    needs every stage), and the returned ones. (A lookup's selection is :func:`_select`, which stops
    at the ``return_n``-th block.)"""
    hits, keys = cands.hits, cands.keys
    per_doc: dict[str, int] = {}
    stages: list[Stage] = []
    returned: list[int] = []
    full = return_n <= 0
    for i in heads:
        bucket = hits[i].doc_id or f"\x00{keys[i]}"  # missing docId: own bucket
        n = per_doc.get(bucket, 0)
        if n >= cap:
            stages.append(_CAP)
            continue
        per_doc[bucket] = n + 1
        if full:
            stages.append(_TRUNCATION)
        else:
            returned.append(i)
            stages.append(_RETURNED)
            full = len(returned) >= return_n
    return stages, returned


_RETURNED, _CAP, _TRUNCATION = Stage.RETURNED, Stage.CAP, Stage.TRUNCATION  # enum lookups cost a call each


def merged_reasons(members: Sequence[RetrievedEvidenceCandidate]) -> Sequence[HitReason]:
    """The members' hit reasons in order, a reason already taken not again.

    Linear: where every reason names a different original rank none can equal another, so
    they are joined as they are; otherwise a set of those taken is asked (rescanning the
    kept tuple for every copy made many copies of one key quadratic).
    """
    first = members[0].hit_reasons
    if len(members) == 1:
        return first
    reasons = [r for m in members for r in m.hit_reasons]
    if len({r.original_rank for r in reasons}) == len(reasons):
        return tuple(reasons)
    out = list(first)
    seen = set(first)
    for member in members[1:]:
        new = [r for r in member.hit_reasons if r not in seen]
        out.extend(new)
        seen.update(new)
    return tuple(out)


def _selection(key: str, cands: Candidates, members: list[int], *, merge: bool = True) -> SelectedEvidence:
    """A block-to-be keeping the first member's content and every member's hit reasons;
    ``merge=False`` keeps the first member only (legacy-first). Further members and the
    merged reasons are Deferred: many copies of one chunk cost no object until read."""
    primary = cands.get(members[0])
    if len(members) == 1:
        return _new_selection(key, primary, (primary,), primary.hit_reasons)
    everyone = deferred(lambda: cands.take(members))
    return _new_selection(key, primary, everyone if merge else (primary,), deferred(lambda: merged_reasons(everyone)))


def _entry(cands: Candidates, i: int, stage: Stage, position: int | None, merged_into: str | None) -> TraceEntry:
    return _new_entry(cands.keys[i], cands.ranks[i], cands.hits[i].vector_id, stage, position, merged_into)


def _trace_order(cands: Candidates, fates: dict[int, tuple[Stage, int | None, str | None]]) -> list[TraceEntry]:
    """One entry per candidate, in original-rank order (then key)."""
    ranks, keys = cands.ranks, cands.keys
    if isinstance(ranks, range):  # straight from the port: ranks are the positions, already in order
        order: Iterable[int] = range(len(ranks))
    else:
        order = sorted(fates, key=lambda i: (ranks[i], keys[i]))
    hits = cands.hits
    return [_new_entry(keys[i], ranks[i], hits[i].vector_id, *fates[i]) for i in order]


# -- the public steps, on candidate objects (for composing evaluation-only variants) ------------------------


def sort_candidates(candidates: Iterable[RetrievedEvidenceCandidate]) -> list[RetrievedEvidenceCandidate]:
    """The documented order: score desc (NaN last, after minus infinity too), original rank asc, key asc."""
    cands = Candidates.of(candidates)
    return cands.take(_order(cands))


def dedup_by_key(
    ordered: Iterable[RetrievedEvidenceCandidate],
) -> tuple[list[SelectedEvidence], list[RetrievedEvidenceCandidate]]:
    """D2 on candidates already in the documented order: one selection per evidence key
    (the first keeps its content, later ones add their hit reasons), and the later
    candidates that were merged into one (the true duplicates)."""
    cands = Candidates.of(ordered)
    groups = _group(range(len(cands)), cands.keys)
    selections = [_selection(key, cands, members) for key, members in groups.items()]
    duplicates = sorted(i for members in groups.values() for i in members[1:])  # in the order given
    return selections, cands.take(duplicates)


def cap_and_return_n(
    selections: Iterable[SelectedEvidence], *, return_n: int, max_chunks_per_document: int
) -> tuple[list[SelectedEvidence], list[TraceEntry]]:
    """D3 then D4 on deduplicated selections in order: at most ``max_chunks_per_document``
    per docId (a selection without docId is a bucket of its own), then the first
    ``return_n``. Returns the selected ones and a trace entry for every input."""
    sels = list(selections)
    primaries = Candidates.of(s.primary for s in sels)
    stages, returned = _cap_and_return_n(range(len(sels)), primaries, return_n, max_chunks_per_document)
    position = {i: pos for pos, i in enumerate(returned, start=1)}
    trace = [_entry(primaries, i, stage, position.get(i), None) for i, stage in enumerate(stages)]
    return [sels[i] for i in returned], trace


def duplicate_trace(
    duplicates: Iterable[RetrievedEvidenceCandidate], selected: Iterable[SelectedEvidence]
) -> list[TraceEntry]:
    """Trace entries of true duplicates: merged into their key, positioned where that key was returned."""
    position_of = {sel.key: i for i, sel in enumerate(selected, start=1)}
    dups = Candidates.of(duplicates)
    return [_entry(dups, i, Stage.DEDUP, position_of.get(key), key) for i, key in enumerate(dups.keys)]


# -- the processors ---------------------------------------------------------------------------------------


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
        cands = Candidates.of(candidates)
        order = _order(cands)
        returned, copies = _select(order, cands, self.return_n, self.max_chunks_per_document)  # D2, D3, D4
        keys = cands.keys
        selected = []
        for i in returned:
            key = keys[i]
            more = copies.get(key)
            if more is None:  # a key seen once (most): its candidate stands alone
                primary = cands.get(i)
                selected.append(_new_selection(key, primary, (primary,), primary.hit_reasons))
            else:  # D2: its later copies add their hit reasons
                selected.append(_selection(key, cands, [i, *more]))
        return _new_outcome(
            tuple(selected),
            deferred(lambda: self._trace(cands, order, returned)),
            deferred(lambda: self._tally(cands, order)),
        )

    def _tally(self, cands: Candidates, order: list[int]) -> tuple[tuple[str, int], ...]:
        """The trace's stage counts, no entries made: a key's first candidate in ``order`` is its head (the rest
        ``dedup``); a document's first ``max_chunks_per_document`` heads pass the cap, ``return_n`` of those return."""
        keys, hits = cands.keys, cands.hits
        backwards = order[::-1]  # a key's entry is its first candidate in ``order``, written last
        first = dict(zip(map(keys.__getitem__, backwards), backwards, strict=True))
        per_doc: dict[str, int] = {}
        for k, i in first.items():
            doc = hits[i].doc_id or f"\x00{k}"  # missing docId: own bucket
            per_doc[doc] = per_doc.get(doc, 0) + 1
        cap = max(self.max_chunks_per_document, 0)
        kept = sum(n if n < cap else cap for n in per_doc.values())
        returned = min(kept, max(self.return_n, 0))
        heads = len(first)
        return (
            ("dedup", len(order) - heads),
            ("cap", heads - kept),
            ("truncation", kept - returned),
            ("returned", returned),
        )

    def _trace(self, cands: Candidates, order: list[int], returned: list[int]) -> list[TraceEntry]:
        """Every candidate's fate: the steps again over the whole order (read by the harness, not production)."""
        keys = cands.keys
        first, more = _first_and_more(order, keys)
        heads = list(first.values())
        stages, _ = _cap_and_return_n(heads, cands, self.return_n, self.max_chunks_per_document)
        position = {i: pos for pos, i in enumerate(returned, start=1)}
        fates: dict[int, tuple[Stage, int | None, str | None]] = {}
        for head, stage in zip(heads, stages, strict=True):
            fates[head] = (stage, position.get(head), None)
            for i in more.get(keys[head], ()):  # true duplicates, positioned where their key was returned
                fates[i] = (Stage.DEDUP, position.get(head), keys[i])
        return _trace_order(cands, fates)


def _select(order: list[int], cands: Candidates, return_n: int, cap: int) -> tuple[list[int], dict[str, list[int]]]:
    """D2, D3 and D4 in one pass over ``order`` that stops at the ``return_n``-th block: a key
    already seen is a copy (its first member's fate is already decided), a new key is capped
    or returned. Returns the returned candidates, and the later copies (in order) of each
    returned key that has any: the copies met before the stop, and those after it, found by a
    filter that runs in C (``compress`` over ``map``). At retrieve-k 10,000 this makes no object
    per candidate and reads the keys of the candidates after the stop once."""
    returned: list[int] = []
    if return_n <= 0:
        return returned, {}
    keys, hits = cands.keys, cands.hits
    seen: set[str] = set()
    per_doc: dict[str, int] = {}
    met: list[int] = []  # copies met before the stop
    add, remember, count = seen.add, met.append, per_doc.get
    left = return_n
    rest = iter(order)
    for i in rest:
        key = keys[i]
        if key in seen:
            remember(i)
            continue
        add(key)
        bucket = hits[i].doc_id or f"\x00{key}"  # missing docId: own bucket
        n = count(bucket, 0)
        if n >= cap:
            continue
        per_doc[bucket] = n + 1
        returned.append(i)
        left -= 1
        if not left:
            break
    met.extend(rest)
    wanted = {keys[i] for i in returned}
    found = list(compress(met, map(wanted.__contains__, map(keys.__getitem__, met))))
    if not found:
        return returned, {}
    if len(wanted) == 1:  # one block (many copies of one chunk): every copy is its
        return returned, {keys[returned[0]]: found}
    copies: dict[str, list[int]] = {}
    for i in found:
        more = copies.get(key := keys[i])
        if more is None:
            copies[key] = [i]
        else:
            more.append(i)
    return returned, copies


def _legacy_key(hit: KnowledgeSearchHit, original_rank: int) -> str:
    """Legacy identity: the document (``source``, else docId), else the row itself."""
    if hit.source:
        return hit.source
    if hit.doc_id:
        return hit.doc_id
    if hit.vector_id:
        return f"{VECTOR_PREFIX}{hit.vector_id}"
    return f"{RANK_PREFIX}{original_rank}"


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
        return _legacy(Candidates.of(candidates), self.top_k, merge=True)


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
        return _legacy(Candidates.of(candidates), self.top_k, merge=False)


def _legacy(cands: Candidates, top_k: int, *, merge: bool) -> PostProcessOutcome:
    """Both legacies: the first ``top_k`` documents, each a block of all its chunks (``merge``)
    or of its top-scored chunk only, carrying every member's hit reasons."""
    doc_keys = [_legacy_key(h, r) for h, r in zip(cands.hits, cands.ranks, strict=True)]
    groups = list(_group(_order(cands), doc_keys).items())
    kept = groups[:top_k]
    selected = [_selection(key, cands, members, merge=merge) for key, members in kept]

    def trace() -> list[TraceEntry]:
        fates: dict[int, tuple[Stage, int | None, str | None]] = {}
        for pos, (key, members) in enumerate(kept, start=1):
            fates[members[0]] = (Stage.RETURNED, pos, None)
            for i in members[1:]:
                fates[i] = (Stage.MERGED, pos, key) if merge else (Stage.DOCUMENT_DEDUP, None, key)
        for _, members in groups[top_k:]:
            fates.update((i, (Stage.TRUNCATION, None, None)) for i in members)
        return _trace_order(cands, fates)

    def tally() -> tuple[tuple[str, int], ...]:
        in_kept = sum(len(members) for _, members in kept)
        others = "merged" if merge else "document_dedup"
        return ("returned", len(kept)), (others, in_kept - len(kept)), ("truncation", len(cands) - in_kept)

    return _new_outcome(tuple(selected), deferred(trace), deferred(tally))
