"""The HTML report of a run (``DIR/report.html``): one self-contained file that opens offline.

Rendered with jinja2 (autoescape on: every text the run holds, from corpus chunks to query
text, is escaped). Charts are inline SVG drawn by matplotlib; the drill-down's details are
JSON in a ``<script type="application/json">`` element (``<``, ``>`` and ``&`` escaped), put
into the page by a small script that only ever sets ``textContent``. No CDN, font, image or
request of any kind; without JavaScript the verdict, the tables and the charts still show.

Top to bottom: the verdict, the configs (what differs), the metric table, the charts, the
per-query drill-down, the provenance.

>>> render_html("no/such/run")
Traceback (most recent call last):
...
rag_eval.core.errors.ReportInputError: no/such/run/summary.json: not found: is this a run directory?
"""

from __future__ import annotations

import base64
import hashlib
import json
import shlex
from collections.abc import Mapping
from functools import cache
from importlib import resources
from pathlib import Path
from typing import Any

import jinja2
import pandas as pd
from markupsafe import Markup

from rag_eval.compare.runs import unjudged_note
from rag_eval.core.errors import RunStoreError
from rag_eval.files import write_text
from rag_eval.loadtest.document import measured_on
from rag_eval.reports import chart_data
from rag_eval.reports.display import budget_note, lead_of, loss_label
from rag_eval.reports.drilldown import DEFAULT_MAX_QUERIES, build_drilldown
from rag_eval.reports.existing import resolution_rows
from rag_eval.reports.gatetext import chip_text
from rag_eval.reports.loadtest import load_rows
from rag_eval.reports.rundata import ReportData, load_run
from rag_eval.reports.tables import config_diff, metric_table, verdict
from rag_eval.reports.templating import environment
from rag_eval.reports.traffic import traffic_section
from rag_eval.reports.verdict_words import LEGEND, rule_words

REPORT_FILE = "report.html"


@cache
def _env() -> jinja2.Environment:
    return environment(html=True, filters={"loss_label": loss_label, "chip_text": chip_text})


@cache
def _asset(name: str) -> Markup:
    # our own static CSS and script, inlined as they are (they hold no run data)
    return Markup(resources.files("rag_eval.reports").joinpath("templates", name).read_text(encoding="utf-8"))


@cache
def _script_hash() -> str:
    # the page's Content-Security-Policy runs this one script and nothing else
    digest = hashlib.sha256(str(_asset("report.js")).encode("utf-8")).digest()
    return "sha256-" + base64.b64encode(digest).decode("ascii")


def reproduce_command(manifest: Mapping[str, Any], out: str) -> str:
    """One line that reruns the run: the commit, then ``rag-eval run`` with the same inputs."""
    exp = manifest.get("experiment") or {}
    parts = ["rag-eval", "run"]
    if exp.get("source"):
        parts.append(str(exp["source"]))
    else:
        parts += ["--dataset", str(exp.get("dataset", "")), "--split", str(exp.get("split", ""))]
        for c in exp.get("configs") or ():
            mode = "" if c.get("mode") in (None, "dense") else f":{c['mode']}"
            parts += ["--config", f"{c['name']}={c.get('origin', '')}{mode}"]
        parts += ["--baseline", str(exp.get("baseline", ""))]
    uri = (manifest.get("milvus") or {}).get("uri")
    if uri:
        parts += ["--milvus-uri", str(uri)]
    if exp.get("query_limit") is not None:
        parts += ["--limit", str(exp["query_limit"])]
    parts += ["--out", out]
    command = shlex.join(parts)
    commit = (manifest.get("git") or {}).get("commit")
    return f"git checkout {commit} && {command}" if commit else command


def _max_queries(manifest: Mapping[str, Any]) -> int:
    report = (manifest.get("experiment") or {}).get("report") or {}
    value = report.get("drilldown_queries")
    return int(value) if isinstance(value, int) and value > 0 else DEFAULT_MAX_QUERIES


def render_context(data: ReportData, *, max_queries: int | None = None) -> dict[str, Any]:
    """Everything the template shows, as plain values."""
    summary, manifest = data.summary, data.manifest
    limit = max_queries or _max_queries(manifest)
    drill = build_drilldown(data, max_queries=limit)
    names, differ, same = config_diff(manifest.get("configs") or [])
    hashes = {str(c["name"]): str(c.get("hash", "")) for c in manifest.get("configs") or []}
    compare = data.compare
    lines = verdict(summary, compare)
    return {
        "summary": summary,
        "manifest": manifest,
        "names": data.names,
        "baseline": data.baseline,
        "compare": compare,
        "verdict": lines,
        "legend": LEGEND,
        "rule": rule_words(compare) if compare else "",
        "unjudged": unjudged_note(summary),
        "budget": budget_note(summary),
        "models": {
            str(c.get("name")): str(c.get("models", "")) for c in manifest.get("configs") or () if c.get("models")
        },
        "exit_code": compare.get("exit_code") if compare else None,
        "candidates": [line.candidate for line in lines],
        "comparison_baselines": [line.baseline for line in lines],
        "table": metric_table(summary, compare, lead_of(manifest)),
        "config_names": names,
        "config_differ": differ,
        "config_same": same,
        "hashes": hashes,
        "charts": chart_data.all_charts(data),
        "traffic": traffic_section(data),
        "load": data.load,
        "load_rows": load_rows(data.load) if data.load is not None else [],
        "load_measured": measured_on(data.load) if data.load is not None else "",
        "mismatch": chart_data.delivered_check(data),
        "drill": drill,
        "drill_json": drill.data,
        "reproduce": reproduce_command(manifest, str(data.dir)),
        "run_dir": str(data.dir),
        "manifest_json": json.dumps(manifest, indent=2, ensure_ascii=False),
        "collection_rows": resolution_rows(summary["resolution"]) if summary.get("resolution") else None,
        "css": _asset("report.css"),
        "script": _asset("report.js"),
        "script_hash": _script_hash(),
    }


def render_html(
    run_dir: str | Path,
    *,
    compare: str | Path | Mapping[str, Any] | None = None,
    history: str | Path | pd.DataFrame | None = None,
    out: str | Path | None = None,
    max_queries: int | None = None,
    shown_dir: str | Path | None = None,
) -> Path:
    """Render ``report.html`` for a run directory (or a ``rag-eval compare --out`` directory)
    and return its path. ``compare`` defaults to ``run_dir/compare.json`` when present;
    ``history`` (``reports/history.parquet`` or a DataFrame) adds the nightly trend;
    ``out`` defaults to ``run_dir/report.html``; ``max_queries`` caps the drill-down
    (default: the experiment's ``[report] drilldown_queries``, else 300); ``shown_dir`` is the
    directory the report names as the run's (where a staged run will be published).
    For example, ``render_html("reports/latest")`` writes and returns
    ``reports/latest/report.html`` (the browser test renders real run directories).
    """
    data = load_run(run_dir, compare=compare, history=history)
    context = render_context(data, max_queries=max_queries)
    if shown_dir is not None:
        context["run_dir"] = str(shown_dir)
        context["reproduce"] = reproduce_command(data.manifest, str(shown_dir))
    html = _env().get_template("report.html.j2").render(**context)
    path = Path(out) if out is not None else Path(run_dir) / REPORT_FILE
    try:
        write_text(path, html)
    except OSError as exc:
        raise RunStoreError(f"cannot write the report: {exc.strerror}", path=str(path)) from exc
    return path
