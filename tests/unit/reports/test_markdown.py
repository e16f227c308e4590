"""report.md of a run made by the real pipeline (an in-memory port, no Milvus): it opens with the verdict, its
tables hold every config, their rows are the registry's measures, and text of the user's never reads as Markdown
or HTML."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from rag_eval.compare.comparison import compare
from rag_eval.compare.gates import gates_from_table
from rag_eval.experiment.latency import ReplayCost, TimingPlan, latency_note
from rag_eval.metrics.registry import LATENCY_STAGES
from rag_eval.reports.markdown import IDENTITY_MEASURES, identity_rows, md_text, render_markdown
from tests.report_runs import HOSTILE, synthetic_run
from tests.unit.runs import config, make_run, pair_rows


def _inputs(run: Path, *, backend: str = "lite") -> tuple[dict[str, Any], dict[str, Any]]:
    """The run's summary.json and manifest.json, with what a Milvus run adds (latency note, versions)."""
    summary = json.loads((run / "summary.json").read_text())
    manifest = json.loads((run / "manifest.json").read_text())
    queries = int(summary["queries"])
    summary["latency"] = latency_note(
        TimingPlan(), backend=f"Milvus {backend}", warmup=0, queries=queries, cost=ReplayCost(0.25)
    )
    for name, cfg in summary["configs"].items():
        cfg["search_latency"].update(timed_search=name, shared_with=[])
    manifest["milvus"]["backend"] = backend
    manifest["versions"]["pymilvus"] = "2.5"
    return summary, manifest


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    yield synthetic_run(tmp_path_factory.mktemp("md") / "run", n_queries=20, render=False)


@pytest.fixture(scope="module")
def hostile_run(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    yield synthetic_run(tmp_path_factory.mktemp("md-hostile") / "run", n_queries=8, hostile=True, render=False)


def _table(text: str, heading: str) -> list[list[str]]:
    """The cells of the table under ``## heading``, header row first (the separator row left out)."""
    section = text.split(f"## {heading}\n", 1)[1].split("\n## ", 1)[0]
    rows = [line for line in section.splitlines() if line.startswith("|") and not line.startswith("|---")]
    return [[cell.strip() for cell in re.split(r"(?<!\\)\|", row)[1:-1]] for row in rows]


def test_every_table_has_a_column_per_config_in_the_summary_order(run: Path) -> None:
    summary, manifest = _inputs(run)
    text = render_markdown(summary, manifest)
    names = list(summary["configs"])
    assert text.startswith(f"# {summary['experiment']}\n")
    configs = _table(text, "Configs")
    assert [row[0] for row in configs[1:]] == [f"{names[0]} (baseline)", *names[1:]]
    assert [row[-1] for row in configs[1:]] == [f"`{c['hash']}`" for c in manifest["configs"]]
    standard = "Standard measures (chunk level / document level)"
    for heading in ("Evidence identity", "Where relevant chunks were lost", standard):
        table = _table(text, heading)
        assert table[0][1:] == names and all(len(row) == len(names) + 1 for row in table)
    latency = _table(text, "Latency (microseconds)")
    assert latency[0][2:] == names  # a row per stage and statistic, the stages in pipeline order
    stats = [(row[0].replace("\\_", "_"), row[1]) for row in latency[1 : 1 + 4 * len(LATENCY_STAGES)]]
    assert stats == [(stage, stat) for stage in LATENCY_STAGES for stat in ("p50", "p95", "p99", "max")]


def test_the_identity_table_is_the_registry_measures_in_order(run: Path) -> None:
    summary, manifest = _inputs(run)
    rows = identity_rows(summary, list(summary["configs"]))
    assert len(rows) == len(IDENTITY_MEASURES)
    table = _table(render_markdown(summary, manifest), "Evidence identity")
    assert [row[0] for row in table[1:]] == [label for label, _ in rows]
    counted = dict(rows)["cap compliance (stored doc ids)"]
    assert all(re.fullmatch(r"(\d+\.\d%|–) \(\d+ violations\)", v) for v in counted)


def test_a_config_without_a_breakdown_count_reads_zero_and_a_missing_measure_a_dash() -> None:
    summary = {"configs": {"a": {"content_duplicates": {"by_key_kind": {"vector": 2}}}, "b": {}}}
    rows = dict(identity_rows(summary, ["a", "b"]))
    assert rows["content duplicates by key kind: vector"] == ["2", "0"]
    assert rows["content duplicates by key kind: rank"] == ["0", "0"]
    assert rows["duplicate rate (evidence key)"] == ["–", "–"]


def test_lite_latency_is_flagged_and_a_server_run_is_not(run: Path) -> None:
    assert "Milvus Lite, a Python re-implementation" in render_markdown(*_inputs(run, backend="lite"))
    assert "re-implementation" not in render_markdown(*_inputs(run, backend="server"))


def test_a_run_whose_search_was_not_timed_says_so(run: Path) -> None:
    summary, manifest = _inputs(run)
    summary["latency"]["search"]["mode"] = "off"
    assert 'Search: not timed (`[timing] latency = "off"`)' in render_markdown(summary, manifest)


def test_hostile_text_is_literal_markdown(hostile_run: Path) -> None:
    summary, manifest = _inputs(hostile_run)
    summary["experiment"] = HOSTILE[0]
    manifest["dataset"]["name"] = HOSTILE[5]
    text = render_markdown(summary, manifest)
    assert "<script>" not in text and "<b>" not in text and "**bold**" not in text
    assert f"# {md_text(HOSTILE[0])}\n" in text and md_text(HOSTILE[5]) in text


@pytest.mark.parametrize(
    ("raw", "escaped"),
    [
        ("a|b", "a\\|b"),
        ("[x](y)", "\\[x\\]\\(y\\)"),
        ("*em* _em_ `code` #h", "\\*em\\* \\_em\\_ \\`code\\` \\#h"),
        ("<b>&</b>", "\\<b\\>&\\</b\\>"),
        ("two\nlines  and\tspaces", "two lines and spaces"),
        ("{{ 7*7 }}", "\\{\\{ 7\\*7 \\}\\}"),
    ],
)
def test_md_text_escapes_what_markdown_or_html_would_read(raw: str, escaped: str) -> None:
    assert md_text(raw) == escaped


def test_report_md_opens_with_the_verdict(run: Path) -> None:
    summary, manifest = _inputs(run)
    rows = pair_rows(30, "base") + pair_rows(30, "cand", lose=6)
    checks = ["fail cap_compliance == 1", "same_doc_multi_chunk_recall drop <= 0.02"]
    document = compare(make_run(rows, [config("base"), config("cand")], baseline="base"), None,
                       gates_from_table({"checks": checks}, path="g.toml", text="")).document  # fmt: skip
    names = [n for n in summary["configs"] if n != summary["baseline"]]
    doc = {**document, "exit_code": 1,
           "comparisons": [{**document["comparisons"][0], "baseline": summary["baseline"], "candidate": n}
                           for n in names]}  # fmt: skip
    text = render_markdown(summary, manifest, doc)
    headings = [line for line in text.splitlines() if line.startswith("## ")]
    assert headings[0] == "## Verdict"
    verdict = text[text.index("## Verdict") : text.index(headings[1])]
    assert "**Exit code 1: a gate failed.**" in verdict
    assert all(f"**{n}** against {summary['baseline']}" in verdict for n in names)
    assert "- fail – same-document multi-chunk recall drops by at most 0.02 (required)" in verdict
    unjudged = render_markdown(summary, manifest)
    assert unjudged.index("## Verdict") < unjudged.index("## Configs") and "Not compared" in unjudged


def test_the_production_cap_is_named_only_when_a_legacy_config_is_compared(run: Path) -> None:
    summary, manifest = _inputs(run)
    with_legacy = render_markdown(summary, manifest)
    legacy = [c for c in manifest["configs"] if c["pipeline"] != "evidence"]
    assert legacy, "the synthetic run has a legacy config"
    assert f"checked against the production cap ({legacy[0]['name']}: " in with_legacy
    only_evidence = {**manifest, "configs": [c for c in manifest["configs"] if c["pipeline"] == "evidence"]}
    text = render_markdown(summary, only_evidence)
    assert "production cap" not in text and "()" not in text
    assert "checked against each evidence config's own cap." in text
