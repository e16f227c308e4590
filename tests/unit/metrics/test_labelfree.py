"""The label-free measures of a query log's rows, pinned by worked examples: payloads against the baseline's on
the same query (a baseline row missing, empty payloads, a legacy block's chunks, duplicates), the weighing by
requests, the RBO histogram, and the rows of each origin."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from rag_eval.metrics.labelfree import (
    PREFIX,
    baseline_of,
    multi_chunk_document,
    overlap_values,
    rbo_histogram,
    traffic_summary,
)
from rag_eval.metrics.measures import of_origin
from rag_eval.traffic.overlap import rbo

CONFIGS = [{"name": "legacy"}, {"name": "evidence", "baseline": True}, {"name": "wide"}]


def _rows(*rows: tuple[str, str, list[str], int]) -> pd.DataFrame:
    return pd.DataFrame(
        {
            "query_id": [r[0] for r in rows],
            "config": [r[1] for r in rows],
            "origin": ["traffic"] * len(rows),
            "occurrences": [r[3] for r in rows],
            "member_keys": [r[2] for r in rows],
            "member_chunks": [r[2] for r in rows],
        }
    )


def test_each_payload_is_compared_with_the_baselines_on_the_same_query() -> None:
    rows = _rows(
        ("t1", "evidence", ["a#chunk-0", "a#chunk-1", "b#chunk-0"], 4),
        ("t1", "legacy", ["a#chunk-0", "a#chunk-1", "b#chunk-0"], 4),  # the same chunks: not changed
        ("t1", "wide", ["b#chunk-0", "a#chunk-0", "a#chunk-1"], 4),  # the same set, another order
        ("t2", "evidence", [], 1),
        ("t2", "wide", [], 1),  # empty and empty: identical
        ("t2", "legacy", ["c#chunk-2"], 1),  # something where the baseline gave nothing
        ("t3", "wide", ["d#chunk-0"], 2),  # no baseline row: not compared
    )
    v = overlap_values(rows, CONFIGS).set_index(["query_id", "config"])
    assert v.loc[("t1", "legacy"), [PREFIX + c for c in ("changed", "jaccard", "rbo", "top_changed")]].tolist() == [
        0.0, 1.0, 1.0, 0.0]  # fmt: skip
    wide = v.loc[("t1", "wide")]
    assert (wide[PREFIX + "changed"], wide[PREFIX + "jaccard"], wide[PREFIX + "top_changed"]) == (1.0, 1.0, 1.0)
    assert wide[PREFIX + "rbo"] == pytest.approx(rbo(["a#chunk-0", "a#chunk-1", "b#chunk-0"],
                                                     ["b#chunk-0", "a#chunk-0", "a#chunk-1"]))  # fmt: skip
    assert wide[PREFIX + "rbo"] < 1.0
    assert v.loc[("t2", "wide"), [PREFIX + "changed", PREFIX + "rbo", PREFIX + "empty"]].tolist() == [0.0, 1.0, 1.0]
    assert v.loc[("t2", "legacy"), [PREFIX + "changed", PREFIX + "rbo", PREFIX + "jaccard"]].tolist() == [
        1.0, 0.0, 0.0]  # fmt: skip
    assert math.isnan(v.loc[("t3", "wide"), PREFIX + "rbo"]) and math.isnan(v.loc[("t3", "wide"), PREFIX + "changed"])
    assert v.loc[("t1", "evidence"), PREFIX + "multi_doc"] == 1.0 and v.loc[("t2", "legacy"), PREFIX + "multi_doc"] == 0
    # a changed payload counts its requests
    assert v.loc[("t1", "wide"), PREFIX + "changed_requests"] == 4.0
    assert v.loc[("t1", "legacy"), PREFIX + "changed_requests"] == 0.0


def test_a_summary_weighs_queries_alike_and_requests_by_their_count() -> None:
    rows = _rows(
        ("t1", "evidence", ["a#chunk-0"], 9),
        ("t1", "wide", ["b#chunk-0"], 9),
        ("t2", "evidence", ["a#chunk-0"], 1),
        ("t2", "wide", ["a#chunk-0"], 1),
    )
    v = overlap_values(rows, CONFIGS)
    s = traffic_summary({"queries": 2, "duplicate_rate": 0.0, "chunk": {"nDCG@5": 0.9}}, v[v["config"] == "wide"])
    assert (s["payload_changed"], s["requests_changed"], s["requests"]) == (0.5, 0.9, 10)
    assert s["rbo"] == 0.5 and s["top_changed"] == 0.5 and s["queries"] == 2
    assert "chunk" not in s  # nothing that needs a label
    assert s["rbo_bins"] == [1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1]


def test_the_baseline_is_the_marked_config_else_the_first() -> None:
    assert baseline_of(CONFIGS) == "evidence"
    assert baseline_of([{"name": "x"}, {"name": "y"}]) == "x"
    assert baseline_of([]) == ""


@pytest.mark.parametrize(
    ("chunks", "expected"),
    [
        ([], False),
        (["a#chunk-0", "a#chunk-0"], False),  # one chunk twice is one chunk
        (["a#chunk-0", "b#chunk-0", "a#chunk-9"], True),
        (["unknown:1", "unknown:2"], False),  # rows of no known document are their own documents
        (["doc#with#hash#chunk-1", "doc#with#hash#chunk-2"], True),  # the document is before the last separator
    ],
)
def test_multi_chunk_documents(chunks: list[str], expected: bool) -> None:
    assert multi_chunk_document(chunks) is expected


def test_the_rbo_histogram_counts_tenths_and_identical_apart() -> None:
    values = np.array([0.0, 0.099999, 0.1, 0.5, 0.999999, 1.0, np.nan])
    assert rbo_histogram(values) == [2, 1, 0, 0, 0, 1, 0, 0, 0, 1, 1]
    assert rbo_histogram(np.array([])) == [0] * 11


def test_rows_of_each_origin() -> None:
    rows = pd.DataFrame({"query_id": ["q1", "t1", "q2"], "origin": ["labelled", "traffic", None]})
    labelled = [q for b in of_origin(rows, "labelled", ["query_id"]) for q in b.column("query_id").to_pylist()]
    traffic = [q for b in of_origin(rows, "traffic", ["query_id"]) for q in b.column("query_id").to_pylist()]
    assert labelled == ["q1", "q2"] and traffic == ["t1"]  # a missing origin is labelled
