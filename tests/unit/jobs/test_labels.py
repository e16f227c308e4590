"""The candidates of the labelling file, from a run's query log rows: the disagreement is the largest 1 - RBO of
a config's delivered chunks with the baseline's, the chunks offered are the union in first-seen order, each
with the configs that delivered it."""

from __future__ import annotations

import pandas as pd
import pytest

from rag_eval.jobs.labels import candidates_of
from rag_eval.traffic.overlap import rbo

CONFIGS = [{"name": "base", "baseline": True}, {"name": "a"}, {"name": "b"}]


def _rows(*rows: tuple[str, str, list[str], int]) -> pd.DataFrame:
    return pd.DataFrame(
        {
            "query_id": [r[0] for r in rows],
            "config": [r[1] for r in rows],
            "origin": ["traffic"] * len(rows),
            "query_text": [f"text of {r[0]}" for r in rows],
            "occurrences": [r[3] for r in rows],
            "member_chunks": [r[2] for r in rows],
        }
    )


def test_disagreement_is_the_largest_over_the_candidate_configs_and_chunks_are_their_union() -> None:
    rows = _rows(
        ("t2", "b", ["d#chunk-0", "x#chunk-1"], 3),  # rows in any order
        ("t1", "a", ["d#chunk-0"], 7),
        ("t1", "base", ["d#chunk-0"], 7),
        ("t2", "base", ["x#chunk-1", "d#chunk-0"], 3),
        ("t2", "a", ["x#chunk-1", "d#chunk-0"], 3),
        ("t1", "b", ["d#chunk-0"], 7),
    )
    t1, t2 = candidates_of(rows, CONFIGS)
    assert (t1.query_id, t1.count, t1.disagreement, t1.text) == ("t1", 7, 0.0, "text of t1")
    assert [(d.chunk, d.configs) for d in t1.delivered] == [("d#chunk-0", ("base", "a", "b"))]
    expected = 1 - rbo(["x#chunk-1", "d#chunk-0"], ["d#chunk-0", "x#chunk-1"])
    assert t2.disagreement == pytest.approx(expected) and 0 < expected < 1
    assert [(d.chunk, d.configs) for d in t2.delivered] == [
        ("x#chunk-1", ("base", "a", "b")), ("d#chunk-0", ("base", "a", "b"))]  # fmt: skip


def test_a_query_the_baseline_did_not_answer_and_empty_payloads() -> None:
    rows = _rows(("t1", "base", [], 1), ("t1", "a", [], 1), ("t2", "a", ["d#chunk-0"], 2))
    t1, t2 = candidates_of(rows, CONFIGS)
    assert t1.disagreement == 0.0 and t1.delivered == ()  # nothing and nothing agree
    assert t2.disagreement == 0.0  # no baseline row: nothing to measure against, never picked
    assert candidates_of(rows.iloc[0:0], CONFIGS) == []
