"""Experiment values a run cannot use are refused up front by `rag-eval run`: exit 2, one line naming
the key, and no run directory, Lite file or reports/ left behind."""

from __future__ import annotations

import tomllib
from dataclasses import replace
from pathlib import Path

import pytest

from rag_eval import cli
from rag_eval.core.errors import ConfigError
from rag_eval.experiment import (
    Overrides,
    check_experiment,
    default_experiment,
    experiment_from_table,
    load_experiment,
    parse_config_flag,
    with_overrides,
)
from rag_eval.rundir.directory import RunStore
from tests.conftest import SHIPPED

EVIDENCE = SHIPPED / "experiments" / "configs" / "evidence.properties"


def experiment(
    tmp: Path,
    *,
    dataset: str = "",
    experiment: str = "",
    config: str = "",
    tables: str = "",
    dataset_path: str = str(SHIPPED),
    uri: str = "",
    properties: str = str(EVIDENCE),
) -> Path:
    """A small experiment of the shipped data set on a Lite file in ``tmp``, with extra lines per table."""
    path = tmp / "exp.toml"
    path.write_text(
        f'[experiment]\nname = "refusals"\n{experiment}\n'
        f'[dataset]\npath = "{dataset_path}"\n{dataset}\n'
        f'[milvus]\nuri = "{uri or tmp / "m.db"}"\n'
        f"{tables}\n"
        f'[[configs]]\nname = "evidence"\nproperties = "{properties}"\n{config}\n',
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


NUL = "\\u0000"  # a NUL byte, as TOML writes one in a string


@pytest.mark.parametrize(
    ("over", "key"),
    [
        ({"dataset_path": f"{SHIPPED}{NUL}x"}, "dataset.path"),
        ({"tables": f'[embedder]\nvectors_dir = "vectors{NUL}"'}, "embedder.vectors_dir"),
        ({"tables": f'[embedder]\ncache_dir = "cache{NUL}"'}, "embedder.cache_dir"),
        ({"properties": f"{EVIDENCE}{NUL}"}, "configs[0].properties"),
        ({"tables": f'[gates]\nfile = "nightly{NUL}"'}, "gates.file"),
        ({"uri": f"m{NUL}.db"}, "milvus.uri"),
    ],
)
def test_a_nul_byte_in_a_path_is_refused_naming_the_key(
    tmp_path: Path,
    over: dict[str, str],
    key: str,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    err = refused(tmp_path, experiment(tmp_path, **over), capsys, monkeypatch)
    assert f"@ {key}" in err and "\0" not in err


def test_a_nul_byte_in_a_path_given_in_code_is_refused_naming_the_flag() -> None:
    # a command line cannot carry a NUL byte; a caller in Python can
    with pytest.raises(ConfigError, match=r"holds a NUL byte, which no path can @ --dataset"):
        with_overrides(default_experiment(str(SHIPPED)), Overrides(dataset=f"{SHIPPED}\0", require_configs=False))
    with pytest.raises(ConfigError, match=r"holds a NUL byte, which no path can @ --dataset"):
        default_experiment(f"{SHIPPED}\0")
    with pytest.raises(ConfigError, match=r"holds a NUL byte, which no path can @ --config"):
        parse_config_flag(f"a={EVIDENCE}\0")
    with pytest.raises(ConfigError, match=r"cannot read: .* holds a NUL byte"):
        load_experiment(f"{SHIPPED}/experiments/default.toml\0")
    built = replace(default_experiment(str(SHIPPED)), cache_dir=Path("cache\0"))
    assert [p.key for p in check_experiment(built)] == ["embedder.cache_dir"]


def test_a_config_name_too_long_for_its_file_names_is_refused_before_the_replay(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    path = experiment(tmp_path, config=f'[[configs]]\nname = "{"e" * 300}"\nproperties = "{EVIDENCE}"')
    err = refused(tmp_path, path, capsys, monkeypatch)
    assert "300 bytes" in err and "at most 231" in err and "@ configs[1].name" in err


def test_a_config_flag_name_too_long_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    argv = ["run", "--dataset", str(SHIPPED), "--config", f"{'e' * 232}={EVIDENCE}", "--milvus-uri", "m.db"]
    assert cli.main([*argv, "--out", "out", "--limit", "4", "-q"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "232 bytes" in err and "@ --config" in err
    assert list(tmp_path.iterdir()) == []


def test_the_longest_config_name_accepted_has_its_trec_runs_written(tmp_path: Path) -> None:
    # the limit is the file names RunStore really writes (a temporary beside runs/<name>.docs.trec)
    table = tomllib.loads((SHIPPED / "experiments" / "default.toml").read_text())
    table["configs"][2]["name"] = "e" * 231  # not the baseline
    exp = experiment_from_table(table, base=SHIPPED / "experiments", source="exp.toml")
    longest = exp.configs[2].name
    ranking = (longest, "q1", [("d1#chunk-0", 0.5)], [("d1", 0.5)])
    written = RunStore(tmp_path / "run").write_trec_runs([ranking], [longest])
    assert [p.name for p in written] == [f"{longest}.trec", f"{longest}.docs.trec"]
    table["configs"][2]["name"] = "e" * 232
    with pytest.raises(ConfigError, match=r"232 bytes .* @ configs\[2\]\.name"):
        experiment_from_table(table, base=SHIPPED / "experiments", source="exp.toml")


@pytest.mark.parametrize(
    ("cutoffs", "reason"),
    [
        ("[]", "empty"),
        ("[0, 5]", "[0] out of range"),
        ("[-1]", "[-1] out of range"),
        ("[5, 16385, 1000000000000]", "[16385, 1000000000000] out of range"),
        ("[5, 3, 5]", "[5] given more than once"),
        ('[5, "10"]', "expected integers, got [5, '10']"),
        ("[5, 2.5]", "expected integers, got [5, 2.5]"),
        ("[true]", "expected integers, got [True]"),
        (str(list(range(1, 22))), "21 cutoffs"),
    ],
)
def test_cutoffs_a_run_cannot_use_are_blamed_on_metrics_cutoffs(
    tmp_path: Path, cutoffs: str, reason: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    err = refused(tmp_path, experiment(tmp_path, tables=f"[metrics]\ncutoffs = {cutoffs}"), capsys, monkeypatch)
    assert reason in err and "1 to 20 distinct integers from 1 to 16,384" in err and "@ metrics.cutoffs" in err
    assert "gates" not in err


def test_cutoffs_within_the_bounds_are_read_in_order(tmp_path: Path) -> None:
    exp = load_experiment(
        experiment(tmp_path, tables=f"[metrics]\ncutoffs = [16384, 1, {', '.join(map(str, range(2, 20)))}]")
    )
    assert exp.cutoffs == (*range(1, 20), 16384)
