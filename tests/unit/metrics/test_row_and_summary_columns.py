"""Every column of a per-query row and every entry of a config's summary, on one worked example.

The row is the single source of truth of every metric, so each of its columns is pinned by name, type and
value; the summary's statistics are computed by hand from those rows.
"""

from __future__ import annotations

import hashlib
import math
from dataclasses import replace

import pytest

from rag_eval.core.config import RagConfig
from rag_eval.core.lookup import Pipeline, StageTimings
from rag_eval.core.types import KnowledgeSearchHit
from rag_eval.metrics.measures import COPY, SAME_TEXT, doc_of, summarize, summary_frame
from rag_eval.rundir.rows import SCHEMA, RowTiming, build_row, rows_to_table

from ..rowkit import HINTS, as_hit, as_table, replay_record, stored, truth_for


def sha(text: str) -> str:
    """The documented content hash: sha256 of the text with case and whitespace folded, 16 hex digits."""
    return hashlib.sha256(" ".join(text.lower().split()).encode()).hexdigest()[:16]


D0, D1 = stored(1, "d#chunk-0", content="Check the SQL thread."), stored(2, "d#chunk-1")
E0_DOCLESS = stored(3, "e#chunk-0", doc_id=False, content="Raise  the relay LOG limit.")
NO_ID = KnowledgeSearchHit(id="none", content="an orphan row", score=0.6)  # no doc id, no vector id: rank:4
ODD_ID = KnowledgeSearchHit(id="v-9", content="odd", score=0.5, doc_id="x", chunk_index=0, vector_id="v-9")
CONFIG = RagConfig(retrieve_k=5, return_n=3, max_chunks_per_document=1)
TIMINGS = StageTimings(transform_ns=2000, search_ns=0, postprocess_ns=3500, projection_ns=500)


def worked_row(
    query_id: str = "q", search_us: float = 10.0, timings: StageTimings = TIMINGS, *, labelled: bool = True
) -> dict:  # type: ignore[type-arg]
    hits = [as_hit(D0, 0.9), as_hit(D1, 0.8), as_hit(E0_DOCLESS, 0.7), NO_ID, ODD_ID]
    record = replace(Pipeline(CONFIG).process(HINTS, hits), timings=timings)
    labels = {"d#chunk-1": 1, "e#chunk-0": 2}
    truth = truth_for([D0, D1, E0_DOCLESS], labels, query_id if labelled else "someone else")
    return build_row(
        query_id=query_id, query_index=7, config="c", record=record, truth=truth, timing=RowTiming(search_us=search_us)
    )


def test_every_column_of_a_row() -> None:
    texts = ["Check the SQL thread.", "Raise  the relay LOG limit.", "an orphan row"]
    expected = {
        "query_id": "q",
        "config": "c",
        "query_index": 7,
        "query_text": "why is the replica behind",
        "judged": True,
        "origin": "labelled",  # a data set's query (a query log's would be "traffic", with its count)
        "occurrences": 1,
        "returned_keys": ["d#chunk-0", "vector:3", "rank:4"],
        "returned_doc_ids": ["d", "", ""],
        "returned_ranks": [1, 2, 3],
        "returned_scores": [0.9, 0.7, 0.6],
        "returned_content_sha": [sha(t) for t in texts],
        "returned_chars": [len(t) for t in texts],
        "member_keys": ["d#chunk-0", "vector:3", "rank:4"],
        "member_chunks": ["d#chunk-0", "e#chunk-0", "unknown:None"],
        "member_doc_ids": ["d", "", ""],
        "member_content_sha": [sha(t) for t in texts],
        "member_block": [1, 2, 3],
        "hit_keys": ["d#chunk-0", "d#chunk-1", "vector:3", "rank:4", "x#chunk-0"],
        "hit_chunks": ["d#chunk-0", "d#chunk-1", "e#chunk-0", "unknown:None", "unknown:v-9"],
        "hit_content_sha": [sha(t) for t in [texts[0], "text of d#chunk-1", texts[1], texts[2], "odd"]],
        "hit_scores": [0.9, 0.8, 0.7, 0.6, 0.5],
        "relevant_chunks": ["d#chunk-1", "e#chunk-0"],
        "relevant_grades": [1, 2],
        "relevant_docs": ["d", "e"],
        "relevant_doc_grades": [1, 2],
        "delivered_relevant": ["e#chunk-0"],
        "lost_chunks": ["d#chunk-1"],
        "lost_stages": ["cap"],
        "n_hits": 5,
        "n_dedup": 0,
        "n_cap": 1,
        "n_truncated": 1,
        "n_blocks": 3,
        "guard_references": 3,
        "guard_violations": 0,
        "payload_chars": sum(len(t) for t in texts),
        "transform_us": 2.0,
        "search_us": 10.0,
        "postprocess_us": 3.5,
        "projection_us": 0.5,
        "e2e_us": 16.0,
    }
    row = worked_row()
    assert list(row) == SCHEMA.names
    assert math.isnan(row.pop("postsearch_cpu_us"))  # the thread's CPU time, when the replay measured it
    assert row == expected
    table = rows_to_table([worked_row()])
    (listed,) = table.to_pylist()
    assert math.isnan(listed.pop("postsearch_cpu_us"))
    assert table.schema == SCHEMA and listed == expected


def test_a_query_without_labels_is_an_unjudged_row() -> None:
    row = worked_row(query_id="unlabelled", labelled=False)
    assert row["judged"] is False
    assert (row["relevant_chunks"], row["relevant_docs"], row["lost_chunks"]) == ([], [], [])
    assert row["delivered_relevant"] == [] and row["relevant_doc_grades"] == []


def test_the_document_of_a_chunk_key_is_everything_before_the_last_chunk_marker() -> None:
    assert doc_of("runbooks/a#chunk-b#chunk-12") == "runbooks/a#chunk-b"
    assert doc_of("d#chunk-0") == "d" and doc_of("unknown:7") == "unknown:7"


def _table() -> list[dict]:  # type: ignore[type-arg]
    legacy = RagConfig.from_mapping({"rag.pipeline": "legacy", "rag.top-k": 5})
    slow = StageTimings(transform_ns=4000, postprocess_ns=5500, projection_ns=1500)
    rows = [worked_row("q1", 10.0), worked_row("q2", 30.0, slow, labelled=False)]
    record = replay_record(legacy, [(D0, 0.9), (D1, 0.8)])
    truth = truth_for([D0, D1], {"d#chunk-1": 1}, "q1")
    rows.append(
        build_row(
            query_id="q1", query_index=0, config="old", record=record, truth=truth, timing=RowTiming(search_us=5.0)
        )
    )
    return rows


CONFIGS = [
    {"name": "c", "cap": 1, "cap_aware": 1, "return_n": 2},
    {"name": "old", "cap": 1, "cap_aware": None, "return_n": 5},
    {"name": "idle", "cap": 2, "cap_aware": 2, "return_n": 5},
]


def test_every_entry_of_a_summary() -> None:
    summary, per_query = summarize(as_table(_table()), configs=CONFIGS, cutoffs=[1, 3])
    c = summary["c"]
    assert (c["queries"], c["judged_queries"]) == (2, 1)  # q2 has no labels
    # three excerpts each, return-n 2: no query complies; every chunk reference maps 1:1
    assert c["return_n_compliance"] == 0.0 and c["evidence_guard_1to1"] == 1.0
    chars = sum(len(t) for t in ["Check the SQL thread.", "Raise  the relay LOG limit.", "an orphan row"])
    assert c["payload"] == {
        "chars_p50": chars,
        "chars_p95": chars,
        "blocks_p50": 3.0,
        "blocks_p95": 3.0,
        "chunks_delivered_mean": 3.0,
    }
    # search 10 and 30 us; transform 2 and 4; post-process 3.5 and 5.5; projection 0.5 and 1.5
    assert c["latency_us"]["search"] == pytest.approx(
        {"p50": 20.0, "p90": 28.0, "p95": 29.0, "p99": 29.8, "max": 30.0, "mean": 20.0}
    )
    assert c["latency_us"]["transform"]["p90"] == pytest.approx(3.8)
    assert c["latency_us"]["postprocess"]["max"] == 5.5 and c["latency_us"]["projection"]["mean"] == 1.0
    assert c["latency_us"]["e2e"]["mean"] == pytest.approx((16.0 + 41.0) / 2)
    assert c["qps_serial"] == pytest.approx(1e6 / 28.5)
    assert c["stage_losses"] == {"cap": 1}
    assert c["doc"]["RR"] == 1.0 and c["chunk"]["RR"] == 0.5  # e#chunk-0 at rank 2; documents d, e
    old = summary["old"]
    # legacy: one block kb/d.md carrying two chunk references, neither maps 1:1
    assert old["evidence_guard_1to1"] == 0.0 and old["cap_compliance"] == 0.0
    assert old["qps_serial"] == pytest.approx(1e6 / old["latency_us"]["e2e"]["mean"])
    idle = summary["idle"]  # a config without rows: every statistic undefined, nothing raises
    assert idle["queries"] == 0 and math.isnan(idle["payload"]["chars_p50"]) and math.isnan(idle["qps_serial"])
    assert math.isnan(idle["latency_us"]["search"]["p95"]) and math.isnan(idle["evidence_guard_1to1"])
    assert len(per_query) == 3 and "_pairs" not in per_query.columns


def test_the_summary_as_a_table() -> None:
    summary, _ = summarize(as_table(_table()), configs=CONFIGS, cutoffs=[1, 3])
    frame = summary_frame(summary)
    assert frame.index.name == "config" and list(frame.index) == ["c", "old", "idle"]
    assert frame.loc["c", "queries"] == 2 and frame.loc["c", "doc:RR"] == 1.0
    assert frame.loc["c", "payload:blocks_p50"] == 3.0
    assert frame.loc["c", "latency:search:p50"] == 20.0
    # a stage that lost nothing in a config counts 0 there, as an integer
    assert frame["lost:cap"].tolist() == [1, 0, 0] and frame["lost:cap"].dtype.kind == "i"
    assert "cap_violations" not in frame.columns and frame.loc["old", "n_cap_violations"] == 1


def test_without_any_judged_query_the_standard_measures_are_undefined() -> None:
    rows = [worked_row("u1", labelled=False), worked_row("u2", labelled=False)]
    summary, _ = summarize(as_table(rows), configs=CONFIGS[:1], cutoffs=[1])
    assert math.isnan(summary["c"]["chunk"]["P@1"]) and math.isnan(summary["c"]["doc"]["RR"])
    assert summary["c"]["judged_queries"] == 0


def test_cap_violations_are_counted_all_and_listed_up_to_fifty() -> None:
    legacy = RagConfig.from_mapping({"rag.pipeline": "legacy", "rag.top-k": 5})
    record = replay_record(legacy, [(D0, 0.9), (D1, 0.8)])
    truth = truth_for([D0, D1], {})
    rows = [
        build_row(
            query_id=f"q{i}", query_index=i, config="old", record=record, truth=truth, timing=RowTiming(search_us=1.0)
        )
        for i in range(51)
    ]
    summary, _ = summarize(as_table(rows), configs=CONFIGS[1:2], cutoffs=[1])
    old = summary["old"]
    assert old["n_cap_violations"] == 51 and len(old["cap_violations"]) == 50
    assert old["cap_violations"][0] == {"query_id": "q0", "doc_id": "d", "chunks": 2, "cap": 1}


def test_every_kind_of_summary_entry_becomes_named_columns() -> None:
    summary = {
        "c": {
            "queries": 2,
            "chunk": {"P@1": 0.5},
            "doc": {"P@1": 1.0},
            "payload": {"chars_p50": 40.0},
            "latency_us": {"search": {"p50": 20.0}},
            "stage_losses": {"cap": 1},
            # the replay adds how search was timed and the configs that share its timing (a list)
            "search_latency": {"timed_queries": 2, "timed_search": "all", "shared_with": ["b", "d"]},
            "content_duplicates": {"total": 3, "by_cause": {COPY: 2, SAME_TEXT: 1}, "by_key_kind": {"vector": 3}},
            "cap_violations": [{"query_id": "q", "doc_id": "d", "chunks": 3, "cap": 2}],
            "true_cap_violations": [{"query_id": "q", "doc_id": "d", "chunks": 3, "cap": 2}],
            "n_true_cap_violations": 1,
        },
        "b": {"queries": 1, "stage_losses": {}},
    }
    frame = summary_frame(summary)
    assert list(frame.columns) == [
        "queries",
        "chunk:P@1",
        "doc:P@1",
        "payload:chars_p50",
        "latency:search:p50",
        "lost:cap",
        "search_latency:timed_queries",
        "search_latency:timed_search",
        "search_latency:shared_with",
        "content_duplicates",
        f"content_duplicates:cause:{COPY}",
        f"content_duplicates:cause:{SAME_TEXT}",
        "content_duplicates:key_kind:vector",
        "n_true_cap_violations",
    ]
    c = frame.loc["c"]
    assert c["search_latency:shared_with"] == "b, d" and c["search_latency:timed_search"] == "all"
    assert c["content_duplicates"] == 3 and c[f"content_duplicates:cause:{COPY}"] == 2
    assert frame["lost:cap"].tolist() == [1, 0] and frame.index.tolist() == ["c", "b"]


def test_a_logs_measures_are_columns_under_traffic() -> None:
    """A config's ``traffic`` block (a query log's label-free measures) is flattened as the config's own are,
    each column named ``traffic:`` and the config's column name."""
    configs = {
        "c": {"queries": 2, "payload": {"chars_p50": 10.0}, "stage_losses": {"cap": 1},
              "traffic": {"payload_changed": 0.25, "payload": {"chars_p50": 30.0}, "stage_losses": {"cap": 2}}},
        "d": {"queries": 2, "payload": {"chars_p50": 12.0}, "stage_losses": {}},
    }  # fmt: skip
    frame = summary_frame(configs)
    assert frame.loc["c", "traffic:payload_changed"] == 0.25 and frame.loc["c", "traffic:payload:chars_p50"] == 30.0
    assert frame.loc["c", "traffic:lost:cap"] == 2 and frame.loc["c", "payload:chars_p50"] == 10.0
    assert "traffic" not in frame.columns and math.isnan(frame.loc["d", "traffic:payload_changed"])
