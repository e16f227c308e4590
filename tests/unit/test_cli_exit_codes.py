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
