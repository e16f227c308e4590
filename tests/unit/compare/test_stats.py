"""The paired statistics, each judged by an oracle written here from the definitions: brute-force
enumeration of every sign pattern for the randomisation test, statsmodels for Holm, normal-table
constants for the minimum detectable difference."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rag_eval.compare.stats import Pairing, Settings, holm, minimum_detectable, paired_compare, required_resamples


def exact_sign_flip_p(stat_of_flips: object, n: int) -> float:
    """Two-sided p from all 2**n swap patterns, as scipy defines it: 2 min(P(null <= obs), P(null >= obs))."""
    observed = stat_of_flips(np.ones(n))  # type: ignore[operator]
    null = np.array([stat_of_flips(np.array(s)) for s in itertools.product([1.0, -1.0], repeat=n)])
    eps = 1e-12 * max(1.0, abs(observed))
    less = np.mean(null <= observed + eps)
    greater = np.mean(null >= observed - eps)
    return float(min(1.0, 2 * min(less, greater)))


def test_mean_difference_exact_p_equals_enumeration() -> None:
    a = np.array([0.2, 0.5, 0.1, 0.9, 0.4, 0.3, 0.8, 0.0])
    b = np.array([0.4, 0.5, 0.3, 1.0, 0.9, 0.2, 0.8, 0.6])
    d = b - a
    result = paired_compare(
        a, b, Pairing(kind="mean", settings=Settings(permutations=4999)), rng=np.random.default_rng(0)
    )
    assert result.delta == pytest.approx(d.mean())
    assert result.p_value == pytest.approx(exact_sign_flip_p(lambda s: float((s * d).mean()), len(d)))
    assert result.n == 8


def test_rate_exact_p_swaps_numerator_and_denominator_together() -> None:
    # duplicates / delivered chunks per query: the share is of chunks, not of queries
    a = np.array([[1, 5], [0, 5], [2, 4], [0, 1], [1, 5], [0, 3], [1, 2]], dtype=float)
    b = np.array([[0, 5], [0, 5], [0, 5], [0, 5], [0, 4], [1, 3], [0, 5]], dtype=float)
    result = paired_compare(
        a, b, Pairing(kind="rate", settings=Settings(permutations=4999)), rng=np.random.default_rng(0)
    )

    def stat(signs: np.ndarray) -> float:
        flip = signs < 0
        aa = np.where(flip[:, None], b, a)
        bb = np.where(flip[:, None], a, b)
        return float(bb[:, 0].sum() / bb[:, 1].sum() - aa[:, 0].sum() / aa[:, 1].sum())

    assert result.baseline == pytest.approx(5 / 25) and result.candidate == pytest.approx(1 / 32)
    assert result.delta == pytest.approx(1 / 32 - 5 / 25)
    assert result.p_value == pytest.approx(exact_sign_flip_p(stat, len(a)))


def test_monte_carlo_p_agrees_with_the_exact_test() -> None:
    rng = np.random.default_rng(3)
    a = rng.normal(size=14)
    b = a + rng.normal(0.4, 1.0, size=14)
    d = b - a
    exact = exact_sign_flip_p(lambda s: float((s * d).mean()), 14)  # 16,384 patterns
    result = paired_compare(
        a, b, Pairing(kind="mean", settings=Settings(permutations=9999)), rng=np.random.default_rng(1)
    )
    assert result.p_value == pytest.approx(exact, abs=0.02)


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
