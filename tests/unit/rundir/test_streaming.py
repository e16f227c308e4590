"""A run's rows are read one part at a time: the summary, the comparison's values and pairs, the final
per_query.parquet and the TREC runs come out the same as from the whole table in memory."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from rag_eval.core.errors import RunStoreError
from rag_eval.metrics import perquery
from rag_eval.metrics.measures import (
    PAIR_COLUMNS,
    chunk_ranking,
    doc_ranking,
    pair_frame,
    query_values,
    summarize,
)
from rag_eval.rundir.directory import RunStore, trec_scores
from rag_eval.rundir.rows import SCHEMA
from tests.benchmarks.synthetic import per_query_table

CONFIGS = [
    {"name": "a", "cap": 2, "cap_aware": 2, "return_n": 20},
    {"name": "b", "cap": None, "cap_aware": None, "return_n": 5},
]


@pytest.fixture(scope="module")
def table() -> pa.Table:
    """Two configs of 700 queries, in the order a run writes them: batch by batch, config by config."""
    a = per_query_table(700, width=8, seed=3, config="a")
    b = per_query_table(700, width=8, seed=4, config="b")
    parts = []
    for start in range(0, 700, 64):
        parts += [a.slice(start, 64), b.slice(start, 64)]
    return pa.concat_tables(parts)


def _store(tmp_path: Path, table: pa.Table) -> RunStore:
    store = RunStore(tmp_path / "run")
    store.begin({"experiment": "t"}, resume=False)
    for number, start in enumerate(range(0, table.num_rows, 128)):
        part = table.slice(start, 128)
        store.write_batch(number, part.to_pylist())
    return store


def test_the_summary_of_the_parts_is_the_summary_of_the_table(tmp_path: Path, table: pa.Table) -> None:
    store = _store(tmp_path, table)
    whole, frame = summarize(table, configs=CONFIGS, cutoffs=(1, 5))
    streamed, streamed_frame = summarize(store.iter_parts(), configs=CONFIGS, cutoffs=(1, 5))
    assert repr(streamed) == repr(whole)
    pd.testing.assert_frame_equal(streamed_frame, frame)
    pd.testing.assert_frame_equal(
        query_values(store.iter_parts(), configs=CONFIGS, cutoffs=(1, 5)),
        query_values(table.to_pandas(), configs=CONFIGS, cutoffs=(1, 5)),
    )
    caps = {"a": 2, "b": None}
    pd.testing.assert_frame_equal(pair_frame(store.iter_parts(), caps), pair_frame(table.to_pandas(), caps))


def test_per_query_parquet_and_trec_runs_are_written_part_by_part(tmp_path: Path, table: pa.Table) -> None:
    store = _store(tmp_path, table)
    store.write_per_query(store.iter_parts(), {"run": "t"})
    written = pq.read_table(store.dir / "per_query.parquet")
    assert written.to_pylist() == table.to_pylist()
    assert pq.ParquetFile(store.dir / "per_query.parquet").metadata.num_row_groups == 1  # 1,400 rows: one group
    assert b"rag_eval.provenance" in written.schema.metadata

    rankings = (
        (r["config"], r["query_id"], [(c, 1.0) for c in chunk_ranking(r)], [(d, 0.5) for d in doc_ranking(r)])
        for part in store.iter_parts(("query_id", "config", "member_chunks"))
        for r in part.to_pylist()
    )
    store.write_trec_runs(rankings, ["a", "b"])
    for name in ("a", "b"):
        rows = [r for r in table.to_pylist() if r["config"] == name]
        for suffix, rank, top in (("", chunk_ranking, 1.0), (".docs", doc_ranking, 0.5)):
            expected = [
                f"{r['query_id']} Q0 {item} {i} {score!r} {name}"
                for r in rows
                for i, (item, score) in enumerate(zip(rank(r), trec_scores([top] * len(rank(r))), strict=True), 1)
            ]
            assert (store.dir / "runs" / f"{name}{suffix}.trec").read_text().splitlines() == expected


def test_a_pair_given_twice_in_the_parts_is_refused(tmp_path: Path, table: pa.Table) -> None:
    store = _store(tmp_path, table.slice(0, 128))
    store.write_batch(7, table.slice(0, 1).to_pylist())
    with pytest.raises(RunStoreError, match="appears twice"):
        store.check_parts()


def test_the_store_reads_only_the_columns_asked_for(tmp_path: Path, table: pa.Table) -> None:
    store = _store(tmp_path, table)
    parts = list(store.iter_parts(("query_id", "config")))
    assert all(p.schema.names == ["query_id", "config"] for p in parts)
    assert sum(p.num_rows for p in parts) == table.num_rows
    assert pa.concat_tables(store.iter_parts()).schema.equals(SCHEMA)


@pytest.mark.parametrize("batch_rows", [97, 700])  # fifteen batches; two
def test_measured_batch_by_batch_the_measures_are_those_of_the_whole_table(
    monkeypatch: pytest.MonkeyPatch, table: pa.Table, batch_rows: int
) -> None:
    caps, checked = {"a": 2, "b": None}, {"a": 2, "b": 1}
    whole = perquery.compute(table, (1, 5), caps, checked)
    whole_pairs = perquery.same_doc_pairs(table, caps)
    whole_pair_frame = pair_frame(table, caps)
    whole_summary, whole_frame = summarize(table, configs=CONFIGS, cutoffs=(1, 5))
    assert all(whole_summary[c]["stage_losses"] for c in ("a", "b"))  # losses in both configs to tell apart
    assert len(whole.pairs) and len(whole.breakdown) and len(whole.over_cap)  # every kind of entry is there
    monkeypatch.setattr(perquery, "BATCH_ROWS", batch_rows)  # rows measured at once: several batches now
    batched = perquery.compute(table, (1, 5), caps, checked)
    for name in ("frame", "pairs", "breakdown", "over_cap"):
        pd.testing.assert_frame_equal(getattr(batched, name), getattr(whole, name))
    assert batched.max_doc_chunks.tolist() == whole.max_doc_chunks.tolist()
    pd.testing.assert_frame_equal(perquery.same_doc_pairs(table, caps), whole_pairs)
    pd.testing.assert_frame_equal(pair_frame(table, caps), whole_pair_frame)
    summary, frame = summarize(table, configs=CONFIGS, cutoffs=(1, 5))
    assert repr(summary) == repr(whole_summary)
    pd.testing.assert_frame_equal(frame, whole_frame)


def test_a_stream_without_parts_has_no_pairs(table: pa.Table) -> None:
    none = pair_frame(iter([]), {"a": 2})
    assert none.empty and list(none.columns) == list(PAIR_COLUMNS)
    empty = pair_frame(table.slice(0, 0), {"a": 2})  # an empty table: one empty batch, the same frame
    assert empty.empty and list(empty.columns) == list(PAIR_COLUMNS)


def test_parts_are_regrouped_into_tables_of_at_least_the_rows_asked_for(table: pa.Table) -> None:
    # tables and a file's record batches: 99 rows (one short), 1 (exactly there), twice; then 5 (the rest)
    def batch(start: int) -> pa.RecordBatch:
        return table.slice(start, 1).to_batches()[0]

    parts = [table.slice(0, 99), batch(99), table.slice(100, 99), batch(199), table.slice(200, 5)]
    grouped = list(perquery.rebatched(parts, rows=100))
    assert all(isinstance(t, pa.Table) for t in grouped)
    assert [t.num_rows for t in grouped] == [100, 100, 5]
    assert pa.concat_tables(grouped).equals(table.slice(0, 205))


def test_parts_are_regrouped_by_the_batch_size_set_when_called(
    monkeypatch: pytest.MonkeyPatch, table: pa.Table
) -> None:
    # the summary regroups its batches with the default: a batch size set later (as the batch-by-batch test
    # above sets it) must reach it, or that test would measure one batch
    monkeypatch.setattr(perquery, "BATCH_ROWS", 97)
    grouped = list(perquery.rebatched([table.slice(0, 64), table.slice(64, 64)]))
    assert [t.num_rows for t in grouped] == [128]
    grouped = list(perquery.rebatched([table.slice(start, 64) for start in range(0, 256, 64)]))
    assert [t.num_rows for t in grouped] == [128, 128]
