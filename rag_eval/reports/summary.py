"""``summary.md`` of a comparison: the gate table, ready for a CI job summary.

>>> doc = {"run": {"dir": "r", "experiment": "e"}, "against": None, "exit_code": 0, "queries_compared": 3,
...        "left_out": {"only_in_run": [], "only_in_against": []},
...        "alpha": 0.05, "resamples": 99, "seed": 1, "gates_file": "g.toml", "notes": [], "test": "t",
...        "comparisons": []}
>>> render_summary(doc).splitlines()[0]
'## rag-eval gates: e: PASS'
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import jinja2

from rag_eval.reports.gatetext import gate_value
from rag_eval.reports.templating import environment
from rag_eval.reports.verdict_words import LEGEND, rule_words, verdict_detail, verdict_headline

VERDICT = {"pass": "pass", "warn": "WARN", "fail": "FAIL", "underpowered": "underpowered", "error": "ERROR"}
EXIT_HEADLINE = {0: "PASS", 1: "FAIL (a gate failed)", 2: "ERROR (a gate could not be evaluated)"}


def _env() -> jinja2.Environment:
    return environment(html=False, filters={"cell": _cell})


def _cell(text: Any) -> str:
    """Markdown table cell: pipes escaped, one line."""
    return " ".join(str(text).split()).replace("|", "\\|")


def _num(v: Any, pct: bool = False) -> str:
    if v is None or (isinstance(v, float) and not math.isfinite(v)):
        return "–"
    if pct:
        return f"{v * 100:+.1f}%"
    return f"{v:.4g}"


def gate_rows(document: Mapping[str, Any]) -> list[dict[str, str]]:
    """One row per gate: config, gate, value, delta, interval, verdict, message (also printed by the CLI)."""
    rows = []
    for comparison in document.get("comparisons", []):
        metrics = {m["metric"]: m for m in comparison.get("metrics", [])}
        for gate in comparison.get("gates", []):
            m = metrics.get(gate["metric"], {})
            ratio = m.get("ratio") is not None and gate.get("kind") == "relative" and "%" in str(gate.get("spec"))
            if ratio:
                delta = _num((m.get("ratio") or math.nan) - 1, pct=True)
                low, high = m.get("ratio_ci_low"), m.get("ratio_ci_high")
                interval = f"[{_num(low - 1 if low is not None else None, True)}, "
                interval += f"{_num(high - 1 if high is not None else None, True)}]"
            else:
                delta = _num(m.get("delta"))
                interval = f"[{_num(m.get('ci_low'))}, {_num(m.get('ci_high'))}]"
            rows.append(
                {
                    "config": str(comparison["candidate"]),
                    "baseline": str(comparison["baseline"]),
                    "gate": str(gate["id"]),
                    "severity": str(gate["severity"]),
                    "value": gate_value(gate, candidate=m.get("candidate")),  # with its unit
                    "delta": delta,
                    "interval": interval,
                    "verdict": VERDICT.get(gate["outcome"], gate["outcome"]),
                    "outcome": str(gate["outcome"]),
                    "message": str(gate.get("message", "")),
                }
            )
    return rows


def render_summary(document: Mapping[str, Any]) -> str:
    template = _env().get_template("summary.md.j2")
    code = int(document.get("exit_code", 0))
    leads = [(verdict_headline(c), verdict_detail(c)) for c in document.get("comparisons", [])]
    return template.render(
        doc=document, rows=gate_rows(document), headline=EXIT_HEADLINE.get(code, f"exit {code}"), leads=leads,
        rule=rule_words(document), legend=LEGEND,
    )  # fmt: skip
