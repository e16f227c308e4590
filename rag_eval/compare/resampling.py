"""The paired randomisation test of many metrics at once: one matrix of random flips per comparison.

Under "no difference" a unit's two values are exchangeable, so the null distribution exchanges them in a
random subset of units. One matrix of flips, drawn once per comparison and unit kind, serves every metric on
those units, each kind computed for a block of resamples at once (means and rates by matrix products,
percentiles by :mod:`rag_eval.compare.orderstats`). The p-value is exactly ``scipy.stats.monte_carlo_test``'s
from the same flips, and the same data and seed give the same p-values whatever the memory or the row order.
The formulas: docs/performance.md, "The comparison"; the test: docs/deciding.md, "Which test, and why".

>>> rng = np.random.default_rng(0)
>>> a = rng.normal(size=40)
>>> tests = [FlipTest(kind="mean", baseline=a, candidate=a + 0.5, positions=np.arange(40))]
>>> [(round(p, 4), round(e, 4)) for p, e in flip_p_values(tests, units=40, resamples=999, rng=rng)]
[(0.002, 0.002)]
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field

import numpy as np

from rag_eval.compare.catalog import Kind
from rag_eval.compare.orderstats import SwappedPercentiles

__all__ = ["FLIPS_PER_BLOCK", "FlipTest", "flip_blocks", "flip_p_values", "monte_carlo_error"]

FLIPS_PER_BLOCK = 4_000_000  # flips (and gathered values) per block of resamples: 4 MB of flags, 32 MB of values
_TOLERANCE = float(np.finfo(np.float64).eps * 100)  # scipy's: numerically distinct but equal statistics tie


@dataclass(frozen=True, slots=True, kw_only=True)
class FlipTest:
    """One metric's test: its per-unit values ((units,), or (units, 2) numerator and denominator for a
    rate), the column of each unit in the flip matrix, the alternative and the percentile."""

    kind: Kind
    baseline: np.ndarray
    candidate: np.ndarray
    positions: np.ndarray
    alternative: str = "two-sided"  # of the candidate's difference (log ratio for percentiles): less, greater
    percentile: float = 50.0
    n: int = field(init=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "n", int(np.asarray(self.positions).shape[0]))


def flip_blocks(rng: np.random.Generator, resamples: int, units: int) -> Iterator[np.ndarray]:
    """Blocks of the ``resamples x units`` flip matrix (bool, True = the unit's two values exchanged),
    each a fair coin drawn from ``rng``; the block size depends on ``units`` alone."""
    rows = max(1, FLIPS_PER_BLOCK // max(1, units))
    for start in range(0, resamples, rows):
        size = min(rows, resamples - start)
        bits = rng.integers(0, 256, size=(size, (units + 7) // 8), dtype=np.uint8)
        yield np.unpackbits(bits, axis=1, count=units).view(np.bool_)


def flip_p_values(
    tests: Sequence[FlipTest], *, units: int, resamples: int, rng: np.random.Generator
) -> list[tuple[float | None, float | None]]:
    """(p-value, Monte Carlo standard error) of every test, from one flip matrix of ``units`` columns
    drawn from ``rng``; None where the observed statistic is not a number."""
    statistics = _Statistics(tests)
    observed = statistics.observed()
    gamma = np.abs(observed) * _TOLERANCE
    at_most = np.zeros(len(tests))
    at_least = np.zeros(len(tests))
    with np.errstate(invalid="ignore"):
        for block in flip_blocks(rng, resamples, units):
            null = statistics.null(block)  # (rows, tests)
            at_most += (null <= observed + gamma).sum(axis=0)
            at_least += (null >= observed - gamma).sum(axis=0)
    out: list[tuple[float | None, float | None]] = []
    for t, obs, low, high in zip(tests, observed, at_most, at_least, strict=True):
        if not math.isfinite(obs):
            out.append((None, None))
            continue
        p_less, p_greater = float(low + 1) / (resamples + 1), float(high + 1) / (resamples + 1)
        p = min(1.0, {"less": p_less, "greater": p_greater}.get(t.alternative, 2 * min(p_less, p_greater)))
        out.append((p, monte_carlo_error(p, resamples, two_sided=t.alternative not in ("less", "greater"))))
    return out


def monte_carlo_error(p: float, resamples: int, *, two_sided: bool = True) -> float:
    """The standard error of a p-value estimated from ``resamples`` random resamples: sqrt(p (1 - p) / R)
    for one tail; a two-sided p-value is twice a tail's count, so its variance is 4 (p/2)(1 - p/2) / R.

    >>> round(monte_carlo_error(0.05, 4999, two_sided=False), 4), round(monte_carlo_error(0.05, 4999), 4)
    (0.0031, 0.0044)
    """
    variance = p * (2 - p) if two_sided else p * (1 - p)
    return math.sqrt(max(variance, 0.0) / resamples)


class _Statistics:
    """The tests grouped by kind, with what each kind's null needs precomputed."""

    def __init__(self, tests: Sequence[FlipTest]) -> None:
        self.width = len(tests)
        self.mean = [i for i, t in enumerate(tests) if t.kind == "mean"]
        self.rate = [i for i, t in enumerate(tests) if t.kind == "rate"]
        self.order = [i for i, t in enumerate(tests) if t.kind in ("percentile", "latency")]
        unknown = set(range(self.width)) - set(self.mean) - set(self.rate) - set(self.order)
        if unknown:
            raise ValueError(f"no randomisation test for kind {tests[min(unknown)].kind!r}")
        self.percentiles = [
            SwappedPercentiles(t.baseline, t.candidate, np.asarray(t.positions), t.percentile)
            for t in (tests[i] for i in self.order)
        ]
        units = max((int(t.positions.max()) + 1 for t in tests if t.n), default=0)
        # means: per-unit differences, zero where a metric has no unit (a flip there changes nothing)
        self.d = np.zeros((units, len(self.mean)))
        for j, i in enumerate(self.mean):
            self.d[tests[i].positions, j] = np.asarray(tests[i].candidate, float) - np.asarray(tests[i].baseline, float)
        self.d_sum = self.d.sum(axis=0)
        self.d_n = np.array([tests[i].n for i in self.mean], dtype=float)
        # rates: how each side's numerator and denominator sums move when a unit is exchanged
        self.r = np.zeros((units, 2 * len(self.rate)))
        sums = np.zeros((4, len(self.rate)))  # baseline num, den; candidate num, den
        for j, i in enumerate(self.rate):
            a, b = np.asarray(tests[i].baseline, float), np.asarray(tests[i].candidate, float)
            self.r[tests[i].positions, 2 * j : 2 * j + 2] = a - b
            sums[:, j] = [a[:, 0].sum(), a[:, 1].sum(), b[:, 0].sum(), b[:, 1].sum()]
        self.sums = sums

    def observed(self) -> np.ndarray:
        out = np.full(self.width, np.nan)
        out[self.mean] = self.d_sum / self.d_n
        out[self.rate] = self._rates(np.zeros((1, 2 * len(self.rate))))[0]
        for i, percentiles in zip(self.order, self.percentiles, strict=True):
            out[i] = percentiles.observed()
        return out

    def null(self, flips: np.ndarray) -> np.ndarray:
        out = np.empty((flips.shape[0], self.width))
        if self.mean or self.rate:
            f = flips[:, : self.d.shape[0]].view(np.uint8).astype(np.float64)  # a bool array converts 3x slower
            if self.mean:
                out[:, self.mean] = (self.d_sum - 2.0 * (f @ self.d)) / self.d_n
            if self.rate:
                out[:, self.rate] = self._rates(f @ self.r)
        if self.order:
            by_unit = np.ascontiguousarray(flips.T)  # one transposition for every percentile of the block
            for i, percentiles in zip(self.order, self.percentiles, strict=True):
                out[:, i] = percentiles.null(by_unit)
        return out

    def _rates(self, moved: np.ndarray) -> np.ndarray:
        """Each rate's difference when the sums move by ``moved`` (rows, 2 per rate: num, den)."""
        dn, dd = moved[:, 0::2], moved[:, 1::2]
        a_num, a_den, b_num, b_den = self.sums
        with np.errstate(divide="ignore", invalid="ignore"):
            b_rate = np.where(b_den + dd > 0, (b_num + dn) / (b_den + dd), np.nan)
            a_rate = np.where(a_den - dd > 0, (a_num - dn) / (a_den - dd), np.nan)
        return np.asarray(b_rate - a_rate)
