"""A Milvus Lite database that is only read (``inspect``, a collection built elsewhere) is never created: a
path that holds none (missing, or an empty folder) is refused with exit 2, naming the URI, and stays as it was."""

from __future__ import annotations

from pathlib import Path

import pytest

from rag_eval.cli import main
from rag_eval.search.milvus.lite import read_only_problem
from tests.conftest import SHIPPED


def test_a_path_that_holds_no_database_is_named_for_what_it_is(tmp_path: Path) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    assert "holds no Milvus Lite database" in (read_only_problem(str(tmp_path / "missing")) or "")
    assert "is an empty directory" in (read_only_problem(str(empty)) or "")
    (tmp_path / "notes.txt").write_text("x")
    assert "is a file" in (read_only_problem(str(tmp_path / "notes.txt")) or "")


@pytest.mark.parametrize("kind", ["empty folder", "missing"])
def test_inspect_of_a_path_without_a_database_writes_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], kind: str
) -> None:
    target = tmp_path / "db"
    if kind == "empty folder":
        target.mkdir()
    assert main(["inspect", str(target)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].endswith("@ URI") and str(target) in err[0]
    assert (sorted(target.iterdir()) == []) if kind == "empty folder" else not target.exists()


def test_a_run_of_a_collection_built_elsewhere_in_an_empty_folder_names_milvus_uri(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    empty = tmp_path / "db"
    empty.mkdir()
    experiment = SHIPPED / "experiments" / "existing.toml"
    code = main(["run", str(experiment), "--milvus-uri", str(empty), "--out", str(tmp_path / "run"), "-q"])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1 and "@ milvus.uri" in err[0] and "empty directory" in err[0], err
    assert sorted(empty.iterdir()) == [] and not (tmp_path / "run").exists()
