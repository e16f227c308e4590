"""Summary entries whose worked examples elsewhere leave a branch untried: where the checked cap came
from, serial QPS without a measurable lookup, the latency interval of a handful of timed queries."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rag_eval.core.config import RagConfig
from rag_eval.metrics.measures import latency_stats, quantile_ci, summarize
from tests.budget import examples

from ..rowkit import as_table, replay_row, stored

CUTOFFS = (1, 3)


def _row(**latency: float) -> dict:  # type: ignore[type-arg]
    hits = [(stored(1, "d#chunk-0"), 0.9), (stored(2, "d#chunk-1"), 0.8)]
    return {**replay_row(RagConfig(), hits, {"d#chunk-0": 1, "d#chunk-1": 1}), **latency}


def _summary(rows: list, **cfg: object) -> dict:  # type: ignore[type-arg]
    config = {"name": "c", "cap": 2, "cap_aware": 2, "return_n": 10, **cfg}
    out, _ = summarize(as_table(rows), configs=[config], cutoffs=CUTOFFS)
    return out["c"]  # type: ignore[no-any-return]


def test_the_summary_says_where_the_checked_cap_came_from() -> None:
    assert _summary([_row()], cap_source="production")["cap_checked_source"] == "production"
    assert _summary([_row()])["cap_checked_source"] == "config"  # a config's own D3 value unless told


def test_serial_qps_is_one_over_the_mean_lookup_and_undefined_without_a_measurable_one() -> None:
    assert _summary([_row(e2e_us=2000.0), _row(e2e_us=6000.0)])["qps_serial"] == pytest.approx(250.0)
    assert math.isnan(_summary([_row(e2e_us=0.0)])["qps_serial"])  # a clock too coarse to see the lookup
    assert math.isnan(_summary([_row(e2e_us=math.nan)])["qps_serial"])  # not timed


def test_latency_of_no_timed_query_is_undefined_not_an_error() -> None:
    stats = latency_stats([math.nan, math.nan])
    assert all(math.isnan(v) for v in stats.values())
    assert latency_stats(np.array([3, 1, 2]))["mean"] == 2.0  # integer microseconds read as numbers
    ci = quantile_ci([])
    assert ci["timed_queries"] == 0
    assert math.isnan(ci["p95_ci_low_us"]) and math.isnan(ci["p95_ci_high_us"]) and math.isnan(ci["p95_ci_coverage"])


@settings(max_examples=examples(100), deadline=None)
@given(st.lists(st.one_of(st.floats(0, 1e6), st.just(math.nan)), max_size=40))
def test_latency_percentiles_are_numpys_percentile_of_the_timed_values(values: list[float]) -> None:
    timed = [v for v in values if not math.isnan(v)]
    stats = latency_stats(values)
    for q in (50, 90, 95, 99):
        expected = float(np.percentile(timed, q)) if timed else math.nan
        assert stats[f"p{q}"] == expected or (math.isnan(expected) and math.isnan(stats[f"p{q}"]))
        assert type(stats[f"p{q}"]) is float


def test_a_handful_of_timed_queries_bounds_the_p95_from_below_only() -> None:
    # lo: the smallest k with P(<= k) >= 2.5%: P(<= 3) = 2.26%, P(<= 4) = 22.6%, so X(4); no k above 5 for hi
    assert _below(3, 5) < 0.025 <= _below(4, 5)
    ci = quantile_ci([5.0, 1.0, math.nan, 4.0, 2.0, 3.0])  # NaN: a query not timed, left out
    assert ci["timed_queries"] == 5
    assert ci["p95_ci_low_us"] == 4.0
    assert math.isnan(ci["p95_ci_high_us"])  # too few values to bound the p95 from above
    assert ci["p95_ci_coverage"] == pytest.approx(_below(5, 5) - _below(3, 5))


def _below(k: int, n: int, q: float = 0.95) -> float:
    """P(at most k of n values lie below the q-quantile), the binomial sum written out."""
    return sum(math.comb(n, i) * q**i * (1 - q) ** (n - i) for i in range(k + 1))


def test_two_timed_queries_bound_the_p95_from_below_by_the_smaller() -> None:
    assert _below(0, 2) < 0.025 <= _below(1, 2)  # lo = 1: X(1), the smaller value
    ci = quantile_ci([7.0, 3.0])
    assert ci["p95_ci_low_us"] == 3.0 and math.isnan(ci["p95_ci_high_us"])
    assert ci["p95_ci_coverage"] == pytest.approx(_below(2, 2) - _below(0, 2))


def test_seventy_two_timed_queries_bound_the_p95_from_above_by_the_largest() -> None:
    # hi - 1 = the smallest k with P(<= k) >= 97.5%: k = 71, so X(72), the largest of 72 values
    assert _below(70, 72) < 0.975 <= _below(71, 72)
    lo = next(k for k in range(73) if _below(k, 72) >= 0.025)
    ci = quantile_ci(np.arange(72.0, 0.0, -1.0))  # 72 down to 1
    assert ci["p95_ci_high_us"] == 72.0
    assert ci["p95_ci_low_us"] == float(lo)
    assert ci["p95_ci_coverage"] == pytest.approx(_below(71, 72) - _below(lo - 1, 72))


def test_cap_checks_are_float_columns_nan_where_no_cap_is_checked() -> None:
    from tests.unit.frames import per_query_frame

    rows = [{**_row(), "config": "capped"}, {**_row(), "config": "free", "query_id": "q2"}]
    frame = per_query_frame(as_table(rows), CUTOFFS, {"capped": 2, "free": None}, {"capped": 1, "free": None})
    for column in ("cap_ok", "cap_ok_true"):
        assert frame[column].dtype == np.float64  # per_query.parquet's type, compared as numbers
        by_config = dict(zip(frame["config"], frame[column], strict=True))
        assert by_config["capped"] == 0.0  # two chunks of d against a cap of 1
        assert math.isnan(by_config["free"])


def test_a_judged_query_whose_qrels_are_all_grade_zero_scores_zero_not_nan() -> None:
    from tests.unit.frames import per_query_frame

    hits = [(stored(1, "d#chunk-0"), 0.9), (stored(2, "e#chunk-0"), 0.8)]
    row = replay_row(RagConfig(), hits, {"d#chunk-0": 0})  # judged: a grade, but 0, so nothing relevant
    assert row["judged"]
    frame = per_query_frame(as_table([row]), CUTOFFS, {"c": None})
    for name in ("P@1", "R@1", "R@3", "nDCG@1", "nDCG@3", "Success@3", "RR"):
        assert frame.loc[0, f"chunk:{name}"] == 0.0, name


def test_measure_columns_are_float_and_a_lone_chunk_is_one_chunk_of_its_document() -> None:
    from rag_eval.metrics.measures import query_values
    from tests.unit.frames import per_query_frame

    lone = replay_row(RagConfig(), [(stored(1, "d#chunk-0"), 0.9)], {"d#chunk-0": 1}, query_id="q1")
    unjudged = replay_row(RagConfig(), [(stored(2, "e#chunk-0"), 0.9)], {}, query_id="q2")
    frame = per_query_frame(as_table([lone, unjudged]), CUTOFFS, {"c": 2})
    measures = [c for c in frame.columns if c.startswith(("chunk:", "doc:"))]
    assert measures and all(frame[c].dtype == np.float64 for c in measures)
    assert frame.loc[1, "chunk:nDCG@3"] != frame.loc[1, "chunk:nDCG@3"]  # NaN: not judged
    config = [{"name": "c", "cap": 2, "cap_aware": 2, "return_n": 10}]
    values = query_values(as_table([lone]), configs=config, cutoffs=CUTOFFS)
    assert values.loc[0, "max_doc_chunks"] == 1
    from rag_eval.metrics import perquery
    from rag_eval.metrics.measures import as_arrow
    from rag_eval.rundir.rows import SCHEMA

    computed = perquery.compute(as_arrow(as_table([lone]), SCHEMA.names), CUTOFFS, {"c": 2}, {"c": 2})
    assert computed.max_doc_chunks.tolist() == [1] and computed.max_doc_chunks.dtype == np.int64  # a count


def test_a_row_mean_of_eight_or_more_pair_recalls_is_the_one_np_mean_gives() -> None:
    import pandas as pd

    from rag_eval.metrics.perquery import _pair_means

    recalls = [0.2, 0.0, 1.0, 0.75, 1.0, 1.0, 2 / 3, 2 / 3]
    left_to_right = 0.0
    for r in recalls:
        left_to_right += r
    assert left_to_right / 8 != float(np.mean(recalls))  # pairwise summation rounds differently here
    pairs = pd.DataFrame(
        {"row": [0] * 8 + [1] * 7, "recall": recalls + recalls[:7], "cap_aware": recalls + recalls[:7]}
    )
    means = _pair_means(pairs, 2)
    assert means["same_doc_recall"][0] == float(np.mean(recalls))  # to the last bit, as a summary computes it
    assert means["same_doc_recall_cap_aware"][1] == float(np.mean(recalls[:7]))
    assert means["same_doc_pairs"].tolist() == [8, 7]


def test_one_timed_query_bounds_the_p95_on_neither_side() -> None:
    assert _below(0, 1) >= 0.025  # lo = 0: no order statistic lies surely below the p95
    ci = quantile_ci([7.0])
    assert ci["timed_queries"] == 1
    assert math.isnan(ci["p95_ci_low_us"]) and math.isnan(ci["p95_ci_high_us"])
