"""The label-free overlap of two delivered lists (rag_eval.traffic.overlap).

RBO is pinned by values worked by hand from Webber, Moffat and Zobel (ACM TOIS 28(4), 2010): equation (30)
for lists of equal length k, RBO_EXT = (1-p)/p Σ_{d=1..k} (X_d/d) p^d + (X_k/k) p^k, and equation (32) for a
shorter list S (length s) and a longer L (length l),
RBO_EXT = (1-p)/p [Σ_{d=1..l} (X_d/d) p^d + Σ_{d=s+1..l} X_s (d-s)/(s d) p^d] + [(X_l - X_s)/l + X_s/s] p^l,
with X_d the number of keys both lists hold in their first d. Two independent oracles judge it on random
lists: the ``rbo`` package (changyaochen's implementation of the same paper) and a direct evaluation of the
definition, equation (7), RBO = (1-p) Σ_d p^(d-1) X_d/d, to a depth where the rest weighs under 1e-12, on
lists continued past their end in the way the extrapolation assumes (and in the two extreme ways: the
bounds RBO_MIN of equation (11) and RBO_MAX).
"""

from __future__ import annotations

import math
import random
from collections import Counter
from collections.abc import Sequence

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from rbo import RankingSimilarity

from rag_eval.traffic import overlap
from rag_eval.traffic.overlap import changed, jaccard, overlap_frame, rbo, top_changed
from tests.budget import examples

P = 0.9
KEYS = [f"doc-{i}#{j}" for i in range(4) for j in range(4)]  # 16 keys: small, so lists overlap often

keys = st.sampled_from(KEYS)
payloads = st.lists(keys, max_size=10)  # duplicates allowed: a legacy payload can carry a key twice
distinct = st.lists(keys, max_size=12, unique=True)
persistence = st.floats(min_value=0.01, max_value=0.99)


@st.composite
def equal_length(draw: st.DrawFn) -> tuple[list[str], list[str]]:
    k = draw(st.integers(0, 10))
    return draw(st.lists(keys, min_size=k, max_size=k, unique=True)), draw(
        st.lists(keys, min_size=k, max_size=k, unique=True)
    )


# -- RBO worked by hand -------------------------------------------------------------------------------------


def test_identical_lists_score_exactly_one_and_disjoint_ones_exactly_zero() -> None:
    for a in (["a"], ["a", "b", "c"], [f"k{i}" for i in range(50)]):
        assert rbo(a, list(a)) == 1.0
    assert rbo(["a", "b", "c"], ["x", "y", "z"]) == 0.0
    assert rbo(["a", "b"], ["x", "y", "z", "w"]) == 0.0  # uneven, nothing in common: X_l = 0


def test_a_swap_at_the_top_costs_more_than_a_swap_at_the_bottom() -> None:
    # top: X = 0, 2, 3, 4; eq. 30: (1-p)/p (0 + p^2 + p^3 + p^4) + p^4 = (1-p)(p + p^2 + p^3) + p^4 = p
    top = rbo(["a", "b", "c", "d"], ["b", "a", "c", "d"])
    # bottom: X = 1, 2, 2, 4; (1-p)(1 + p + (2/3) p^2 + p^3) + p^4 = 1 - (1-p) p^2 / 3 = 1 - 0.1 * 0.81 / 3
    bottom = rbo(["a", "b", "c", "d"], ["a", "b", "d", "c"])
    assert top == pytest.approx(0.9, abs=1e-12)
    assert bottom == pytest.approx(0.973, abs=1e-12)
    assert top < bottom < 1.0


@given(k=st.integers(2, 40), p=persistence)
@settings(max_examples=examples(100), deadline=None)
def test_swapping_the_top_two_of_any_list_scores_p(k: int, p: float) -> None:
    # X_1 = 0, X_d = d for d >= 2: (1-p) Σ_{d=2..k} p^(d-1) + p^k = (p - p^k) + p^k = p, whatever k
    a = [f"k{i}" for i in range(k)]
    assert rbo(a, [a[1], a[0], *a[2:]], p) == pytest.approx(p, abs=1e-12)


def test_a_prefix_of_the_longer_list_scores_one() -> None:
    # S = [a, b], L = [a, b, c, d]: s = 2, l = 4, X = 1, 2, 2, 2, X_s = 2. Eq. 32:
    # (1-p)/p [p + p^2 + (2/3) p^3 + (1/2) p^4 + (1/3) p^3 + (1/2) p^4] + (0/4 + 2/2) p^4
    #   = (1-p)(1 + p + p^2 + p^3) + p^4 = 1 - p^4 + p^4 = 1: the extrapolation assumes that S, read as the
    # seen part of an indefinite ranking, goes on agreeing as it did (X_s / s = 1), so it is never below 1
    assert rbo(["a", "b"], ["a", "b", "c", "d"]) == 1.0
    assert rbo(["a", "b", "c", "d"], ["a", "b"]) == 1.0
    assert rbo(["a"], ["a", "b"]) == 1.0
    assert changed(["a", "b"], ["a", "b", "c", "d"]) and jaccard(["a", "b"], ["a", "b", "c", "d"]) == 0.5


def test_uneven_lists_by_equation_32() -> None:
    # S = [a, c], L = [a, b, c]: s = 2, l = 3, X = 1, 1, 2, X_s = 1. Eq. 32 at p = 0.9:
    # (1-p)/p [p + (1/2) p^2 + (2/3) p^3 + 1 * 1 / (2 * 3) p^3] + ((2 - 1)/3 + 1/2) p^3
    #   = 0.1 (1 + 0.45 + (5/6) 0.81) + (5/6) 0.729 = 0.2125 + 0.6075 = 0.82
    assert rbo(["a", "c"], ["a", "b", "c"]) == pytest.approx(0.82, abs=1e-12)
    assert rbo(["a", "b", "c"], ["a", "c"]) == pytest.approx(0.82, abs=1e-12)
    # S = [a], L = [b, a]: s = 1, l = 2, X = 0, 1, X_s = 0: (1-p)/p (1/2) p^2 + (1/2) p^2 = p / 2
    assert rbo(["a"], ["b", "a"]) == pytest.approx(0.45, abs=1e-12)


def test_lists_of_one_and_empty_lists() -> None:
    assert rbo(["a"], ["a"]) == 1.0 and rbo(["a"], ["b"]) == 0.0
    assert rbo([], []) == 1.0  # nothing and nothing: identical
    assert rbo(["a"], []) == 0.0 and rbo([], ["a", "b"]) == 0.0


def test_a_repeated_key_counts_at_its_first_position() -> None:
    assert rbo(["a", "a", "b"], ["a", "b"]) == 1.0
    assert rbo(["b", "a", "a"], ["b", "a"]) == 1.0
    # [a, b, a] is read as [a, b]; against [b, a]: X = 0, 2; eq. 30: (1-p) p + p^2 = p
    assert rbo(["a", "b", "a"], ["b", "a"]) == pytest.approx(0.9, abs=1e-12)
    with pytest.raises(AssertionError):  # the rbo package refuses such a list; the oracle test draws none
        RankingSimilarity(["a", "b", "a"], ["b", "a"]).rbo_ext(0.9)


@pytest.mark.parametrize("p", [0.0, 1.0, -0.5, 1.5, math.nan, math.inf])
def test_p_outside_the_open_unit_interval_is_refused(p: float) -> None:
    with pytest.raises(ValueError, match="between 0 and 1"):
        rbo(["a"], ["a"], p)
    with pytest.raises(ValueError, match="between 0 and 1"):
        overlap_frame([["a"]], [["a"]], p)


def test_a_string_is_not_a_list_of_keys() -> None:
    for measure in (changed, jaccard, top_changed, rbo):
        with pytest.raises(TypeError, match="not one string"):
            measure("abc", ["a", "b", "c"])  # type: ignore[operator]
    with pytest.raises(TypeError, match="not one string"):
        overlap_frame([["a"], "ab"], [["a"], ["a", "b"]])
    with pytest.raises(ValueError, match="2 baseline lists against 1 candidate lists"):
        overlap_frame([["a"], ["b"]], [["a"]])


# -- the other measures, worked and against simple oracles ----------------------------------------------------


def test_changed_jaccard_and_top_changed_worked() -> None:
    assert not changed(["a", "b"], ("a", "b")) and changed(["a", "b"], ["b", "a"]) and changed(["a"], ["a", "a"])
    assert not changed([], []) and changed([], ["a"])
    assert jaccard(["a", "b", "c"], ["c", "d"]) == 0.25 and jaccard(["a", "a"], ["a"]) == 1.0
    assert jaccard([], []) == 1.0 and jaccard(["a"], []) == 0.0
    assert not top_changed(["a", "b"], ["a", "c"]) and top_changed(["a", "b"], ["b", "a"])
    assert not top_changed([], []) and top_changed([], ["a"]) and top_changed(["a"], [])


@given(a=payloads, b=payloads)
@settings(max_examples=examples(300), deadline=None)
def test_changed_jaccard_and_top_changed_against_list_and_set_oracles(a: list[str], b: list[str]) -> None:
    assert changed(a, b) == (len(a) != len(b) or any(x != y for x, y in zip(a, b, strict=False)))
    assert top_changed(a, b) == (a[:1] != b[:1])
    first, second = Counter(a), Counter(b)
    common = sum(1 for k in first if k in second)
    union = len(first) + len(second) - common
    assert jaccard(a, b) == (common / union if union else 1.0)


@given(a=payloads, b=payloads, p=persistence)
@settings(max_examples=examples(300), deadline=None)
def test_symmetry_bounds_and_identity(a: list[str], b: list[str], p: float) -> None:
    assert rbo(a, b, p) == pytest.approx(rbo(b, a, p), abs=1e-15)
    assert jaccard(a, b) == jaccard(b, a)
    for value in (rbo(a, b, p), jaccard(a, b)):
        assert 0.0 <= value <= 1.0
    assert rbo(a, a, p) == 1.0 and jaccard(a, a) == 1.0 and not changed(a, a) and not top_changed(a, a)
    if not changed(a, b):
        assert rbo(a, b, p) == 1.0 and jaccard(a, b) == 1.0
    if jaccard(a, b) == 0.0:  # no key in common: exactly 0
        assert rbo(a, b, p) == 0.0
    elif p >= 0.5:  # a common key weighs at least p^(depth-1): below double precision for a tiny p deep down
        assert rbo(a, b, p) > 0.0
    assert changed(a, b) or not top_changed(a, b)


# -- RBO against the rbo package ---------------------------------------------------------------------------


@given(a=distinct, b=distinct, p=persistence)
@settings(max_examples=examples(400), deadline=None)
def test_rbo_is_the_rbo_packages_rbo_ext(a: list[str], b: list[str], p: float) -> None:
    # the package follows eq. 30 and 32 (and the same empty-list conventions) on lists of distinct keys
    assert rbo(a, b, p) == pytest.approx(RankingSimilarity(a, b).rbo_ext(p), abs=1e-9)


@given(pair=equal_length(), p=persistence)
@settings(max_examples=examples(200), deadline=None)
def test_rbo_of_equal_lengths_is_the_rbo_packages(pair: tuple[list[str], list[str]], p: float) -> None:
    a, b = pair
    assert rbo(a, b, p) == pytest.approx(RankingSimilarity(a, b).rbo_ext(p), abs=1e-9)


# -- RBO against its definition, eq. 7 ------------------------------------------------------------------------


def _definition(a: Sequence[str], b: Sequence[str], p: float) -> float:
    """Eq. 7, (1-p) Σ_{d>=1} p^(d-1) |a[:d] ∩ b[:d]| / d, to the depth of the shorter list (the lists given
    here are long enough that the weight past it is under 1e-12)."""
    depth = min(len(a), len(b))
    return (1 - p) * sum(p ** (d - 1) * len(set(a[:d]) & set(b[:d])) / d for d in range(1, depth + 1))


def _tail(p: float, tag: str, length: int) -> list[str]:
    """Fresh keys enough for the weight past the end, p^depth, to fall under 1e-12 (``length`` seen before)."""
    return [f"{tag}{i}" for i in range(length + math.ceil(math.log(1e-12) / math.log(p)))]


@given(data=st.data(), p=st.floats(min_value=0.05, max_value=0.9))
@settings(max_examples=examples(150), deadline=None)
def test_rbo_is_the_definition_on_lists_that_go_on_as_the_extrapolation_assumes(data: st.DataObject, p: float) -> None:
    # when the shorter list S is a reordering of the longer L's first s keys, eq. 30/32 extrapolate an agreement
    # of 1 past S's end: RBO_EXT is then the definition on S continued with the rest of L, both then with one
    # common tail (for equal lengths: two lists of the same keys, continued alike)
    long_ = data.draw(distinct)
    s = data.draw(st.integers(min(1, len(long_)), len(long_)))
    short = data.draw(st.permutations(long_[:s]))
    tail = _tail(p, "tail-", len(long_))
    expected = _definition([*short, *long_[s:], *tail], [*long_, *tail], p) if long_ else 1.0
    assert rbo(short, long_, p) == pytest.approx(expected, abs=1e-9)


@given(pair=equal_length(), p=st.floats(min_value=0.05, max_value=0.9))
@settings(max_examples=examples(150), deadline=None)
def test_rbo_lies_between_the_bounds_of_equation_11_and_the_best_continuation(
    pair: tuple[list[str], list[str]], p: float
) -> None:
    a, b = pair
    k = len(a)
    if k == 0:
        return
    # the least agreement: each list goes on with keys the other never has
    low = _definition([*a, *_tail(p, "a-", k)], [*b, *_tail(p, "b-", k)], p)
    x = [len(set(a[:d]) & set(b[:d])) for d in range(1, k + 1)]
    eq_11 = (1 - p) / p * (sum((x[d - 1] - x[-1]) * p**d / d for d in range(1, k + 1)) - x[-1] * math.log(1 - p))
    assert low == pytest.approx(eq_11, abs=1e-9)  # RBO_MIN, eq. 11, as the definition gives it
    # the most: each goes on with the other's keys it lacks (two more in common per depth), then alike
    tail = _tail(p, "c-", 2 * k)
    high = _definition(
        [*a, *[key for key in b if key not in a], *tail], [*b, *[key for key in a if key not in b], *tail], p
    )
    assert low - 1e-12 <= rbo(a, b, p) <= high + 1e-12


# -- the columns -----------------------------------------------------------------------------------------------


def _scalar(baseline: Sequence[Sequence[str]], candidate: Sequence[Sequence[str]], p: float) -> dict[str, list[float]]:
    pairs = list(zip(baseline, candidate, strict=True))
    return {
        "changed": [float(changed(a, b)) for a, b in pairs],
        "jaccard": [jaccard(a, b) for a, b in pairs],
        "rbo": [rbo(a, b, p) for a, b in pairs],
        "top_changed": [float(top_changed(a, b)) for a, b in pairs],
    }


def _columns(baseline: Sequence[Sequence[str]], candidate: Sequence[Sequence[str]], p: float) -> dict[str, list[float]]:
    return {name: values.tolist() for name, values in overlap_frame(baseline, candidate, p).items()}


any_payloads = st.lists(st.one_of(keys, st.text(max_size=3)), max_size=10)  # the empty key, any code point


@given(pairs=st.lists(st.tuples(any_payloads, any_payloads), max_size=30), p=persistence)
@settings(max_examples=examples(150), deadline=None)
def test_the_columns_are_the_scalar_measures_exactly(pairs: list[tuple[list[str], list[str]]], p: float) -> None:
    baseline, candidate = [a for a, _ in pairs], [b for _, b in pairs]
    assert _columns(baseline, candidate, p) == _scalar(baseline, candidate, p)


def test_the_columns_of_many_pairs_and_of_none() -> None:
    rng = random.Random(7)
    baseline = [rng.choices(KEYS, k=rng.randint(0, 12)) for _ in range(3000)]
    candidate = [
        rng.sample(a, len(a)) if rng.random() < 0.3 else rng.choices(KEYS, k=rng.randint(0, 12)) for a in baseline
    ]
    assert _columns(baseline, candidate, 0.8) == _scalar(baseline, candidate, 0.8)
    assert _columns([], [], P) == {"changed": [], "jaccard": [], "rbo": [], "top_changed": []}
    assert _columns([[], []], [[], ["a"]], P) == {
        "changed": [0.0, 1.0], "jaccard": [1.0, 0.0], "rbo": [1.0, 0.0], "top_changed": [0.0, 1.0]
    }  # fmt: skip


def test_keys_with_the_same_hash_are_told_apart(monkeypatch: pytest.MonkeyPatch) -> None:
    # every key hashed alike: the columns see the collision and number the keys exactly instead
    monkeypatch.setattr(overlap, "hash", lambda key: 7, raising=False)
    baseline = [["a", "b", "c", "a"], ["x"], [], ["p", "q"]]
    candidate = [["c", "a", "d"], ["y"], ["z"], ["q", "p", "p"]]
    assert _columns(baseline, candidate, P) == _scalar(baseline, candidate, P)
