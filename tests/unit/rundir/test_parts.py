"""A run's parts: their names, the batch a name gives (a look-alike refused), the parts of a directory,
a part taken in from a parts URL only when whole, and the parts URL's own directory removed."""

from __future__ import annotations

import re
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
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
    session_url,
    take,
)
from rag_eval.rundir.rows import rows_to_table
from tests.unit.runs import row

LOOK_ALIKE = "named like a part, not one rag-eval wrote (batch-NNNNN.parquet): move it away and run again"


def write_part(path: Path, queries: int = 2) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(rows_to_table([row(f"q{i}", "a", delivered=["d#chunk-0"]) for i in range(queries)]), path)
    return path


@pytest.mark.parametrize(
    ("number", "name"),
    [(0, "batch-00000.parquet"), (7, "batch-00007.parquet"), (99_999, "batch-99999.parquet"),
     (100_000, "batch-100000.parquet")],
)  # fmt: skip
def test_a_parts_name_and_its_number_go_both_ways(number: int, name: str) -> None:
    assert part_name(number) == name
    assert part_number(Path("/run/.parts") / name) == number


@pytest.mark.parametrize(
    "name",
    ["batch-7.parquet", "batch-007.parquet", "batch-000007.parquet", "batch-.parquet", "batch-0000a.parquet",
     "batch--0001.parquet", "batch-+0001.parquet", "batch-\uff10\uff10\uff10\uff10\uff17.parquet",
     "batch-00007.parquet.tmp"],
)  # fmt: skip
def test_a_name_like_a_parts_that_part_name_does_not_make_is_refused(name: str) -> None:
    with pytest.raises(RunStoreError) as err:
        part_number(Path("/run/.parts") / name)
    assert str(err.value) == f"/run/.parts/{name}: {LOOK_ALIKE}"
    assert err.value.exit_code == 3


def test_the_parts_of_a_directory_by_number(tmp_path: Path) -> None:
    assert listed(tmp_path) == {}
    for name in ("batch-00003.parquet", "batch-00001.parquet", "other.parquet", "batch-00002.json"):
        (tmp_path / name).write_text("")
    assert listed(tmp_path) == {1: tmp_path / "batch-00001.parquet", 3: tmp_path / "batch-00003.parquet"}
    (tmp_path / "batch-3.parquet").write_text("")
    with pytest.raises(RunStoreError, match=re.escape(f"{tmp_path / 'batch-3.parquet'}: {LOOK_ALIKE}")):
        listed(tmp_path)


def test_each_replay_has_a_directory_of_its_own_under_the_parts_url() -> None:
    first, second = session_url("s3://bucket/parts/"), session_url("s3://bucket/parts")
    assert re.fullmatch(r"s3://bucket/parts/rag-eval-[0-9a-f]{12}", first)
    assert re.fullmatch(r"s3://bucket/parts/rag-eval-[0-9a-f]{12}", second)
    assert first != second


def test_a_whole_part_passes_the_check(tmp_path: Path) -> None:
    assert check_part(write_part(tmp_path / "batch-00000.parquet"), "shown", advice=REMOVE) is None


def test_a_part_of_other_columns_is_refused_naming_it_with_the_advice(tmp_path: Path) -> None:
    path = tmp_path / "batch-00000.parquet"
    pq.write_table(pa.table({"query_id": ["q1"]}), path)
    with pytest.raises(RunStoreError) as err:
        check_part(path, "the/part", advice=REMOVE)
    assert str(err.value) == (
        "the/part: not a part of a rag-eval run (its columns differ): remove it and run again with --resume to "
        "replay its batch"
    )
    full = pq.read_table(write_part(tmp_path / "full.parquet"))
    pq.write_table(full.select(list(reversed(full.column_names))), path)  # the same columns in another order
    with pytest.raises(RunStoreError, match="its columns differ"):
        check_part(path, "the/part", advice=REMOVE)


@pytest.mark.parametrize("content", [b"", b"PAR1", b"not parquet at all"])
def test_a_damaged_part_is_refused_naming_it_with_the_advice(tmp_path: Path, content: bytes) -> None:
    path = tmp_path / "batch-00000.parquet"
    path.write_bytes(content)
    with pytest.raises(RunStoreError) as err:
        check_part(path, "url/batch-00000.parquet", advice=RETAKE)
    message = str(err.value)
    assert message.startswith("url/batch-00000.parquet: a damaged part, not a whole Parquet file (")
    assert message.endswith("): run again with --resume to replay its batch")


def test_a_whole_part_is_taken_from_the_parts_url_and_removed_there(tmp_path: Path) -> None:
    source, parts = tmp_path / "shared" / "rag-eval-abc", tmp_path / "run" / ".parts"
    parts.mkdir(parents=True)
    written = write_part(source / "batch-00002.parquet", queries=3)
    expected = pq.read_table(written)
    assert take(str(source), 2, parts) == parts / "batch-00002.parquet"
    assert not written.exists()
    assert pq.read_table(parts / "batch-00002.parquet").equals(expected)
    assert sorted(p.name for p in parts.iterdir()) == ["batch-00002.parquet"]


def test_a_damaged_part_is_left_where_it_is_and_nothing_is_taken(tmp_path: Path) -> None:
    source, parts = tmp_path / "shared", tmp_path / ".parts"
    parts.mkdir()
    source.mkdir()
    (source / "batch-00001.parquet").write_bytes(b"cut short")
    with pytest.raises(RunStoreError) as err:
        take(f"{source}/", 1, parts)
    assert str(err.value).startswith(f"{source}/batch-00001.parquet: a damaged part")
    assert str(err.value).endswith(RETAKE)
    assert (source / "batch-00001.parquet").read_bytes() == b"cut short"
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
