"""How much two delivered lists of evidence keys agree, without labels: a baseline config's payload for a
query against a candidate config's payload for the same query, each the ordered list of the evidence keys
(D1 chunk keys) the agent receives, in payload order.

- :func:`changed`: the two lists differ as ordered lists (a duplicate or a new order is a change);
- :func:`jaccard`: |A ∩ B| / |A ∪ B| of the two key sets (both empty: 1.0);
- :func:`top_changed`: the first key differs (one list empty and the other not: a change);
- :func:`rbo`: rank-biased overlap, extrapolated (RBO_EXT) -- Webber, Moffat and Zobel, "A similarity measure
  for indefinite rankings", ACM TOIS 28(4), 2010, equation (30) for lists of equal length and equation (32)
  for lists of different lengths;
- :func:`overlap_frame`: the four for many query pairs at once, as numpy columns (the same values).

Conventions of :func:`rbo` (the paper defines none of them): both lists empty -> 1.0, exactly one empty ->
0.0; a key given twice in one list (a legacy payload can carry a chunk twice) counts at its first position
only; ``p`` must lie in (0, 1). RBO_EXT reads each list as the seen prefix of an indefinite ranking and
assumes the agreement seen continues past the shorter one's end: a payload that is a prefix of the other
scores 1.0 (``changed`` and ``jaccard`` see the dropped tail).

The value is computed as one minus its deficit, ``1 - [(1-p) Σ_d p^(d-1) (1 - A_d) + (1 - A_ext) p^l]``
(the same sum as equation 32, rearranged, with every agreement a ratio of integers), so that identical lists
and a prefix score exactly 1.0 and lists with no common key exactly 0.0, not 1 or 0 give or take a rounding.
"""

from __future__ import annotations

import operator
from collections.abc import Sequence
from itertools import chain
from typing import Any

import numpy as np

Keys = Sequence[str]
FloatArray = np.ndarray[Any, np.dtype[np.float64]]
IntArray = np.ndarray[Any, np.dtype[np.int64]]


def changed(a: Keys, b: Keys) -> bool:
    """True when the two delivered lists differ as ordered lists.

    >>> changed(["a", "b"], ["a", "b"]), changed(["a", "b"], ["b", "a"]), changed(["a"], ["a", "a"])
    (False, True, True)
    """
    return list(_keys(a)) != list(_keys(b))


def jaccard(a: Keys, b: Keys) -> float:
    """|A ∩ B| / |A ∪ B| of the two key sets; two empty lists are identical (1.0).

    >>> jaccard(["a", "b", "c"], ["c", "d"]), jaccard([], []), jaccard(["a"], [])
    (0.25, 1.0, 0.0)
    """
    first, second = set(_keys(a)), set(_keys(b))
    union = len(first | second)
    return 1.0 if union == 0 else len(first & second) / union


def top_changed(a: Keys, b: Keys) -> bool:
    """True when the first key differs; one list empty and the other not is a change, two empty lists are not.

    >>> top_changed(["a", "b"], ["a", "c"]), top_changed(["a"], ["b", "a"]), top_changed([], ["a"])
    (False, True, True)
    """
    first, second = _keys(a), _keys(b)
    if not first or not second:
        return bool(first) != bool(second)
    return bool(first[0] != second[0])


def rbo(a: Keys, b: Keys, p: float = 0.9) -> float:
    """Rank-biased overlap, extrapolated (RBO_EXT; Webber, Moffat and Zobel, ACM TOIS 28(4), 2010, equation (30)
    for lists of equal length, equation (32) for lists of different lengths), symmetric in ``a`` and ``b``.

    ``p`` is the persistence: the weight of depth d is (1-p) p^(d-1), so the first 10 ranks carry about 86% of
    the weight at p = 0.9. Both lists empty -> 1.0; exactly one empty -> 0.0; a repeated key counts at its first
    position only.

    >>> rbo(["a", "b", "c", "d"], ["b", "a", "c", "d"])  # a swap at the top: p (worked out in the tests)
    0.9
    >>> round(rbo(["a", "b", "c", "d"], ["a", "b", "d", "c"]), 12)  # a swap at the bottom: 1 - (1-p) p^2 / 3
    0.973
    >>> rbo(["a", "b"], ["a", "b", "c"]), rbo(["a"], ["b"]), rbo([], [])
    (1.0, 0.0, 1.0)
    """
    check_p(p)
    first, second = _distinct(a), _distinct(b)
    short, long_ = (first, second) if len(first) <= len(second) else (second, first)
    s, l = len(short), len(long_)  # noqa: E741 (the paper's names)
    if l == 0:
        return 1.0
    overlaps = _overlaps(short, long_)  # X_1 .. X_l
    if s == 0 or overlaps[-1] == 0:
        return 0.0
    x_s, x_l = overlaps[s - 1], overlaps[-1]
    deficit = 0.0
    for d, x_d in enumerate(overlaps, start=1):
        agreement = (s * x_d + x_s * max(d - s, 0)) / (s * d)  # X_d/d, plus eq. 32's assumed agreement past s
        deficit += (1.0 - p) * p ** (d - 1) * (1.0 - agreement)
    extrapolated = (s * (x_l - x_s) + l * x_s) / (l * s)  # (X_l - X_s)/l + X_s/s
    return _clip(1.0 - (deficit + (1.0 - extrapolated) * p**l))


def overlap_frame(baseline: Sequence[Keys], candidate: Sequence[Keys], p: float = 0.9) -> dict[str, FloatArray]:
    """The four measures of each query pair (``baseline[i]`` against ``candidate[i]``) as float columns:
    ``changed`` and ``top_changed`` (0.0 or 1.0), ``jaccard`` and ``rbo``: the values :func:`changed`,
    :func:`top_changed`, :func:`jaccard` and :func:`rbo` give, pair by pair. ``changed`` compares the lists one
    by one; the other three are computed column-wise: each key is coded once by its hash (two different keys of
    a pair with the same hash are found, and the keys then numbered exactly), and one sort finds each pair's
    common keys and each list's repeats (its time: docs/traffic.md).

    >>> frame = overlap_frame([["a", "b"], [], ["a"]], [["a", "b"], ["x"], ["b", "a"]])
    >>> {name: values.round(12).tolist() for name, values in frame.items()}  # doctest: +NORMALIZE_WHITESPACE
    {'changed': [0.0, 1.0, 1.0], 'jaccard': [1.0, 0.0, 0.5], 'rbo': [1.0, 0.0, 0.45],
     'top_changed': [0.0, 1.0, 1.0]}
    """
    check_p(p)
    if len(baseline) != len(candidate):
        raise ValueError(f"{len(baseline)} baseline lists against {len(candidate)} candidate lists: one per query pair")
    if str in set(map(type, chain(baseline, candidate))):
        raise TypeError("each delivered list must be a sequence of keys, not one string")
    n = len(baseline)
    matched = _Coded.of(baseline, candidate, exact=False).distinct_and_common()
    if matched is None:  # two keys of one pair with the same hash: code them exactly instead
        matched = _Coded.of(baseline, candidate, exact=True).distinct_and_common()
    assert matched is not None  # exact codes are never refused
    size_b, size_c, common_pair, common_depth = matched
    common = np.bincount(common_pair, minlength=n)
    union = size_b + size_c - common
    return {
        "changed": np.fromiter(map(operator.ne, map(list, baseline), map(list, candidate)), np.float64, count=n),
        "jaccard": np.where(union == 0, 1.0, common / np.maximum(union, 1)),
        "rbo": _rbo_columns(np.minimum(size_b, size_c), np.maximum(size_b, size_c), common_pair, common_depth, p),
        "top_changed": _top_changed(size_b, size_c, common_pair[common_depth == 0]),
    }


def check_p(p: float) -> None:
    """Raise ValueError unless 0 < ``p`` < 1 (RBO's persistence)."""
    if not 0.0 < p < 1.0:
        raise ValueError(f"rbo's p must lie strictly between 0 and 1, not {p!r}")


# -- the scalar measures' helpers ----------------------------------------------------------------------------


def _keys(keys: Keys) -> Keys:
    if isinstance(keys, str):
        raise TypeError("a delivered list must be a sequence of keys, not one string")
    return keys


def _distinct(keys: Keys) -> list[str]:
    """The keys in order, each at its first position only."""
    return list(dict.fromkeys(_keys(keys)))


def _overlaps(short: list[str], long_: list[str]) -> list[int]:
    """X_d = |short[:d] ∩ long[:d]| for d = 1 .. len(long) (past its end, all of ``short`` counts)."""
    seen_short: set[str] = set()
    seen_long: set[str] = set()
    x, out = 0, []
    for d, key in enumerate(long_):
        seen_long.add(key)
        if d < len(short):
            x += (short[d] in seen_long) + (key in seen_short)  # a key at depth d in both counts once
            seen_short.add(short[d])
        else:
            x += key in seen_short
        out.append(x)
    return out


def _clip(value: float) -> float:
    return min(1.0, max(0.0, value))


# -- the columns ---------------------------------------------------------------------------------------------


class _Coded:
    """Every key of both sides, flat (the baseline's lists, then the candidate's: list ``i`` belongs to pair
    ``i mod n``), each with an integer that holds its pair in the high bits and its key's code in the low ones."""

    def __init__(self, flat: list[str], codes: IntArray, raw_lengths: IntArray, *, exact: bool) -> None:
        self.n, self.flat, self.exact = len(raw_lengths) // 2, flat, exact
        self.raw_lengths = raw_lengths
        self.starts = np.concatenate(([0], np.cumsum(raw_lengths)[:-1])).astype(np.int64)
        self.list_of = np.repeat(np.arange(2 * self.n, dtype=np.int64), raw_lengths)
        shift = 62 - max(self.n, 1).bit_length()
        self.keys = ((self.list_of % max(self.n, 1)) << shift) | (codes & ((1 << shift) - 1))

    @classmethod
    def of(cls, baseline: Sequence[Keys], candidate: Sequence[Keys], *, exact: bool) -> _Coded:
        """Codes from Python's ``hash`` (fast; a collision is found and refused later) or, ``exact``, numbered."""
        flat = list(chain.from_iterable(chain(baseline, candidate)))
        if exact:
            table = dict(zip(dict.fromkeys(flat), range(len(flat)), strict=False))
            codes = np.fromiter(map(table.__getitem__, flat), dtype=np.int64, count=len(flat))
        else:
            codes = np.fromiter(map(hash, flat), dtype=np.int64, count=len(flat))
        lengths = np.fromiter(map(len, chain(baseline, candidate)), dtype=np.int64, count=2 * len(baseline))
        return cls(flat, codes, lengths, exact=exact)

    def distinct_and_common(self) -> tuple[IntArray, IntArray, IntArray, IntArray] | None:
        """The distinct lengths of the baseline's and the candidate's lists; for each key both lists of a pair
        hold, the pair and the 0-based depth from which both prefixes hold it. None when two different keys of
        one pair have the same code (possible with hashed codes only)."""
        n, size = self.n, len(self.keys)
        if size == 0:
            none = np.zeros(n, dtype=np.int64)
            return none, none, none[:0], none[:0]
        order = np.argsort(self.keys, kind="stable")  # stable: the baseline's first, each list in its order
        key, side = self.keys[order], self.list_of[order] >= n
        same_key = np.r_[False, key[1:] == key[:-1]]
        if not self.exact and not _all_equal(self.flat, order[np.flatnonzero(same_key) - 1], order[same_key]):
            return None
        first = ~same_key | np.r_[False, side[1:] != side[:-1]]  # a list's first occurrence of the key
        keep = np.zeros(size, dtype=bool)
        keep[order[first]] = True
        kept_before = np.cumsum(keep) - keep
        ranks = kept_before - kept_before[np.minimum(self.starts, size - 1)][self.list_of]
        group_start = np.maximum.accumulate(np.where(same_key, 0, np.arange(size)))
        both = np.flatnonzero(first & same_key)  # the candidate's first occurrence after the baseline's
        in_baseline, in_candidate = order[group_start[both]], order[both]
        lengths = np.bincount(self.list_of[keep], minlength=2 * n)
        depth = np.maximum(ranks[in_baseline], ranks[in_candidate])
        return lengths[:n], lengths[n:], self.list_of[in_candidate] - n, depth


def _top_changed(size_b: IntArray, size_c: IntArray, same_top: IntArray) -> FloatArray:
    """1.0 where the first keys differ: a common key at depth 0 is both lists' first."""
    changed_top = (size_b > 0) != (size_c > 0)
    both = (size_b > 0) & (size_c > 0)
    both[same_top] = False
    return np.asarray(changed_top | both, dtype=np.float64)


def _all_equal(flat: list[str], left: IntArray, right: IntArray) -> bool:
    keys = np.fromiter(flat, dtype=object, count=len(flat))  # the keys themselves, compared with ==
    return bool(np.all(keys[left] == keys[right]))


def _rbo_columns(s: IntArray, l: IntArray, common_pair: IntArray, common_depth: IntArray, p: float) -> FloatArray:  # noqa: E741
    """RBO_EXT of each pair from its shorter and longer distinct lengths and its common keys' depths: the sum of
    :func:`rbo`, term by term in the same order (so the same float). Each pair has one cell per depth 1 .. l."""
    n, cells = len(s), int(l.sum())
    if cells == 0:
        return np.ones(n)
    offsets = np.concatenate(([0], np.cumsum(l)[:-1])).astype(np.int64)
    cell_pair = np.repeat(np.arange(n, dtype=np.int64), l)
    depth = np.arange(cells, dtype=np.int64) - offsets[cell_pair] + 1

    def at(index: IntArray) -> IntArray:  # a cell of each pair (clipped: the pairs it does not exist for are masked)
        return running[np.clip(index, 0, cells - 1)]

    running = np.cumsum(np.bincount(offsets[common_pair] + common_depth, minlength=cells))
    base = np.where(offsets > 0, at(offsets - 1), 0)  # the common keys of the pairs before
    overlap = running - base[cell_pair]  # X_d
    x_s = np.where(s > 0, at(offsets + s - 1) - base, 0)
    x_l = np.where(l > 0, at(offsets + l - 1) - base, 0)
    safe_s = np.maximum(s, 1)
    s_cell, x_s_cell = safe_s[cell_pair], x_s[cell_pair]
    agreement = (s_cell * overlap + x_s_cell * np.maximum(depth - s_cell, 0)) / (s_cell * depth)
    powers = np.array([p**k for k in range(int(l.max()) + 1)])  # Python's p**k, as rbo() computes them
    weights = (1.0 - p) * powers[depth - 1]
    deficit = np.bincount(cell_pair, weights=weights * (1.0 - agreement), minlength=n)
    extrapolated = (safe_s * (x_l - x_s) + l * x_s) / (np.maximum(l, 1) * safe_s)
    value = np.clip(1.0 - (deficit + (1.0 - extrapolated) * powers[l]), 0.0, 1.0)
    return np.where(l == 0, 1.0, np.where((s == 0) | (x_l == 0), 0.0, value))
