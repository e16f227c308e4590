"""Bootstrap intervals of many metrics at once: one stream of resamples per comparison and unit set.

Every statistic here needs only how often each unit was drawn, so one block of counts (resamples x units)
serves every metric on the same units, each kind computed for the whole block at once (a rate by a matrix
product, a percentile by cumulated counts in a window about its rank). The draws and the intervals (BCa for a
rate, else the percentile interval) are ``scipy.stats.bootstrap``'s from the same generator, which the unit
tests check. How each kind is computed: docs/performance.md, "The comparison"; why a bootstrap: docs/deciding.md.

>>> rng = np.random.default_rng(0)
>>> a = rng.exponential(size=200); b = 1.5 * rng.exponential(size=200)
>>> (box,) = intervals([BootTest(kind="percentile", baseline=a, candidate=b)], resamples=999,
...                    confidence=0.95, rng=np.random.default_rng(1))
>>> [round(v, 2) for v in (box.lows[1], box.highs[1])]  # the median's log ratio (log 1.5 = 0.41)
[0.15, 0.64]
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Protocol

import numpy as np
from scipy.special import ndtr, ndtri

from rag_eval.compare.catalog import RATIO_KINDS, Kind
from rag_eval.compare.orderstats import count_down, cumulate, interpolate, narrowest

__all__ = [
    "BCA_MAX_UNITS", "COUNTS_PER_BLOCK", "NORMAL_MIN_UNITS", "NORMAL_RESAMPLES", "BootTest", "Interval", "count_blocks",
    "intervals", "p_value",
]  # fmt: skip

COUNTS_PER_BLOCK = 2_000_000  # drawn indices (and counts) per block of resamples: 16 MB of int64
# BCa's jackknife costs n leave-one-out statistics; from 5,000 units on, the percentile interval is within
# 3% of its width of BCa's (measured on exponential, 10%-binary and U-shaped beta values of 5,000 units)
BCA_MAX_UNITS = 5_000
# from 20,000 units on (a query log's traffic), the normal interval of the bootstrap's standard error: its
# p-value is read from the normal curve, not counted among resamples, so it needs neither the resamples a
# counted p-value at Holm's first step needs nor redraws near alpha for an effect many standard errors from
# zero; 1,999 resamples put its standard error within 1.6% (one standard error) of the limit. Within 2.4% of the
# percentile interval's width for latencies and shares of a 100,000-query log, 4.5-15.5% for whole-character
# percentiles (docs/deciding.md, "Many units").
NORMAL_MIN_UNITS = 20_000
NORMAL_RESAMPLES = 1_999
WINDOW_Z = 6.0  # binomial standard deviations of a window: a resample outside it is rarer than 1 in 10**8
ORDER_KINDS = ("max", "percentile", "latency")


@dataclass(frozen=True, slots=True, kw_only=True)
class BootTest:
    """One metric's paired values on the units of a stream ((units,), or (units, 2) numerator and
    denominator for a rate)."""

    kind: Kind
    baseline: np.ndarray
    candidate: np.ndarray
    percentile: float = 50.0


@dataclass(frozen=True, slots=True, kw_only=True)
class Interval:
    """Per output of a metric (the difference; and the log ratio for ratio kinds): the interval's ends,
    the standard error, the bootstrap distribution (in draw order), and ``nulls``: the level at which the
    interval's own method (BCa, or percentile) puts an end at no change (0), the interval inverted, from
    which :func:`p_value` reads a p-value that agrees with the interval by construction."""

    lows: tuple[float, ...]
    highs: tuple[float, ...]
    ses: tuple[float, ...]
    distributions: tuple[np.ndarray, ...]
    nulls: tuple[float, ...] = ()
    null_errors: tuple[float, ...] = ()  # the Monte Carlo standard error of each level in ``nulls``
    normal: bool = False  # the normal interval (observed plus and minus z standard errors), not quantiles


def p_value(null: float, alternative: str) -> float:
    """The p-value of no change from the level ``null`` at which the interval's end sits at 0: an interval
    at confidence 1 - alpha (two-sided) excludes 0 exactly when the two-sided p-value is below alpha, and a
    one-sided bound at 1 - alpha when the one-sided p-value is (``greater``: the candidate's statistic is
    above the baseline's).

    >>> p_value(0.01, "greater"), p_value(0.01, "less"), p_value(0.01, "two-sided")
    (0.01, 0.99, 0.02)
    """
    if not math.isfinite(null):
        return math.nan
    if alternative == "greater":
        return null
    if alternative == "less":
        return 1.0 - null
    return min(1.0, 2 * min(null, 1.0 - null))


def count_blocks(rng: np.random.Generator, resamples: int, units: int) -> Iterator[np.ndarray]:
    """Blocks of the matrix of counts, transposed (``units x resamples``, so that a pass over one unit is a
    contiguous row of every resample): row ``i``, column ``r`` is how often resample ``r`` drew unit ``i``;
    the draws are ``scipy.stats.bootstrap``'s with ``batch`` = :func:`block_rows` ``(units)``."""
    rows = block_rows(units)
    for start in range(0, resamples, rows):
        size = min(rows, resamples - start)
        drawn = rng.integers(0, units, (size, units))
        drawn *= size
        drawn += np.arange(size)[:, None]
        counts = np.bincount(drawn.ravel(), minlength=size * units).reshape(units, size)
        yield counts.astype(narrowest(units))


def block_rows(units: int) -> int:
    """Resamples per block: memory bounded whatever the number of units."""
    return max(1, COUNTS_PER_BLOCK // max(1, units))


def intervals(
    tests: Sequence[BootTest], *, resamples: int, confidence: float, rng: np.random.Generator,
    normal_resamples: int = NORMAL_RESAMPLES,
) -> list[Interval]:  # fmt: skip
    """The interval of every test, all on the same ``n`` units (row i of each is the same unit), from one
    stream of ``resamples`` resamples drawn from ``rng`` (from :data:`NORMAL_MIN_UNITS` units on, the normal
    interval of no more than ``normal_resamples``).

    BCa for a rate; the percentile interval for an order statistic (a percentile, a latency, a maximum): BCa's
    acceleration is a jackknife, and the jackknife fails for the median and other quantiles (Efron and
    Tibshirani, An Introduction to the Bootstrap, 11.6). Measured on real pairs at 264 units (legacy against
    D1-D5, 200 draws each, three runs): BCa covered the post-process p50's difference 0.74-0.94, the
    percentile interval 0.98-1.00; the payload p95's 0.94 and 0.995 (docs/deciding.md)."""
    if not tests:
        return []
    n = int(np.asarray(tests[0].baseline).shape[0])
    normal = n >= NORMAL_MIN_UNITS
    if normal:
        resamples = min(resamples, normal_resamples)
    statistics = [_statistic(t, n) for t in tests]
    columns = np.concatenate([s.columns for s in statistics], axis=1)
    spans = np.cumsum([0] + [s.columns.shape[1] for s in statistics])
    drawn: list[list[np.ndarray]] = [[] for _ in tests]
    for counts in count_blocks(rng, resamples, n):
        product = columns.T @ counts.astype(np.float64)
        for j, s in enumerate(statistics):
            drawn[j].append(s.block(counts, product[spans[j] : spans[j + 1]]))
    alpha = (1 - confidence) / 2
    return [
        _interval(s, np.concatenate(d, axis=1), alpha=alpha, bca=s.smooth and n <= BCA_MAX_UNITS, normal=normal)
        for s, d in zip(statistics, drawn, strict=True)
    ]


def _interval(statistic: _Statistic, dist: np.ndarray, *, alpha: float, bca: bool, normal: bool = False) -> Interval:
    """BCa where it is defined for every output (as scipy computes it), the normal interval from the
    resamples' standard error with ``normal`` (where every output has a finite, positive one), else the
    percentile interval."""
    if normal:
        box = _normal_interval(statistic, dist, alpha=alpha)
        if box is not None:
            return box
    bounds = None
    nulls: list[float] = []
    errors: list[float] = []
    if bca:
        observed = statistic.observed()
        jackknife = statistic.jackknife()
        bounds = [_bca(d, o, j, alpha) for d, o, j in zip(dist, observed, jackknife, strict=True)]
        nulls = [_bca_null(d, o, j) for d, o, j in zip(dist, observed, jackknife, strict=True)]
        errors = [_bca_null_error(d, o, j) for d, o, j in zip(dist, observed, jackknife, strict=True)]
        if not all(math.isfinite(lo) and math.isfinite(hi) for lo, hi in bounds):
            bounds = None
    if bounds is None:
        bounds = [(_quantile(d, alpha), _quantile(d, 1 - alpha)) for d in dist]
        nulls = [_level_at_zero(d) for d in dist]
        errors = [_share_error(d) for d in dist]
    with np.errstate(invalid="ignore"):
        ses = tuple(float(np.std(d, ddof=1)) for d in dist)
    return Interval(
        lows=tuple(lo for lo, _ in bounds), highs=tuple(hi for _, hi in bounds), ses=ses,
        distributions=tuple(np.asarray(d) for d in dist), nulls=tuple(nulls),
        null_errors=tuple(errors),
    )  # fmt: skip


def _normal_interval(statistic: _Statistic, dist: np.ndarray, *, alpha: float) -> Interval | None:
    """The observed statistic plus and minus the normal quantile times the resamples' standard deviation
    (Efron and Tibshirani 13.2), and its inversion (the level at which an end sits at 0: the normal curve's
    share below 0), with the Monte Carlo error of that level from the standard deviation's own (relative
    1 / sqrt(2 (B - 1))). An output every resample of which equals its observed value (every unit changed
    alike) is the limit of that interval: a point, its level 0 or 1 (0.5 at no change) with no Monte Carlo
    error, which more resamples could not move. None where a resample is not a number, or an output does
    not vary but differs from its observed value."""
    if np.isnan(dist).any() or not np.isfinite(dist).all():
        return None
    observed = statistic.observed()
    ses = np.std(dist, axis=1, ddof=1)
    point = ses == 0
    if not np.isfinite(observed).all() or not (dist[point] == observed[point, None]).all():
        return None
    z = float(ndtri(1 - alpha))
    relative = 1 / math.sqrt(2 * (dist.shape[1] - 1))
    with np.errstate(invalid="ignore", divide="ignore"):
        z_obs = np.where(point, np.sign(observed) * np.inf, observed / np.where(point, 1.0, ses))
        density = np.exp(-0.5 * z_obs**2) / math.sqrt(2 * math.pi)
        errors = np.where(point, 0.0, density * np.abs(z_obs) * relative)
    nulls = np.where(point & (observed == 0), 0.5, ndtr(-z_obs))
    return Interval(
        lows=tuple(float(v) for v in observed - z * ses), highs=tuple(float(v) for v in observed + z * ses),
        ses=tuple(float(v) for v in ses), distributions=tuple(np.asarray(d) for d in dist),
        nulls=tuple(float(v) for v in nulls), null_errors=tuple(float(v) for v in errors), normal=True,
    )  # fmt: skip


def _share_below(dist: np.ndarray) -> float:
    """The share of resamples below 0 (half of those at 0), kept 1 / (resamples + 1) from 0 and 1: the level
    of the percentile interval's end at 0, never a p-value of 0 from a finite number of resamples."""
    finite = dist[~np.isnan(dist)]
    if finite.size == 0:
        return math.nan
    share = (np.count_nonzero(finite < 0) + 0.5 * np.count_nonzero(finite == 0)) / finite.size
    edge = 1.0 / (finite.size + 1)
    return float(min(max(share, edge), 1.0 - edge))


def _level_at_zero(dist: np.ndarray) -> float:
    """The level at which the percentile interval's end (:func:`_quantile`, linear between order statistics) is
    0, its inverse, kept 1 / (resamples + 1) from 0 and 1 as :func:`_share_below`: so that the interval at
    confidence 1 - alpha excludes 0 exactly when the p-value read from this level is below alpha (the share
    of resamples below 0 is not: 25 of 999 below 0 is a share of 0.025, while the interpolated 2.5% end lies
    between the 25th and the 26th, above 0). Values at 0: the middle of their levels.

    >>> _level_at_zero(np.array([-2.0, -1.0, 1.0, 3.0])), _level_at_zero(np.array([-1.0, 0.0, 0.0, 2.0]))
    (0.5, 0.5)
    >>> round(_level_at_zero(np.array([-3.0, 1.0, 2.0, 4.0, 5.0])), 4)  # 0 is 3/4 of the way from -3 to 1
    0.1875
    """
    finite = np.sort(dist[~np.isnan(dist)])
    n = finite.size
    if n == 0:
        return math.nan
    below, zeros = int(np.count_nonzero(finite < 0)), int(np.count_nonzero(finite == 0))
    if zeros:
        level = (below + (zeros - 1) / 2) / (n - 1) if n > 1 else 0.5
    elif below == 0:
        level = 0.0
    elif below == n:
        level = 1.0
    else:
        lo, hi = float(finite[below - 1]), float(finite[below])
        position = below - 1 + (0.0 - lo) / (hi - lo) if math.isfinite(lo) and math.isfinite(hi) else below - 0.5
        level = position / (n - 1)
    edge = 1.0 / (n + 1)
    return float(min(max(level, edge), 1.0 - edge))


def _share_error(dist: np.ndarray) -> float:
    """The binomial standard error of :func:`_share_below`."""
    q = _share_below(dist)
    return math.sqrt(q * (1 - q) / max(1, int(np.count_nonzero(~np.isnan(dist))))) if math.isfinite(q) else math.nan


def _bca_null_error(dist: np.ndarray, observed: float, jackknife: np.ndarray) -> float:
    """The Monte Carlo standard error of :func:`_bca_null`: the share's binomial error through BCa's map (its
    slope at the share, the delta method), which is steep in the tails where few resamples decide."""
    share = _share_below(dist)
    z0, accel = _bca_terms(dist, observed, jackknife)
    if not (math.isfinite(share) and math.isfinite(z0) and math.isfinite(accel)):
        return _share_error(dist)
    z_share = float(ndtri(share))
    w = z_share - z0
    u = w / (1 + accel * w)
    density = math.exp(-0.5 * (u - z0) ** 2 + 0.5 * z_share**2)  # phi(z_level) / phi(z_share)
    slope = density / (1 + accel * w) ** 2
    return slope * _share_error(dist)


def _bca_terms(dist: np.ndarray, observed: float, jackknife: np.ndarray) -> tuple[float, float]:
    """BCa's bias correction z0 and acceleration, as scipy.stats.bootstrap computes them."""
    with np.errstate(divide="ignore", invalid="ignore"):
        share = (np.count_nonzero(dist < observed) + np.count_nonzero(dist <= observed)) / (2 * dist.size)
        z0 = float(ndtri(share))
        n = float(jackknife.size)
        u = (n - 1) * (jackknife.mean() - jackknife)
        accel = float(1 / 6 * ((u**3).sum() / n**3) / ((u**2).sum() / n**2) ** (3 / 2))
    return z0, accel


def _bca_null(dist: np.ndarray, observed: float, jackknife: np.ndarray) -> float:
    """The nominal level at which the BCa interval's end is 0: BCa's map from a level to a quantile of the
    resamples (Efron and Tibshirani 14.3), inverted at the share of resamples below 0."""
    share = _share_below(dist)
    z0, accel = _bca_terms(dist, observed, jackknife)
    if not (math.isfinite(share) and math.isfinite(z0) and math.isfinite(accel)):
        return _level_at_zero(dist)  # BCa undefined: the percentile interval's level
    w = float(ndtri(share)) - z0  # = u / (1 - a u), u = z0 + z_level
    u = w / (1 + accel * w)
    return float(ndtr(u - z0))


def _bca(dist: np.ndarray, observed: float, jackknife: np.ndarray, alpha: float) -> tuple[float, float]:
    """scipy.stats.bootstrap's BCa ends (Efron and Tibshirani 14.3, 15.4): the bias correction from the
    share of resamples below the observed value, the acceleration from the jackknife."""
    z0, accel = _bca_terms(dist, observed, jackknife)
    with np.errstate(divide="ignore", invalid="ignore"):
        z = float(ndtri(alpha))
        ends = []
        for z_end in (z, -z):
            num = z0 + z_end
            ends.append(float(ndtr(z0 + num / (1 - accel * num))))
    return _quantile(dist, ends[0]), _quantile(dist, ends[1])


def _quantile(dist: np.ndarray, level: float) -> float:
    """``scipy.stats.quantile``'s linear quantile (Hyndman and Fan's 7th, written as scipy writes it, so
    infinite values give what scipy gives); not a number when the level or any value is not."""
    if not math.isfinite(level) or not 0.0 <= level <= 1.0 or np.isnan(dist).any():
        return math.nan
    y = np.sort(dist)
    n = y.size
    jg = level * n + (1 - level)
    j = jg // 1 - 1
    g = 0.0 if j < 0 else jg % 1
    lo, hi = int(min(max(j, 0.0), n - 1)), int(min(max(j + 1, 0.0), n - 1))
    with np.errstate(invalid="ignore"):
        return float((1 - g) * y[lo] + g * y[hi])


class _Statistic(Protocol):
    """One test's statistic over blocks of counts, its observed value and its jackknife."""

    columns: np.ndarray  # (units, k): what the block's matrix product needs of this test
    smooth: bool  # a smooth function of the units' means (BCa's jackknife holds), not an order statistic

    def block(self, counts: np.ndarray, product: np.ndarray) -> np.ndarray:
        """(outputs, resamples) of a block of counts (units x resamples); ``product`` = ``columns.T @ counts``."""
        ...

    def observed(self) -> np.ndarray:
        """(outputs,): the statistic of the units as they are."""
        ...

    def jackknife(self) -> np.ndarray:
        """(outputs, units): the statistic with each unit left out."""
        ...


def _statistic(test: BootTest, n: int) -> _Statistic:
    a, b = np.asarray(test.baseline, float), np.asarray(test.candidate, float)
    if a.shape[0] != n or b.shape[0] != n:
        raise ValueError(f"every test of one stream has its {n} units")
    if test.kind == "rate":
        return _Rate(a, b)
    if test.kind in ORDER_KINDS:
        percentile = 100.0 if test.kind == "max" else test.percentile
        return _Order(a, b, percentile, ratio=test.kind in RATIO_KINDS)
    raise ValueError(f"no bootstrap for kind {test.kind!r}")


def _rates(num: np.ndarray, den: np.ndarray) -> np.ndarray:
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.asarray(np.where(den > 0, num / np.where(den > 0, den, 1.0), np.nan))


class _Rate:
    """The difference of two shares of sums."""

    smooth = True

    def __init__(self, a: np.ndarray, b: np.ndarray) -> None:
        self.columns = np.column_stack([a[:, 0], a[:, 1], b[:, 0], b[:, 1]])
        self.sums = self.columns.sum(axis=0)

    def block(self, counts: np.ndarray, product: np.ndarray) -> np.ndarray:
        return np.asarray(_rates(product[2], product[3]) - _rates(product[0], product[1]))[None, :]

    def observed(self) -> np.ndarray:
        s = self.sums
        return np.asarray(_rates(s[2:3], s[3:4]) - _rates(s[0:1], s[1:2]))

    def jackknife(self) -> np.ndarray:
        rest = self.sums[None, :] - self.columns
        return np.asarray(_rates(rest[:, 2], rest[:, 3]) - _rates(rest[:, 0], rest[:, 1]))[None, :]


class _Side:
    """One side's values, sorted once, and the window of sorted positions its order statistics reach."""

    def __init__(self, values: np.ndarray, ranks: tuple[int, int]) -> None:
        n = len(values)
        self.order = np.argsort(values, kind="stable")
        self.sorted = values[self.order]
        self.ranks = ranks
        p = min(1.0, (ranks[0] + 1) / n)
        margin = math.ceil(WINDOW_Z * math.sqrt(n * p * (1 - p)) + WINDOW_Z**2) + 1
        self.lo, self.hi = max(0, ranks[0] - margin), min(n, ranks[1] + margin + 1)
        if 2 * (self.hi - self.lo) >= n:
            self.lo, self.hi = 0, n  # a window of half the units saves nothing: cumulate all
        self.below = np.zeros(n)
        self.below[self.order[: self.lo]] = 1.0  # the units under the window: a column of the product

    def order_statistics(self, counts: np.ndarray, below: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The values of the two ranks in every resample (``below``: its count of units under the window)."""
        window = counts[self.order[self.lo : self.hi]]
        cumulate(window)
        window += below.astype(window.dtype)[None, :]
        out = []
        for k in self.ranks:
            at = self.lo + count_down(window <= k)
            outside = (below > k) | (window[-1] <= k)
            if outside.any():  # beyond the window: those resamples cumulated in full
                full = counts[:, outside][self.order]
                cumulate(full)
                at[outside] = count_down(full <= k)
            out.append(self.sorted[at])
        return out[0], out[1]


def _ranks(n: int, percentile: float) -> tuple[tuple[int, int], float]:
    """numpy's linear percentile of ``n`` values: the two ranks it interpolates and the weight."""
    virtual = (n - 1) * np.true_divide(percentile, 100)
    low = math.floor(virtual)
    return (low, min(low + 1, n - 1)), float(virtual - low)


class _Order:
    """The difference of two sides' percentiles, and for a ratio kind the log of their ratio."""

    smooth = False

    def __init__(self, a: np.ndarray, b: np.ndarray, percentile: float, *, ratio: bool) -> None:
        n = len(a)
        self.percentile, self.ratio = percentile, ratio
        ranks, self.t = _ranks(n, percentile)
        self.sides = (_Side(a, ranks), _Side(b, ranks))
        self.columns = np.column_stack([s.below for s in self.sides])

    def _outputs(self, base: np.ndarray, cand: np.ndarray) -> np.ndarray:
        if not self.ratio:
            return np.asarray(cand - base)[None, ...]
        with np.errstate(divide="ignore", invalid="ignore"):
            return np.stack([cand - base, np.log(cand / base)])

    def block(self, counts: np.ndarray, product: np.ndarray) -> np.ndarray:
        base, cand = (interpolate(*s.order_statistics(counts, product[j]), self.t) for j, s in enumerate(self.sides))
        return self._outputs(base, cand)

    def observed(self) -> np.ndarray:
        lo, hi = self.sides[0].ranks
        base, cand = (interpolate(s.sorted[lo : lo + 1], s.sorted[hi : hi + 1], self.t) for s in self.sides)
        return self._outputs(base, cand)[:, 0]

    def jackknife(self) -> np.ndarray:
        raise TypeError("an order statistic has no BCa: the jackknife fails for quantiles")
