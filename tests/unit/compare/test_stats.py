"""The paired statistics, each judged by an oracle written here from the definitions: brute-force
enumeration of every sign pattern for the randomisation test, statsmodels for Holm, normal-table
constants for the minimum detectable difference."""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rag_eval.compare.stats import Pairing, Settings, holm, minimum_detectable, paired_compare, required_resamples


def test_a_means_p_value_is_the_paired_t_tests_of_its_t_interval() -> None:
    """The test of a mean is the paired t-test (scipy.stats.ttest_rel, the oracle), the inversion of the t
    interval shown: one statistic, so the two agree."""
    from scipy import stats

    a = np.array([0.2, 0.5, 0.1, 0.9, 0.4, 0.3, 0.8, 0.0])
    b = np.array([0.4, 0.5, 0.3, 1.0, 0.9, 0.2, 0.8, 0.6])
    for alternative in ("two-sided", "less", "greater"):
        result = paired_compare(
            a, b, Pairing(kind="mean", settings=Settings(), alternative=alternative), rng=np.random.default_rng(0)
        )  # fmt: skip
        oracle = stats.ttest_rel(b, a, alternative=alternative)
        assert result.p_value == pytest.approx(oracle.pvalue, rel=1e-9) and result.p_mc_error == 0.0
    assert result.delta == pytest.approx((b - a).mean()) and result.n == 8
    # the 95% interval's end sits at 0 exactly at p = 0.05: an interval at confidence 1 - p ends at 0
    two = paired_compare(a, b, Pairing(kind="mean", settings=Settings()), rng=np.random.default_rng(0))
    assert two.p_value is not None
    at = paired_compare(
        a, b, Pairing(kind="mean", settings=Settings(confidence=1 - two.p_value)), rng=np.random.default_rng(0)
    )
    assert at.ci_low == pytest.approx(0.0, abs=1e-12)


@pytest.mark.parametrize("kind", ["rate", "latency"])
def test_a_bootstrapped_numbers_p_value_is_its_interval_inverted(kind: str) -> None:
    """The p-value of a share or a percentile is the level at which its own bootstrap interval (BCa, from the
    same resamples) ends at no change: the interval at confidence 1 - p has an end at 0."""
    rng = np.random.default_rng(4)
    if kind == "rate":
        a = np.column_stack([rng.binomial(5, 0.2, 200), np.full(200, 5)]).astype(float)
        b = np.column_stack([rng.binomial(5, 0.17, 200), np.full(200, 5)]).astype(float)
    else:
        a = rng.lognormal(4.0, 0.3, size=200)
        b = a * rng.lognormal(0.04, 0.2, size=200)
    settings = Settings(permutations=1999)
    pairing = Pairing(kind=kind, settings=settings, percentile=50)  # type: ignore[arg-type]
    result = paired_compare(a, b, pairing, rng=np.random.default_rng(9))
    assert result.p_value is not None and 0.005 < result.p_value < 0.9  # not at the floor 1 / 2000
    at = paired_compare(
        a, b, Pairing(kind=kind, settings=replace(settings, confidence=1 - result.p_value), percentile=50),  # type: ignore[arg-type]
        rng=np.random.default_rng(9),
    )  # fmt: skip
    low, high = (at.ratio_ci_low, at.ratio_ci_high) if kind == "latency" else (at.ci_low, at.ci_high)
    zero = 1.0 if kind == "latency" else 0.0
    assert low is not None and high is not None
    spacing = float(np.median(np.diff(np.sort(result.boot_log_ratio if kind == "latency" else result.boot))))
    assert min(abs(low - zero), abs(high - zero)) <= 20 * spacing + 1e-12


@pytest.mark.parametrize("kind", ["mean", "rate", "latency"])
def test_the_test_and_the_95_percent_interval_agree_on_every_draw(kind: str) -> None:
    """p < 0.05 exactly when the 95% interval excludes no change, over 40 draws of small changes."""
    for seed in range(40):
        rng = np.random.default_rng(seed)
        if kind == "rate":
            a = np.column_stack([rng.binomial(4, 0.2, 80), np.full(80, 4)]).astype(float)
            b = np.column_stack([rng.binomial(4, 0.2 + 0.002 * seed, 80), np.full(80, 4)]).astype(float)
        elif kind == "mean":
            a = rng.binomial(1, 0.5, 80).astype(float)
            b = np.where(rng.random(80) < 0.003 * seed, 1.0, a)
        else:
            a = rng.lognormal(4.0, 0.3, 80)
            b = a * rng.lognormal(0.003 * seed, 0.2, 80)
        r = paired_compare(a, b, Pairing(kind=kind, settings=Settings(permutations=999)), rng=rng)  # type: ignore[arg-type]
        if r.p_value is None or r.identical:
            continue
        low, high = (r.ratio_ci_low, r.ratio_ci_high) if kind == "latency" else (r.ci_low, r.ci_high)
        zero = 1.0 if kind == "latency" else 0.0
        assert low is not None and high is not None
        assert (low > zero or high < zero) == (r.p_value < 0.05), (seed, r.p_value, low, high)


def test_identical_values_give_p_one_and_a_zero_interval() -> None:
    a = np.array([0.1, 0.5, 0.5, 1.0, 0.0])
    for kind in ("mean", "percentile", "latency"):
        r = paired_compare(a, a.copy(), Pairing(kind=kind, settings=Settings()), rng=np.random.default_rng(0))  # type: ignore[arg-type]
        assert (r.p_value, r.delta, r.ci_low, r.ci_high, r.se) == (1.0, 0.0, 0.0, 0.0, 0.0)
    rate = np.array([[1.0, 4.0], [0.0, 0.0], [2.0, 2.0]])
    r = paired_compare(rate, rate.copy(), Pairing(kind="rate", settings=Settings()), rng=np.random.default_rng(0))
    assert r.p_value == 1.0 and r.delta == 0.0


def test_latency_ratio_of_percentiles_and_its_interval() -> None:
    rng = np.random.default_rng(5)
    base = rng.lognormal(4.0, 0.3, size=400)
    cand = base * 1.5 * rng.lognormal(0.0, 0.05, size=400)
    r = paired_compare(
        base,
        cand,
        Pairing(kind="latency", percentile=95, settings=Settings(resamples=1999)),
        rng=np.random.default_rng(0),
    )
    assert r.ratio == pytest.approx(np.percentile(cand, 95) / np.percentile(base, 95))
    assert r.ratio_ci_low is not None and r.ratio_ci_high is not None
    assert r.ratio_ci_low < r.ratio < r.ratio_ci_high and r.ratio_ci_low > 1.3 and r.ratio_ci_high < 1.75
    assert r.delta == pytest.approx(np.percentile(cand, 95) - np.percentile(base, 95))
    assert r.p_value is not None and r.p_value < 0.01


def test_interval_covers_the_mean_difference() -> None:
    rng = np.random.default_rng(11)
    a = rng.binomial(1, 0.5, size=300).astype(float)
    b = np.where(rng.random(300) < 0.1, 1 - a, a)
    r = paired_compare(a, b, Pairing(kind="mean", settings=Settings(resamples=1999)), rng=np.random.default_rng(2))
    assert r.ci_low <= r.delta <= r.ci_high
    assert r.se == pytest.approx(np.std(b - a, ddof=1) / math.sqrt(300), rel=0.15)


def test_empty_and_undefined_units() -> None:
    r = paired_compare(
        np.array([]), np.array([]), Pairing(kind="mean", settings=Settings()), rng=np.random.default_rng(0)
    )
    assert r.n == 0 and r.p_value is None and math.isnan(r.delta)
    zero = np.array([[0.0, 0.0], [0.0, 0.0]])
    one = zero + np.array([[1.0, 0.0], [0.0, 0.0]])  # a duplicate counted with no delivered chunk
    r = paired_compare(zero, one, Pairing(kind="rate", settings=Settings()), rng=np.random.default_rng(0))
    assert r.p_value is None and math.isnan(r.candidate)  # no delivered chunk: no share to compare


def test_max_has_no_test() -> None:
    r = paired_compare(
        np.array([1.0, 2.0]),
        np.array([3.0, 2.0]),
        Pairing(kind="max", settings=Settings(), test=False),
        rng=np.random.default_rng(0),
    )
    assert (r.baseline, r.candidate, r.delta, r.p_value) == (2.0, 3.0, 1.0, None)


@settings(max_examples=25, deadline=None)  # statsmodels takes about 0.1 s a call here
@given(st.lists(st.one_of(st.none(), st.floats(min_value=0, max_value=1)), min_size=1, max_size=30))
def test_holm_equals_statsmodels(ps: list[float | None]) -> None:
    from statsmodels.stats.multitest import multipletests

    ours = holm(ps)
    present = [p for p in ps if p is not None]
    assert [o is None for o in ours] == [p is None for p in ps]
    if present:
        _, reference, _, _ = multipletests(present, method="holm")
        assert [o for o in ours if o is not None] == pytest.approx(list(reference), abs=1e-12)


def test_holm_worked_example_with_ties() -> None:
    # sorted 0.01, 0.02, 0.02, 0.04 with m = 4: 0.04, 0.06, max(0.06, 0.04) = 0.06, max(0.06, 0.04) = 0.06
    assert holm([0.02, 0.04, 0.01, None, 0.02]) == pytest.approx([0.06, 0.06, 0.04, None, 0.06])
    assert holm([]) == [] and holm([None]) == [None] and holm([0.5, 0.9]) == [1.0, 1.0]


def test_minimum_detectable_difference_from_normal_tables() -> None:
    # z(0.975) = 1.959964, z(0.80) = 0.841621: (1.959964 + 0.841621) * se
    assert minimum_detectable(0.01, alpha=0.05, power=0.8) == pytest.approx(0.02801585, rel=1e-6)
    # z(0.9975) = 2.807034 at alpha 0.005
    assert minimum_detectable(1.0, alpha=0.005, power=0.8) == pytest.approx(3.648655, rel=1e-6)
    assert minimum_detectable(0.0, alpha=0.05, power=0.8) == 0.0
    assert math.isnan(minimum_detectable(math.nan, alpha=0.05, power=0.8))


def test_resamples_are_raised_until_holm_can_be_passed() -> None:
    for tests in (1, 57, 171, 400):
        r = required_resamples(tests, 0.05, 999)
        assert 2 / (r + 1) <= 0.05 / tests / 2 + 1e-12  # the smallest two-sided p is half Holm's first threshold
    assert required_resamples(1, 0.05, 4999) == 4999


def test_many_units_a_normal_interval_whose_bounds_and_p_value_agree() -> None:
    # 20,000 queries of a log, a latency ratio of 1.01: the interval is the normal one, its one-sided bound
    # at any level is the same normal curve's (stats.bound), and the p-value is its end at no change
    from scipy import stats as scipy_stats

    from rag_eval.compare.stats import bound

    rng = np.random.default_rng(8)
    a = rng.exponential(1000.0, size=20_000)
    b = a * rng.normal(1.01, 0.05, size=a.size)
    p = paired_compare(a, b, Pairing(kind="latency", percentile=50.0, settings=Settings(), alternative="greater"),
                       rng=np.random.default_rng(1))  # fmt: skip
    assert p.normal and p.p_value is not None and 0 < p.p_value < 1
    log = math.log(p.ratio or math.nan)
    assert p.se_log_ratio is not None
    for level in (0.9, 0.99, 1 - 0.05 / 40):
        expected = scipy_stats.norm.ppf(level, loc=log, scale=p.se_log_ratio)
        assert bound(p, level=level, upper=True, log_ratio=True) == pytest.approx(expected, rel=1e-9)
        assert bound(p, level=level, upper=False) == pytest.approx(
            scipy_stats.norm.ppf(1 - level, loc=p.delta, scale=p.se), rel=1e-9)
    # the one-sided p-value is the level at which the lower bound of the log ratio is 0
    assert bound(p, level=1 - p.p_value, upper=False, log_ratio=True) == pytest.approx(0.0, abs=1e-9)
