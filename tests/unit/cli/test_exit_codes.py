"""Exit codes a CI job can trust: a bug is never 1; user text printed through rich or written to report.md
is shown as text, never read as markup."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from rag_eval import cli, jobs
from tests.conftest import SHIPPED

EVIDENCE = SHIPPED / "experiments" / "configs" / "evidence.properties"
DEFAULT = SHIPPED / "experiments" / "default.toml"


def test_a_bug_exits_70_with_its_traceback(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    def broken(*args: object, **kwargs: object) -> None:
        raise ZeroDivisionError("a bug")

    monkeypatch.setattr(jobs, "run_experiment", broken)
    code = cli.main(["run", str(SHIPPED / "experiments" / "default.toml"), "-q"])
    assert code == cli.EXIT_INTERNAL == 70
    err = capsys.readouterr().err
    assert "Traceback" in err and "ZeroDivisionError: a bug" in err and "internal error" in err


def test_an_os_error_is_infrastructure(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    def full(*args: object, **kwargs: object) -> None:
        raise OSError(28, "No space left on device", "/reports/latest/per_query.parquet")

    monkeypatch.setattr(jobs, "run_experiment", full)
    assert cli.main(["run", str(SHIPPED / "experiments" / "default.toml"), "-q"]) == 3
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "No space left on device" in err and "Traceback" not in err


@pytest.mark.milvus_lite
def test_markup_in_paths_and_names_is_printed_as_text(tmp_path: Path) -> None:
    dataset = tmp_path / "kb|<b>x<i>[bold]*"
    shutil.copytree(SHIPPED, dataset, ignore=shutil.ignore_patterns("src", "experiments"))
    out = tmp_path / "out[/][bold]"
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "rag_eval.cli",
            "run",
            "--dataset",
            str(dataset),
            "--config",
            f"a={EVIDENCE}",
            "--milvus-uri",
            str(tmp_path / "m.db"),
            "--out",
            str(out),
            "--limit",
            "5",
        ],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr
    assert "out[/][bold]" in proc.stdout.replace("\n", "")
    report = (out / "report.md").read_text()
    assert "<b>" not in report and "kb\\|\\<b\\>x\\<i\\>\\[bold\\]\\*" in report


@pytest.mark.milvus_lite
def test_one_query_is_too_few_to_test_never_a_crash(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """``--limit 1``: one unit is not testable (no p-value, no interval): every relative gate is
    ``underpowered``, a warning (exit 0), never a bug (exit 70)."""
    legacy = SHIPPED / "experiments" / "configs" / "legacy.properties"
    out = tmp_path / "out"
    code = cli.main([
        "run", "--dataset", str(SHIPPED), "--config", f"legacy={legacy}", "--config", f"evidence={EVIDENCE}",
        "--milvus-uri", str(tmp_path / "m.db"), "--out", str(out), "--limit", "1", "-q",
    ])  # fmt: skip
    assert code == 0, capsys.readouterr().err
    doc = json.loads((out / "compare.json").read_text())
    assert doc["queries_compared"] == 1
    relative = [g for c in doc["comparisons"] for g in c["gates"] if g["kind"] == "relative"]
    assert relative and {g["outcome"] for g in relative} == {"underpowered"}
    assert all("too few to test" in g["message"] for g in relative)
    metrics = [m for c in doc["comparisons"] for m in c["metrics"] if m["n"] == 1 and m["delta"] not in (0, None)]
    assert metrics and all(m["p_value"] is None and not m["significant"] for m in metrics)


@pytest.mark.parametrize("step", ["prepare", "ingest_collection"])
def test_ctrl_c_before_any_batch_says_there_is_nothing_to_resume(
    step: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from rag_eval.jobs import run as run_job

    def interrupted(*args: object, **kwargs: object) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(run_job, step, interrupted)
    out = tmp_path / "run"
    argv = ["run", str(DEFAULT), "-q", "--milvus-uri", str(tmp_path / "m.db"), "--out", str(out)]
    assert cli.main(argv) == 130
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "interrupted" in err and "nothing to resume" in err and "--resume" not in err
    assert not out.exists()  # the run left nothing behind that --resume could continue
    assert cli.main([*argv, "--resume"]) == 2  # and indeed there is nothing
    assert "nothing to resume" in capsys.readouterr().err


def test_ctrl_c_with_an_unfinished_run_in_the_directory_advises_resume(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from rag_eval.jobs import run as run_job
    from rag_eval.rundir.directory import RunStore

    def interrupted(*args: object, **kwargs: object) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(run_job, "prepare", interrupted)
    out = tmp_path / "run"
    RunStore(out).begin({"experiment": "incident-kb"}, resume=False)  # an earlier run's finished batches
    assert cli.main(["run", str(DEFAULT), "-q", "--milvus-uri", str(tmp_path / "m.db"), "--out", str(out)]) == 130
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "run the same command with --resume" in err
    stamped = cli.main(["run", str(DEFAULT), "-q", "--milvus-uri", str(tmp_path / "m.db")])
    assert stamped == 130 and "--resume" not in capsys.readouterr().err  # a new directory: nothing in it


def fail_and_error_run(directory: Path) -> Path:
    """A candidate whose same-document recall drops (a fail gate fires) and that delivers nothing on the
    queries of a second check's metric (an error gate)."""
    from tests.unit.runs import config, make_run, pair_rows, row

    rows = pair_rows(60, "base") + [
        row(f"q{i}", "cand", delivered=[], relevant=[f"d{i}#chunk-0", f"d{i}#chunk-1"]) for i in range(60)
    ]
    make_run(rows, [config("base"), config("cand")], baseline="base", directory=directory)
    return directory


def test_a_fail_gate_and_an_error_gate_together_exit_1(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    import json

    run = fail_and_error_run(tmp_path / "run")
    gates = tmp_path / "gates.toml"
    gates.write_text('[gates]\nchecks = ["same_doc_multi_chunk_recall drop <= 0.02", "evidence_guard_1to1 == 1"]\n')
    assert cli.main(["compare", str(run), "--gates", str(gates)]) == 1  # a regression is what a CI job must see
    outcomes = [g["outcome"] for c in json.loads((run / "compare.json").read_text())["comparisons"] for g in c["gates"]]
    assert sorted(outcomes) == ["error", "fail"]
    assert (run / "summary.md").read_text().startswith("## rag-eval gates: synthetic: FAIL")
    harness = (SHIPPED.parents[1] / "docs" / "harness.md").read_text()
    section = harness.split("## Exit codes", 1)[1].split("\n#", 1)[0]
    assert "a `fail` gate fired and another could not be evaluated: 1" in " ".join(section.split())


def history_file(tmp_path: Path) -> Path:
    from rag_eval.compare.history import append_history
    from tests.unit.runs import config, make_run, pair_rows

    path = tmp_path / "history.parquet"
    run = make_run(pair_rows(10, "base") + pair_rows(10, "cand"), [config("base"), config("cand")], baseline="base",
                   directory=tmp_path / "night")  # fmt: skip
    append_history(run, exit_code=0, path=path)
    return path


@pytest.mark.parametrize(
    ("flags", "needles"),
    [
        (["--metric", "same_doc_multi_chunk_recal"], ["--metric", "did you mean 'same_doc_multi_chunk_recall'"]),
        (["--metric", "nope"], ["--metric", "'nope'", "same_doc_multi_chunk_recall"]),
        (["--config", "cnad"], ["--config", "did you mean 'cand'"]),
        (["--experiment", "synthetc"], ["--experiment", "did you mean 'synthetic'"]),
    ],
)
def test_history_names_it_does_not_know_are_refused_with_the_known_ones(
    flags: list[str], needles: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = history_file(tmp_path)
    assert cli.main(["history", "--history", str(path), *flags]) == 2
    captured = capsys.readouterr()
    assert captured.out == "" and captured.err.count("\n") == 1
    for needle in needles:
        assert needle in captured.err, (needle, captured.err)
    assert cli.main(["history", "--history", str(path), "--metric", "chunk:nDCG@5", "--config", "cand"]) == 0


@pytest.mark.parametrize(("name", "suggested"), [("nightlyy", "did you mean 'nightly'"), ("nope", "default, nightly")])
def test_a_gates_name_that_is_neither_a_file_nor_shipped_lists_the_shipped_ones(
    name: str, suggested: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from tests.unit.runs import config, make_run, pair_rows

    make_run(pair_rows(10, "base") + pair_rows(10, "cand"), [config("base"), config("cand")], baseline="base",
             directory=tmp_path / "run")  # fmt: skip
    for argv in (["compare", str(tmp_path / "run"), "--gates", name],
                 ["run", str(DEFAULT), "-q", "--milvus-uri", str(tmp_path / "m.db"), "--gates", name]):  # fmt: skip
        assert cli.main(argv) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and suggested in err and "shipped" in err, err
    assert not (tmp_path / "m.db").exists() and not (tmp_path / "run" / "compare.json").exists()
