"""A run where most queries have no relevance label says so wherever its verdict is read: summary.md (a CI
job's summary), the console and the verdict of report.html; a run judged on most of its queries does not."""

from __future__ import annotations

from pathlib import Path

import pytest

from rag_eval import cli
from rag_eval.reports.html import render_html
from tests.report_runs import synthetic_run
from tests.unit.runs import config, make_run, pair_rows, row

NOTE = "most queries are unjudged: 10 of 40 have a relevance label"


def run_with_unjudged(directory: Path, unjudged: int) -> Path:
    """40 queries of two configs, the last ``unjudged`` of them without any relevant chunk."""
    rows = []
    for name in ("base", "cand"):
        rows += pair_rows(40 - unjudged, name)
        rows += [row(f"q{i}", name, delivered=[f"x{i}#chunk-0"]) for i in range(40 - unjudged, 40)]
    make_run(rows, [config("base"), config("cand")], baseline="base", directory=directory)
    return directory


def verdict_of(report: Path) -> str:
    html = " ".join(report.read_text().split())
    return html.split('<section id="verdict">', 1)[1].split("</section>", 1)[0]


def test_most_queries_unjudged_is_said_in_the_comparison(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    run = run_with_unjudged(tmp_path / "run", unjudged=30)
    assert cli.main(["compare", str(run), "--gates", "default"]) == 0
    console = " ".join(capsys.readouterr().out.split())
    assert NOTE in console
    summary = (run / "summary.md").read_text()
    assert NOTE in summary and summary.index(NOTE) < summary.index("| config | gate |")  # above the gate table


def test_a_run_judged_on_most_queries_carries_no_such_note(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = run_with_unjudged(tmp_path / "run", unjudged=10)
    assert cli.main(["compare", str(run), "--gates", "default"]) == 0
    assert "unjudged" not in capsys.readouterr().out
    assert "unjudged" not in (run / "summary.md").read_text()


@pytest.mark.parametrize(("judged", "noted"), [(10, True), (30, False)])
def test_the_reports_verdict_says_most_queries_are_unjudged(tmp_path: Path, judged: int, noted: bool) -> None:
    run = synthetic_run(tmp_path / "run", n_queries=40, judged=judged, render=False)
    assert (NOTE in verdict_of(render_html(run))) is noted  # not compared yet: the run's own verdict
    # a verdict whatever it is (the synthetic run lacks some gated measures: an error gate, exit 2)
    assert cli.main(["compare", str(run), "--gates", "default"]) in (0, 1, 2)
    assert (NOTE in verdict_of(render_html(run))) is noted
