"""A part's table is the table ``pa.Table.from_pylist`` makes of its rows, whatever the rows hold."""

from __future__ import annotations

import math

import pyarrow as pa

from rag_eval.core.config import RagConfig
from rag_eval.rundir.rows import SCHEMA, rows_to_table

from ..rowkit import replay_row, stored


def _rows() -> list[dict[str, object]]:
    kept = [stored(1, "d#chunk-0"), stored(2, "d#chunk-0", chunk_index=False), stored(3, "e#chunk-1", doc_id=False)]
    hits = [(kept[0], 0.9), (kept[1], 0.8), (kept[2], float("nan"))]
    rows = [replay_row(RagConfig(return_n=n), hits, {"d#chunk-0": 1, "x#chunk-9": 2}) for n in (1, 3)]
    rows.append({**rows[0], "query_id": "q2", "returned_keys": [], "hit_scores": [math.inf], "search_us": None})
    return rows


def _same(a: pa.Table, b: pa.Table) -> bool:
    """Equal schemas and the same Arrow stream bytes (``Table.equals`` says a NaN is not itself)."""

    def stream(t: pa.Table) -> bytes:
        sink = pa.BufferOutputStream()
        with pa.ipc.new_stream(sink, t.schema) as writer:
            writer.write_table(t)
        return sink.getvalue().to_pybytes()

    return a.schema.equals(b.schema) and stream(a) == stream(b)


def test_the_table_is_from_pylists_column_for_column() -> None:
    rows = _rows()
    table = rows_to_table(rows)
    assert table.schema.equals(SCHEMA) and table.num_rows == len(rows)
    assert _same(table, pa.Table.from_pylist(rows, schema=SCHEMA))
    assert table.column("query_id").to_pylist() == [r["query_id"] for r in rows]
    assert math.isnan(table.column("hit_scores")[0].as_py()[-1]) and not _same(table, table.slice(1))


def test_rows_missing_a_column_or_none_at_all_are_tables_too() -> None:
    rows = _rows()
    partial = [{k: v for k, v in r.items() if k != "occurrences"} for r in rows] + [{"query_id": "only"}]
    table = rows_to_table(partial)
    assert _same(table, pa.Table.from_pylist(partial, schema=SCHEMA))
    assert table.column("occurrences").null_count == len(partial)
    assert _same(rows_to_table([]), SCHEMA.empty_table())


def test_a_log_querys_row_says_its_origin_and_how_often_it_was_asked() -> None:
    """A query of the log (in the truth's traffic, with its count) is a ``traffic`` row with its occurrences; a
    labelled query beside it is ``labelled``, asked once."""
    from dataclasses import replace

    from rag_eval.rundir.rows import RowTiming, build_row

    from ..rowkit import replay_record, truth_for

    kept = [stored(1, "d#chunk-0"), stored(2, "d#chunk-1")]
    truth = replace(truth_for(kept, {"d#chunk-0": 1}), traffic={"t1": 3})
    record = replay_record(RagConfig(return_n=2), [(kept[0], 0.9), (kept[1], 0.8)])
    rows = {q: build_row(query_id=q, query_index=i, config="c", record=record, truth=truth,
                         timing=RowTiming(search_us=1.0)) for i, q in enumerate(("q", "t1"))}  # fmt: skip
    assert (rows["t1"]["origin"], rows["t1"]["occurrences"]) == ("traffic", 3)
    assert (rows["q"]["origin"], rows["q"]["occurrences"]) == ("labelled", 1)
