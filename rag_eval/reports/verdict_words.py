"""The verdict of one comparison in words: the line a reviewer decides from, then the detail, in
``summary.md``, the console and the report.

:func:`verdict_headline` opens a comparison: its gates counted by what they found, each regression and each
undecided check named with its change. :func:`verdict_sentence` is the detail below it: one clause per
measure a gate holds, in the gates' order, worded from the registry's label and unit
(:mod:`rag_eval.metrics.registry`) and the number's one verdict in ``compare.json``. :data:`LEGEND` says
what an interval and a star are; :func:`rule_words` what a gate's ``fail`` and ``pass`` mean under the
fire rule in force.

>>> comparison = {"baseline": "legacy-merge", "candidate": "evidence", "metrics": [
...     {"metric": "same_doc_multi_chunk_recall", "delta": -0.049, "ci_low": -0.077, "ci_high": -0.025,
...      "significant": True, "candidate": 0.42, "ratio": None, "alternative": "less"},
...     {"metric": "latency:postsearch_cpu:p50", "delta": 9.0, "ratio": 1.19, "ratio_ci_low": 1.12,
...      "ratio_ci_high": 1.25, "significant": True, "candidate": 41.0, "alternative": "greater"}],
...   "gates": [
...     {"metric": "cap_compliance", "kind": "absolute", "outcome": "pass", "value": 1.0},
...     {"metric": "same_doc_multi_chunk_recall", "kind": "relative", "outcome": "warn", "value": 0.049},
...     {"metric": "latency:postsearch_cpu:p50", "kind": "relative", "outcome": "underpowered", "value": 0.19}]}
>>> verdict_headline(comparison)  # doctest: +NORMALIZE_WHITESPACE
'evidence vs legacy-merge: 1 regression (same-document multi-chunk recall -0.049), 1 check holds,
 1 undecided (post-search CPU latency p50 +19%)'
>>> verdict_sentence(comparison)  # doctest: +NORMALIZE_WHITESPACE
'evidence vs legacy-merge: cap compliance (stored doc ids) 100.0% (holds); same-document multi-chunk recall worse
 by 0.049 [0.025, 0.077], significant; post-search CPU latency p50 slower by 19.0% [12.0%, 25.0%], significant'

A gain that a drop-only gate does not test is no regression, not "could be noise":

>>> verdict_sentence({"baseline": "a", "candidate": "b", "metrics": [
...     {"metric": "cap_compliance_true", "delta": 0.587, "ci_low": 0.527, "ci_high": 0.647, "significant": False,
...      "alternative": "less", "candidate": 0.9, "ratio": None}],
...   "gates": [{"metric": "cap_compliance_true", "kind": "relative", "outcome": "pass", "value": -0.587}]})
'b vs a: cap compliance (true documents) no regression (+58.7 points [52.7, 64.7]; only a fall is tested)'
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from rag_eval.compare.checks import RULE_MEANING
from rag_eval.reports.display import Measure, fmt, measure, normalise_key

LEGEND = (
    "An interval is the 95% confidence interval of the change (candidate minus baseline, paired by query; a "
    "timing's as a ratio); a star (*) marks a change that is significant after Holm's correction over every "
    "number tested alongside it (alpha 0.05), so an interval that excludes no change may stand without a star. "
    "A measure a gate holds is tested one-sided, in the direction the gate guards against."
)


def rule_words(document: Mapping[str, Any]) -> str:
    """What a relative gate's ``fail``, ``pass`` and ``underpowered`` mean under the document's fire rule
    (a document written before the rule was recorded decided by ``zero``).

    >>> rule_words({"rule": "threshold", "rule_meaning": {"fail": "F", "pass": "P", "underpowered": "U"}})
    'Relative gates decide by the threshold rule: fail means F; pass means P; underpowered means U.'
    """
    rule = str(document.get("rule") or "zero")
    meaning = document.get("rule_meaning") or {str(k): v for k, v in RULE_MEANING.items()}.get(rule, {})
    parts = "; ".join(f"{k} means {meaning[k]}" for k in ("fail", "pass", "underpowered") if k in meaning)
    return f"Relative gates decide by the {rule} rule: {parts}."


def verdict_headline(comparison: Mapping[str, Any]) -> str:
    """``CANDIDATE vs BASELINE: N regressions (...), N checks hold, N undecided (...)``: the comparison's
    gates counted by what they found, the changes that need a reviewer named."""
    metrics = {m["metric"]: m for m in comparison.get("metrics", [])}
    found: dict[str, list[str]] = {key: [] for key, _ in _HEADLINE}
    for gate in comparison.get("gates", []):
        name, outcome = str(gate.get("metric", "")), str(gate.get("outcome"))
        m = measure(normalise_key(name))
        relative = gate.get("kind") == "relative"
        if outcome == "error":
            found["error"].append(m.label)
        elif relative:
            key = {"fail": "regression", "warn": "regression", "underpowered": "undecided"}.get(outcome, "within")
            found[key].append(f"{m.label} {_signed(m, metrics.get(name), gate)}")
        else:
            found["holds" if outcome == "pass" else "broken"].append(f"{m.label} {fmt(m, gate.get('value'))}")
    parts = []
    for key, (one, many) in _HEADLINE:
        names = found[key]
        if names:
            named = f" ({', '.join(names)})" if key in _NAMED else ""
            parts.append(f"{len(names)} {one if len(names) == 1 else many}{named}")
    head = f"{comparison.get('candidate')} vs {comparison.get('baseline')}"
    return f"{head}: {', '.join(parts)}" if parts else f"{head}: no gate applies"


_HEADLINE = (
    ("regression", ("regression", "regressions")),
    ("broken", ("check broken", "checks broken")),
    ("error", ("not measured", "not measured")),
    ("holds", ("check holds", "checks hold")),
    ("undecided", ("undecided", "undecided")),
    ("within", ("within its allowance", "within their allowance")),
)
_NAMED = {"regression", "broken", "error", "undecided"}


def _signed(m: Measure, entry: Mapping[str, Any] | None, gate: Mapping[str, Any]) -> str:
    """A change with its sign, as short as it reads: a timing's in percent, a share's in points."""
    if entry is not None and m.unit == "us" and not _missing(entry.get("ratio")):
        return f"{float(entry['ratio']) - 1:+.0%}"
    delta: Any = None if entry is None else entry.get("delta")
    if _missing(delta):
        value: Any = gate.get("value")
        return "(change not measured)" if _missing(value) else f"{float(value):.3g} in the bad direction"
    if m.unit == "share":
        return f"{float(delta) * 100:+.1f} points"
    return f"{float(delta):+.{m.digits}f}"


def verdict_detail(comparison: Mapping[str, Any]) -> str:
    """The clauses of :func:`verdict_sentence` alone: the detail below the headline, which names the configs."""
    sentence = verdict_sentence(comparison)
    head = f"{comparison.get('candidate')} vs {comparison.get('baseline')}: "
    return sentence[len(head) :] if sentence.startswith(head) else sentence


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
        untested = _untested_way(e, ratio - 1)
        if untested is not None and ratio < 1:  # a timing is better lower
            return f"{label} no regression (×{ratio:.2f} [{low:.2f}, {high:.2f}]; only a {untested} is tested)"
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
    untested = _untested_way(e, delta)
    if untested is not None and better:
        if m.unit == "share":
            shown = f"{delta * 100:+.1f} points [{low * 100:.1f}, {high * 100:.1f}]"
        else:
            shown = f"{delta:+.{m.digits}f} [{low:.{m.digits}f}, {high:.{m.digits}f}]"
        return f"{label} no regression ({shown}; only a {untested} is tested)"
    ends = sorted((abs(low), abs(high)))
    interval = f"[{_amount(m, ends[0])}, {_amount(m, ends[1])}]".replace(" points,", ",")
    return f"{label} {'better' if better else 'worse'} by {_amount(m, delta)} {interval}, {_significance(e)}"


def _untested_way(e: Mapping[str, Any], delta: float) -> str | None:
    """The way a one-sided test looks (``fall`` or ``rise``) when the change went the other way, else None."""
    alternative = e.get("alternative")
    if alternative == "less" and delta > 0:
        return "fall"
    if alternative == "greater" and delta < 0:
        return "rise"
    return None


def _significance(e: Mapping[str, Any]) -> str:
    """A change whose interval excludes none may still not be significant: its gate tests the other way
    only (one-sided), or Holm's step asks for more."""
    if e.get("significant"):
        return "significant"
    return "not significant after correction"


def _own_value(m: Measure, gate: Mapping[str, Any], entry: Mapping[str, Any] | None) -> str:
    value = gate.get("value", entry.get("candidate") if entry else None)
    if _missing(value):
        return f"{m.label} not defined"
    held = {"pass": "holds", "fail": "does not hold", "warn": "does not hold", "error": "not defined"}
    return f"{m.label} {fmt(m, value)} ({held.get(str(gate.get('outcome')), str(gate.get('outcome')))})"
