"""A run's parts: their names, the batch a name gives (a look-alike refused), the parts of a directory,
a part taken in from a parts URL only when whole, and the parts URL's own directory removed."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pyarrow as pa
import pytest

from rag_eval.core.errors import RunStoreError
from rag_eval.rundir.parts import (
    REMOVE,
    RETAKE,
    check_part,
    drop_session,
    listed,
    part_name,
    part_number,
    read,
    session_url,
    take,
    write,
)
from rag_eval.rundir.rows import SCHEMA, rows_to_table
from tests.unit.runs import row

LOOK_ALIKE = "named like a part, not one rag-eval wrote (batch-NNNNN.arrow): move it away and run again"


def write_part(path: Path, queries: int = 2) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    write(rows_to_table([row(f"q{i}", "a", delivered=["d#chunk-0"]) for i in range(queries)]), path)
    return path


@pytest.mark.parametrize(
    ("number", "name"),
    [(0, "batch-00000.arrow"), (7, "batch-00007.arrow"), (99_999, "batch-99999.arrow"),
     (100_000, "batch-100000.arrow")],
)  # fmt: skip
def test_a_parts_name_and_its_number_go_both_ways(number: int, name: str) -> None:
    assert part_name(number) == name
    assert part_number(Path("/run/.parts") / name) == number


@pytest.mark.parametrize(
    "name",
    ["batch-7.arrow", "batch-007.arrow", "batch-000007.arrow", "batch-.arrow", "batch-0000a.arrow",
     "batch--0001.arrow", "batch-+0001.arrow", "batch-\uff10\uff10\uff10\uff10\uff17.arrow",
     "batch-00007.arrow.tmp"],
)  # fmt: skip
def test_a_name_like_a_parts_that_part_name_does_not_make_is_refused(name: str) -> None:
    with pytest.raises(RunStoreError) as err:
        part_number(Path("/run/.parts") / name)
    assert str(err.value) == f"/run/.parts/{name}: {LOOK_ALIKE}"
    assert err.value.exit_code == 3


def test_the_parts_of_a_directory_by_number(tmp_path: Path) -> None:
    assert listed(tmp_path) == {}
    for name in ("batch-00003.arrow", "batch-00001.arrow", "other.arrow", "batch-00002.json"):
        (tmp_path / name).write_text("")
    assert listed(tmp_path) == {1: tmp_path / "batch-00001.arrow", 3: tmp_path / "batch-00003.arrow"}
    (tmp_path / "batch-3.arrow").write_text("")
    with pytest.raises(RunStoreError, match=re.escape(f"{tmp_path / 'batch-3.arrow'}: {LOOK_ALIKE}")):
        listed(tmp_path)


def test_each_replay_has_a_directory_of_its_own_under_the_parts_url() -> None:
    first, second = session_url("s3://bucket/parts/"), session_url("s3://bucket/parts")
    assert re.fullmatch(r"s3://bucket/parts/rag-eval-[0-9a-f]{12}", first)
    assert re.fullmatch(r"s3://bucket/parts/rag-eval-[0-9a-f]{12}", second)
    assert first != second


def test_a_whole_part_passes_the_check(tmp_path: Path) -> None:
    assert check_part(write_part(tmp_path / "batch-00000.arrow"), "shown", advice=REMOVE) is None


def test_a_part_cut_short_anywhere_is_refused(tmp_path: Path) -> None:
    whole = write_part(tmp_path / "whole.arrow").read_bytes()
    path = tmp_path / "batch-00000.arrow"
    for size in (len(whole) - 1, len(whole) - 10, len(whole) // 2, 8):
        path.write_bytes(whole[:size])
        with pytest.raises(RunStoreError, match="a damaged part, not a whole Arrow file"):
            check_part(path, "shown", advice=REMOVE)


def test_what_is_not_a_regular_file_is_refused_without_waiting_on_it(tmp_path: Path) -> None:
    (tmp_path / "batch-00001.arrow").mkdir()
    (tmp_path / "batch-00002.arrow").symlink_to("/dev/zero")  # a device: reading it never ends
    os.mkfifo(tmp_path / "batch-00003.arrow")  # a named pipe: opening it waits for a writer
    (tmp_path / "batch-00004.arrow").symlink_to(tmp_path / "nowhere")
    for number, path in sorted(listed(tmp_path).items()):
        with pytest.raises(RunStoreError) as err:
            check_part(path, f"url/{path.name}", advice=REMOVE)
        assert str(err.value).startswith(f"url/batch-0000{number}.arrow: a damaged part, not a whole Arrow file (")
        with pytest.raises(OSError, match="not a regular file"):
            read(path, SCHEMA)


def test_a_part_reads_back_its_rows_and_only_the_columns_asked_for(tmp_path: Path) -> None:
    rows = [row(f"q{i}", "a", delivered=["d#chunk-0"]) for i in range(3)]
    path = write_part(tmp_path / "batch-00000.arrow", queries=3)
    assert read(path, SCHEMA).equals(rows_to_table(rows))
    some = pa.schema([SCHEMA.field("config"), SCHEMA.field("query_id")])
    table = read(path, some)
    assert table.schema.equals(some)
    assert table.to_pydict() == {"config": ["a"] * 3, "query_id": ["q0", "q1", "q2"]}
    path.unlink()  # the rows read are the table's own: they stay readable once the file is gone
    assert table.column("query_id").to_pylist() == ["q0", "q1", "q2"]


def test_a_part_of_other_columns_is_refused_naming_it_with_the_advice(tmp_path: Path) -> None:
    path = tmp_path / "batch-00000.arrow"
    write(pa.table({"query_id": ["q1"]}), path)
    with pytest.raises(RunStoreError) as err:
        check_part(path, "the/part", advice=REMOVE)
    assert str(err.value) == (
        "the/part: not a part of a rag-eval run (its columns differ): remove it and run again with --resume to "
        "replay its batch"
    )
    full = read(write_part(tmp_path / "full.arrow"), SCHEMA)
    write(full.select(list(reversed(full.column_names))), path)  # the same columns in another order
    with pytest.raises(RunStoreError, match="its columns differ"):
        check_part(path, "the/part", advice=REMOVE)


@pytest.mark.parametrize("content", [b"", b"ARROW1", b"ARROW1\0\0ARROW1", b"PAR1", b"not arrow at all"])
def test_a_damaged_part_is_refused_naming_it_with_the_advice(tmp_path: Path, content: bytes) -> None:
    path = tmp_path / "batch-00000.arrow"
    path.write_bytes(content)
    with pytest.raises(RunStoreError) as err:
        check_part(path, "url/batch-00000.arrow", advice=RETAKE)
    message = str(err.value)
    assert message.startswith("url/batch-00000.arrow: a damaged part, not a whole Arrow file (")
    assert message.endswith("): run again with --resume to replay its batch")


def test_a_whole_part_is_taken_from_the_parts_url_and_removed_there(tmp_path: Path) -> None:
    source, parts = tmp_path / "shared" / "rag-eval-abc", tmp_path / "run" / ".parts"
    parts.mkdir(parents=True)
    written = write_part(source / "batch-00002.arrow", queries=3)
    expected = read(written, SCHEMA)
    assert take(str(source), 2, parts) == parts / "batch-00002.arrow"
    assert not written.exists()
    assert read(parts / "batch-00002.arrow", SCHEMA).equals(expected)
    assert sorted(p.name for p in parts.iterdir()) == ["batch-00002.arrow"]


def test_a_damaged_part_is_left_where_it_is_and_nothing_is_taken(tmp_path: Path) -> None:
    source, parts = tmp_path / "shared", tmp_path / ".parts"
    parts.mkdir()
    source.mkdir()
    (source / "batch-00001.arrow").write_bytes(b"cut short")
    with pytest.raises(RunStoreError) as err:
        take(f"{source}/", 1, parts)
    assert str(err.value).startswith(f"{source}/batch-00001.arrow: a damaged part")
    assert str(err.value).endswith(RETAKE)
    assert (source / "batch-00001.arrow").read_bytes() == b"cut short"
    assert list(parts.iterdir()) == []


def test_a_part_that_is_not_there_is_an_error_naming_the_parts_directory(tmp_path: Path) -> None:
    parts = tmp_path / ".parts"
    parts.mkdir()
    with pytest.raises(RunStoreError) as err:
        take(str(tmp_path / "shared"), 4, parts)
    assert str(err.value).startswith(f"{parts}: cannot move a finished batch in from {tmp_path / 'shared'}: ")
    assert list(parts.iterdir()) == []


def test_dropping_a_session_removes_its_directory_only(tmp_path: Path) -> None:
    session = tmp_path / "parts" / "rag-eval-abc"
    session.mkdir(parents=True)
    (tmp_path / "parts" / "rag-eval-other").mkdir()
    drop_session(str(session))
    assert sorted(p.name for p in (tmp_path / "parts").iterdir()) == ["rag-eval-other"]
    drop_session(str(session))  # gone already: nothing to do
