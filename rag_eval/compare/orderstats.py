"""The null distribution of a percentile's log ratio under random flips, from the units that can move it.

Each unit holds two values, ``low <= high`` (written ``low + side * span``, ``side`` 0 or 1, for every
resample and for the observed data alike, so ties are exact). A flip decides which side gets which.
Every order statistic of a side's values lies between the same order statistic of the lows and of the
highs, and in practice in a far narrower window, the range of the null itself: a pilot of the first
:data:`PILOT_ROWS` resamples, sorted in full, gives that range, widened by its own width on each side.
Against a window ``[q1, q2]`` the units fall in four groups: below (both values under ``q1``), above
(both over ``q2``), spanning (one under, one over: which one a side gets is a count) and inside (a value
within). For a resample, the order statistic of rank ``k`` is the one of rank ``k - below - spanning
low`` among the inside units' values, *if* that lies within the window; a resample for which it does not
is sorted in full. So the result is exact, and a block of resamples costs a sort of the inside units
only (about ``16 sqrt(n)`` of them for a median) plus a count over the spanning ones.
"""

from __future__ import annotations

import math

import numpy as np

PILOT_ROWS = 128
WINDOWED_SHARE = 0.5  # inside units above this share of all: a full sort costs no more


class SwappedPercentiles:
    """log(candidate percentile / baseline percentile) of one test, observed and under flips."""

    def __init__(self, baseline: np.ndarray, candidate: np.ndarray, positions: np.ndarray, percentile: float) -> None:
        a, b = np.asarray(baseline, float), np.asarray(candidate, float)
        self.low = np.minimum(a, b)
        self.span = np.maximum(a, b) - self.low
        self.high = self.low + self.span  # as every side writes it
        self.candidate_high = b > a
        self.positions = positions
        self.n = len(a)
        self.identity = bool(self.n == 0 or (positions[0] == 0 and positions[-1] == self.n - 1))
        virtual = (self.n - 1) * np.true_divide(percentile, 100)
        self.ranks = (math.floor(virtual), min(math.floor(virtual) + 1, self.n - 1))
        self.t = float(virtual - math.floor(virtual))
        self.window: _Window | None = None
        self.full = False

    def observed(self) -> float:
        side = self.candidate_high[None, :]
        return float(self._full(side)[0])

    def null(self, flips: np.ndarray) -> np.ndarray:
        """The statistic of every resample of a block of flips (resamples x the comparison's units)."""
        mine = flips if flips.shape[1] == self.n and self.identity else flips[:, self.positions]
        side = mine ^ self.candidate_high  # True: the candidate holds the higher value
        if self.window is None and not self.full:
            pilot = min(PILOT_ROWS, len(side))
            head = self._full(side[:pilot], keep_ranks=True)
            self._set_window(head)
            if self.window is None or pilot == len(side):
                return self._full(side)
        if self.full or self.window is None:
            return self._full(side)
        return self.window.statistic(side, self)

    def _set_window(self, ranks: np.ndarray) -> None:
        """The window from the pilot's order statistics (rows x (side, rank)), or a full sort for good."""
        lo, hi = float(np.min(ranks)), float(np.max(ranks))
        if not (math.isfinite(lo) and math.isfinite(hi)):
            self.full = True
            return
        width = hi - lo
        window = _Window(self, lo - width, hi + width)
        if window.inside.size > WINDOWED_SHARE * self.n:
            self.full = True
        else:
            self.window = window

    def _full(self, side: np.ndarray, *, keep_ranks: bool = False) -> np.ndarray:
        """Every row sorted: the statistic, or (``keep_ranks``) the two ranks' values of both sides."""
        a, b = sorted_sides(side, self.low, self.span)
        lo, hi = self.ranks
        if keep_ranks:
            return np.stack([a[:, lo], a[:, hi], b[:, lo], b[:, hi]], axis=1)
        return self.log_ratio(a[:, lo], a[:, hi], b[:, lo], b[:, hi])

    def log_ratio(self, a_lo: np.ndarray, a_hi: np.ndarray, b_lo: np.ndarray, b_hi: np.ndarray) -> np.ndarray:
        with np.errstate(divide="ignore", invalid="ignore"):
            return np.asarray(np.log(interpolate(b_lo, b_hi, self.t) / interpolate(a_lo, a_hi, self.t)))


class _Window:
    """The units against one window ``[q1, q2]`` of values."""

    def __init__(self, test: SwappedPercentiles, q1: float, q2: float) -> None:
        self.q1, self.q2 = q1, q2
        below = test.high < q1
        above = test.low > q2
        spanning = (test.low < q1) & (test.high > q2)
        self.below = int(below.sum())
        self.spanning = np.flatnonzero(spanning)
        self.inside = np.flatnonzero(~(below | above | spanning))
        self.low, self.span = test.low[self.inside], test.span[self.inside]

    def statistic(self, side: np.ndarray, test: SwappedPercentiles) -> np.ndarray:
        a, b = sorted_sides(side[:, self.inside], self.low, self.span)
        # a spanning unit whose side flag is False gives the candidate its low value (under q1), the
        # baseline its high one (over q2), and the other way round
        cand_low = self.spanning.size - np.count_nonzero(side[:, self.spanning], axis=1)
        base_low = self.spanning.size - cand_low
        values = [self._rank(a, base_low, k) for k in test.ranks] + [self._rank(b, cand_low, k) for k in test.ranks]
        ok = np.logical_and.reduce([v[1] for v in values])
        out = np.empty(len(side))
        out[ok] = test.log_ratio(*(v[0][ok] for v in values))
        if not ok.all():  # the order statistic fell outside the window: those resamples sorted in full
            out[~ok] = test._full(side[~ok])
        return out

    def _rank(self, rows: np.ndarray, spanning_low: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
        """(the value of rank ``k`` of each row's side, whether it is exact: within the window)."""
        r = k - self.below - spanning_low
        inside = (r >= 0) & (r < rows.shape[1])
        value = np.take_along_axis(rows, np.clip(r, 0, max(rows.shape[1] - 1, 0))[:, None], axis=1)[:, 0] \
            if rows.shape[1] else np.full(len(rows), np.nan)
        return value, inside & (value >= self.q1) & (value <= self.q2)


def sorted_sides(side: np.ndarray, low: np.ndarray, span: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(baseline, candidate) values of every resample, each row sorted: ``side`` True where the candidate
    holds the unit's higher value (``low + span``), the baseline then its lower one."""
    b = side.astype(np.float64)
    a = 1.0 - b
    b *= span
    b += low
    a *= span
    a += low
    a.sort(axis=1)
    b.sort(axis=1)
    return a, b


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
