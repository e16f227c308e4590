"""Where a row goes when its text is in several places: the order of a document's rows, and how well a
place fits the rows already there (see :mod:`rag_eval.existing.locate`, which finds the candidates)."""

from __future__ import annotations

import itertools
from bisect import bisect_right
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum

from rag_eval.core.parsing import ascii_int


class How(StrEnum):
    OFFSETS = "offsets"
    EXACT = "exact"
    NORMALISED = "normalised"
    FUZZY = "fuzzy"
    UNRESOLVED = "unresolved"


@dataclass(frozen=True, slots=True, kw_only=True)
class StoredRow:
    """One row of a collection as the label resolution needs it (``None``: the collection has no value)."""

    pk: str
    doc_id: str | None
    text: str
    chunk_index: int | None = None
    start: int | None = None
    end: int | None = None


@dataclass(slots=True)
class Match:
    """Candidate ranges of one row at one level: every occurrence, given out in row order."""

    doc_id: str
    ranges: list[tuple[int, int]]
    how: How
    score: float = 100.0


def sequence(row: StoredRow) -> tuple[int, int | str]:
    """Where a row sits in its document's order: its chunk index, else its primary key (kind 1)."""
    if row.chunk_index is not None:
        return (0, row.chunk_index)
    number = ascii_int(row.pk)
    return (1, row.pk if number is None else number)


REFINE_PASSES = 4
OVERLAP_SLACK = 8  # characters a neighbour's overlap may exceed the usual one by


def placed_elsewhere(
    rows: Sequence[StoredRow],
    elsewhere: Mapping[int, list[Match]],
    found: Mapping[int, Match],
    placed: Mapping[int, tuple[int, int]],
) -> dict[int, tuple[Match, tuple[int, int]]]:
    """A place for each row found outside its stored document: of the places that hold its text, the one
    that costs least (:class:`_Held`; the first in corpus order among equals). Placed greedily in the rows' order,
    then each row with a choice is moved again while a place the others cover less exists (a few passes:
    a row placed early saw only the rows placed before it)."""
    held = _Held((found[i].doc_id, r) for i, r in placed.items())
    options = {i: [(m, r) for m in ms for r in m.ranges] for i, ms in elsewhere.items()}
    chosen: dict[int, tuple[Match, tuple[int, int]]] = {}
    order = sorted(elsewhere, key=lambda j: (_comparable(sequence(rows[j])), j))
    for i in order:
        chosen[i] = min(options[i], key=lambda o: held.cost(o[0].doc_id, o[1]))
        held.add(chosen[i][0].doc_id, chosen[i][1])
    for _ in range(REFINE_PASSES):
        moved = False
        for i in (j for j in order if len(options[j]) > 1):
            current = chosen[i]
            held.remove(current[0].doc_id, current[1])
            best = min(options[i], key=lambda o: (held.cost(o[0].doc_id, o[1]), o != current))
            held.add(best[0].doc_id, best[1])
            if best != current:
                chosen[i], moved = best, True
        if not moved:
            break
    return chosen


def _comparable(seq: tuple[int, int | str]) -> tuple[int, bool, int, str]:
    """A sequence as a key that orders numeric primary keys before the others (numbers and texts never compared)."""
    kind, at = seq
    return (kind, False, at, "") if isinstance(at, int) else (kind, True, 0, at)


class _Held:
    """The ranges rows hold in each document, and what holding one more range costs: first whether it shares
    more with rows at other ranges than the document's usual overlap of neighbouring rows (a row straddling
    two others' chunks is unlikely; an overlapping chunker's neighbours share their overlap, give or take a
    word), then whether a row holds that very range already (a gap is likelier the place of a missing row
    than a copy of a present one), then how many characters beyond the usual overlap it shares."""

    def __init__(self, ranges: Iterable[tuple[str, tuple[int, int]]], usual: Mapping[str, int] | None = None) -> None:
        """``usual``: each document's usual overlap of neighbouring rows, when known; else it is read off the
        ranges (neighbours by start), which is right once most rows of a document are placed."""
        self._by_doc: dict[str, list[tuple[int, int]]] = defaultdict(list)
        for doc_id, r in ranges:
            self._by_doc[doc_id].append(r)
        self._usual: dict[str, int] = dict(usual) if usual is not None else {}
        for doc_id, line in self._by_doc.items():
            line.sort()
            if usual is None:
                shared = sorted(max(0, a[1] - b[0]) for a, b in itertools.pairwise(sorted(set(line))))
                self._usual[doc_id] = shared[len(shared) // 2] if shared else 0
        self._longest = {d: max(e - s for s, e in line) for d, line in self._by_doc.items()}

    def cost(self, doc_id: str, where: tuple[int, int]) -> tuple[bool, bool, int]:
        line = self._by_doc.get(doc_id, [])
        lo = bisect_right(line, (where[0] - self._longest.get(doc_id, 0), -1))
        hi = bisect_right(line, (where[1], -1))
        near = line[lo:hi]
        # chunkers cut at word and sentence ends, so neighbours overlap by the usual amount give or take a
        # word; with no usual amount known, by up to a quarter of the row
        usual = self._usual.get(doc_id)
        quarter = (where[1] - where[0]) // 4
        allowed = quarter if usual is None else usual + min(OVERLAP_SLACK, quarter)
        shared = (max(0, min(e, where[1]) - max(s, where[0])) for s, e in near if (s, e) != where)
        beyond = sum(max(0, n - allowed) for n in shared)
        return beyond > 0, where in near, beyond

    def add(self, doc_id: str, where: tuple[int, int]) -> None:
        line = self._by_doc[doc_id]
        line.insert(bisect_right(line, where), where)
        self._longest[doc_id] = max(self._longest.get(doc_id, 0), where[1] - where[0])

    def remove(self, doc_id: str, where: tuple[int, int]) -> None:
        self._by_doc[doc_id].remove(where)  # the longest stays: a bound, not an exact figure


def _ranks(rows: Sequence[StoredRow], found: Mapping[int, Match]) -> dict[int, tuple[int, int]]:
    """Each row's place in its document's order: (kind, rank), the rank dense among the rows of that
    document and kind (rows with one chunk index share it), so neighbours differ by one whatever the ids."""
    seqs: dict[tuple[str, int], set[tuple[int, int | str]]] = defaultdict(set)
    for i, match in found.items():
        seq = sequence(rows[i])
        seqs[(match.doc_id, seq[0])].add(seq)
    order = {key: {q: n for n, q in enumerate(sorted(values, key=str))} for key, values in seqs.items()}
    for key, values in seqs.items():
        if all(isinstance(q[1], int) for q in values):
            order[key] = {q: n for n, q in enumerate(sorted(values))}
    out = {}
    for i, match in found.items():
        seq = sequence(rows[i])
        out[i] = (seq[0], order[(match.doc_id, seq[0])][seq])
    return out


def _next(a: tuple[int, int], b: tuple[int, int]) -> bool:
    """Whether ``b`` comes right after ``a`` in a document's order."""
    return a[0] == b[0] and b[1] == a[1] + 1


_Line = list[tuple[tuple[int, int], int, int]]  # (place in the document's order, start, end), sorted


def placed(
    rows: Sequence[StoredRow], found: Mapping[int, Match], *, known: Sequence[tuple[str, tuple[int, int]]] = ()
) -> dict[int, tuple[int, int]]:
    """One range per row found in its stored document: its only candidate; else, for a text found several
    times there, a neighbour's own range when that neighbour is at the same place in the document's order
    (a re-ingested copy); else, of the candidates that fit the document's other rows (:class:`_Held`), the
    one between its neighbours nearest to where the previous row ends plus the document's usual gap between
    consecutive rows (negative for an overlapping chunker; 0 when no two consecutive rows show it), or the
    first at or after that place when rows between the two are missing. The order is the chunk index, or
    the primary key for rows without one; each kind of order is a line of its own. ``known``: ranges other
    rows hold (found elsewhere, in one place), which only the fit counts."""
    placed: dict[int, tuple[int, int]] = {}
    pending: dict[str, list[int]] = defaultdict(list)
    lines: dict[tuple[str, int], _Line] = defaultdict(list)
    rank = _ranks(rows, found)
    for i, match in found.items():
        if len(match.ranges) == 1:
            placed[i] = match.ranges[0]
            lines[(match.doc_id, rank[i][0])].append((rank[i], *match.ranges[0]))
        else:
            pending[match.doc_id].append(i)
    gaps: dict[tuple[str, int], int] = {}
    for key, line in lines.items():
        line.sort()
        steps = sorted(b[1] - a[2] for a, b in itertools.pairwise(line) if _next(a[0], b[0]))
        if steps:
            gaps[key] = steps[len(steps) // 2]
    usual = {doc_id: max(0, -gap) for (doc_id, _), gap in gaps.items()}
    held = _Held([*((found[i].doc_id, r) for i, r in placed.items()), *known], usual=usual)
    for doc_id, members in pending.items():
        for i in sorted(members, key=lambda j: (rank[j], j)):
            seq = rank[i]
            line = lines[(doc_id, seq[0])]
            fitting = [r for r in found[i].ranges if not held.cost(doc_id, r)[0]]
            choice = _in_line(line, seq, fitting or found[i].ranges, gaps.get((doc_id, seq[0]), 0))
            placed[i] = choice
            line.insert(bisect_right(line, (seq, *choice)), (seq, *choice))
            held.add(doc_id, choice)
    return placed


def _in_line(line: _Line, seq: tuple[int, int], ranges: Sequence[tuple[int, int]], gap: int) -> tuple[int, int]:
    """The candidate for the row at ``seq`` of a line (see :func:`placed`)."""
    at = bisect_right(line, (seq, -1, -1))
    same = {(s, e) for q, s, e in line[at:] if q == seq}
    copy = next((r for r in ranges if r in same), None)
    if copy is not None:
        return copy
    before = line[at - 1] if at > 0 else None
    after = next((s for q, s, _ in line[at:] if q != seq), None)
    inside = [r for r in ranges if (before is None or before[1] < r[0]) and (after is None or r[0] < after)]
    options = inside or list(ranges)
    if before is None:
        return options[0]
    expected = before[2] + gap
    later = [r for r in options if r[0] >= expected]
    if later and not _next(before[0], seq):  # rows between the two are missing: further on
        return later[0]
    return min(options, key=lambda r: (abs(r[0] - expected), r[0]))
