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
import re
from collections.abc import Mapping
from typing import Any

from rag_eval.reports.display import Measure, fmt, measure, normalise_key

_SPEC = re.compile(
    r"^\s*(?:(?:fail|warn)\s+)?(?P<metric>\S+)\s+(?P<op>drop|growth|rise|==|!=|<=|>=|<|>)\s*(?:(?P<bound><=)\s*)?"
    r"(?P<number>[-+]?[\d.]+(?:[eE][-+]?\d+)?)\s*(?P<unit>%|us|µs|ms|s)?(?:\s+for\s+.*)?$"
)
_ABSOLUTE = {"==": "is", "!=": "is not", "<=": "is at most", ">=": "is at least", "<": "is below", ">": "is above"}
_RELATIVE = {"drop": "drops by at most", "growth": "grows by at most", "rise": "rises by at most"}
_DONE = {"drop": "dropped by", "growth": "grew by", "rise": "rose by"}
_AGAINST = {"drop": "rose by", "growth": "fell by", "rise": "fell by"}
_SEVERITY = {"fail": "required", "warn": "advisory"}
_TIME = {"us": 1.0, "µs": 1.0, "ms": 1e3, "s": 1e6}


def _measure(gate: Mapping[str, Any]) -> Measure:
    return measure(normalise_key(str(gate.get("metric", ""))))


def _number(m: Measure, value: float, unit: str | None) -> str:
    """A threshold as the check means it: a share in percent, a time with its unit, else as written."""
    if unit == "%":
        return f"{value:g}%"
    if unit in _TIME or m.unit == "us":
        return fmt(m, value * _TIME.get(unit or "us", 1.0))
    if m.unit == "share":
        return f"{value * 100:g}%"
    return f"{value:g}"


def check_words(gate: Mapping[str, Any]) -> str:
    """What the gate checks, in words (its spec as written when it cannot be read)."""
    spec = str(gate.get("spec") or gate.get("id") or "")
    found = _SPEC.match(spec)
    m = _measure(gate)
    if found is None:
        return spec
    value, unit = float(found["number"]), found["unit"]
    if found["op"] in _RELATIVE:
        amount = f"{value * 100:g} pts" if unit is None and m.unit == "share" else _number(m, value, unit)
        return f"{m.label} {_RELATIVE[found['op']]} {amount}"
    return f"{m.label} {_ABSOLUTE[found['op']]} {_number(m, value, unit)}"


def observed(gate: Mapping[str, Any]) -> str:
    """What was measured against the check: the value (absolute), or the change in the bad direction."""
    raw = gate.get("value")
    if not isinstance(raw, int | float) or not math.isfinite(raw):
        return "it could not be measured" if gate.get("outcome") == "error" else ""
    value = float(raw)
    m = _measure(gate)
    found = _SPEC.match(str(gate.get("spec") or ""))
    if gate.get("kind") == "relative" and found is not None and found["op"] in _DONE:
        done = _DONE[found["op"]] if value >= 0 else _AGAINST[found["op"]]  # a change the other way
        value = abs(value)
        if found["unit"] == "%":
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
