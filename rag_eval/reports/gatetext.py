"""A gate as a reader reads it: the outcome once, the check in words, its value with its unit.

``compare.json`` names a gate by its spec (``fail cap_compliance == 1 for pipeline=evidence``); the
report and ``report.md`` say what it checks instead, with the measure's label and unit from the
registry (:mod:`rag_eval.metrics.registry`), and whether it is required (``fail``) or advisory
(``warn``). The scope (``for ...``) is left out: a chip stands on the line of a config it
applies to.

>>> chip_text({"spec": "fail cap_compliance == 1 for pipeline=evidence", "metric": "cap_compliance",
...            "outcome": "pass", "severity": "fail", "kind": "absolute", "value": 1.0})
'pass – cap compliance (stored doc ids) is 100% (required)'
>>> chip_text({"spec": "warn chunk:nDCG@5 drop <= 0.02", "metric": "chunk:nDCG@5", "outcome": "warn",
...            "severity": "warn", "kind": "relative", "value": 0.0268})
'warn – chunk nDCG@5 drops by at most 0.02 (advisory): it dropped by 0.027'
>>> chip_text({"spec": "warn cap_compliance_true drop <= 0.02", "metric": "cap_compliance_true", "outcome": "pass",
...            "severity": "warn", "kind": "relative", "value": -0.43})
'pass – cap compliance (true documents) drops by at most 2 pts (advisory)'
>>> gate_value({"metric": "latency:postprocess:p95", "value": 0.124, "spec": "latency:postprocess:p95 growth <= 20%",
...             "kind": "relative"}, candidate=62.1)
'62 µs'
>>> observed({"spec": "warn latency:postprocess:p95 growth <= 20%", "metric": "latency:postprocess:p95",
...           "kind": "relative", "value": -0.288})
'it fell by 28.8%'
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from rag_eval.compare.checks import AbsoluteCheck, RelativeCheck
from rag_eval.compare.gates import parse_check
from rag_eval.core.errors import GatesError
from rag_eval.reports.display import Measure, fmt, measure, normalise_key

_ABSOLUTE = {"==": "is", "!=": "is not", "<=": "is at most", ">=": "is at least", "<": "is below", ">": "is above"}
_RELATIVE = {"drop": "drops by at most", "growth": "grows by at most"}
_DONE = {"drop": "dropped by", "growth": "grew by"}
_AGAINST = {"drop": "rose by", "growth": "fell by"}
_SEVERITY = {"fail": "required", "warn": "advisory"}


def _measure(gate: Mapping[str, Any]) -> Measure:
    return measure(normalise_key(str(gate.get("metric", ""))))


def _check(gate: Mapping[str, Any]) -> AbsoluteCheck | RelativeCheck | None:
    """The gate's check as the gates file's own grammar reads it (None: a spec this version cannot read,
    e.g. of a metric it no longer knows)."""
    try:
        return parse_check(str(gate.get("spec") or ""), path="compare.json")
    except GatesError:
        return None


def _threshold(m: Measure, check: AbsoluteCheck | RelativeCheck) -> str:
    """A threshold as the check means it: a share of the baseline in percent, a time with its unit, a
    share in percent (absolute) or points (a change), else as written."""
    if isinstance(check, RelativeCheck) and check.relative:
        return f"{check.threshold * 100:g}%"
    if m.unit == "us":
        return fmt(m, check.threshold)  # parse_check gives times in microseconds
    if m.unit == "share":
        return f"{check.threshold * 100:g} pts" if isinstance(check, RelativeCheck) else f"{check.threshold * 100:g}%"
    return f"{check.threshold:g}"


def check_words(gate: Mapping[str, Any]) -> str:
    """What the gate checks, in words (its spec as written when it cannot be read)."""
    check, m = _check(gate), _measure(gate)
    if check is None:
        return str(gate.get("spec") or gate.get("id") or "")
    if isinstance(check, RelativeCheck):
        return f"{m.label} {_RELATIVE[check.direction]} {_threshold(m, check)}"
    return f"{m.label} {_ABSOLUTE[check.op]} {_threshold(m, check)}"


def observed(gate: Mapping[str, Any]) -> str:
    """What was measured against the check: the value (absolute), or the change in the bad direction."""
    raw = gate.get("value")
    if not isinstance(raw, int | float) or not math.isfinite(raw):
        return "it could not be measured" if gate.get("outcome") == "error" else ""
    value = float(raw)
    m = _measure(gate)
    check = _check(gate)
    if gate.get("kind") == "relative" and isinstance(check, RelativeCheck):
        done = _DONE[check.direction] if value >= 0 else _AGAINST[check.direction]  # a change the other way
        value = abs(value)
        if check.relative:
            return f"it {done} {value * 100:.1f}%"
        if m.unit == "share":
            return f"it {done} {value * 100:.1f} pts"
        return f"it {done} {fmt(m, value)}"
    return f"it is {fmt(m, value)}"


def chip_text(gate: Mapping[str, Any]) -> str:
    """``outcome – the check in words (required | a warning)``, and what was measured unless it passed."""
    outcome = str(gate.get("outcome", ""))
    text = f"{outcome} – {check_words(gate)} ({_SEVERITY.get(str(gate.get('severity')), str(gate.get('severity')))})"
    seen = observed(gate) if outcome != "pass" else ""
    return f"{text}: {seen}" if seen else text


def gate_value(gate: Mapping[str, Any], *, candidate: Any) -> str:
    """The candidate's value of the gate's measure, with its unit and precision."""
    return fmt(_measure(gate), candidate)
