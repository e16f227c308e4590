"""The batched randomisation test against scipy: the same flips give scipy.stats.monte_carlo_test's p-values.

scipy is the oracle: its ``monte_carlo_test`` is given the flips the batched test draws (as signs) and the
metric's statistic written the plain way (swap the flipped units' values, aggregate each side with numpy),
so any difference is the batched arithmetic's.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats

from rag_eval.compare.orderstats import SwappedPercentiles, Window, percentile_rows
from rag_eval.compare.resampling import (
    FlipTest,
    flip_blocks,
    flip_p_values,
    monte_carlo_error,
)

ALTERNATIVES = ("two-sided", "less", "greater")


def plain_statistic(kind: str, a: np.ndarray, b: np.ndarray, q: float) -> Callable[..., np.ndarray]:
    """The metric's difference with the units whose sign is -1 exchanged, aggregated by numpy."""

    def statistic(signs: np.ndarray, axis: int = -1) -> np.ndarray:
        flip = (signs < 0)[..., None] if kind == "rate" else signs < 0
        sa, sb = np.where(flip, b, a), np.where(flip, a, b)
        if kind == "mean":
            return np.asarray((sb - sa).mean(axis=-1))
        if kind == "rate":
            with np.errstate(divide="ignore", invalid="ignore"):
                rb = np.where(sb[..., 1].sum(-1) > 0, sb[..., 0].sum(-1) / sb[..., 1].sum(-1), np.nan)
                ra = np.where(sa[..., 1].sum(-1) > 0, sa[..., 0].sum(-1) / sa[..., 1].sum(-1), np.nan)
            return np.asarray(rb - ra)
        with np.errstate(divide="ignore", invalid="ignore"):
            return np.asarray(np.log(np.percentile(sb, q, axis=-1) / np.percentile(sa, q, axis=-1)))

    return statistic


def scipy_p(kind: str, a: np.ndarray, b: np.ndarray, *, alternative: str, resamples: int, flips: np.ndarray,
            q: float = 50.0) -> float:  # fmt: skip
    """scipy's p-value of the flips ``flips`` (resamples x units) for the plain statistic."""
    given_flips = iter([flips])

    def rvs(size: tuple[int, ...]) -> np.ndarray:
        f = next(given_flips)
        assert f.shape == size
        return np.where(f, -1.0, 1.0)

    result = stats.monte_carlo_test(np.ones(len(a)), rvs, plain_statistic(kind, a, b, q), vectorized=True,
                                    n_resamples=resamples, alternative=alternative)  # fmt: skip
    return float(result.pvalue)


def drawn(seed: int, resamples: int, units: int) -> np.ndarray:
    return np.concatenate(list(flip_blocks(np.random.default_rng(seed), resamples, units)))


def values(kind: str, n: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    if kind == "rate":
        a = rng.integers(0, 4, size=(n, 2)).astype(float)
        b = rng.integers(0, 4, size=(n, 2)).astype(float)
        return a, b
    a = rng.exponential(size=n)
    b = a * rng.uniform(0.7, 1.5, size=n)
    if kind == "mean":  # ties and zero differences: binary-like values, half the units unchanged
        a, b = np.round(a), np.round(b)
        b[: n // 2] = a[: n // 2]
    else:  # repeated values and units whose two values are equal
        a[::5], b[::5] = 1.0, 1.0
    return a, b


@pytest.mark.parametrize("kind", ["mean", "rate", "latency", "percentile"])
@pytest.mark.parametrize("alternative", ALTERNATIVES)
@pytest.mark.parametrize("n", [15, 264])
def test_the_batched_p_value_is_scipys_for_the_same_flips(kind: str, alternative: str, n: int) -> None:
    a, b = values(kind, n, seed=n)
    q = 95.0 if kind == "percentile" else 50.0
    test = FlipTest(kind=kind, baseline=a, candidate=b, positions=np.arange(n),  # type: ignore[arg-type]
                    alternative=alternative, percentile=q)  # fmt: skip
    ((p, error),) = flip_p_values([test], units=n, resamples=1999, rng=np.random.default_rng(7))
    expected = scipy_p(kind, a, b, alternative=alternative, resamples=1999, flips=drawn(7, 1999, n), q=q)
    assert p == pytest.approx(expected, abs=1e-12)
    assert error == pytest.approx(monte_carlo_error(expected, 1999, two_sided=alternative == "two-sided"))


def test_a_metric_on_some_units_reads_its_own_columns_and_its_p_value_does_not_depend_on_the_others() -> None:
    """Three metrics of one comparison on 300 units, one of them defined on a subset (positions in id order,
    not 0..n-1): each equals scipy on its own columns of the shared flips, and each equals itself computed
    alone from the same stream."""
    rng = np.random.default_rng(3)
    width = 300
    subset = np.sort(rng.choice(width, 181, replace=False))
    mean_a, mean_b = values("mean", width, 1)
    lat_a, lat_b = values("latency", 181, 2)
    rate_a, rate_b = values("rate", width, 4)
    tests = [
        FlipTest(kind="mean", baseline=mean_a, candidate=mean_b, positions=np.arange(width)),
        FlipTest(kind="latency", baseline=lat_a, candidate=lat_b, positions=subset, alternative="greater"),
        FlipTest(kind="rate", baseline=rate_a, candidate=rate_b, positions=np.arange(width), alternative="less"),
    ]
    together = flip_p_values(tests, units=width, resamples=2999, rng=np.random.default_rng(11))
    flips = drawn(11, 2999, width)
    assert together[0][0] == pytest.approx(scipy_p("mean", mean_a, mean_b, alternative="two-sided",
                                                   resamples=2999, flips=flips))  # fmt: skip
    assert together[1][0] == pytest.approx(scipy_p("latency", lat_a, lat_b, alternative="greater",
                                                   resamples=2999, flips=flips[:, subset]))  # fmt: skip
    assert together[2][0] == pytest.approx(scipy_p("rate", rate_a, rate_b, alternative="less",
                                                   resamples=2999, flips=flips))  # fmt: skip
    for i, t in enumerate(tests):
        alone = flip_p_values([t], units=width, resamples=2999, rng=np.random.default_rng(11))
        assert alone == [together[i]]


def test_a_resample_where_a_rate_has_no_denominator_is_never_at_least_as_extreme() -> None:
    """Two units carry every denominator: a flip that moves both to one side leaves the other with none
    (not a number), which counts as neither tail, exactly as scipy counts it."""
    a = np.array([[1.0, 2.0], [0.0, 0.0], [0.0, 0.0]] * 6)
    b = np.array([[0.0, 0.0], [1.0, 1.0], [0.0, 0.0]] * 6)
    test = FlipTest(kind="rate", baseline=a, candidate=b, positions=np.arange(18))
    ((p, _),) = flip_p_values([test], units=18, resamples=999, rng=np.random.default_rng(0))
    assert p == pytest.approx(scipy_p("rate", a, b, alternative="two-sided", resamples=999, flips=drawn(0, 999, 18)))


def test_an_undefined_observed_statistic_has_no_p_value() -> None:
    a, b = np.zeros(30), np.linspace(0, 1, 30)  # the baseline's median is 0: the log ratio is infinite
    test = FlipTest(kind="latency", baseline=a, candidate=b, positions=np.arange(30))
    assert flip_p_values([test], units=30, resamples=99, rng=np.random.default_rng(0)) == [(None, None)]


def test_the_same_seed_gives_the_same_p_values_and_another_seed_agrees_within_monte_carlo_error() -> None:
    a, b = values("latency", 264, 5)
    test = FlipTest(kind="latency", baseline=a, candidate=b, positions=np.arange(264))
    first = flip_p_values([test], units=264, resamples=4999, rng=np.random.default_rng(1))
    assert flip_p_values([test], units=264, resamples=4999, rng=np.random.default_rng(1)) == first
    ((other, error),) = flip_p_values([test], units=264, resamples=4999, rng=np.random.default_rng(2))
    assert first[0][0] is not None and other is not None and error is not None
    assert abs(first[0][0] - other) < 5 * error


def test_the_two_sided_monte_carlo_error_is_the_spread_of_p_over_seeds() -> None:
    """Simulated: 300 seeds of a two-sided p of about 0.05 at 999 resamples; the spread of the p-values is
    sqrt(p (2 - p) / R) (within 15%), not the one-tail sqrt(p (1 - p) / R), which is 29% too small."""
    rng = np.random.default_rng(0)
    d = rng.normal(size=120)
    d += 1.98 * d.std() / math.sqrt(120) - d.mean()
    test = FlipTest(kind="mean", baseline=np.zeros(120), candidate=d, positions=np.arange(120))
    ps = np.array([flip_p_values([test], units=120, resamples=999, rng=np.random.default_rng(s))[0][0]
                   for s in range(300)], dtype=float)  # fmt: skip
    p = float(ps.mean())
    assert 0.03 < p < 0.07
    assert float(ps.std(ddof=1)) == pytest.approx(monte_carlo_error(p, 999), rel=0.15)
    assert float(ps.std(ddof=1)) > 1.2 * monte_carlo_error(p, 999, two_sided=False)


def test_blocks_bound_memory_and_cover_every_resample() -> None:
    blocks = list(flip_blocks(np.random.default_rng(0), 2500, 100_000))
    assert sum(len(b) for b in blocks) == 2500 and max(b.size for b in blocks) <= 4_000_000
    assert all(b.dtype == np.bool_ and b.shape[1] == 100_000 for b in blocks)
    share = float(np.mean([b.mean() for b in blocks]))
    assert abs(share - 0.5) < 0.001  # fair coins


@settings(max_examples=60, deadline=None)
@given(
    st.lists(st.floats(0, 1e6, allow_nan=False), min_size=1, max_size=40),
    st.sampled_from([0.0, 5.0, 37.3, 50.0, 90.0, 95.0, 99.0, 100.0]),
)
def test_the_percentile_of_sorted_rows_is_numpys(row: list[float], q: float) -> None:
    x = np.array([row, row[::-1]], dtype=float)
    assert np.array_equal(percentile_rows(x, q), np.percentile(x, q, axis=1))


def _pairs(shape: str, n: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    a = rng.lognormal(6.0, 0.5, size=n)
    if shape == "correlated":  # the same queries under two configs: each query's time, a little changed
        return a, a * rng.lognormal(0.05, 0.1, size=n)
    if shape == "independent":
        return a, rng.lognormal(6.05, 0.5, size=n)
    if shape == "ties":  # times on a coarse clock: few distinct values, many units equal on both sides
        a = np.round(a / 100) * 100
        b = a.copy()
        b[::3] = np.round(b[::3] * 1.3 / 100) * 100
        return a, b
    raise AssertionError(shape)


@pytest.mark.parametrize("shape", ["correlated", "independent", "ties"])
@pytest.mark.parametrize("q", [50.0, 95.0, 99.0])
def test_the_windowed_null_is_the_full_sorts_resample_by_resample(shape: str, q: float) -> None:
    """3,000 units: the null computed from the units inside the pilot's window equals, for every resample,
    the one of a full sort of every unit (fallback rows included), and the window leaves most units out
    where the two values of a unit are close."""
    rng = np.random.default_rng(int(q) + len(shape))
    a, b = _pairs(shape, 3000, rng)
    swapped = SwappedPercentiles(a, b, np.arange(3000), q)
    flips = drawn(5, 1500, 3000)
    by_unit = np.ascontiguousarray(flips.T)
    null = np.concatenate([swapped.null(by_unit[:, :1000]), swapped.null(by_unit[:, 1000:])])
    full = swapped.full_null(by_unit)
    assert np.array_equal(null, full)
    if shape == "correlated":
        assert swapped.window is not None and swapped.window.stop - swapped.window.start < 0.25 * 6000


def test_a_window_too_narrow_for_a_resample_falls_back_to_the_full_sort() -> None:
    rng = np.random.default_rng(0)
    a, b = _pairs("correlated", 2000, rng)
    swapped = SwappedPercentiles(a, b, np.arange(2000), 50.0)
    flips = drawn(2, 600, 2000)
    flips = np.ascontiguousarray(flips.T)
    swapped.null(flips[:, :200])  # the pilot sets the window
    assert swapped.window is not None
    swapped.window = Window(swapped, 2000, 2001)  # a window of one value: most resamples fall outside
    assert np.array_equal(swapped.null(flips[:, 200:]), swapped.full_null(flips[:, 200:]))


def test_the_windowed_p_value_is_scipys_at_thousands_of_units() -> None:
    rng = np.random.default_rng(1)
    a, b = _pairs("correlated", 2500, rng)
    test = FlipTest(kind="latency", baseline=a, candidate=b, positions=np.arange(2500), alternative="greater",
                    percentile=95.0)  # fmt: skip
    ((p, _),) = flip_p_values([test], units=2500, resamples=999, rng=np.random.default_rng(3))
    assert p == pytest.approx(scipy_p("latency", a, b, alternative="greater", resamples=999,
                                      flips=drawn(3, 999, 2500), q=95.0), abs=1e-12)  # fmt: skip
