"""Experiment values a run cannot use are refused up front by `rag-eval run`: exit 2, one line naming
the key, and no run directory, Lite file or reports/ left behind."""

from __future__ import annotations

from pathlib import Path

import pytest

from rag_eval import cli
from tests.conftest import SHIPPED

EVIDENCE = SHIPPED / "experiments" / "configs" / "evidence.properties"


def experiment(tmp: Path, *, dataset: str = "", experiment: str = "", config: str = "", tables: str = "") -> Path:
    """A small experiment of the shipped data set on a Lite file in ``tmp``, with extra lines per table."""
    path = tmp / "exp.toml"
    path.write_text(
        f'[experiment]\nname = "refusals"\n{experiment}\n'
        f'[dataset]\npath = "{SHIPPED}"\n{dataset}\n'
        f'[milvus]\nuri = "{tmp / "m.db"}"\n'
        f"{tables}\n"
        f'[[configs]]\nname = "evidence"\nproperties = "{EVIDENCE}"\n{config}\n',
        encoding="utf-8",
    )
    return path


def refused(tmp: Path, path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> str:
    """The one line of stderr of a `rag-eval run` of ``path`` that exited 2 and wrote nothing."""
    monkeypatch.chdir(tmp)  # reports/ of a default path would land here
    code = cli.main(["run", str(path), "--out", str(tmp / "out"), "--limit", "4", "-q"])
    err = capsys.readouterr().err
    assert code == 2, err
    assert err.count("\n") == 1 and "Traceback" not in err, err
    assert str(path) in err, err
    assert sorted(p.name for p in tmp.iterdir()) == [path.name]  # no run directory, no Lite file, no reports/
    return err


@pytest.mark.parametrize("value", [0, -3])
def test_min_overlap_chars_below_one_is_refused(
    tmp_path: Path, value: int, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    err = refused(tmp_path, experiment(tmp_path, dataset=f"min_overlap_chars = {value}"), capsys, monkeypatch)
    assert "must be >= 1 (the characters a chunk shares" in err and f"got {value} @ dataset.min_overlap_chars" in err
