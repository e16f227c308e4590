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


def test_rows_of_lookups_sharing_their_hits_are_each_lookups_own_row_and_share_the_hit_lists() -> None:
    """``build_rows`` makes the hit columns once for lookups of the same tuple of hits (configs sharing a search),
    and the rows equal ``build_row``'s one by one: two configs on one tuple, a third on a tuple of equal hits but
    another object (its own lists), a fourth on other hits, duplicates and a doc-less row among the hits."""
    from rag_eval.core.lookup import Pipeline
    from rag_eval.rundir.rows import RowLookup, RowTiming, build_row, build_rows

    from ..rowkit import HINTS, as_hit, truth_for

    kept = [stored(1, "d#chunk-0"), stored(2, "d#chunk-0", chunk_index=False), stored(3, "e#chunk-1", doc_id=False),
            stored(4, "d#chunk-1")]  # fmt: skip
    scored = [(kept[0], 0.9), (kept[1], 0.9), (kept[2], 0.7), (kept[0], 0.6), (kept[3], 0.5)]
    hits = tuple(as_hit(row, score) for row, score in scored)
    truth = truth_for(kept, {"d#chunk-1": 1, "e#chunk-1": 2})
    configs = {"evidence": RagConfig(return_n=2), "legacy": RagConfig.from_mapping({"rag.pipeline": "legacy-merge"})}
    lookups = [RowLookup("q", 0, name, Pipeline(config).process(HINTS, hits), RowTiming(search_us=5.0))
               for name, config in configs.items()]  # fmt: skip
    again = tuple(as_hit(row, score) for row, score in scored)
    lookups.append(RowLookup("q", 0, "evidence-2", Pipeline(configs["evidence"]).process(HINTS, again),
                             RowTiming(search_us=6.0, cpu_us=2.0)))  # fmt: skip
    lookups.append(RowLookup("q", 0, "legacy-3", Pipeline(configs["legacy"]).process(HINTS, hits[2:]),
                             RowTiming(search_us=7.0)))  # other hits: a wider search's tail  # fmt: skip
    rows = build_rows(lookups, truth)
    one_by_one = [build_row(query_id=lk.query_id, query_index=lk.query_index, config=lk.config, record=lk.record,
                            truth=truth, timing=lk.timing) for lk in lookups]  # fmt: skip
    assert _same(rows_to_table(rows), rows_to_table(one_by_one))
    assert rows[0]["hit_keys"] is rows[1]["hit_keys"] and rows[0]["hit_content_sha"] is rows[1]["hit_content_sha"]
    assert rows[2]["hit_keys"] is not rows[0]["hit_keys"] and rows[2]["hit_keys"] == rows[0]["hit_keys"]
    assert rows[0]["returned_keys"] != rows[1]["returned_keys"]  # the configs' own columns stay their own
    assert build_rows([], truth) == []


def test_configs_sharing_a_search_in_a_replay_get_the_same_tuple_of_hits() -> None:
    """What lets ``build_rows`` share: a replay hands every config of one search signature and width the same tuple."""
    from rag_eval.experiment.model import ConfigSpec
    from rag_eval.replay.batches import Replayer

    from ..rowkit import as_hit, truth_for

    kept = [stored(i, f"d#chunk-{i}") for i in range(1, 6)]
    hits = tuple(as_hit(row, 1 - i / 10) for i, row in enumerate(kept))

    class Port:
        def search(self, request):  # type: ignore[no-untyped-def]
            return hits[: request.top_k]

    configs = [ConfigSpec(name="evidence", config=RagConfig(return_n=2)),
               ConfigSpec(name="legacy", config=RagConfig.from_mapping({"rag.pipeline": "legacy-merge"}))]  # fmt: skip
    replayer = Replayer(port=Port(), configs=configs, truth=truth_for(kept, {}))
    looked = replayer.lookups([(0, "q", "replica lag")])
    assert len(looked) == 2 and looked[0][3].candidates.hits is looked[1][3].candidates.hits
