"""The verdict of one comparison in words: the first line a reviewer reads for a config, in
``summary.md``, the console and the report.

One clause per measure a gate holds, in the gates' order, worded from the registry's label and unit
(:mod:`rag_eval.metrics.registry`) and the number's one verdict in ``compare.json``: a change that is
significant says which way, by how much and its interval; one whose interval holds no change says
"no clear change" with its interval; one outside it but not significant (a one-sided gate's other way,
or Holm) says so; a check on the config's own value says the value and whether it holds.

>>> comparison = {"baseline": "legacy-merge", "candidate": "evidence", "metrics": [
...     {"metric": "same_doc_multi_chunk_recall", "delta": -0.049, "ci_low": -0.077, "ci_high": -0.025,
...      "significant": True, "candidate": 0.42, "ratio": None},
...     {"metric": "latency:postsearch_cpu:p50", "delta": 0.4, "ratio": 1.01, "ratio_ci_low": 0.98,
...      "ratio_ci_high": 1.03, "significant": False, "candidate": 41.0}],
...   "gates": [
...     {"metric": "same_doc_multi_chunk_recall", "kind": "relative", "outcome": "warn", "value": 0.049},
...     {"metric": "latency:postsearch_cpu:p50", "kind": "relative", "outcome": "pass", "value": 0.01}]}
>>> verdict_sentence(comparison)  # doctest: +NORMALIZE_WHITESPACE
'evidence vs legacy-merge: same-document multi-chunk recall worse by 0.049 [0.025, 0.077], significant;
 post-search CPU latency p50 no clear change (×1.01 [0.98, 1.03], not significant)'

A gain that a drop-only gate does not test is a gain, not "no change":

>>> verdict_sentence({"baseline": "a", "candidate": "b", "metrics": [
...     {"metric": "cap_compliance_true", "delta": 0.6, "ci_low": 0.5, "ci_high": 0.65, "significant": False,
...      "alternative": "less", "candidate": 0.9, "ratio": None}],
...   "gates": [{"metric": "cap_compliance_true", "kind": "relative", "outcome": "pass", "value": -0.6}]})
... # doctest: +NORMALIZE_WHITESPACE
'b vs a: cap compliance (true documents) better by 60.0 points [50.0, 65.0 points],
 not significant (tested one-sided, a fall only)'
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from rag_eval.reports.display import Measure, fmt, measure, normalise_key


def verdict_sentence(comparison: Mapping[str, Any]) -> str:
    """``CANDIDATE vs BASELINE: clause; clause; ...`` for one comparison of ``compare.json``."""
    metrics = {m["metric"]: m for m in comparison.get("metrics", [])}
    clauses: list[str] = []
    seen: set[str] = set()
    for gate in comparison.get("gates", []):
        name = str(gate.get("metric", ""))
        if name in seen:
            continue
        seen.add(name)
        m = measure(normalise_key(name))
        entry = metrics.get(name)
        if gate.get("kind") == "relative" and entry is not None:
            clauses.append(_change(m, entry))
        else:
            clauses.append(_own_value(m, gate, entry))
    head = f"{comparison.get('candidate')} vs {comparison.get('baseline')}"
    return f"{head}: {'; '.join(clauses)}" if clauses else f"{head}: no gate applies"


def _missing(v: Any) -> bool:
    return v is None or (isinstance(v, float) and not math.isfinite(v))


def _amount(m: Measure, v: float) -> str:
    """A size of change: a share in points, else in the measure's own unit."""
    if m.unit == "share":
        return f"{abs(v) * 100:.1f} points"
    return fmt(m, abs(v))


def _change(m: Measure, e: Mapping[str, Any]) -> str:
    label = m.label
    if e.get("ratio") is not None and m.unit == "us":
        if any(_missing(e.get(k)) for k in ("ratio", "ratio_ci_low", "ratio_ci_high")):
            return f"{label} not measured on both sides"
        ratio, low, high = float(e["ratio"]), float(e["ratio_ci_low"]), float(e["ratio_ci_high"])
        if not e.get("significant") and low <= 1 <= high:
            return f"{label} no clear change (×{ratio:.2f} [{low:.2f}, {high:.2f}], not significant)"
        way = "slower" if ratio > 1 else "faster"
        ends = sorted((abs(low - 1), abs(high - 1)))
        return f"{label} {way} by {abs(ratio - 1):.1%} [{ends[0]:.1%}, {ends[1]:.1%}], {_significance(e)}"
    if any(_missing(e.get(k)) for k in ("delta", "ci_low", "ci_high")):
        return f"{label} not testable here ({e.get('n', 0)} units)"
    delta, low, high = float(e["delta"]), float(e["ci_low"]), float(e["ci_high"])
    if not e.get("significant") and low <= 0 <= high:
        d = m.digits
        return f"{label} no clear change ({delta:+.{d}f} [{low:+.{d}f}, {high:+.{d}f}], not significant)"
    better = (delta > 0) == bool(m.higher_is_better)
    ends = sorted((abs(low), abs(high)))
    interval = f"[{_amount(m, ends[0])}, {_amount(m, ends[1])}]".replace(" points,", ",")
    return f"{label} {'better' if better else 'worse'} by {_amount(m, delta)} {interval}, {_significance(e)}"


def _significance(e: Mapping[str, Any]) -> str:
    """A change whose interval excludes none may still not be significant: its gate tests the other way
    only (one-sided), or Holm's step asks for more."""
    if e.get("significant"):
        return "significant"
    alternative = e.get("alternative")
    if alternative in ("less", "greater"):
        return f"not significant (tested one-sided, {'a fall' if alternative == 'less' else 'a rise'} only)"
    return "not significant after correction"


def _own_value(m: Measure, gate: Mapping[str, Any], entry: Mapping[str, Any] | None) -> str:
    value = gate.get("value", entry.get("candidate") if entry else None)
    if _missing(value):
        return f"{m.label} not defined"
    held = {"pass": "holds", "fail": "does not hold", "warn": "does not hold", "error": "not defined"}
    return f"{m.label} {fmt(m, value)} ({held.get(str(gate.get('outcome')), str(gate.get('outcome')))})"
