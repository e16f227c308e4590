"""The null distribution of a percentile's log ratio under random flips, by cumulated counts.

A flip decides which side holds which of a unit's two values, so the ``2n`` values are sorted once and a side's
order statistic is where its cumulated count passes the rank: one cumulative count serves both sides and no
row is sorted. Only a window about the null's range (from a pilot of :data:`PILOT_ROWS` resamples) is
cumulated, a resample outside it in full, so the result is exact. Details: docs/performance.md, "The
comparison".
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

PILOT_ROWS = 128
WINDOWED_SHARE = 0.5  # a window over this share of the values costs no less than the full count


class SwappedPercentiles:
    """log(candidate percentile / baseline percentile) of one test, observed and under flips."""

    def __init__(self, baseline: np.ndarray, candidate: np.ndarray, positions: np.ndarray, percentile: float) -> None:
        a, b = np.asarray(baseline, float), np.asarray(candidate, float)
        low = np.minimum(a, b)
        span = np.maximum(a, b) - low
        candidate_high = b > a
        self.n = n = len(a)
        values = np.concatenate([low, low + span])  # the high value as every side writes it
        order = np.argsort(values, kind="stable")  # a unit's low sorts before its high, ties included
        self.sorted = values[order]
        owner = np.concatenate([np.arange(n), np.arange(n)])[order]
        is_high = order >= n
        self.columns = np.asarray(positions)[owner]  # each sorted value's unit in the flip matrix
        # the candidate holds sorted value j when its unit's flip differs from ``want[j]``
        self.want = is_high == candidate_high[owner]
        self.where = np.empty(2 * n, dtype=np.int64)
        self.where[order] = np.arange(2 * n)  # the sorted position of each unit's low (first n) and high
        self.candidate_high = candidate_high
        self.positions = np.asarray(positions)
        virtual = (n - 1) * np.true_divide(percentile, 100)
        self.ranks = (math.floor(virtual), min(math.floor(virtual) + 1, n - 1))
        self.t = float(virtual - math.floor(virtual))
        self.window: Window | None = None
        self.full = False
        self.dtype = narrowest(2 * n)

    def observed(self) -> float:
        return float(self.full_null(np.zeros((int(self.positions.max(initial=-1)) + 1, 1), dtype=bool))[0])

    def null(self, flips: np.ndarray) -> np.ndarray:
        """The statistic of every resample of a block of flips, given transposed (the comparison's units x
        resamples: a pass over one value is then one contiguous row of every resample)."""
        if self.window is None and not self.full:
            pilot = min(PILOT_ROWS, flips.shape[1])
            head = self.full_null(flips[:, :pilot], keep=True)
            self._set_window(head)
            if self.window is None or pilot == flips.shape[1]:
                return self.full_null(flips)
        if self.full or self.window is None:
            return self.full_null(flips)
        return self.window.statistic(flips, self)

    def _set_window(self, at: np.ndarray) -> None:
        """The window from the pilot's sorted positions of the order statistics, or a full count for good."""
        lo, hi = int(at.min()), int(at.max())
        margin = (hi - lo) // 2 + 2
        p1, p2 = max(0, lo - margin), min(2 * self.n, hi + margin + 1)
        if p2 - p1 > WINDOWED_SHARE * 2 * self.n:
            self.full = True
        else:
            self.window = Window(self, p1, p2)

    def counts(self, flips: np.ndarray, start: int = 0, stop: int | None = None) -> np.ndarray:
        """(values, rows): how many of the sorted values from ``start`` up to each one in ``[start, stop)``
        the candidate holds, in every resample of the transposed ``flips``."""
        held = flips[self.columns[start:stop]] != self.want[start:stop, None]
        count: np.ndarray = held.view(np.uint8).astype(self.dtype)  # from bytes: a bool array converts 3x slower
        np.cumsum(count, axis=0, out=count)
        return count

    def full_null(self, flips: np.ndarray, *, keep: bool = False) -> np.ndarray:
        """Every value cumulated: the statistic, or (``keep``) the sorted positions of the order statistics."""
        count = self.counts(flips)
        total = np.arange(1, 2 * self.n + 1, dtype=self.dtype)[:, None]
        at = [count_down(side <= k) for side in (total - count, count) for k in self.ranks]
        if keep:
            return np.stack(at, axis=1)
        return self.log_ratio(*(self.sorted[j] for j in at))

    def log_ratio(self, a_lo: np.ndarray, a_hi: np.ndarray, b_lo: np.ndarray, b_hi: np.ndarray) -> np.ndarray:
        with np.errstate(divide="ignore", invalid="ignore"):
            return np.asarray(np.log(interpolate(b_lo, b_hi, self.t) / interpolate(a_lo, a_hi, self.t)))


class Window:
    """The sorted values ``[start, stop)`` of one test, and what a side holds under them."""

    def __init__(self, test: SwappedPercentiles, start: int, stop: int) -> None:
        self.start, self.stop = start, stop
        low_at, high_at = test.where[: test.n], test.where[test.n :]
        under = high_at < start  # both values under the window: the candidate holds one of them
        straddle = (low_at < start) & ~under  # the low under it, the high not
        # the candidate holds a straddling unit's low when its flip equals candidate_high (a flipped unit
        # whose candidate value was the high one, or an unflipped one whose candidate value was the low)
        self.straddle = test.positions[straddle]
        self.straddle_high = test.candidate_high[straddle]
        self.under = int(under.sum())

    def statistic(self, flips: np.ndarray, test: SwappedPercentiles) -> np.ndarray:
        holds_low = flips[self.straddle] == self.straddle_high[:, None]
        cand_under = self.under + count_down(holds_low)
        base_under = self.start - cand_under
        count = test.counts(flips, self.start, self.stop)
        count += cand_under.astype(test.dtype)[None, :]
        total = np.arange(self.start + 1, self.stop + 1, dtype=test.dtype)[:, None]
        sides = ((total - count, base_under), (count, cand_under))
        at, ok = [], np.ones(flips.shape[1], dtype=bool)
        for side, under in sides:
            for k in test.ranks:
                at.append(self.start + count_down(side <= k))
                ok &= (under <= k) & (side[-1] > k)
        out = np.empty(flips.shape[1])
        out[ok] = test.log_ratio(*(test.sorted[j[ok]] for j in at))
        if not ok.all():  # an order statistic fell outside the window: those resamples cumulated in full
            out[~ok] = test.full_null(flips[:, ~ok])
        return out


def count_down(mask: np.ndarray) -> np.ndarray:
    """How many rows of each column of a bool matrix are True (``np.count_nonzero(mask, axis=0)``, summed
    in the narrowest integer that holds the count: twice as fast)."""
    return np.asarray(mask.view(np.uint8).sum(axis=0, dtype=narrowest(mask.shape[0])), dtype=np.intp)


def narrowest(count: int) -> type[np.signedinteger[Any]]:
    """The narrowest integer that holds a count (or a cumulated count) of up to ``count``: int16 halves the
    memory a pass over counts reads."""
    return np.int16 if count < np.iinfo(np.int16).max else np.int32


def percentile_rows(values: np.ndarray, percentile: float, in_place: bool = False) -> np.ndarray:
    """numpy's linear percentile of each row of a 2-d array, from the two order statistics it interpolates
    (the rows sorted in place with ``in_place``).

    >>> x = np.array([[4.0, 1.0, 3.0, 2.0]])
    >>> float(percentile_rows(x, 95.0)[0]) == float(np.percentile([4.0, 1.0, 3.0, 2.0], 95.0))
    True
    """
    rows = values if in_place else values.copy()
    rows.sort(axis=1)
    virtual = (rows.shape[1] - 1) * np.true_divide(percentile, 100)
    low = math.floor(virtual)
    return interpolate(rows[:, low], rows[:, min(low + 1, rows.shape[1] - 1)], float(virtual - low))


def interpolate(low: np.ndarray, high: np.ndarray, t: float) -> np.ndarray:
    """numpy's linear interpolation between two order statistics (``np.percentile``'s ``_lerp``)."""
    diff = high - low
    return np.asarray(high - diff * (1 - t) if t >= 0.5 else low + diff * t)
