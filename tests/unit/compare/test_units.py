"""A comparison's units: the queries (or query-document pairs) both sides have, among those asked, in
id order; a metric's values on the units where both sides define it, and where those sit; whether its
p-value is drawn at random; the p-values of all its metrics at once."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from rag_eval.compare.catalog import Metric
from rag_eval.compare.units import Units, columns, unit_frames, unit_values

BASE = {
    "query": pd.DataFrame(
        {"config": ["a", "a", "a", "x"], "query_id": ["q3", "q1", "q2", "q4"], "v": [3.0, 1.0, 2.0, 9.0],
         "hits": [3, None, 2, 9], "num": [1, 2, 0, 0], "den": [2, 2, 0, 1]}
    ),
    "pair": pd.DataFrame(
        {"config": ["a", "a", "a"], "query_id": ["q1", "q1", "q2"], "doc_id": ["d1", "d2", "d1"], "g": [1.0, 2.0, 3.0]}
    ),
}  # fmt: skip
CAND = {
    "query": pd.DataFrame(
        {"config": ["b", "b", "b"], "query_id": ["q2", "q1", "q4"], "v": [20.0, 10.0, 40.0], "hits": [1, 5, 4],
         "num": [1, 1, 1], "den": [1, 2, 1]}
    ),
    "pair": pd.DataFrame(
        {"config": ["b", "b", "b"], "query_id": ["q2", "q1", "q3"], "doc_id": ["d1", "d2", "d1"],
         "g": [30.0, 20.0, 0.0]}
    ),
}  # fmt: skip
QUERIES = ["q1", "q2", "q3", "q4"]


def mean(column: str, **more: object) -> Metric:
    return Metric(name=column, label=column, group="chunk", higher_is_better=True, kind="mean", column=column,
                  **more)  # type: ignore[arg-type]  # fmt: skip


def test_the_units_both_configs_have_among_the_queries_asked_in_id_order() -> None:
    frames = unit_frames(BASE, CAND, "a", "b", QUERIES)
    # q3 only in the baseline, q4 only in the candidate's config b (the baseline's q4 is config x)
    assert list(frames.baseline["query"].index) == ["q1", "q2"]
    assert list(frames.candidate["query"].index) == ["q1", "q2"]
    assert list(frames.baseline["pair"].index) == [("q1", "d2"), ("q2", "d1")]
    assert frames.width("query") == 2 and frames.width("pair") == 2
    assert frames.column(False, "query", "v").tolist() == [1.0, 2.0]
    assert frames.column(True, "query", "v").tolist() == [10.0, 20.0]
    assert frames.column(True, "pair", "g").tolist() == [20.0, 30.0]
    only_q2 = unit_frames(BASE, CAND, "a", "b", ["q2"])
    assert list(only_q2.baseline["query"].index) == ["q2"] and list(only_q2.baseline["pair"].index) == [("q2", "d1")]
    none = unit_frames(BASE, CAND, "a", "c", QUERIES)  # a config the candidate run does not have
    assert none.width("query") == 0 and none.width("pair") == 0


def test_the_same_rows_in_another_order_give_the_same_units() -> None:
    shuffled = {per: frame.iloc[::-1] for per, frame in BASE.items()}
    first, second = unit_frames(BASE, CAND, "a", "b", QUERIES), unit_frames(shuffled, CAND, "a", "b", QUERIES)
    assert first.column(False, "query", "v").tolist() == second.column(False, "query", "v").tolist()
    assert first.column(False, "pair", "g").tolist() == second.column(False, "pair", "g").tolist()


def test_a_column_no_row_defines_reads_as_missing_values() -> None:
    frames = unit_frames(BASE, CAND, "a", "b", QUERIES)
    assert np.isnan(frames.column(False, "query", "absent")).tolist() == [True, True]
    assert frames.column(False, "query", "hits").tolist()[1] == 2.0 and np.isnan(
        frames.column(False, "query", "hits")[0]
    )
    frame = pd.DataFrame({"a": [1, 2]})
    read = columns(frame, ["b", "a"])
    assert read.columns.tolist() == ["b", "a"] and read["b"].isna().tolist() == [True, True]
    assert read["a"].tolist() == [1, 2]


def test_the_queries_by_their_place_in_the_run_unknown_ones_after_by_id() -> None:
    frames = unit_frames(BASE, CAND, "a", "b", QUERIES)
    ranks, names = frames.query_ranks("query", {"q2": 0, "q1": 1})
    assert (ranks.tolist(), names) == ([1, 0], ["q2", "q1"])
    fresh = unit_frames(BASE, CAND, "a", "b", QUERIES)
    ranks, names = fresh.query_ranks("pair", {"q2": 5})  # q1 unknown: after q2
    assert (ranks.tolist(), names) == ([1, 0], ["q2", "q1"])
    fresh = unit_frames(BASE, CAND, "a", "b", QUERIES)
    assert fresh.query_ranks("query", {}) == (pytest.approx(np.array([0, 1])), ["q1", "q2"])


def test_a_metrics_values_on_the_units_both_sides_define_and_their_positions() -> None:
    frames = unit_frames(BASE, CAND, "a", "b", QUERIES)
    hits = unit_values(mean("hits"), frames)  # the baseline's q1 has no value: only q2 (position 1)
    assert (hits.baseline.tolist(), hits.candidate.tolist(), hits.positions.tolist()) == ([2.0], [1.0], [1])
    rate = Metric(name="r", label="r", group="chunk", higher_is_better=True, kind="rate", numerator="num",
                  denominator="den")  # fmt: skip
    values = unit_values(rate, frames)
    assert values.baseline.tolist() == [[2.0, 2.0], [0.0, 0.0]] and values.candidate.tolist() == [
        [1.0, 2.0],
        [1.0, 1.0],
    ]
    assert values.baseline.shape == (2, 2) and values.positions.tolist() == [0, 1]
    nothing = unit_values(mean("absent"), frames)
    assert nothing.baseline.shape == (0,) and nothing.positions.tolist() == []


def units(baseline: list[float], candidate: list[float]) -> Units:
    return Units(baseline=np.array(baseline), candidate=np.array(candidate), positions=np.arange(len(baseline)))
