"""The files a run hands to its store: each kind written atomically, a set written in order, and a set read
as one through its last file (``load.json``) written last-file-first and removed whole on a failure."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from rag_eval.core.errors import RunStoreError
from rag_eval.rundir import publish
from rag_eval.rundir.publish import JsonFile, ParquetFile, TextFile, write_artifact, write_set


def test_each_kind_of_artifact_is_written_as_its_kind(tmp_path: Path) -> None:
    text = write_artifact(tmp_path, TextFile("report.md", "# Run\n\u00e9\n"))
    assert text == tmp_path / "report.md" and text.read_bytes() == "# Run\n\u00e9\n".encode()
    doc = write_artifact(tmp_path, JsonFile("summary.json", {"a": math.nan, "b": [1, math.inf], "c": "x"}))
    assert json.loads(doc.read_text(encoding="utf-8")) == {"a": None, "b": [1, None], "c": "x"}
    table = pa.table({"query_id": ["q1", "q2"], "v": [1.5, None]})
    rows = write_artifact(tmp_path, ParquetFile("rows.parquet", table))
    assert pq.read_table(rows).equals(table)
    assert pq.ParquetFile(rows).metadata.row_group(0).column(0).compression == "ZSTD"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["report.md", "rows.parquet", "summary.json"]


def test_a_set_is_written_in_order_and_replaces_what_was_there(tmp_path: Path) -> None:
    (tmp_path / "a.md").write_text("old", encoding="utf-8")
    paths = write_set(tmp_path, [TextFile("a.md", "new"), JsonFile("sub/b.json", [1])], what="the report")
    assert paths == [tmp_path / "a.md", tmp_path / "sub" / "b.json"]
    assert (tmp_path / "a.md").read_text(encoding="utf-8") == "new"
    assert write_set(tmp_path, [], what="nothing", together=True) == []


def test_a_failure_names_the_set_and_leaves_what_was_written_before_it(tmp_path: Path) -> None:
    (tmp_path / "b.json").mkdir()  # a directory where the second file goes
    with pytest.raises(RunStoreError) as err:
        write_set(tmp_path, [TextFile("a.md", "a"), JsonFile("b.json", {})], what="the comparison")
    assert str(err.value).startswith(f"{tmp_path}: cannot write the comparison: ")
    assert err.value.exit_code == 3
    assert (tmp_path / "a.md").read_text(encoding="utf-8") == "a"  # not a set read as one: kept


def test_a_set_read_as_one_drops_its_last_file_first_and_is_removed_whole_on_a_failure(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "load.json").write_text('{"old": true}', encoding="utf-8")

    def disk_full(path: Path, table: pa.Table) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(publish, "write_parquet", disk_full)
    artifacts = [TextFile("load.md", "m"), ParquetFile("load_requests.parquet", pa.table({"x": [1]})),
                 JsonFile("load.json", {"new": True})]  # fmt: skip
    with pytest.raises(RunStoreError) as err:
        write_set(tmp_path, artifacts, what="the load measurement", together=True)
    assert str(err.value) == f"{tmp_path}: cannot write the load measurement: No space left on device"
    # the old load.json is gone (no reader takes it for the new set) and so is the new set's first file
    assert list(tmp_path.iterdir()) == []
    monkeypatch.undo()
    paths = write_set(tmp_path, artifacts, what="x", together=True)
    assert [p.name for p in paths] == ["load.md", "load_requests.parquet", "load.json"]
    assert json.loads((tmp_path / "load.json").read_text(encoding="utf-8")) == {"new": True}


def test_a_set_read_as_one_that_fails_on_a_directory_in_its_way_is_still_one_error(tmp_path: Path) -> None:
    (tmp_path / "load_requests.parquet").mkdir()
    with pytest.raises(RunStoreError):
        write_set(tmp_path, [ParquetFile("load_requests.parquet", pa.table({"x": [1]})), JsonFile("load.json", {})],
                  what="the load measurement", together=True)  # fmt: skip
