"""The HTML report rendered from run directories made by the real pipeline (no browser here;
``tests/integration/test_report_browser.py`` opens it in Chromium)."""

from __future__ import annotations

import base64
import copy
import hashlib
import json
import os
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from rag_eval.core.errors import InputError, ReportInputError
from rag_eval.reports import html as report_html
from rag_eval.reports.drilldown import build_drilldown
from rag_eval.reports.rundata import load_run
from tests.report_runs import HOSTILE, synthetic_run


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    yield synthetic_run(tmp_path_factory.mktemp("report") / "run", n_queries=40, render=False)


@pytest.fixture(scope="module")
def hostile_run(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    yield synthetic_run(tmp_path_factory.mktemp("hostile") / "run", n_queries=12, hostile=True, render=False)


def compare_fixture(summary: dict[str, Any], *, exit_code: int = 1) -> dict[str, Any]:
    """A compare.json of the documented shape (values chosen, not computed: it tests rendering)."""
    base = summary["baseline"]
    comps = []
    for name in summary["configs"]:
        if name == base:
            continue
        comps.append(
            {
                "baseline": base,
                "candidate": name,
                "baseline_source": "run",
                "metrics": [
                    {"metric": "same_doc_multi_chunk_recall", "label": "same-document multi-chunk recall",
                     "group": "mission", "higher_is_better": True, "n": 40, "baseline": 0.5, "candidate": 0.62,
                     "delta": 0.12, "ratio": 1.24, "ci_low": 0.09, "ci_high": 0.15, "p_value": 0.001,
                     "p_holm": 0.004, "significant": True, "improved": ["q0001"], "degraded": [], "unchanged": 39},
                    {"metric": "duplicate_rate", "label": "duplicate rate", "group": "mission",
                     "higher_is_better": False, "n": 40, "baseline": 0.049, "candidate": 0.0, "delta": -0.049,
                     "ratio": 0.0, "ci_low": -0.06, "ci_high": -0.03, "p_value": 0.01, "p_holm": 0.03,
                     "significant": True, "improved": [], "degraded": [], "unchanged": 40},
                    {"metric": "latency_us.postprocess.p95", "label": "post-process p95", "group": "latency",
                     "higher_is_better": False, "n": 40, "baseline": 100.0, "candidate": 130.0, "delta": 30.0,
                     "ratio": 1.3, "ci_low": 10.0, "ci_high": 50.0, "p_value": None, "p_holm": None,
                     "significant": False, "improved": [], "degraded": [], "unchanged": 40},
                    {"metric": "chunk:nDCG@5", "label": "chunk nDCG@5", "group": "chunk", "higher_is_better": True,
                     "n": 40, "baseline": 0.5, "candidate": 0.45, "delta": -0.05, "ratio": 0.9, "ci_low": -0.09,
                     "ci_high": -0.01, "p_value": 0.02, "p_holm": 0.2, "significant": False, "improved": [],
                     "degraded": ["q0002"], "unchanged": 39},
                ],
                "gates": [
                    {"id": "g1", "spec": "same_doc_multi_chunk_recall >= +0.05",
                     "metric": "same_doc_multi_chunk_recall",
                     "severity": "fail", "outcome": "pass", "message": "ok", "value": 0.12, "threshold": 0.05,
                     "mde": 0.03},
                    {"id": "g2", "spec": "chunk:nDCG@5 >= -0.02", "metric": "chunk:nDCG@5", "severity": "fail",
                     "outcome": "fail", "message": "nDCG@5 fell by 0.05", "value": -0.05, "threshold": -0.02,
                     "mde": 0.04},
                    {"id": "g3", "spec": "latency:postprocess:p95 <= x1.5", "metric": "latency:postprocess:p95",
                     "severity": "warn", "outcome": "underpowered", "message": "too few queries", "value": None,
                     "threshold": 1.5, "mde": None},
                ],
            }
        )  # fmt: skip
    return {
        "schema_version": 1, "alpha": 0.05, "seed": 1, "resamples": 2000, "test": "paired permutation test",
        "run": {"dir": "x", "experiment": summary["experiment"]}, "against": None, "queries_compared": 40,
        "left_out": {"only_in_run": [], "only_in_against": []}, "gates_file": "gates.toml",
        "exit_code": exit_code, "comparisons": comps,
    }  # fmt: skip


def visible_text(html: str) -> str:
    """The page's text outside scripts and styles, tags removed and entities decoded."""
    import html as html_lib

    body = re.sub(r"<(script|style)[^>]*>.*?</\1>", " ", html, flags=re.S)
    return " ".join(html_lib.unescape(re.sub(r"<[^>]+>", " ", body)).split())


def test_report_is_self_contained_and_names_what_it_shows(run: Path) -> None:
    path = report_html.render_html(run)
    html = path.read_text()
    assert path == run / "report.html"
    # nothing to fetch: no URL-bearing attributes, no external references
    assert not re.search(r"""\b(src|href)\s*=""", html.replace('href="#', ""))
    assert "http://" not in html.replace("http://www.w3.org/", "") and "https://" not in html
    assert "@import" not in html and not re.search(r"url\((?!#)", html)  # only in-page references
    text = visible_text(html)
    for section in ("Verdict", "Configs", "Measures", "Charts", "Queries", "Provenance"):
        assert section in text
    assert "Not compared yet" in text and "rag-eval compare" in text
    assert html.count("<svg") >= 4  # recall with intervals, waterfall, latency (and the sweep of none here)


def test_content_security_policy_allows_only_the_report_script(run: Path) -> None:
    html = report_html.render_html(run).read_text()
    scripts = re.findall(r"<script>(.*?)</script>", html, flags=re.S)
    assert len(scripts) == 1
    digest = base64.b64encode(hashlib.sha256(scripts[0].encode()).digest()).decode()
    assert f"script-src 'sha256-{digest}'" in html
    assert "default-src 'none'" in html


def test_fallback_verdict_is_the_summary_difference(run: Path) -> None:
    summary = json.loads((run / "summary.json").read_text())
    text = visible_text(report_html.render_html(run).read_text())
    base = summary["configs"]["legacy"]
    for cand in ("evidence", "evidence-cap3"):
        delta = summary["configs"][cand]["same_doc_multi_chunk_recall"] - base["same_doc_multi_chunk_recall"]
        sign = "+" if delta > 0 else "−"
        assert f"same-document multi-chunk recall: {sign}{abs(delta):.3f}" in text
    dup = summary["configs"]["evidence"]["duplicate_rate"] - base["duplicate_rate"]
    assert f"{abs(dup) * 100:.1f} pts" in text


def test_verdict_and_table_from_compare_json(run: Path, tmp_path: Path) -> None:
    summary = json.loads((run / "summary.json").read_text())
    out = report_html.render_html(run, compare=compare_fixture(summary), out=tmp_path / "r.html")
    html = out.read_text()
    text = visible_text(html)
    assert "Exit code 1" in text and "a gate failed" in text
    assert "same-document multi-chunk recall: +0.120 [+0.090, +0.150] *" in text
    assert "duplicate rate: −4.9 pts [−6.0 pts, −3.0 pts] (0.0%) *" in text
    assert "post-process p95: ×1.30" in text
    # gates sorted worst first, each with its outcome; underpowered is not a pass
    verdict = html[html.index('id="verdict"') : html.index('id="configs"')]
    chips = re.findall(r'class="chip (\w+)"', verdict)
    assert chips[:3] == ["fail", "underpowered", "pass"]
    # the metric table marks significance after correction only: nDCG (p 0.02, p_holm 0.2) has no mark
    table = html[html.index('id="metric-table"') : html.index("</table>", html.index('id="metric-table"'))]
    ndcg_row = next(r for r in table.split("<tr>") if "chunk nDCG@5" in r)
    assert "*" not in visible_text(ndcg_row)
    recall_row = next(r for r in table.split("<tr>") if ">same-document multi-chunk recall<" in r)
    assert "good" in recall_row and "*" in visible_text(recall_row)
    # each comparison's own table: the interval and the gate of every measure, the first comparison open
    first = html.index('<details class="comparison" open>')
    comparison = html[first : html.index("</table>", first)]
    ndcg_row = next(r for r in comparison.split("<tr>") if "chunk nDCG@5" in r)
    assert "*" not in visible_text(ndcg_row) and 'chip fail' in ndcg_row and "[−0.090, −0.010]" in ndcg_row
    assert html.count('<details class="comparison"') == len(summary["configs"]) - 1


def test_exit_code_zero_reads_as_no_gate_failed(run: Path, tmp_path: Path) -> None:
    summary = json.loads((run / "summary.json").read_text())
    out = report_html.render_html(run, compare=compare_fixture(summary, exit_code=0), out=tmp_path / "r.html")
    text = visible_text(out.read_text())
    assert "Exit code 0" in text and "no gate failed" in text


@pytest.mark.parametrize(
    ("change", "field"),
    [
        (lambda c: c.pop("comparisons"), "comparisons"),
        (lambda c: c["comparisons"][0]["metrics"][1].update(delta="big"), "comparisons[0].metrics[1].delta"),
        (lambda c: c["comparisons"][1]["gates"][0].update(outcome="maybe"), "comparisons[1].gates[0].outcome"),
        (lambda c: c.update(exit_code="1"), "exit_code"),
    ],
)
def test_malformed_compare_json_is_an_input_error_naming_the_field(
    run: Path, tmp_path: Path, change: Any, field: str
) -> None:
    summary = json.loads((run / "summary.json").read_text())
    data = compare_fixture(summary)
    change(data)
    (tmp_path / "compare.json").write_text(json.dumps(data))
    out = tmp_path / "r.html"
    with pytest.raises(ReportInputError) as err:
        report_html.render_html(run, compare=tmp_path / "compare.json", out=out)
    assert isinstance(err.value, InputError) and err.value.field == field
    assert str(tmp_path / "compare.json") in str(err.value)
    assert not out.exists()  # no partial artifact


def test_not_a_run_directory(tmp_path: Path) -> None:
    (tmp_path / "summary.json").write_text("{not json")
    with pytest.raises(ReportInputError, match=r"summary.json: not valid JSON \(line 1"):
        report_html.render_html(tmp_path)
    assert not (tmp_path / "report.html").exists()


def test_compare_json_beside_the_run_is_used_unless_older_than_its_rows(run: Path, tmp_path: Path) -> None:
    work = tmp_path / "run"
    work.mkdir()
    for f in run.iterdir():
        (work / f.name).write_bytes(f.read_bytes())
    summary = json.loads((work / "summary.json").read_text())
    cmp = work / "compare.json"
    cmp.write_text(json.dumps(compare_fixture(summary)))
    assert "Exit code 1" in visible_text(report_html.render_html(work).read_text())
    old = (work / "per_query.parquet").stat().st_mtime - 60
    os.utime(cmp, (old, old))  # a comparison of an earlier run in this directory
    assert "Not compared yet" in visible_text(report_html.render_html(work).read_text())


def test_a_compare_out_directory_reads_the_run_it_names(run: Path, tmp_path: Path) -> None:
    summary = json.loads((run / "summary.json").read_text())
    data = compare_fixture(summary)
    data["run"]["dir"] = str(run)
    (tmp_path / "compare.json").write_text(json.dumps(data))
    path = report_html.render_html(tmp_path)
    assert path == tmp_path / "report.html" and "Exit code 1" in visible_text(path.read_text())


def test_hostile_text_is_escaped_everywhere(hostile_run: Path) -> None:
    html = report_html.render_html(hostile_run).read_text()
    # two script elements: the JSON data and the report's own script; no other tag came from the data
    assert len(re.findall(r"<script\b", html)) == 2
    assert "<img" not in html and "<textarea" not in html and "<b>bold tag</b>" not in html
    assert "window.__pwned" in html  # the text is there, escaped
    text = visible_text(html)
    assert HOSTILE[0] in text and HOSTILE[1] in text  # the query row (and the document title) as text
    payload = re.search(r'<script type="application/json" id="drill-data">(.*?)</script>', html, re.S)
    assert payload is not None and "<" not in payload.group(1)
    data = json.loads(payload.group(1))
    assert data["queries"]["q0000"]["text"] == " ".join(" ".join(HOSTILE).split())
    assert any(t and HOSTILE[0] in t[2] for t in data["texts"])


def test_new_measures_and_stages_are_shown_in_order(run: Path, tmp_path: Path) -> None:
    """Measures and loss stages the summary gains later (new columns, a document_dedup stage, a
    second legacy pipeline) are rendered without code changes, in pipeline order."""
    work = tmp_path / "run"
    work.mkdir()
    for f in run.iterdir():
        (work / f.name).write_bytes(f.read_bytes())
    summary = json.loads((work / "summary.json").read_text())
    for cfg in summary["configs"].values():
        cfg["cap_compliance_true"] = 0.75
        cfg["content_duplicates"] = {"legacy_rows": 0.01, "copies": 0.02}
        losses = cfg["stage_losses"]
        moved = losses.pop("cap", 0)
        losses.update({"document_dedup": moved, "projector_total_chars": 0})
    (work / "summary.json").write_text(json.dumps(summary))
    context = report_html.render_context(load_run(work))
    rows = [r.label for _, rows in context["table"] for r in rows]
    assert "cap compliance (true documents)" in rows and "content duplicates: legacy rows" in rows
    stored, true = rows.index("cap compliance (stored doc ids)"), rows.index("cap compliance (true documents)")
    assert stored < true < rows.index("chunk nDCG@1")
    waterfall = dict(context["charts"])["Where relevant chunks were lost"]
    labels = [lab for lab in re.findall(r">\s*([a-z:_ ]+)\s*<", waterfall) if lab.strip()]
    order = [lab.strip() for lab in labels if lab.strip() in {"not retrieved", "document dedup", "return n",
                                                              "projector: total chars", "delivered"}]  # fmt: skip
    assert order[:5] == ["not retrieved", "document dedup", "return n", "projector: total chars", "delivered"]
    # relevant - losses != delivered once a stage is renamed by hand: the report says the files disagree
    assert context["mismatch"] == []


def test_files_that_disagree_are_reported(run: Path, tmp_path: Path) -> None:
    work = tmp_path / "run"
    work.mkdir()
    for f in run.iterdir():
        (work / f.name).write_bytes(f.read_bytes())
    summary = json.loads((work / "summary.json").read_text())
    summary["configs"]["evidence"]["stage_losses"]["cap"] += 1
    (work / "summary.json").write_text(json.dumps(summary))
    assert "The run's files disagree for evidence" in visible_text(report_html.render_html(work).read_text())


def test_history_adds_the_trend(run: Path, tmp_path: Path) -> None:
    history = pd.DataFrame(
        {
            "night": ["2026-11-01", "2026-11-02", "2026-11-01", "2026-11-02"],
            "config": ["legacy", "legacy", "evidence", "evidence"],
            "same_doc_multi_chunk_recall": [0.4, 0.41, 0.5, 0.52],
            "git_commit": ["a", "b", "a", "b"],
        }
    )
    path = tmp_path / "history.parquet"
    history.to_parquet(path)
    context = report_html.render_context(load_run(run, history=path))
    assert "Nightly trend" in dict(context["charts"])
    with pytest.raises(ReportInputError, match="field 'config'"):
        load_run(run, history=history.drop(columns=["config"]))


def test_drilldown_past_the_limit_keeps_the_most_changed_and_the_worst(run: Path) -> None:
    data = load_run(run)
    full = build_drilldown(data)
    cut = build_drilldown(data, max_queries=10)
    assert len(full.rows) == full.total == 40 and not full.cut
    assert len(cut.rows) == 10 and cut.cut and cut.total == 40
    # an oracle from the rows alone: per query, the change in relevant chunks delivered against the
    # baseline and the share delivered over all configs
    pq = data.per_query
    got = pq.assign(n=pq["delivered_relevant"].map(len), r=pq["relevant_chunks"].map(len))
    wide = got.pivot(index="query_id", columns="config", values="n")
    change = wide.sub(wide[data.baseline], axis=0).abs().max(axis=1)
    share = got.groupby("query_id").apply(lambda g: g["n"].sum() / max(1, g["r"].iloc[0] * len(g)))
    kept = {r.qid for r in cut.rows}
    changed = {r.qid for r in cut.rows if r.reasons == ("changed",)}
    assert len(changed) == min(5, int((change > 0).sum()))
    assert min(change[list(changed)]) >= max(change[[q for q in change.index if q not in changed]])
    worst = kept - changed
    rest = [q for q in share.index if q not in kept and got[got.query_id == q]["r"].iloc[0] > 0]
    assert not rest or max(share[list(worst)]) <= min(share[rest])
    html_text = visible_text(report_html.render_html(run, max_queries=10, out=run.parent / "cut.html").read_text())
    assert "Showing 10 of 40 queries" in html_text and "per_query.parquet" in html_text


def test_reproduce_command(run: Path) -> None:
    manifest = json.loads((run / "manifest.json").read_text())
    cmd = report_html.reproduce_command(manifest, "out dir")
    assert cmd.startswith("git checkout " + "0" * 40 + " && rag-eval run --dataset ")
    assert "--config 'evidence=inline'" not in cmd and "--baseline legacy" in cmd and cmd.endswith("--out 'out dir'")
    m2 = copy.deepcopy(manifest)
    m2["experiment"]["source"] = "exp; rm -rf /.toml"
    assert "rag-eval run 'exp; rm -rf /.toml'" in report_html.reproduce_command(m2, "o")


def test_experiment_report_settings() -> None:
    import tomllib

    from rag_eval.core.errors import ConfigError
    from rag_eval.experiment import experiment_from_table
    from tests.conftest import SHIPPED

    base = SHIPPED / "experiments"
    table = tomllib.loads((base / "default.toml").read_text())
    assert experiment_from_table(table, base=base, source="x").drilldown_queries is None
    table["report"] = {"drilldown_queries": 50}
    exp = experiment_from_table(table, base=base, source="x")
    assert exp.drilldown_queries == 50 and exp.as_dict()["report"] == {"drilldown_queries": 50}
    for bad, message in ((0, "must be >= 1"), ("many", "expected"), (True, "expected")):
        table["report"] = {"drilldown_queries": bad}
        with pytest.raises(ConfigError, match=rf"{message}.*@ report.drilldown_queries"):
            experiment_from_table(table, base=base, source="x")
    table["report"] = {"drilldown": 5}
    with pytest.raises(ConfigError, match=r"report\.drilldown"):
        experiment_from_table(table, base=base, source="x")
