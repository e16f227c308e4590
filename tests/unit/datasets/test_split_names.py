"""A split is a plain name wherever it enters (the experiment's ``[dataset] split``, ``--split``, the data set
loader): it names files under the data set's ``qrels/`` and the run's ``qrels/``, so nothing that can leave
either, and nothing too long for the file names made of it."""

from __future__ import annotations

import shutil
import tomllib
from pathlib import Path

import pytest

from rag_eval import cli
from rag_eval.core.errors import ConfigError, DatasetError
from rag_eval.datasets.beir import load_beir
from rag_eval.experiment import experiment_from_table
from rag_eval.rundir.directory import RunStore
from tests.conftest import SHIPPED
from tests.unit.experiment.test_experiment_refusals import EVIDENCE, experiment, refused

HOSTILE = ["../../../elsewhere/PWNED", "../test", "/etc/passwd", "a/b", "..", ".", "", "te st", "-x", "x\0", "t\\x"]


def _copy_of_the_shipped_data_set(root: Path) -> Path:
    """The shipped data set with its qrels also beside it, where a split of ``../../elsewhere/PWNED`` points."""
    data = root / "data" / "kb"
    (data / "qrels").mkdir(parents=True)
    for name in ("corpus.jsonl", "queries.jsonl"):
        shutil.copy(SHIPPED / name, data / name)
    shutil.copytree(SHIPPED / "vectors", data / "vectors")
    shutil.copy(SHIPPED / "qrels" / "test.tsv", data / "qrels" / "test.tsv")
    (root / "elsewhere").mkdir()
    shutil.copy(SHIPPED / "qrels" / "test.tsv", root / "elsewhere" / "PWNED.tsv")
    return data


def test_a_split_flag_that_leaves_the_data_set_is_refused_and_writes_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    data = _copy_of_the_shipped_data_set(tmp_path)
    monkeypatch.chdir(tmp_path)
    before = sorted(str(p.relative_to(tmp_path)) for p in tmp_path.rglob("*"))
    argv = ["run", "--dataset", str(data), "--split", "../../../elsewhere/PWNED", "--config", f"e={EVIDENCE}"]
    code = cli.main([*argv, "--milvus-uri", "m.db", "--out", "out/run", "--limit", "4", "-q"])
    err = capsys.readouterr().err
    assert code == 2, err
    assert err.count("\n") == 1 and "Traceback" not in err, err
    assert "'../../../elsewhere/PWNED'" in err and "@ --split" in err and "a plain name" in err, err
    assert sorted(str(p.relative_to(tmp_path)) for p in tmp_path.rglob("*")) == before  # no PWNED.*.trec, no out/


@pytest.mark.parametrize("split", ["../../elsewhere/PWNED", "/etc/passwd", "a/b", "..", "te st"])
def test_a_split_in_the_experiment_file_that_is_not_a_plain_name_is_refused(
    tmp_path: Path, split: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    err = refused(tmp_path, experiment(tmp_path, dataset=f'split = "{split}"'), capsys, monkeypatch)
    assert f"{split!r}: a split is a plain name" in err and "@ dataset.split" in err


@pytest.mark.parametrize("split", HOSTILE)
def test_the_loader_refuses_a_split_that_is_not_a_plain_name(split: str) -> None:
    # whoever calls it (`rag-eval embed --split`, code): qrels/<split>.tsv stays inside the data set
    with pytest.raises(DatasetError, match="a split is a plain name") as err:
        load_beir(SHIPPED, split)
    assert err.value.path == str(SHIPPED) and err.value.field == "split" and "\0" not in str(err.value)


def test_embed_with_a_split_that_leaves_the_data_set_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    data = _copy_of_the_shipped_data_set(tmp_path)
    monkeypatch.chdir(tmp_path)
    before = sorted(str(p.relative_to(tmp_path)) for p in tmp_path.rglob("*"))
    assert cli.main(["embed", str(data), "--split", "../../../elsewhere/PWNED", "--cache-dir", "cache", "-q"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "a split is a plain name" in err and str(data) in err, err
    assert sorted(str(p.relative_to(tmp_path)) for p in tmp_path.rglob("*")) == before


def test_the_loader_refuses_a_split_too_long_for_the_file_names_it_reads() -> None:
    with pytest.raises(DatasetError, match=r"246 bytes is too long for a split name: .* at most 245"):
        load_beir(SHIPPED, "s" * 246)
    with pytest.raises(DatasetError, match="no qrels for split"):
        load_beir(SHIPPED, "s" * 245)  # within the limit: looked for, and not there


def test_a_split_too_long_for_the_runs_qrels_is_refused_before_the_run(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    err = refused(tmp_path, experiment(tmp_path, dataset=f'split = "{"s" * 230}"'), capsys, monkeypatch)
    assert "230 bytes is too long for a split name" in err and "at most 229" in err and "@ dataset.split" in err


def test_the_longest_split_accepted_has_its_qrels_written(tmp_path: Path) -> None:
    # the limit is the file names RunStore really writes (a temporary beside qrels/<split>.chunks.trec)
    table = tomllib.loads((SHIPPED / "experiments" / "default.toml").read_text())
    table["dataset"]["split"] = "s" * 229
    exp = experiment_from_table(table, base=SHIPPED / "experiments", source="exp.toml")
    store = RunStore(tmp_path / "run")
    written = [store.write_trec_qrels(f"{exp.split}.{kind}", {"q1": {"d1": 1}}) for kind in ("chunks", "docs")]
    assert [p.name for p in written] == [f"{exp.split}.chunks.trec", f"{exp.split}.docs.trec"]
    table["dataset"]["split"] = "s" * 230
    with pytest.raises(ConfigError, match=r"230 bytes .* @ dataset\.split"):
        experiment_from_table(table, base=SHIPPED / "experiments", source="exp.toml")


@pytest.mark.parametrize("split", ["test", "dev", "train", "dev.v2", "test_small", "2024-01"])
def test_plain_split_names_are_accepted(tmp_path: Path, split: str) -> None:
    table = tomllib.loads((SHIPPED / "experiments" / "default.toml").read_text())
    table["dataset"]["split"] = split
    assert experiment_from_table(table, base=SHIPPED / "experiments", source="exp.toml").split == split
