"""The label-free measures of a query log's rows, pinned by worked examples: payloads against the baseline's on
the same query (a baseline row missing, empty payloads, a legacy block's chunks, duplicates), the weighing by
requests, the RBO histogram, and the rows of each origin."""

from __future__ import annotations

import json
import math
from collections.abc import Sequence

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


@pytest.mark.parametrize("batch_rows", [1, 2, 8192])
def test_the_values_do_not_depend_on_how_the_rows_are_batched(monkeypatch: pytest.MonkeyPatch, batch_rows: int) -> None:
    from rag_eval.metrics import perquery

    rows = _rows(
        ("t1", "evidence", ["a#chunk-0", "a#chunk-1"], 3),
        ("t1", "wide", ["a#chunk-1"], 3),
        ("t2", "evidence", ["b#chunk-0"], 5),
        ("t2", "wide", [], 5),
        ("t3", "evidence", ["c#chunk-0"], 2),
    )
    monkeypatch.setattr(perquery, "BATCH_ROWS", batch_rows)
    v = overlap_values(rows, CONFIGS)
    assert v["query_id"].tolist() == ["t1", "t1", "t2", "t2", "t3"]
    assert v["config"].tolist() == ["evidence", "wide", "evidence", "wide", "evidence"]
    assert v[PREFIX + "changed"].tolist() == [0.0, 1.0, 0.0, 1.0, 0.0]
    assert v[PREFIX + "jaccard"].tolist() == [1.0, 0.5, 1.0, 0.0, 1.0]
    assert v[PREFIX + "requests"].tolist() == [3.0, 3.0, 5.0, 5.0, 2.0]
    assert v[PREFIX + "changed_requests"].tolist() == [0.0, 3.0, 0.0, 5.0, 0.0]
    assert v[PREFIX + "empty"].tolist() == [0.0, 0.0, 0.0, 1.0, 0.0]
    assert v[PREFIX + "multi_doc"].tolist() == [1.0, 0.0, 0.0, 0.0, 0.0]


@pytest.mark.parametrize("batch_rows", [1, 8192])
def test_a_query_without_a_count_is_asked_once(monkeypatch: pytest.MonkeyPatch, batch_rows: int) -> None:
    """A log row whose count is missing, and rows written before queries had counts (no column), count one
    request each."""
    from rag_eval.metrics import perquery

    monkeypatch.setattr(perquery, "BATCH_ROWS", batch_rows)
    rows = _rows(("t1", "evidence", ["a#chunk-0"], 4), ("t1", "wide", ["b#chunk-0"], 4))
    rows["occurrences"] = pd.array([None, None], dtype="Int64")
    v = overlap_values(rows, CONFIGS)
    assert v[PREFIX + "requests"].tolist() == [1.0, 1.0] and v[PREFIX + "changed_requests"].tolist() == [0.0, 1.0]
    older = _rows(("t1", "evidence", ["a#chunk-0"], 4), ("t1", "wide", ["b#chunk-0"], 4), ("t2", "wide", [], 4))
    v = overlap_values(older.drop(columns=["occurrences"]), CONFIGS)
    assert v[PREFIX + "requests"].tolist() == [1.0, 1.0, 1.0]


def test_every_figure_of_a_traffic_summary_is_named_and_pinned() -> None:
    rows = _rows(
        ("t1", "evidence", ["a#chunk-0", "b#chunk-0"], 2),
        ("t1", "wide", ["a#chunk-0", "a#chunk-1"], 2),  # a document twice, half the set shared
        ("t2", "evidence", ["c#chunk-0"], 1),
        ("t2", "wide", [], 1),  # nothing delivered
    )
    v = overlap_values(rows, CONFIGS)
    s = traffic_summary({"queries": 2}, v[v["config"] == "wide"])
    assert s["jaccard"] == pytest.approx((1 / 3 + 0.0) / 2)
    assert s["empty_payloads"] == 0.5 and s["multi_chunk_payloads"] == 0.5
    assert (s["payload_changed"], s["requests_changed"], s["requests"]) == (1.0, 1.0, 3)


def test_a_config_with_no_log_rows_has_a_summary_of_no_numbers() -> None:
    s = traffic_summary({"queries": 0}, overlap_values(_rows(("t1", "evidence", ["a#chunk-0"], 1)), CONFIGS).iloc[0:0])
    assert s["requests"] == 0 and s["rbo_bins"] == [0] * 11
    assert all(math.isnan(s[k]) for k in ("payload_changed", "requests_changed", "jaccard", "rbo", "empty_payloads"))


def test_an_unknown_chunk_is_its_own_document_whatever_its_name() -> None:
    # a row no document is known for: its id is not read as a document's, even where it looks like one
    assert multi_chunk_document(["unknown:x#chunk-1", "unknown:x#chunk-2"]) is False


def test_the_payloads_of_one_config_by_query() -> None:
    from rag_eval.metrics.labelfree import payloads_of

    rows = _rows(("t1", "evidence", ["a#chunk-0"], 1), ("t1", "wide", ["b#chunk-0"], 1), ("t2", "evidence", [], 1))
    rows.loc[len(rows)] = ["q1", "evidence", "labelled", 1, ["z#chunk-0"], ["z#chunk-0"]]  # not the log's
    rows["member_keys"] = rows["member_keys"].astype(object)
    rows.at[2, "member_keys"] = None  # a row that delivered nothing may carry no list
    assert payloads_of(rows, "evidence") == {"t1": ["a#chunk-0"], "t2": []}
    assert payloads_of(rows, "wide") == {"t1": ["b#chunk-0"]}
    assert payloads_of(rows, "nobody") == {}


def test_against_another_runs_payloads_the_overlap_is_measured_between_the_two_runs() -> None:
    """A nightly: each query's payload now against the same config's payload in the accepted night; the baseline
    side reads as a payload against itself; a query only one run has is not compared."""
    from rag_eval.metrics.labelfree import against_payloads

    index = pd.Index(["t1", "t2", "t3"], name="query_id")
    cand = pd.DataFrame({PREFIX + "requests": [4.0, 1.0, 2.0]}, index=index)
    base = pd.DataFrame({"x": [0.0, 0.0, 0.0]}, index=index)
    then = {"t1": ["a#chunk-0", "a#chunk-1"], "t2": ["c#chunk-0"]}
    now = {"t1": ["a#chunk-1", "a#chunk-0"], "t2": ["c#chunk-0"], "t3": ["d#chunk-0"]}
    b, c = against_payloads(base, cand, (then, now))
    assert c[PREFIX + "changed"].tolist()[:2] == [1.0, 0.0] and math.isnan(c[PREFIX + "changed"].iloc[2])
    assert c[PREFIX + "jaccard"].tolist()[:2] == [1.0, 1.0] and c[PREFIX + "top_changed"].tolist()[:2] == [1.0, 0.0]
    assert c[PREFIX + "rbo"].iloc[0] == pytest.approx(rbo(then["t1"], now["t1"])) and c[PREFIX + "rbo"].iloc[1] == 1.0
    assert math.isnan(c[PREFIX + "rbo"].iloc[2]) and math.isnan(c[PREFIX + "jaccard"].iloc[2])
    assert c[PREFIX + "changed_requests"].tolist()[:2] == [4.0, 0.0]
    assert b[PREFIX + "changed"].tolist()[:2] == [0.0, 0.0] and b[PREFIX + "rbo"].tolist()[:2] == [1.0, 1.0]
    assert b[PREFIX + "jaccard"].tolist()[:2] == [1.0, 1.0] and b[PREFIX + "top_changed"].tolist()[:2] == [0.0, 0.0]
    assert b[PREFIX + "changed_requests"].tolist()[:2] == [0.0, 0.0]
    assert b[PREFIX + "requests"].tolist()[:2] == [4.0, 1.0]
    assert all(math.isnan(b[PREFIX + n].iloc[2]) for n in ("changed", "rbo", "changed_requests", "requests"))
    assert list(b["x"]) == [0.0, 0.0, 0.0] and "x" not in c  # the sides keep their own columns, copied
    assert PREFIX + "changed" not in base and PREFIX + "changed" not in cand
    gone = pd.Index(["t1", "t4"], name="query_id")  # t4: in the accepted night only, not asked now
    _, c = against_payloads(base.iloc[:2].set_axis(gone), cand.iloc[:2].set_axis(gone), ({**then, "t4": ["e"]}, now))
    assert c[PREFIX + "changed"].iloc[0] == 1.0 and math.isnan(c[PREFIX + "changed"].iloc[1])
    no_counts = pd.DataFrame(index=index)  # values read before a log kept counts: one request a query
    _, c = against_payloads(base, no_counts, (then, now))
    assert c[PREFIX + "changed_requests"].tolist()[:2] == [1.0, 0.0]


def _logged_rows() -> pd.DataFrame:
    """Two configs' synthetic rows of the same 40 queries, as a query log's (origin traffic, with counts), beside
    10 labelled rows of each config that must not count."""
    import pyarrow as pa

    from tests.benchmarks import synthetic

    parts = []
    for config, seed in (("legacy", 3), ("evidence", 4)):
        table = synthetic.per_query_table(50, config=config, seed=seed).to_pandas()
        table["origin"] = ["traffic"] * 40 + ["labelled"] * 10
        table["occurrences"] = [1 + i % 4 for i in range(50)]
        parts.append(table)
    return pa.Table.from_pandas(pd.concat(parts, ignore_index=True), preserve_index=False).to_pandas()


LOGGED_CONFIGS = [
    {"name": "legacy", "cap": None, "cap_aware": None, "return_n": 20, "baseline": True},
    {"name": "evidence", "cap": 2, "cap_aware": 2, "return_n": 20},
]


def test_the_logs_values_are_its_rows_measures_and_overlaps_under_traffic_names() -> None:
    from rag_eval.metrics.labelfree import traffic_values
    from rag_eval.metrics.measures import query_values

    rows = _logged_rows()
    asked: list[tuple[str, ...]] = []

    def source(columns: Sequence[str]) -> pd.DataFrame:
        asked.append(tuple(columns))
        return rows[[c for c in columns if c in rows.columns]]

    got = traffic_values(source, configs=LOGGED_CONFIGS, cutoffs=[1, 5])
    plain = query_values(rows, configs=LOGGED_CONFIGS, cutoffs=[1, 5], origin="traffic")
    overlap = overlap_values(rows, LOGGED_CONFIGS)
    assert len(got) == 80 and set(got["query_id"]) == set(rows["query_id"][rows["origin"] == "traffic"])
    assert {"query_id", "config", "judged"} <= set(got.columns)  # the keys keep their names
    measured = [c for c in plain.columns if c not in ("query_id", "config", "judged")]
    assert measured and all(PREFIX + c in got.columns and c not in got.columns for c in measured)
    merged = plain.rename(columns={c: PREFIX + c for c in measured}).merge(overlap, on=["query_id", "config"])
    pd.testing.assert_frame_equal(got.reset_index(drop=True), merged.reset_index(drop=True), check_like=True)
    assert len(asked) == 2 and "origin" in asked[0] and "origin" in asked[1] and "member_keys" in asked[1]


def test_a_configs_traffic_summary_is_its_log_rows_summary_and_overlap() -> None:
    from rag_eval.metrics.labelfree import summarize_traffic
    from rag_eval.metrics.measures import summarize

    rows = _logged_rows()
    got = summarize_traffic(lambda cols: rows[[c for c in cols if c in rows.columns]], configs=LOGGED_CONFIGS,
                            cutoffs=[1, 5])  # fmt: skip
    summaries, _ = summarize(rows, configs=LOGGED_CONFIGS, cutoffs=[1, 5], origin="traffic")
    overlap = overlap_values(rows, LOGGED_CONFIGS)
    assert set(got) == {"legacy", "evidence"}
    for name in got:
        expected = traffic_summary(summaries[name], overlap[overlap["config"] == name])
        assert got[name].keys() == expected.keys() and got[name]["queries"] == 40
        assert json.dumps(got[name], sort_keys=True, default=str) == json.dumps(expected, sort_keys=True, default=str)
    assert got["legacy"]["payload_changed"] == 0.0 and got["evidence"]["payload_changed"] > 0.0
    assert got["evidence"]["requests"] == sum(1 + i % 4 for i in range(40))
    labelled_only = rows[(rows["config"] == "legacy") | (rows["origin"] == "labelled")]  # evidence: no log rows
    got = summarize_traffic(lambda cols: labelled_only[[c for c in cols if c in rows.columns]], configs=LOGGED_CONFIGS,
                            cutoffs=[1, 5])  # fmt: skip
    assert got["evidence"]["requests"] == 0 and math.isnan(got["evidence"]["payload_changed"])
