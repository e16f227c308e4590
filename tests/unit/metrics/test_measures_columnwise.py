"""The column-wise measures equal the row-by-row definitions (kept in ``rowwise_measures``) on
generated per-query tables full of the awkward cases: repeated keys and chunks, re-ingested copies,
the same text in other chunks, unknown chunks, unjudged queries, grades 0 and 2, empty payloads,
queries with more relevant chunks than a cutoff, several configs with and without caps."""

from __future__ import annotations

from typing import Any
from unittest import mock

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rag_eval.metrics import columns, measures, perquery
from rag_eval.rundir.rows import SCHEMA
from tests.benchmarks import synthetic
from tests.budget import examples

from .. import rowwise_measures
from ..frames import per_query_frame
from ..measures_equivalence import assert_same_measures

CHUNKS = [f"d{d}#chunk-{c}" for d in range(3) for c in range(3)] + ["unknown:9", "x#chunk-1#chunk-2"]
KEYS = ["d0#chunk-0", "d0#chunk-1", "vector:4", "vector:5", "rank:2", "d1#chunk-0"]
SHAS = ["s1", "s2", "s3"]


@st.composite
def rows(draw: st.DrawFn, query: str, config: str) -> dict[str, object]:
    n_members = draw(st.integers(0, 12))
    n_hits = draw(st.integers(0, 12))
    relevant = sorted(set(draw(st.lists(st.sampled_from(CHUNKS[:-2] + CHUNKS[-1:]), max_size=7))))
    grades = [draw(st.sampled_from([0, 1, 1, 2])) for _ in relevant]
    docs = sorted({measures.doc_of(c) for c in relevant})
    members = [draw(st.sampled_from(CHUNKS)) for _ in range(n_members)]
    return {
        "query_id": query,
        "config": config,
        "judged": bool(relevant),
        "member_keys": [draw(st.sampled_from(KEYS)) for _ in range(n_members)],
        "member_chunks": members,
        "member_doc_ids": [draw(st.sampled_from(["d0", "d1", ""])) for _ in range(n_members)],
        "member_content_sha": [draw(st.sampled_from(SHAS)) for _ in range(n_members)],
        "hit_keys": [draw(st.sampled_from(KEYS)) for _ in range(n_hits)],
        "hit_content_sha": [draw(st.sampled_from(SHAS)) for _ in range(n_hits)],
        "relevant_chunks": relevant,
        "relevant_grades": grades,
        "relevant_docs": docs,
        "relevant_doc_grades": [draw(st.sampled_from([0, 1, 3])) for _ in docs],
        "delivered_relevant": sorted(c for c in relevant if c in members),
        "lost_stages": draw(st.lists(st.sampled_from(["cap", "dedup", "not_retrieved", "return_n"]), max_size=3)),
        "guard_references": draw(st.integers(0, 6)),
        "guard_violations": draw(st.integers(0, 2)),
        "n_blocks": draw(st.integers(0, 6)),
        "payload_chars": draw(st.integers(0, 900)),
        **{
            col: draw(st.floats(0, 1e4))
            for col in ("search_us", "postprocess_us", "projection_us", "transform_us", "postsearch_cpu_us")
        },
        "e2e_us": draw(st.floats(1, 1e5)),
    }


@st.composite
def tables(draw: st.DrawFn) -> pd.DataFrame:
    configs = ["a", "b"]
    queries = [f"q{i}" for i in range(draw(st.integers(1, 6)))]
    return pd.DataFrame([draw(rows(q, c)) for c in configs for q in queries])


CONFIGS = [
    {"name": "a", "cap": 2, "cap_source": "config", "cap_aware": 2, "return_n": 5},
    {"name": "b", "cap": None, "cap_aware": None, "return_n": 3},
]


@settings(max_examples=examples(150), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(tables(), st.sampled_from([(1, 3, 5, 10), (2,), (1, 20)]))
def test_column_wise_measures_equal_the_row_by_row_definitions(table: pd.DataFrame, cutoffs: tuple[int, ...]) -> None:
    assert_same_measures(table, CONFIGS, cutoffs)


@settings(max_examples=examples(60), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(tables(), st.sampled_from([1, 2, 5]))
def test_rows_coded_a_few_at_a_time_give_the_row_by_row_measures(table: pd.DataFrame, code_rows: int) -> None:
    with mock.patch.object(columns, "CODE_ROWS", code_rows):  # a vocabulary per slice of rows
        assert_same_measures(table, CONFIGS, (1, 3, 5, 10))


def test_a_batch_of_one_origin_is_passed_on_without_a_copy_and_a_mixed_one_filtered() -> None:
    table = synthetic.per_query_table(6)
    one = next(perquery.of_origin([table], "labelled", ["query_id", "member_keys"]))
    buffers = [t.column("member_keys").chunk(0).buffers()[1].address for t in (one, table)]
    assert buffers[0] == buffers[1]  # the same memory
    assert next(perquery.of_origin([table], "traffic", ["query_id"])).num_rows == 0
    origins = pa.array(["labelled", "traffic", None, "traffic", "labelled", "labelled"])
    mixed = table.set_column(table.schema.get_field_index("origin"), "origin", origins)
    assert next(perquery.of_origin([mixed], "traffic", ["query_id"])).column("query_id").to_pylist() == ["q1", "q3"]
    labelled = next(perquery.of_origin([mixed], "labelled", ["query_id", "origin"]))
    assert labelled.column("query_id").to_pylist() == ["q0", "q2", "q4", "q5"]
    assert labelled.column_names == ["query_id", "origin"]


@settings(max_examples=examples(5), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(tables())
def test_arrow_and_pandas_tables_give_the_same_measures(table: pd.DataFrame) -> None:
    arrow = measures.as_arrow(table, [f.name for f in SCHEMA])
    one, frame_one = measures.summarize(table, configs=CONFIGS, cutoffs=(1, 3))
    two, frame_two = measures.summarize(arrow, configs=CONFIGS, cutoffs=(1, 3))
    assert repr(one) == repr(two)
    pd.testing.assert_frame_equal(frame_one, frame_two)


def test_a_query_with_eight_or_more_pairs_averages_them_as_numpy_does() -> None:
    # ten documents with 2-7 relevant chunks, 1-2 delivered: these recalls added left to right
    # differ in the last bit from numpy's pairwise sum, which the row-by-row definition used
    sizes, got = [2, 3, 5, 3, 7, 3, 3, 3, 2, 5], [2, 2, 1, 1, 1, 1, 1, 1, 2, 1]
    relevant = [f"d{d}#chunk-{c}" for d, n in enumerate(sizes) for c in range(n)]
    delivered = [f"d{d}#chunk-{c}" for d, n in enumerate(got) for c in range(n)]
    recalls = [g / n for g, n in zip(got, sizes, strict=True)]
    left_to_right = 0.0
    for r in recalls:
        left_to_right += r
    assert left_to_right / 10 != float(np.mean(recalls))
    row = {
        "query_id": "q",
        "config": "a",
        "judged": True,
        "member_keys": delivered,
        "member_chunks": delivered,
        "member_doc_ids": [measures.doc_of(c) for c in delivered],
        "member_content_sha": delivered,
        "hit_keys": [],
        "hit_content_sha": [],
        "relevant_chunks": relevant,
        "relevant_grades": [1] * len(relevant),
        "relevant_docs": [f"d{d}" for d in range(10)],
        "relevant_doc_grades": [1] * 10,
        "delivered_relevant": sorted(delivered),
    }
    frame = per_query_frame(pd.DataFrame([row]), [5], {"a": None})
    assert frame.loc[0, "same_doc_pairs"] == 10
    assert frame.loc[0, "same_doc_recall"] == float(np.mean(recalls))


def test_values_per_row_of_a_list_column_count_a_null_list_as_empty() -> None:
    table = pa.Table.from_batches(
        [pa.record_batch({"a": pa.array([["x", "y"], None, [], ["z"]], pa.list_(pa.string()))})]
    ).append_column(
        "b",
        pa.chunked_array([pa.array([[1], [2, 3]], pa.list_(pa.int32())), pa.array([[], [4]], pa.list_(pa.int32()))]),
    )
    rows, values = columns.flat_values(table, "a")
    assert rows.tolist() == [0, 0, 3] and rows.dtype == np.int64 and values.to_pylist() == ["x", "y", "z"]
    rows, values = columns.flat_values(table, "b")  # several chunks, read as one
    assert rows.tolist() == [0, 1, 1, 3] and values.to_pylist() == [1, 2, 3, 4]


@settings(max_examples=examples(100), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(rows("q", "a"), st.sampled_from([None, 1, 2, 3]))
def test_the_definitions_on_one_row_give_what_the_row_by_row_oracle_gives(row: dict[str, Any], cap: int | None) -> None:
    assert measures.same_doc_pairs_of_row(row, cap) == rowwise_measures.same_doc_pairs(row, cap)
    assert measures.chunk_ranking(row) == rowwise_measures.chunk_ranking(row)
    assert measures.doc_ranking(row) == rowwise_measures.doc_ranking(row)


def test_a_stream_of_no_parts_is_measured_as_the_empty_table() -> None:
    empty = SCHEMA.empty_table()
    summary_of_table, per_query_of_table = measures.summarize(empty, configs=CONFIGS, cutoffs=(1, 5))
    summary_of_stream, per_query_of_stream = measures.summarize(iter([]), configs=CONFIGS, cutoffs=(1, 5))
    assert per_query_of_table.empty and per_query_of_stream.empty
    assert list(per_query_of_stream.columns) == list(per_query_of_table.columns)
    assert summary_of_stream.keys() == summary_of_table.keys() == {"a", "b"}
    assert summary_of_stream["a"]["queries"] == 0
    values = measures.query_values(iter([]), configs=CONFIGS, cutoffs=(1, 5))
    assert values.empty
    assert list(values.columns) == list(measures.query_values(empty, configs=CONFIGS, cutoffs=(1, 5)).columns)


@settings(max_examples=examples(40), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(tables(), st.sampled_from([(1, 3, 5, 10), (2,), (1, 20)]))
def test_standard_measures_alone_equal_those_of_every_measure(table: pd.DataFrame, cutoffs: tuple[int, ...]) -> None:
    arrow = measures.as_arrow(table, [f.name for f in SCHEMA])
    alone = perquery.standard_measures(arrow, cutoffs)
    _, every = measures.summarize(arrow, configs=CONFIGS, cutoffs=cutoffs)
    chunk = [c for c in every.columns if c.startswith("chunk:")]
    assert sorted(alone.columns) == sorted(chunk)
    pd.testing.assert_frame_equal(alone[chunk], every[chunk].reset_index(drop=True), check_exact=True)


def test_standard_measures_of_several_batches_are_indexed_by_row(monkeypatch: pytest.MonkeyPatch) -> None:
    table = synthetic.per_query_table(10)
    whole = perquery.standard_measures(table, (1, 5))
    monkeypatch.setattr(perquery, "BATCH_ROWS", 3)  # four batches
    batched = perquery.standard_measures(table, (1, 5))
    assert list(batched.index) == list(range(10))  # the rows' own index, not each batch's
    pd.testing.assert_frame_equal(batched, whole, check_exact=True)
