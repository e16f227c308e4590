"""The batched bootstrap against scipy: the same draws give scipy.stats.bootstrap's intervals.

scipy is the oracle: ``scipy.stats.bootstrap`` is given the same generator (so it draws the same resample
indices, a block of :func:`block_rows` at a time) and the metric's statistic written the plain way (gather
the resampled units' values, aggregate each side with numpy), so any difference is the batched
arithmetic's: the counts, the windows of order statistics, the closed-form jackknife, the BCa ends.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats

from rag_eval.compare import bootstrap
from rag_eval.compare.bootstrap import BootTest, block_rows, count_blocks, intervals

RATIO = ("percentile", "latency")


def plain(kind: str, a: np.ndarray, b: np.ndarray, q: float) -> Callable[..., np.ndarray]:
    """The metric's statistic of resampled unit indices, aggregated by numpy."""

    def statistic(idx: np.ndarray, axis: int = -1) -> np.ndarray:
        idx = idx.astype(int)
        if kind == "rate":
            with np.errstate(divide="ignore", invalid="ignore"):
                rb = np.where(b[idx, 1].sum(-1) > 0, b[idx, 0].sum(-1) / b[idx, 1].sum(-1), np.nan)
                ra = np.where(a[idx, 1].sum(-1) > 0, a[idx, 0].sum(-1) / a[idx, 1].sum(-1), np.nan)
            return np.asarray(rb - ra)
        if kind == "max":
            return np.asarray(b[idx].max(-1) - a[idx].max(-1))
        pa, pb = np.percentile(a[idx], q, axis=-1), np.percentile(b[idx], q, axis=-1)
        with np.errstate(divide="ignore", invalid="ignore"):
            return np.stack([pb - pa, np.log(pb / pa)])

    return statistic


def scipy_interval(kind: str, a: np.ndarray, b: np.ndarray, *, q: float, resamples: int, seed: int,
                   method: str) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:  # fmt: skip
    """(lows, highs, standard errors, distributions) of scipy.stats.bootstrap on the same draws."""
    n = len(a)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # a degenerate BCa warns and gives NaN ends
        res = stats.bootstrap((np.arange(n, dtype=float),), plain(kind, a, b, q), vectorized=True,
                              n_resamples=resamples, confidence_level=0.95, method=method,
                              rng=np.random.default_rng(seed), batch=block_rows(n))  # fmt: skip
    lows = np.atleast_1d(res.confidence_interval.low)
    dist = np.asarray(res.bootstrap_distribution).reshape(len(lows), -1)
    return lows, np.atleast_1d(res.confidence_interval.high), np.atleast_1d(res.standard_error), dist


def mine(kind: str, a: np.ndarray, b: np.ndarray, *, q: float, resamples: int, seed: int) -> bootstrap.Interval:
    (box,) = intervals([BootTest(kind=kind, baseline=a, candidate=b, percentile=q)],  # type: ignore[arg-type]
                       resamples=resamples, confidence=0.95, rng=np.random.default_rng(seed))  # fmt: skip
    return box


def assert_same(
    kind: str, a: np.ndarray, b: np.ndarray, *, q: float = 50.0, resamples: int = 999, seed: int = 5
) -> str:
    """The intervals equal scipy's: of a rate, BCa where scipy's BCa is defined, else scipy's percentile
    interval; of an order statistic (percentile, latency, max), the percentile interval. Returns the method
    that held."""
    box = mine(kind, a, b, q=q, resamples=resamples, seed=seed)
    method = "BCa" if kind == "rate" and len(a) <= bootstrap.BCA_MAX_UNITS else "percentile"
    lows, highs, ses, dist = scipy_interval(kind, a, b, q=q, resamples=resamples, seed=seed, method=method)
    if not (np.isfinite(lows).all() and np.isfinite(highs).all()):
        method = "percentile"
        lows, highs, ses, dist = scipy_interval(kind, a, b, q=q, resamples=resamples, seed=seed, method=method)
    np.testing.assert_allclose(np.asarray(box.distributions), dist, rtol=1e-12, atol=0, equal_nan=True)
    np.testing.assert_allclose(box.lows, lows, rtol=1e-9, atol=1e-12, equal_nan=True)
    np.testing.assert_allclose(box.highs, highs, rtol=1e-9, atol=1e-12, equal_nan=True)
    np.testing.assert_allclose(box.ses, ses, rtol=1e-9, atol=1e-12, equal_nan=True)
    return method


def values(kind: str, n: int, rng: np.random.Generator, *, discrete: bool = False) -> tuple[np.ndarray, np.ndarray]:
    if kind == "rate":
        # chunks delivered and relevant ones among them, per query: a numerator at most its denominator
        den_a, den_b = rng.integers(0, 6, n), rng.integers(0, 6, n)
        a = np.column_stack([rng.integers(0, den_a + 1), den_a]).astype(float)
        b = np.column_stack([rng.integers(0, den_b + 1), den_b]).astype(float)
        return a, b
    if discrete:
        return rng.integers(0, 4, n).astype(float), rng.integers(0, 4, n).astype(float)
    a = rng.exponential(size=n)
    return a, a * rng.uniform(0.5, 2.0, size=n)


@pytest.mark.parametrize("n", [2, 3, 30, 264, 2500])
@pytest.mark.parametrize(("kind", "q"), [("latency", 95.0), ("percentile", 50.0), ("max", 100.0), ("rate", 50.0)])
def test_the_same_intervals_as_scipy_from_the_same_draws(kind: str, q: float, n: int) -> None:
    a, b = values(kind, n, np.random.default_rng(n))
    assert_same(kind, a, b, q=q)


@pytest.mark.parametrize("kind", ["percentile", "latency", "max"])
def test_ties_and_a_degenerate_bca_fall_back_to_scipys_percentile_interval(kind: str) -> None:
    # values in {0, 1, 2, 3}: many resamples equal the observed median, some percentiles are 0 (log ratio
    # infinite), and BCa's ends are not numbers
    methods = {assert_same(kind, *values(kind, n, np.random.default_rng(n), discrete=True), q=q)
               for n in (40, 264) for q in (10.0, 50.0, 90.0)}  # fmt: skip
    assert "percentile" in methods or kind == "max"


def test_beyond_bca_units_the_percentile_interval_as_scipy_computes_it() -> None:
    a, b = values("latency", bootstrap.BCA_MAX_UNITS + 1, np.random.default_rng(3))
    assert assert_same("latency", a, b, q=99.0, resamples=199) == "percentile"


@pytest.mark.parametrize(("kind", "q"), [("rate", 50.0), ("latency", 95.0)])
def test_from_normal_min_units_the_normal_interval_of_scipys_standard_error(kind: str, q: float) -> None:
    # the same draws as scipy (capped at normal_resamples), the ends observed -/+ z * scipy's standard error,
    # and the level at which an end sits at 0 the normal curve's share below 0 (scipy.stats.norm as the oracle)
    n = bootstrap.NORMAL_MIN_UNITS
    a, b = values(kind, n, np.random.default_rng(17))
    if kind == "rate":  # a small change, so the p-value is neither 0 nor 1
        b = a.copy()
        b[: n // 40, 0] = np.minimum(b[: n // 40, 0] + 1, b[: n // 40, 1])
    (box,) = intervals([BootTest(kind=kind, baseline=a, candidate=b, percentile=q)],  # type: ignore[arg-type]
                       resamples=9_999, confidence=0.95, rng=np.random.default_rng(4),
                       normal_resamples=199)  # fmt: skip
    assert box.normal
    _, _, ses, dist = scipy_interval(kind, a, b, q=q, resamples=199, seed=4, method="percentile")
    np.testing.assert_allclose(np.asarray(box.distributions), dist, rtol=1e-12)
    observed = plain(kind, a, b, q)(np.arange(n)[None, :])[..., 0].reshape(-1)
    np.testing.assert_allclose(box.ses, ses, rtol=1e-9)
    np.testing.assert_allclose(box.lows, stats.norm.ppf(0.025, loc=observed, scale=ses), rtol=1e-9)
    np.testing.assert_allclose(box.highs, stats.norm.ppf(0.975, loc=observed, scale=ses), rtol=1e-9)
    np.testing.assert_allclose(box.nulls, stats.norm.cdf(0.0, loc=observed, scale=ses), rtol=1e-9, atol=1e-300)
    assert all(0 < p < 1 for p in box.nulls[:1]) and all(e > 0 for e in box.null_errors[:1])


def test_below_normal_min_units_no_normal_interval_and_no_cap_on_resamples() -> None:
    a, b = values("rate", bootstrap.NORMAL_MIN_UNITS - 1, np.random.default_rng(2))
    (box,) = intervals([BootTest(kind="rate", baseline=a, candidate=b)], resamples=59, confidence=0.95,
                       rng=np.random.default_rng(0), normal_resamples=9)  # fmt: skip
    assert not box.normal and box.distributions[0].size == 59


@pytest.mark.parametrize(("gain", "level"), [(1.0, 0.0), (-1.0, 1.0), (0.0, 0.5)])
def test_a_normal_interval_where_every_unit_changed_alike_is_a_point_that_no_resample_moves(
    gain: float, level: float
) -> None:
    n = bootstrap.NORMAL_MIN_UNITS
    a = np.column_stack([np.full(n, 0.5), np.ones(n)])
    b = np.column_stack([np.full(n, 0.5 + gain / 2), np.ones(n)])  # every unit's share moves by gain / 2
    for resamples in (19, 79):  # more resamples: the same point, the same level, no Monte Carlo error
        (box,) = intervals([BootTest(kind="rate", baseline=a, candidate=b)], resamples=999, confidence=0.95,
                           rng=np.random.default_rng(resamples), normal_resamples=resamples)  # fmt: skip
        assert box.normal and box.lows == box.highs == (gain / 2,) and box.ses == (0.0,)
        assert box.nulls == (level,) and box.null_errors == (0.0,)


def test_a_normal_interval_falls_back_to_the_percentile_one_where_a_resample_is_not_a_number() -> None:
    n = bootstrap.NORMAL_MIN_UNITS
    a = np.column_stack([np.zeros(n), np.zeros(n)])  # no denominator anywhere: every share undefined
    a[0, 1] = 1.0  # but one unit's, which some resamples do not draw
    b = np.column_stack([np.ones(n), np.ones(n)])
    (box,) = intervals([BootTest(kind="rate", baseline=a, candidate=b)], resamples=99, confidence=0.95,
                       rng=np.random.default_rng(0), normal_resamples=19)  # fmt: skip
    assert not box.normal


def test_every_resample_outside_its_window_is_cumulated_in_full(monkeypatch: pytest.MonkeyPatch) -> None:
    # windows of no width: almost every order statistic falls outside and is found by the full cumulation
    a, b = values("latency", 3000, np.random.default_rng(11))
    wide = mine("latency", a, b, q=90.0, resamples=499, seed=2)
    monkeypatch.setattr(bootstrap, "WINDOW_Z", 0.0)
    side = bootstrap._Side(a, (2698, 2699))
    assert side.lo > 0 and side.hi < len(a)  # a window, not the full sort
    narrow = mine("latency", a, b, q=90.0, resamples=499, seed=2)
    np.testing.assert_array_equal(np.asarray(wide.distributions), np.asarray(narrow.distributions))
    assert_same("latency", a, b, q=90.0, resamples=499, seed=2)


def test_counts_are_scipys_draws_counted() -> None:
    rng, again = np.random.default_rng(9), np.random.default_rng(9)
    (block,) = list(count_blocks(rng, 50, 7))
    drawn = again.integers(0, 7, (50, 7))
    assert block.shape == (7, 50) and (block.sum(axis=0) == 7).all()  # units x resamples
    np.testing.assert_array_equal(block.T, np.stack([np.bincount(r, minlength=7) for r in drawn]))


def test_blocks_depend_on_the_units_alone() -> None:
    n = 3000
    assert block_rows(n) < 999  # several blocks
    sizes = [b.shape[1] for b in count_blocks(np.random.default_rng(0), 999, n)]
    assert sum(sizes) == 999 and len(set(sizes[:-1])) == 1 and sizes[0] == block_rows(n)


def test_metrics_sharing_a_stream_each_get_scipys_interval() -> None:
    # one stream for several metrics: each interval is the one scipy gives that metric alone on the same draws
    rng = np.random.default_rng(4)
    n = 264
    tests = [("latency", 95.0), ("percentile", 50.0), ("rate", 50.0), ("max", 100.0)]
    data = [values(kind, n, rng) for kind, _ in tests]
    boxes = intervals([BootTest(kind=k, baseline=a, candidate=b, percentile=q)  # type: ignore[arg-type]
                       for (k, q), (a, b) in zip(tests, data, strict=True)],
                      resamples=999, confidence=0.95, rng=np.random.default_rng(8))  # fmt: skip
    for (kind, q), (a, b), box in zip(tests, data, boxes, strict=True):
        method = "BCa" if kind == "rate" else "percentile"  # an order statistic: the percentile interval
        lows, highs, _, dist = scipy_interval(kind, a, b, q=q, resamples=999, seed=8, method=method)
        np.testing.assert_allclose(np.asarray(box.distributions), dist, rtol=1e-12, atol=0)
        np.testing.assert_allclose(box.lows, lows, rtol=1e-9)
        np.testing.assert_allclose(box.highs, highs, rtol=1e-9)


def test_a_rate_without_denominator_in_some_resamples_has_no_interval() -> None:
    a = np.array([[1.0, 1.0]] + [[0.0, 0.0]] * 29)
    b = np.array([[0.0, 1.0]] + [[0.0, 0.0]] * 29)
    box = mine("rate", a, b, q=50.0, resamples=499, seed=1)
    assert math.isnan(box.lows[0]) and math.isnan(box.highs[0])  # some resamples never draw the one unit


@settings(max_examples=40, deadline=None)
@given(
    st.sampled_from(["latency", "percentile", "max", "rate"]),
    st.integers(min_value=2, max_value=60),
    st.floats(min_value=0.0, max_value=100.0),
    st.integers(min_value=0, max_value=2**32 - 1),
    st.booleans(),
)
def test_any_values_the_same_as_scipy(kind: str, n: int, q: float, seed: int, discrete: bool) -> None:
    a, b = values(kind, n, np.random.default_rng(seed), discrete=discrete)
    assert_same(kind, a, b, q=100.0 if kind == "max" else q, resamples=199, seed=seed)
