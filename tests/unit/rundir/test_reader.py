"""The one reader of a run directory: each JSON file's one-line errors (either kind), the shape checks of
compare.json and load.json, a finished run's documents and rows (a column an older run lacks read as
nulls), and a report's rows of some queries."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from rag_eval.core.errors import InputError, ReportInputError, RunDirectoryError
from rag_eval.rundir import reader
from rag_eval.rundir.directory import MARKER
from rag_eval.rundir.reader import (
    FinishedRun,
    check_compare,
    check_load,
    check_run_dir,
    read_json,
    read_load,
    read_parquet,
    run_started,
)
from rag_eval.rundir.rows import SCHEMA
from tests.unit.runs import config, make_run, row

KINDS = [RunDirectoryError, ReportInputError]


def finished_run(directory: Path, queries: int = 3) -> Path:
    rows = [row(f"q{i}", "a", delivered=[f"d{i}#chunk-0"], relevant=[f"d{i}#chunk-0"]) for i in range(queries)]
    make_run(rows, [config("a")], baseline="a", directory=directory)
    return directory


def raised(expected: type[InputError], call: Any, /, *args: Any, **kwargs: Any) -> str:
    with pytest.raises(expected) as err:
        call(*args, **kwargs)
    assert type(err.value) is expected
    assert err.value.exit_code == 2
    return str(err.value)


# read_json ------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("kind", KINDS)
def test_read_json_names_a_missing_file(tmp_path: Path, kind: type[InputError]) -> None:
    path = tmp_path / "summary.json"
    assert raised(kind, read_json, path, error=kind) == f"{path}: not found: is this a run directory?"


@pytest.mark.parametrize("kind", KINDS)
def test_read_json_names_a_file_it_cannot_read(tmp_path: Path, kind: type[InputError]) -> None:
    path = tmp_path / "summary.json"
    path.mkdir()  # a directory where the file should be
    assert raised(kind, read_json, path, error=kind) == f"{path}: cannot read: Is a directory"


@pytest.mark.parametrize("kind", KINDS)
def test_read_json_names_the_line_of_invalid_json(tmp_path: Path, kind: type[InputError]) -> None:
    path = tmp_path / "manifest.json"
    path.write_text('{\n"a": 1\n"b": 2}', encoding="utf-8")  # the comma missing at the start of line 3
    assert raised(kind, read_json, path, error=kind) == f"{path}: not valid JSON (line 3: Expecting ',' delimiter)"


@pytest.mark.parametrize("kind", KINDS)
def test_read_json_says_a_file_is_not_utf8(tmp_path: Path, kind: type[InputError]) -> None:
    path = tmp_path / "manifest.json"
    path.write_bytes(b'{"a": "\xff"}')
    assert raised(kind, read_json, path, error=kind) == f"{path}: not valid JSON (not UTF-8)"


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("text", ["[1, 2]", '"text"', "3", "null"])
def test_read_json_refuses_what_is_not_an_object(tmp_path: Path, kind: type[InputError], text: str) -> None:
    path = tmp_path / "summary.json"
    path.write_text(text, encoding="utf-8")
    assert raised(kind, read_json, path, error=kind) == f"{path}: expected a JSON object"


def test_read_json_reads_an_object_and_defaults_to_the_run_directory_error(tmp_path: Path) -> None:
    path = tmp_path / "summary.json"
    path.write_text('{"a": [1, 2.5, null], "b": {"c": "\u00e9"}}', encoding="utf-8")
    assert read_json(path) == {"a": [1, 2.5, None], "b": {"c": "é"}}
    raised(RunDirectoryError, read_json, tmp_path / "none.json")


# check_compare --------------------------------------------------------------------------------------------


def compare_doc(**changes: Any) -> dict[str, Any]:
    metric = {"metric": "recall@5", "baseline": 0.5, "candidate": 0.75, "delta": 0.25, "ci_low": None, "ci_high": 1}
    comp = {"baseline": "a", "candidate": "b", "metrics": [metric], "gates": [{"outcome": "pass"}]}
    return {"schema_version": 1, "comparisons": [comp], "exit_code": 0, **changes}


def with_comp(**changes: Any) -> dict[str, Any]:
    doc = compare_doc()
    doc["comparisons"][0].update(changes)
    return doc


def test_a_well_formed_compare_json_is_returned_as_it_is() -> None:
    doc = compare_doc()
    assert check_compare(doc, "c.json") == doc
    assert check_compare(compare_doc(exit_code=None, comparisons=[]), "c.json")["comparisons"] == []


@pytest.mark.parametrize(
    ("doc", "message"),
    [
        ({"schema_version": 1}, "c.json: field 'comparisons': missing"),
        (compare_doc(comparisons={}), "c.json: field 'comparisons': expected list, got {}"),
        (compare_doc(schema_version=2), "c.json: unsupported schema version 2"),
        ({"comparisons": []}, "c.json: unsupported schema version None"),
        (compare_doc(comparisons=[3]), "c.json: field 'comparisons[0]': expected an object"),
        (with_comp(baseline=None), "c.json: field 'comparisons[0].baseline': expected str, got None"),
        ({**compare_doc(), "comparisons": [{"baseline": "a"}]}, "c.json: field 'comparisons[0].candidate': missing"),
        (with_comp(metrics=None), "c.json: field 'comparisons[0].metrics': expected list, got None"),
        (with_comp(metrics=["m"]), "c.json: field 'comparisons[0].metrics[0]': expected an object"),
        (with_comp(metrics=[{"metric": 5}]), "c.json: field 'comparisons[0].metrics[0].metric': expected str, got 5"),
        (with_comp(gates=[{}]), "c.json: field 'comparisons[0].gates[0].outcome': missing"),
        (with_comp(gates=[[]]), "c.json: field 'comparisons[0].gates[0]': expected an object"),
        (
            with_comp(gates=[{"outcome": "pass"}, {"outcome": "maybe"}]),
            "c.json: field 'comparisons[0].gates[1].outcome': unknown outcome 'maybe'",
        ),
        (compare_doc(exit_code=True), "c.json: field 'exit_code': expected an integer, got True"),
        (compare_doc(exit_code="1"), "c.json: field 'exit_code': expected an integer, got '1'"),
    ],
)
def test_a_malformed_compare_json_names_the_field(doc: dict[str, Any], message: str) -> None:
    assert raised(ReportInputError, check_compare, doc, "c.json") == message


@pytest.mark.parametrize(("value", "shown"), [("0.5", "'0.5'"), (True, "True"), ([1], "[1]")])
def test_a_metric_value_that_is_no_number_names_the_field(value: Any, shown: str) -> None:
    doc = compare_doc()
    doc["comparisons"][0]["metrics"][0]["delta"] = value
    message = raised(ReportInputError, check_compare, doc, "c.json")
    assert message.startswith("c.json: field 'comparisons[0].metrics[0].delta': expected ")
    assert message.endswith(f", got {shown}")


# check_load and read_load ---------------------------------------------------------------------------------


def load_doc(**entry: Any) -> dict[str, Any]:
    result = {"config": "a", "concurrency": 4, "rounds": [], "latency_us": {"p50": 10.0}, **entry}
    return {"schema_version": 1, "results": [result]}


@pytest.mark.parametrize(
    ("doc", "message"),
    [
        ([], "load.json: expected a JSON object"),
        ({"results": []}, "load.json: unsupported schema version None"),
        ({"schema_version": "1", "results": []}, "load.json: unsupported schema version '1'"),
        ({"schema_version": 1}, "load.json: missing 'results' (a list)"),
        ({"schema_version": 1, "results": {}}, "load.json: missing 'results' (a list)"),
        ({"schema_version": 1, "results": ["a"]}, "load.json: results[0]: expected an object"),
        ({"schema_version": 1, "results": [{"config": "a"}]}, "load.json: results[0]: missing 'concurrency'"),
        (load_doc(config=1), "load.json: results[0].config: expected str"),
        (load_doc(concurrency=True), "load.json: results[0].concurrency: expected int"),
        (load_doc(concurrency=4.0), "load.json: results[0].concurrency: expected int"),
        (load_doc(rounds=()), "load.json: results[0].rounds: expected list"),
        (load_doc(latency_us=[10.0]), "load.json: results[0].latency_us: expected Mapping"),
    ],
)
def test_a_malformed_load_json_names_the_field(doc: Any, message: str) -> None:
    assert raised(RunDirectoryError, check_load, doc, "load.json") == message


def test_a_well_formed_load_json_is_returned_as_it_is() -> None:
    doc = {**load_doc(), "run": {"started": "t"}}
    assert check_load(doc, "load.json") == doc
    assert check_load({"schema_version": 1, "results": []}, "load.json") == {"schema_version": 1, "results": []}


def test_read_load_of_a_directory_without_one_is_none(tmp_path: Path) -> None:
    assert read_load(tmp_path) is None
    (tmp_path / "load.json").mkdir()  # not a file either
    assert read_load(tmp_path, error=ReportInputError) is None


def test_read_load_reads_and_checks_the_file(tmp_path: Path) -> None:
    (tmp_path / "load.json").write_text(json.dumps(load_doc()), encoding="utf-8")
    assert read_load(str(tmp_path)) == load_doc()


@pytest.mark.parametrize("kind", KINDS)
def test_read_load_names_the_field_of_a_malformed_file_in_either_kind(tmp_path: Path, kind: type[InputError]) -> None:
    path = tmp_path / "load.json"
    path.write_text(json.dumps(load_doc(concurrency="4")), encoding="utf-8")
    assert raised(kind, read_load, tmp_path, error=kind) == f"{path}: results[0].concurrency: expected int"
    path.write_text("{", encoding="utf-8")
    message = raised(kind, read_load, tmp_path, error=kind)
    assert message == f"{path}: not valid JSON (line 1: Expecting property name enclosed in double quotes)"


def test_read_load_as_a_report_error_keeps_a_path_that_holds_a_colon(tmp_path: Path) -> None:
    directory = tmp_path / "run: 2"
    directory.mkdir()
    (directory / "load.json").write_text(json.dumps(load_doc(concurrency="4")), encoding="utf-8")
    message = raised(ReportInputError, read_load, directory, error=ReportInputError)
    assert message == f"{directory / 'load.json'}: results[0].concurrency: expected int"


# run_started and check_run_dir ----------------------------------------------------------------------------


def test_run_started_is_the_start_and_fingerprint_of_a_finished_run(tmp_path: Path) -> None:
    run = finished_run(tmp_path / "run")
    assert run_started(run) == {"started": "2026-01-01T00:00:00+00:00", "fingerprint": None}
    manifest = json.loads((run / "manifest.json").read_text(encoding="utf-8"))
    (run / "manifest.json").write_text(json.dumps({**manifest, "fingerprint": "f1"}), encoding="utf-8")
    assert run_started(run) == {"started": "2026-01-01T00:00:00+00:00", "fingerprint": "f1"}


def test_run_started_is_none_without_a_finished_run(tmp_path: Path) -> None:
    assert run_started(tmp_path) is None  # empty
    run = finished_run(tmp_path / "run")
    (run / MARKER).unlink()
    assert run_started(run) is None  # unfinished
    (run / MARKER).write_text("{}", encoding="utf-8")
    (run / "manifest.json").unlink()
    assert run_started(run) is None  # no manifest


def test_check_run_dir_names_the_missing_files(tmp_path: Path) -> None:
    advice = "give a directory written by `rag-eval run`"
    message = raised(RunDirectoryError, check_run_dir, tmp_path)
    assert message == f"{tmp_path}: not a run directory (no per_query.parquet, summary.json, manifest.json): {advice}"
    run = finished_run(tmp_path / "run")
    (run / "manifest.json").unlink()
    assert raised(RunDirectoryError, check_run_dir, run) == f"{run}: not a run directory (no manifest.json): {advice}"


def test_check_run_dir_refuses_an_unfinished_run_and_accepts_a_finished_one(tmp_path: Path) -> None:
    run = finished_run(tmp_path / "run")
    assert check_run_dir(run) is None
    (run / MARKER).unlink()
    assert raised(RunDirectoryError, check_run_dir, run) == (
        f"{run}: the run's files were not all published (no run.complete.json: it stopped while writing them): "
        "run it again"
    )


# FinishedRun ----------------------------------------------------------------------------------------------


def test_a_finished_run_reads_its_documents_and_the_columns_its_rows_hold(tmp_path: Path) -> None:
    run = finished_run(tmp_path / "run")
    found = FinishedRun.read(run)
    assert found.dir == run
    assert found.summary == json.loads((run / "summary.json").read_text(encoding="utf-8"))
    assert found.manifest["started"] == "2026-01-01T00:00:00+00:00"
    assert found.columns == frozenset(SCHEMA.names)
    assert found.table(["query_id", "no_such_column"]).to_pydict() == {"query_id": ["q0", "q1", "q2"]}


def test_a_finished_run_whose_rows_are_not_parquet_is_one_error(tmp_path: Path) -> None:
    run = finished_run(tmp_path / "run")
    (run / "per_query.parquet").write_bytes(b"not parquet")
    message = raised(RunDirectoryError, FinishedRun.read, run)
    assert message.startswith(f"{run}: cannot read the run: ")
    raised(RunDirectoryError, FinishedRun.read, tmp_path / "none")


def test_batches_read_only_the_columns_asked_and_a_column_an_older_run_lacks_as_nulls(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    run = finished_run(tmp_path / "run", queries=5)
    table = pq.read_table(run / "per_query.parquet")
    pq.write_table(table.drop_columns(["postsearch_cpu_us", "e2e_us"]), run / "per_query.parquet")  # an older run
    found = FinishedRun.read(run)
    assert "postsearch_cpu_us" not in found.columns and "query_id" in found.columns
    monkeypatch.setattr(reader, "BATCH_ROWS", 2)
    batches = list(found.batches(["query_id", "postsearch_cpu_us", "transform_us", "not_in_the_schema"]))
    assert [b.num_rows for b in batches] == [2, 2, 1]
    assert [b.column_names for b in batches] == [["query_id", "transform_us", "postsearch_cpu_us"]] * 3
    joined = pa.concat_tables(batches)
    assert joined.column("query_id").to_pylist() == ["q0", "q1", "q2", "q3", "q4"]
    assert joined.column("transform_us").to_pylist() == [10.0] * 5
    assert joined.column("postsearch_cpu_us").to_pylist() == [None] * 5
    assert joined.schema.field("postsearch_cpu_us").type == pa.float64()


def test_batches_of_a_run_damaged_after_it_was_read_is_one_error(tmp_path: Path) -> None:
    run = finished_run(tmp_path / "run")
    found = FinishedRun.read(run)
    (run / "per_query.parquet").write_bytes(b"cut")
    message = raised(RunDirectoryError, lambda: list(found.batches(["query_id"])))
    assert message.startswith(f"{run}: cannot read the run: ")
    assert raised(RunDirectoryError, found.table, ["query_id"]).startswith(f"{run}: cannot read the run: ")


# read_parquet ---------------------------------------------------------------------------------------------


def rows_file(path: Path) -> Path:
    pq.write_table(
        pa.table({"query_id": ["q1", "q2", "q3", "q1"], "config": ["a", "a", "a", "b"], "x": [1, 2, 3, 4]}),
        path,
        row_group_size=2,
    )
    return path


def test_read_parquet_reads_the_columns_it_has(tmp_path: Path) -> None:
    path = rows_file(tmp_path / "rows.parquet")
    assert read_parquet(path).to_dict("list") == {
        "query_id": ["q1", "q2", "q3", "q1"], "config": ["a", "a", "a", "b"], "x": [1, 2, 3, 4],
    }  # fmt: skip
    assert read_parquet(path, columns=["x", "absent", "query_id"]).to_dict("list") == {
        "query_id": ["q1", "q2", "q3", "q1"], "x": [1, 2, 3, 4],
    }  # fmt: skip


def test_read_parquet_keeps_only_the_rows_of_the_queries_asked_in_file_order(tmp_path: Path) -> None:
    path = rows_file(tmp_path / "rows.parquet")
    got = read_parquet(path, columns=["query_id", "x"], query_ids=["q3", "q1", "q9"])
    assert got.to_dict("list") == {"query_id": ["q1", "q3", "q1"], "x": [1, 3, 4]}
    none = read_parquet(path, columns=["query_id", "x"], query_ids=[])
    assert none.to_dict("list") == {"query_id": [], "x": []}


def test_read_parquet_of_no_rows_keeps_only_the_columns_asked(tmp_path: Path) -> None:
    path = tmp_path / "empty.parquet"
    pq.write_table(pa.table({"query_id": pa.array([], pa.string()), "x": pa.array([], pa.int64())}), path)
    assert list(read_parquet(path, columns=["query_id"], query_ids=["q1"]).columns) == ["query_id"]


def test_read_parquet_names_a_missing_file(tmp_path: Path) -> None:
    missing = tmp_path / "texts.parquet"
    assert raised(ReportInputError, read_parquet, missing) == f"{missing}: not found: is this a run directory?"
    assert raised(ReportInputError, read_parquet, missing, query_ids=["q1"]).endswith(
        ": not found: is this a run directory?"
    )


@pytest.mark.parametrize("content", [b"", b"query_id\nq1\n"])
def test_read_parquet_names_a_file_that_is_not_parquet(tmp_path: Path, content: bytes) -> None:
    foreign = tmp_path / "spans.parquet"
    foreign.write_bytes(content)
    message = raised(ReportInputError, read_parquet, foreign, query_ids=["q1"])
    assert message.startswith(f"{foreign}: cannot read as Parquet: ")
