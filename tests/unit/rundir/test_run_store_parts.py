"""The run store takes the parts workers wrote under a parts URL into ``.parts``: whole, checked, the source
removed; a damaged or foreign part is an error naming the file, and a file named like a part but not one
is never read as a batch."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest

from rag_eval.core.errors import RunStoreError
from rag_eval.replay.workers import write_part
from rag_eval.rundir.directory import RunStore
from rag_eval.rundir.parts import write
from tests.benchmarks.synthetic import per_query_table
from tests.unit.frames import read_parts


def begun(tmp_path: Path) -> RunStore:
    store = RunStore(tmp_path / "run")
    store.begin({"experiment": "x"}, resume=False)
    return store


def rows_of(number: int) -> list[dict[str, object]]:
    """Batch ``number``'s rows: three queries of one config."""
    rows = per_query_table(3, width=4, seed=number, config="c").to_pylist()
    return [{**r, "query_index": number * 10 + i, "query_id": f"q{number}-{i}"} for i, r in enumerate(rows)]


def test_a_part_is_taken_from_a_directory_url_into_parts_and_removed_there(tmp_path: Path) -> None:
    store = begun(tmp_path)
    for url in (str(tmp_path / "shared"), f"file://{tmp_path / 'shared-url'}"):
        session = store.parts_url(url)
        assert session.startswith(f"{url}/rag-eval-") and session != store.parts_url(url)
        number = 3 if url.startswith("file") else 1
        write_part(session, number, rows_of(number))  # as a worker writes it
        taken = store.take_part(session, number)
        assert taken == store.parts_dir / f"batch-{number:05d}.arrow"
        assert not (Path(session.removeprefix("file://")) / taken.name).exists()
        store.drop_parts_url(session)
        assert not Path(session.removeprefix("file://")).exists()
        assert Path(url.removeprefix("file://")).is_dir()  # only the replay's own directory goes
    assert store.finished_batches() == {1, 3}
    assert read_parts(store).column("query_id").to_pylist() == [f"q{n}-{i}" for n in (1, 3) for i in range(3)]
    assert sorted(p.name for p in store.parts_dir.iterdir()) == ["batch-00001.arrow", "batch-00003.arrow",
                                                                 "state.json"]  # fmt: skip
    assert store.parts_url(None) == str(store.parts_dir)  # no parts URL: the workers write into .parts


def test_a_truncated_part_is_an_error_naming_it_and_nothing_is_taken(tmp_path: Path) -> None:
    store = begun(tmp_path)
    session = store.parts_url(str(tmp_path / "shared"))
    write_part(session, 2, rows_of(2))
    source = Path(session) / "batch-00002.arrow"
    source.write_bytes(source.read_bytes()[: source.stat().st_size // 2])  # cut short, as by a full disk
    with pytest.raises(RunStoreError, match=r"a damaged part, not a whole Arrow file") as caught:
        store.take_part(session, 2)
    assert caught.value.path == f"{session}/batch-00002.arrow"
    assert str(caught.value).startswith(f"{session}/batch-00002.arrow: ")
    assert caught.value.exit_code == 3
    assert sorted(p.name for p in store.parts_dir.iterdir()) == ["state.json"]  # no part, no temporary file
    assert source.is_file()  # left where it is, to be looked at


def test_a_foreign_file_under_a_part_name_is_an_error_naming_it(tmp_path: Path) -> None:
    store = begun(tmp_path)
    session = Path(store.parts_url(str(tmp_path / "shared")))
    session.mkdir(parents=True)
    write(pa.table({"something": [1, 2]}), session / "batch-00004.arrow")
    with pytest.raises(RunStoreError, match=r"not a part of a rag-eval run \(its columns differ\)") as caught:
        store.take_part(str(session), 4)
    assert caught.value.path == f"{session}/batch-00004.arrow"
    assert store.finished_batches() == set()


def test_a_part_that_never_arrived_is_an_infrastructure_error(tmp_path: Path) -> None:
    store = begun(tmp_path)
    session = store.parts_url(str(tmp_path / "shared"))
    with pytest.raises(RunStoreError, match=r"cannot move a finished batch in from .*shared/rag-eval-") as caught:
        store.take_part(session, 9)
    assert caught.value.path == str(store.parts_dir) and caught.value.exit_code == 3
    assert sorted(p.name for p in store.parts_dir.iterdir()) == ["state.json"]


@pytest.mark.parametrize("name", ["batch-7.arrow", "batch-.arrow", "batch-0001x.arrow", "batch-000001.arrow"])
def test_a_file_named_like_a_part_but_not_one_is_never_read_as_a_batch(tmp_path: Path, name: str) -> None:
    store = begun(tmp_path)
    store.write_batch(0, rows_of(0))
    (store.parts_dir / name).write_bytes(b"not a part")
    for read in (store.finished_batches, lambda: read_parts(store), store.check_parts):
        with pytest.raises(RunStoreError, match=r"named like a part, not one rag-eval wrote") as caught:
            read()
        assert caught.value.path == str(store.parts_dir / name)
