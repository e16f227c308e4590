"""What a worker does besides replaying: write a batch's part whole (a local directory or an fsspec URL),
cut an error's chain of causes where it loops (Dask would follow it forever), release a replay's clients."""

from __future__ import annotations

from itertools import pairwise
from pathlib import Path

import fsspec
import pyarrow as pa
import pytest

from rag_eval.core.errors import RunStoreError
from rag_eval.replay.workers import cut_cycles, release, write_part
from rag_eval.rundir.parts import check_part, read
from rag_eval.rundir.rows import SCHEMA
from tests.unit.runs import row

ROWS = [row("q1", "a", delivered=["d#chunk-0"]), row("q2", "a", delivered=[])]


def test_a_part_is_written_into_a_local_directory_whole(tmp_path: Path) -> None:
    write_part(str(tmp_path), 3, ROWS)
    assert [p.name for p in tmp_path.iterdir()] == ["batch-00003.arrow"]
    table = read(tmp_path / "batch-00003.arrow", SCHEMA)
    assert table.schema.names == SCHEMA.names and table.column("query_id").to_pylist() == ["q1", "q2"]
    check_part(tmp_path / "batch-00003.arrow", "part", advice="")  # a part the run takes


def test_a_part_is_written_under_a_parts_url_through_a_temporary_name(tmp_path: Path) -> None:
    url = "memory://parts-of-a-test/rag-eval-abc"
    fs = fsspec.filesystem("memory")
    try:
        write_part(url, 12, ROWS)
        assert [p.rsplit("/", 1)[-1] for p in fs.ls("/parts-of-a-test/rag-eval-abc", detail=False)] == [
            "batch-00012.arrow"
        ]
        with fs.open("/parts-of-a-test/rag-eval-abc/batch-00012.arrow", "rb") as fh:
            assert pa.ipc.open_file(fh).read_all().column("query_id").to_pylist() == ["q1", "q2"]
    finally:
        fs.rm("/parts-of-a-test", recursive=True)


def test_a_part_that_cannot_be_written_is_an_error_naming_the_parts_url(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("", encoding="utf-8")
    with pytest.raises(RunStoreError) as err:
        write_part(str(tmp_path / "file" / "parts"), 0, ROWS)  # a file where the directory should be
    assert str(err.value).startswith(f"{tmp_path / 'file' / 'parts'}: cannot write a batch: ")
    assert err.value.exit_code == 3


def chain(*errors: BaseException, loop_to: int | None = None, context: bool = False) -> None:
    for first, second in pairwise(errors):
        if context:
            first.__context__ = second
        else:
            first.__cause__ = second
    if loop_to is not None:
        errors[-1].__cause__ = errors[loop_to]


def test_a_chain_of_causes_that_loops_is_cut_where_it_loops() -> None:
    a, b, c = ValueError("a"), KeyError("b"), OSError("c")
    chain(a, b, c, loop_to=0)  # a -> b -> c -> a
    cut_cycles(a)
    assert (a.__cause__, b.__cause__, c.__cause__, c.__context__) == (b, c, None, None)
    selfish = RuntimeError("self")
    selfish.__cause__ = selfish
    cut_cycles(selfish)
    assert selfish.__cause__ is None
    d, e = ValueError("d"), ValueError("e")
    chain(d, e, context=True)  # d's context is e, e's cause is d
    e.__cause__ = d
    cut_cycles(d)
    assert (d.__context__, e.__cause__) == (e, None)


def test_a_chain_without_a_loop_is_left_as_it_is() -> None:
    a, b, c = ValueError("a"), KeyError("b"), OSError("c")
    chain(a, b, c)
    cut_cycles(a)
    assert (a.__cause__, b.__cause__, c.__cause__) == (b, c, None)
    lone = ValueError("lone")
    cut_cycles(lone)
    assert lone.__cause__ is None and lone.__context__ is None


def test_releasing_a_replay_with_no_clients_on_this_worker_releases_none() -> None:
    assert release("no-such-replay") == 0
