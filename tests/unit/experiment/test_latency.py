"""Which queries get their search timed, the orders configs are post-processed in, the ``--latency``
flag, and the note saying how latency was measured."""

from __future__ import annotations

from collections import Counter
from math import factorial, sqrt

import pytest
from scipy.stats import chisquare

from rag_eval.core.errors import ConfigError
from rag_eval.experiment.latency import LatencyMode, ReplayCost, TimingPlan, label_search_timing, latency_note


def test_the_queries_timed_all_off_or_a_seeded_sample() -> None:
    assert TimingPlan(mode=LatencyMode.ALL).timed(3) == frozenset({0, 1, 2})
    assert TimingPlan(mode=LatencyMode.OFF).timed(3) == frozenset()
    assert TimingPlan(sample_size=5).timed(3) == frozenset({0, 1, 2})  # fewer queries than the sample
    sample = TimingPlan(sample_size=4, seed=1).timed(100)
    assert len(sample) == 4 and sample <= frozenset(range(100))
    assert TimingPlan(sample_size=4, seed=1).timed(100) == sample  # the same seed, the same sample
    assert TimingPlan(sample_size=4, seed=2).timed(100) != sample
    assert TimingPlan(sample_size=100, seed=1).timed(100) == frozenset(range(100))
    assert TimingPlan().timed(0) == frozenset()


def test_rounds_of_post_processing() -> None:
    assert TimingPlan().rounds == (1, 5)
    assert TimingPlan(postprocess_repeats=3, mode=LatencyMode.ALL).rounds == (1, 3)
    assert TimingPlan(mode=LatencyMode.OFF).rounds == (0, 1)


def test_the_config_orders_are_a_seeded_permutation_rotated_each_round() -> None:
    plan = TimingPlan(seed=3)
    orders = plan.config_orders(4, query_index=7, rounds=5)
    first = orders[0]
    assert sorted(first) == [0, 1, 2, 3]
    assert orders[1:] == [first[1:] + first[:1], first[2:] + first[:2], first[3:] + first[:3], first]
    assert plan.config_orders(4, query_index=7, rounds=5) == orders  # wherever and whenever it runs
    assert len({tuple(plan.config_orders(4, query_index=q, rounds=1)[0]) for q in range(40)}) > 1
    assert plan.config_orders(1, query_index=0, rounds=3) == [[0], [0], [0]]
    assert plan.config_orders(0, query_index=0, rounds=2) == [[], []]
    assert plan.config_orders(3, query_index=0, rounds=0) == []


@pytest.mark.parametrize(("configs", "seed"), [(2, 0), (2, 7), (3, 0), (3, -5), (4, 2**70)])
def test_every_first_order_is_about_equally_likely_over_the_queries(configs: int, seed: int) -> None:
    """Each permutation's share over 24,000 query indices within 4.5 standard errors of 1/configs! (a
    scipy chi-square test of uniformity at 1e-4 as well), and another seed gives other orders."""
    n = 24_000
    plan = TimingPlan(seed=seed)
    counts = Counter(tuple(plan.config_orders(configs, query_index=q, rounds=1)[0]) for q in range(n))
    cells = factorial(configs)
    assert len(counts) == cells
    share = 1 / cells
    assert all(abs(c / n - share) <= 4.5 * sqrt(share * (1 - share) / n) for c in counts.values())
    assert chisquare(list(counts.values())).pvalue > 1e-4
    other = TimingPlan(seed=seed + 1)
    differ = sum(plan.config_orders(configs, query_index=q, rounds=1) != other.config_orders(configs, query_index=q,
                 rounds=1) for q in range(200))  # fmt: skip
    assert differ > 50


@pytest.mark.parametrize(
    ("text", "plan"),
    [
        ("all", TimingPlan(mode=LatencyMode.ALL)),
        (" off ", TimingPlan(mode=LatencyMode.OFF)),
        ("sample", TimingPlan()),
        ("sample:25", TimingPlan(sample_size=25)),
    ],
)
def test_the_latency_flag(text: str, plan: TimingPlan) -> None:
    assert TimingPlan.parse(text) == plan


def test_the_latency_flag_keeps_what_it_does_not_set() -> None:
    base = TimingPlan(sample_size=9, seed=4, postprocess_repeats=2)
    assert TimingPlan.parse("all", base) == TimingPlan(mode=LatencyMode.ALL, sample_size=9, seed=4,
                                                        postprocess_repeats=2)  # fmt: skip


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("some", "expected all, off, sample or sample:N, got 'some'"),
        ("", "expected all, off, sample or sample:N, got ''"),
        ("SAMPLE", "expected all, off, sample or sample:N, got 'SAMPLE'"),
        ("sample:0", "expected sample:N with N >= 1, got 'sample:0'"),
        ("sample:-3", "expected sample:N with N >= 1, got 'sample:-3'"),
        ("sample:1e3", "expected sample:N with N >= 1, got 'sample:1e3'"),
        ("all:5", "expected sample:N with N >= 1, got 'all:5'"),
    ],
)
def test_a_latency_flag_that_is_none_of_these_is_refused_naming_the_flag(text: str, message: str) -> None:
    with pytest.raises(ConfigError) as err:
        TimingPlan.parse(text)
    assert [(p.key, p.message) for p in err.value.problems] == [("--latency", message)]


def test_the_latency_note() -> None:
    note = latency_note(TimingPlan(sample_size=2, seed=5), backend="Milvus Lite 2.4", warmup=3, queries=10,
                        cost=ReplayCost(1.23456, 4.0, 3.00004))  # fmt: skip
    search, post = note["search"], note["postprocess"]
    assert note["backend"] == "Milvus Lite 2.4"
    assert {k: search[k] for k in ("mode", "sample_size", "seed", "timed_queries", "queries", "warmup")} == {
        "mode": "sample", "sample_size": 2, "seed": 5, "timed_queries": 2, "queries": 10, "warmup": 3,
    }  # fmt: skip
    assert (search["timing_seconds"], search["replay_seconds"], search["timing_share_of_replay"]) == (
        1.235,
        4.0,
        0.3086,
    )
    assert (search["replay_cpu_seconds"], search["replay_cpu_share"]) == (3.0, 0.75)  # of the seconds before rounding
    assert (post["timed_queries"], post["warmup_rounds"], post["repeats"], post["order_seed"]) == (10, 1, 5, 5)
    unknown = latency_note(TimingPlan(mode=LatencyMode.OFF), backend="b", warmup=0, queries=4, cost=ReplayCost(0.0))
    assert unknown["search"]["timing_share_of_replay"] is None and unknown["search"]["timed_queries"] == 0
    assert unknown["search"]["replay_cpu_share"] is None and unknown["search"]["replay_cpu_seconds"] == 0.0
    busy = latency_note(TimingPlan(), backend="b", warmup=0, queries=4, cost=ReplayCost(0.0, 2.0, 2.6))
    assert busy["search"]["replay_cpu_share"] == 1.3  # two threads of the process at work at once: above 1
    assert (unknown["postprocess"]["warmup_rounds"], unknown["postprocess"]["repeats"]) == (0, 1)


def test_each_config_is_labelled_with_the_search_it_timed_and_who_shares_it() -> None:
    configs = {"a": {"search_latency": {"p50_us": 1.0}}, "b": {}, "c": {}}
    groups = {"a": ("dense, retrieve-k 20", ["a", "b"]), "b": ("dense, retrieve-k 20", ["a", "b"]),
              "c": ("dense, retrieve-k 5", ["c"])}  # fmt: skip
    assert label_search_timing(configs, groups) == {
        "a": {"search_latency": {"p50_us": 1.0, "timed_search": "dense, retrieve-k 20", "shared_with": ["b"]}},
        "b": {"search_latency": {"timed_search": "dense, retrieve-k 20", "shared_with": ["a"]}},
        "c": {"search_latency": {"timed_search": "dense, retrieve-k 5", "shared_with": []}},
    }
