"""One habit across the command line: every command takes the same global flags, every path in an experiment file
is relative to the file (the rule stated in ``--help``), ``rag-eval config`` prints a file that reads back as the
same config, and the README's first experiment is a valid one."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from rag_eval import cli
from rag_eval.cli_flags import COMMANDS, PATHS
from rag_eval.core.config import RagConfig
from rag_eval.core.errors import ConfigError
from rag_eval.experiment import load_experiment
from tests.conftest import ROOT, SHIPPED

SHIPPED_PROPERTIES = sorted(p for p in ROOT.rglob("*.properties") if not {".venv", "reports"} & set(p.parts))
POSITIONAL = {"config": ["x.properties"], "ingest": ["e.toml"], "run": ["e.toml"], "compare": ["r"],
              "accept": ["r"], "history": [], "nightly": ["e.toml"], "load": ["e.toml"], "embed": ["d"],
              "inspect": ["m.db"], "labels": ["import", "m.jsonl", "--dataset", "d"], "serve": ["s.toml"]}  # fmt: skip


def _subparsers() -> dict[str, object]:
    parser = cli.build_parser()
    action = next(a for a in parser._actions if a.dest == "command")
    return dict(action.choices)  # type: ignore[arg-type]


@pytest.mark.parametrize("command", [name for name, _, _ in COMMANDS])
def test_every_command_takes_the_global_flags_and_states_the_path_rule(command: str) -> None:
    for flag in ("-q", "--quiet"):
        args = cli.build_parser().parse_args([command, *POSITIONAL[command], flag])
        assert args.quiet is True
        assert cli.build_parser().parse_args([flag, command, *POSITIONAL[command]]).quiet is True  # before it too
    assert cli.build_parser().parse_args([command, *POSITIONAL[command]]).quiet is False
    words = " ".join(_subparsers()[command].format_help().split())  # type: ignore[attr-defined]
    assert " ".join(PATHS.split()) in words
    assert "relative to that file" in " ".join(cli.build_parser().format_help().split())


def test_every_path_in_an_experiment_is_relative_to_the_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    exp_dir = tmp_path / "exp"
    (exp_dir / "configs").mkdir(parents=True)
    (exp_dir / "configs" / "a.properties").write_text("rag.retrieve-k=10\n", encoding="utf-8")
    (exp_dir / "e.toml").write_text(
        f'[dataset]\npath = "{SHIPPED}"\n[embedder]\ncache_dir = "cache"\n[milvus]\nuri = "../lite/kb.db"\n'
        '[[configs]]\nname = "a"\nproperties = "configs/a.properties"\n',
        encoding="utf-8",
    )
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    exp = load_experiment(tmp_path / "exp" / "e.toml")
    assert Path(exp.resolved_uri).resolve() == (tmp_path / "lite" / "kb.db").resolve()
    assert exp.cache_dir.resolve() == (exp_dir / "cache").resolve()
    assert exp.configs[0].config.retrieve_k == 10
    # the shipped experiments keep their Lite file in the project's reports/, from wherever they are run
    monkeypatch.chdir(SHIPPED / "experiments")
    shipped = load_experiment("default.toml")
    assert Path(shipped.resolved_uri).resolve() == ROOT / "reports" / "milvus" / "incident-kb.db"
    monkeypatch.chdir(ROOT)
    assert load_experiment(SHIPPED / "experiments" / "default.toml").resolved_uri == "reports/milvus/incident-kb.db"


@pytest.mark.parametrize("path", SHIPPED_PROPERTIES, ids=lambda p: p.name)
def test_config_prints_a_file_that_reads_back_as_the_same_config(
    path: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert cli.main(["config", str(path), "-q"]) == 0
    printed = capsys.readouterr().out
    again = tmp_path / "printed.properties"
    again.write_text(printed, encoding="utf-8")
    assert RagConfig.from_properties_file(again) == RagConfig.from_properties_file(path)
    assert cli.main(["config", str(again)]) == 0
    assert capsys.readouterr().out == printed


@pytest.mark.parametrize(
    "text",
    [
        "rag.pipeline=legacy\n",  # the default width, no rag.top-k
        "rag.top-k=8\nrag.return-n=3\nrag.category-filter=  two words\\\\ \u00e9\n",
        "rag.pipeline=legacy-first\nrag.top-k=7\nrag.projector.max-blocks=3\n",
    ],
)
def test_the_round_trip_holds_for_defaults_fallbacks_and_awkward_values(
    text: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    source = tmp_path / "source.properties"
    source.write_text(text, encoding="utf-8")
    assert cli.main(["config", str(source)]) == 0
    printed = tmp_path / "printed.properties"
    printed.write_text(capsys.readouterr().out, encoding="utf-8")
    assert RagConfig.from_properties_file(printed) == RagConfig.from_properties_file(source)


def test_the_readme_experiment_is_valid(tmp_path: Path) -> None:
    """The quick start's three files, written where it says (a folder at the top of the clone)."""
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    files = dict(re.findall(r"`my-eval/([\w.-]+)`\n\n```(?:toml|properties)\n(.*?)```", readme, re.S))
    assert set(files) == {"experiment.toml", "old.properties", "new.properties"}
    (tmp_path / "datasets").symlink_to(ROOT / "datasets")
    (tmp_path / "my-eval").mkdir()
    for name, body in files.items():
        (tmp_path / "my-eval" / name).write_text(body, encoding="utf-8")
    exp = load_experiment(tmp_path / "my-eval" / "experiment.toml")
    assert [c.name for c in exp.configs] == ["old", "new"] and exp.baseline == "old"
    assert exp.configs[0].config.pipeline.is_legacy and not exp.configs[1].config.pipeline.is_legacy


def test_cutoffs_on_the_command_line_lead_the_console_and_are_measured(tmp_path: Path) -> None:
    args = cli.build_parser().parse_args(["-q", "run", str(SHIPPED / "experiments" / "default.toml"), "--cutoffs",
                                          "10,20"])  # fmt: skip
    assert args.quiet is True and args.cutoffs == (10, 20)
    exp = cli._experiment(args)
    assert exp.leading_cutoffs == (10, 20) and exp.cutoffs == (1, 3, 5, 10, 20)
    with pytest.raises(SystemExit):  # argparse: a usage error, exit 2
        cli.build_parser().parse_args(["run", "--cutoffs", "ten"])


def test_a_cutoff_out_of_range_on_the_command_line_is_named_by_its_flag() -> None:
    args = cli.build_parser().parse_args(["run", str(SHIPPED / "experiments" / "default.toml"), "--cutoffs", "0"])
    with pytest.raises(ConfigError, match="--cutoffs"):
        cli._experiment(args)
