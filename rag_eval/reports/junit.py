"""``junit.xml`` of a comparison: one testsuite per compared config, one testcase per gate.

A gate that fired with severity ``fail`` is a ``<failure>``; a gate that could not be evaluated
(the metric is undefined for the config) is an ``<error>``; a warning and an underpowered check are
``<skipped>`` with the reason (JUnit has no "warning": skipped is the state CI systems show as
neither passed nor failed). The gate's values (value, threshold, minimum detectable difference,
p-value) and the metric's (baseline, candidate, delta, interval) are properties of the testcase;
every metric of the config is a property of the testsuite.

>>> doc = {"run": {"experiment": "e"}, "comparisons": [{"baseline": "a", "candidate": "b",
...        "baseline_source": "run", "metrics": [], "gates": [{"id": "x == 1", "metric": "x", "outcome": "fail",
...        "severity": "fail", "message": "x = 0", "value": 0.0, "threshold": 1.0, "mde": None, "p_value": None}]}]}
>>> "<failure" in render_junit(doc)
True
"""

from __future__ import annotations

import math
import xml.etree.ElementTree as ET
from collections.abc import Mapping
from typing import Any

GATE_PROPERTIES = ("outcome", "severity", "spec", "value", "threshold", "mde", "p_value")
METRIC_PROPERTIES = ("baseline", "candidate", "delta", "ratio", "ci_low", "ci_high", "p_value", "p_holm", "n")


def render_junit(document: Mapping[str, Any]) -> str:
    experiment = str(document.get("run", {}).get("experiment", ""))
    root = ET.Element("testsuites", name=f"rag-eval gates: {experiment}")
    totals = {"tests": 0, "failures": 0, "errors": 0, "skipped": 0}
    for comparison in document.get("comparisons", []):
        suite = _suite(comparison, experiment)
        root.append(suite)
        for key in totals:
            totals[key] += int(suite.get(key, "0"))
    for key, value in totals.items():
        root.set(key, str(value))
    ET.indent(root)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(root, encoding="unicode") + "\n"


def _suite(comparison: Mapping[str, Any], experiment: str) -> ET.Element:
    candidate = str(comparison["candidate"])
    suite = ET.Element("testsuite", name=candidate)
    props = ET.SubElement(suite, "properties")
    _prop(props, "baseline", comparison["baseline"])
    _prop(props, "baseline_source", comparison["baseline_source"])
    metrics = {m["metric"]: m for m in comparison.get("metrics", [])}
    for name, m in metrics.items():
        _prop(props, name, _metric_summary(m))
    counts = {"tests": 0, "failures": 0, "errors": 0, "skipped": 0}
    for gate in comparison.get("gates", []):
        counts["tests"] += 1
        case = ET.SubElement(
            suite, "testcase", classname=f"rag_eval.gates.{experiment}.{candidate}", name=str(gate["id"]), time="0"
        )
        case_props = ET.SubElement(case, "properties")
        for key in GATE_PROPERTIES:
            _prop(case_props, key, gate.get(key))
        metric = metrics.get(gate["metric"], {})
        for key in METRIC_PROPERTIES:
            if key in metric:
                _prop(case_props, f"metric.{key}", metric[key])
        outcome = gate["outcome"]
        message = str(gate.get("message", ""))
        if outcome == "fail":
            counts["failures"] += 1
            ET.SubElement(case, "failure", message=message, type="GateFailed").text = message
        elif outcome == "error":
            counts["errors"] += 1
            ET.SubElement(case, "error", message=message, type="GateNotEvaluated").text = message
        elif outcome in ("warn", "underpowered"):
            counts["skipped"] += 1
            ET.SubElement(case, "skipped", message=f"{outcome}: {message}")
        ET.SubElement(case, "system-out").text = message
    for key, value in counts.items():
        suite.set(key, str(value))
    return suite


def _prop(parent: ET.Element, name: str, value: Any) -> None:
    ET.SubElement(parent, "property", name=str(name), value=_text(value))


def _text(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, float):
        return "" if not math.isfinite(value) else repr(value)
    return str(value)


def _metric_summary(m: Mapping[str, Any]) -> str:
    def f(v: Any) -> str:
        return "n/a" if v is None or (isinstance(v, float) and not math.isfinite(v)) else f"{v:.6g}"

    return (
        f"{f(m.get('candidate'))} (baseline {f(m.get('baseline'))}, delta {f(m.get('delta'))}, "
        f"95% CI [{f(m.get('ci_low'))}, {f(m.get('ci_high'))}], p_holm {f(m.get('p_holm'))}, n {m.get('n')})"
    )
