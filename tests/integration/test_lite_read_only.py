"""Read only is read only on a Milvus Lite database: ``rag-eval inspect FILE --collection NAME`` and a run with
a ``[collection]`` table leave every file of the user's database byte for byte (Milvus Lite writes an index
file into a database whose collection it loads, so a reader opens a private copy), on the collection the
LangChain example builds."""

from __future__ import annotations

import hashlib
import tempfile
from pathlib import Path

import pytest

from rag_eval.cli import main
from rag_eval.search.milvus import SearchTarget
from rag_eval.search.milvus.existing import ForeignCollection
from tests.integration.test_existing_runs import example_collection, example_toml, run

pytestmark = pytest.mark.milvus_lite


def hashes(root: Path) -> dict[str, str]:
    """Every file under ``root`` and its SHA-256 (the empty ``LOCK`` included)."""
    return {str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(root.rglob("*")) if p.is_file()}  # fmt: skip


@pytest.fixture(autouse=True)
def own_temp_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The private copies go to this test's own temporary directory, so that the copies of tests running
    beside it (other workers reading Lite databases) neither appear nor vanish in what it counts."""
    own = tmp_path / "tmp"
    own.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(own))
    monkeypatch.setenv("TMPDIR", str(own))


def private_copies() -> set[str]:
    return {p.name for p in Path(tempfile.gettempdir()).glob("rag-eval-lite-read-*")}


def test_inspect_and_a_run_leave_every_file_of_the_lite_database_as_it_was(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = tmp_path / "theirs.db"
    example_collection(str(db), "kb_chunks")
    before = hashes(db)
    assert any(name.endswith(".parquet") for name in before) and not any("indexes" in n for n in before)
    copies = private_copies()

    assert main(["inspect", str(db), "--collection", "kb_chunks", "-q"]) == 0
    assert "kb_chunks" in capsys.readouterr().out
    assert hashes(db) == before

    assert run(example_toml(tmp_path, str(db), "kb_chunks"), tmp_path / "run") == 0
    assert (tmp_path / "run" / "per_query.parquet").is_file()
    assert hashes(db) == before
    assert private_copies() == copies  # each private copy removed with its last reader


def test_the_copy_is_shared_by_the_readers_of_a_process_and_removed_with_the_last(tmp_path: Path) -> None:
    db = tmp_path / "theirs.db"
    example_collection(str(db), "kb_chunks")
    before, copies = hashes(db), private_copies()
    target = SearchTarget(uri=str(db), collection="kb_chunks", index=None)
    with ForeignCollection(target, load=True) as one:
        made = private_copies() - copies
        with ForeignCollection(target, load=True) as two:
            assert private_copies() - copies == made and len(made) == 1
            assert one.info.rows == two.info.rows > 0
        assert private_copies() - copies == made
    assert private_copies() == copies and hashes(db) == before


def test_a_database_another_process_holds_is_not_copied_half_written(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The copy is made under a shared lock on the database's LOCK: while another process has it open (and may
    be writing it), a reader is refused with exit 3, as opening it in place was."""
    import subprocess
    import sys

    db = tmp_path / "theirs.db"
    example_collection(str(db), "kb_chunks")
    holder = subprocess.Popen(
        [sys.executable, "-c", "import time; from pymilvus import MilvusClient; "
         f"c = MilvusClient({str(db)!r}); c.list_collections(); print('ready', flush=True); time.sleep(60)"],
        stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "ready"
        copies = private_copies()
        assert main(["inspect", str(db), "--collection", "kb_chunks", "-q"]) == 3
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and "only one process at a time" in err[0], err
        assert private_copies() == copies
    finally:
        holder.kill()
        holder.wait()
