"""The verdict lines, the metric table and the config diff of a report, as plain values.

With ``compare.json`` the deltas, intervals, significance (after correction) and gate
outcomes are the comparison's; without it, each candidate is set against the baseline from
``summary.json`` alone (differences only: no interval, no test, no gate) and the report says so.

>>> summary = {"baseline": "a", "configs": {"a": {"duplicate_rate": 0.05}, "b": {"duplicate_rate": 0.0}}}
>>> [(i.label, i.text) for i in verdict(summary, None)[0].items]
[('duplicate rate (evidence key)', '−5.0 pts (0.0%)')]
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from rag_eval.metrics.registry import GROUPS, VERDICT_LINE, Group
from rag_eval.reports.display import (
    GROUP_TITLES,
    Measure,
    flatten_config,
    fmt,
    fmt_delta,
    fmt_ratio,
    lead_first,
    measure,
    normalise_key,
    ordered,
    prefers_ratio,
)
from rag_eval.reports.verdict_words import verdict_detail, verdict_headline

HEADLINE_MEASURES = VERDICT_LINE
GATE_ORDER = ("fail", "error", "warn", "underpowered", "pass")


@dataclass(frozen=True, slots=True, kw_only=True)
class Item:
    label: str
    text: str
    tone: str = ""  # good | bad | "" (not significant, or no test)
    title: str = ""


@dataclass(frozen=True, slots=True, kw_only=True)
class VerdictLine:
    candidate: str
    baseline: str
    baseline_source: str
    items: tuple[Item, ...]
    gates: tuple[Mapping[str, Any], ...] = ()
    sentence: str = ""  # the verdict's detail in words (:mod:`rag_eval.reports.verdict_words`), once compared
    headline: str = ""  # the one line a reviewer decides from, before the sentence


@dataclass(slots=True, kw_only=True)
class Cell:
    value: str
    delta: str = ""
    ci: str = ""
    mark: str = ""
    mark_title: str = ""
    gate: str = ""
    tone: str = ""


@dataclass(slots=True, kw_only=True)
class MetricRow:
    key: str
    label: str
    baseline: str
    cells: list[Cell] = field(default_factory=list)


def _nan(v: Any) -> bool:
    return v is None or (isinstance(v, float) and math.isnan(v))


def _tone(m: Measure, delta: Any, significant: bool) -> str:
    if not significant or m.higher_is_better is None or _nan(delta) or delta == 0:
        return ""
    return "good" if (delta > 0) == m.higher_is_better else "bad"


def comparisons(summary: Mapping[str, Any], compare: Mapping[str, Any] | None) -> list[dict[str, Any]]:
    """The comparisons to show: compare.json's, else each candidate against the baseline."""
    if compare is not None:
        return [dict(c) for c in compare["comparisons"]]
    base = summary["baseline"]
    return [
        {"baseline": base, "candidate": n, "baseline_source": "run", "metrics": None, "gates": []}
        for n in summary["configs"]
        if n != base
    ]


def _metric_map(comp: Mapping[str, Any]) -> dict[str, Mapping[str, Any]]:
    return {normalise_key(m["metric"]): m for m in comp.get("metrics") or ()}


def _item(m: Measure, base: Any, cand: Any, cm: Mapping[str, Any] | None) -> Item:
    label = str(cm.get("label") or m.label) if cm else m.label
    delta = cm.get("delta") if cm else (None if _nan(base) or _nan(cand) else cand - base)
    significant = bool(cm and cm.get("significant"))
    if prefers_ratio(m):
        ratio = cm.get("ratio") if cm else (cand / base if not _nan(base) and not _nan(cand) and base else None)
        text = f"{fmt_ratio(ratio)} ({fmt(m, cand)})"
    elif m.unit == "share" and m.name.endswith(("compliance", "compliance_true", "1to1")):
        text = f"{fmt(m, cand)} ({fmt_delta(m, delta)})"
    else:
        text = fmt_delta(m, delta)
        if cm and not _nan(cm.get("ci_low")) and not _nan(cm.get("ci_high")):
            text += f" [{fmt_delta(m, cm['ci_low'])}, {fmt_delta(m, cm['ci_high'])}]"
        if m.unit == "share":
            text += f" ({fmt(m, cand)})"
    title = ""
    if cm:
        p = cm.get("p_holm", cm.get("p_value"))
        title = f"n={cm.get('n')}, p (corrected)={'–' if _nan(p) else f'{p:.3g}'}"
        text += " *" if significant else ""
    return Item(label=label, text=text, tone=_tone(m, delta, significant), title=title)


def verdict(summary: Mapping[str, Any], compare: Mapping[str, Any] | None) -> list[VerdictLine]:
    """One line per candidate: the headline measures against the baseline, and the gates."""
    flats = {n: flatten_config(c) for n, c in summary["configs"].items()}
    out = []
    for comp in comparisons(summary, compare):
        metrics = _metric_map(comp) if compare is not None else {}
        base, cand = flats.get(comp["baseline"], {}), flats.get(comp["candidate"], {})
        items = []
        for key in HEADLINE_MEASURES:
            cm = metrics.get(key)
            if cm is None and key not in cand:
                continue
            m = measure(key)
            b = cm.get("baseline") if cm else base.get(key)
            c = cm.get("candidate") if cm else cand.get(key)
            items.append(_item(m, b, c, cm))
        gates = sorted(comp.get("gates") or (), key=lambda g: (GATE_ORDER.index(g["outcome"]), str(g.get("id"))))
        out.append(
            VerdictLine(
                candidate=comp["candidate"],
                baseline=comp["baseline"],
                baseline_source=str(comp.get("baseline_source", "run")),
                items=tuple(items),
                gates=tuple(gates),
                sentence=verdict_detail(comp) if compare is not None else "",
                headline=verdict_headline(comp) if compare is not None else "",
            )
        )
    return out


def metric_table(
    summary: Mapping[str, Any], compare: Mapping[str, Any] | None, lead: Sequence[int] = ()
) -> list[tuple[str, list[MetricRow]]]:
    """(group title, rows) in reading order: the mission's measures first, then chunk and
    document level, payload, latency, counts; in a group, the measures at the ``lead`` cutoffs first. Every
    measure the summary (or the comparison) holds is shown."""
    flats = {n: flatten_config(c) for n, c in summary["configs"].items()}
    comps = comparisons(summary, compare)
    maps = [_metric_map(c) if compare is not None else {} for c in comps]
    keys: set[str] = {k for f in flats.values() for k in f if not k.startswith("lost:")}
    for mm in maps:
        keys.update(mm)
    groups: dict[Group, list[MetricRow]] = {g: [] for g in GROUPS}
    for m in ordered(keys):
        base_cfg = comps[0]["baseline"] if comps else summary["baseline"]
        first = maps[0].get(m.name) if maps else None
        base_value = first.get("baseline") if first else flats.get(base_cfg, {}).get(m.name)
        label = str(first.get("label") or m.label) if first else m.label  # compare.json's, as it was compared
        row = MetricRow(key=m.name, label=label, baseline=fmt(m, base_value))
        for comp, mm in zip(comps, maps, strict=True):
            row.cells.append(_cell(m, comp, mm.get(m.name), flats))
        groups[m.group].append(row)
    if lead:
        for g, rows in groups.items():
            order = {key: i for i, key in enumerate(lead_first([r.key for r in rows], lead))}
            groups[g] = sorted(rows, key=lambda r: order[r.key])
    return [(GROUP_TITLES[g], rows) for g, rows in groups.items() if rows]


def _cell(m: Measure, comp: Mapping[str, Any], cm: Mapping[str, Any] | None, flats: Mapping[str, Any]) -> Cell:
    if cm is None:
        b = flats.get(comp["baseline"], {}).get(m.name)
        c = flats.get(comp["candidate"], {}).get(m.name)
        delta = None if _nan(b) or _nan(c) else c - b
        text = fmt_delta(m, delta)
        if prefers_ratio(m) and not _nan(b) and not _nan(c) and b:
            text = f"{text} ({fmt_ratio(c / b)})"
        return Cell(value=fmt(m, c), delta=text)
    gates = [g for g in comp.get("gates") or () if normalise_key(str(g.get("metric", ""))) == m.name]
    gate = sorted((g["outcome"] for g in gates), key=GATE_ORDER.index)[0] if gates else ""
    sig = bool(cm.get("significant"))
    p = cm.get("p_holm", cm.get("p_value"))
    delta_text = fmt_delta(m, cm.get("delta"))
    if prefers_ratio(m) and not _nan(cm.get("ratio")):
        delta_text = f"{delta_text} ({fmt_ratio(cm['ratio'])})"
    ci = "" if _nan(cm.get("ci_low")) else f"[{fmt_delta(m, cm['ci_low'])}, {fmt_delta(m, cm['ci_high'])}]"
    return Cell(
        value=fmt(m, cm.get("candidate")),
        delta=delta_text,
        ci=ci,
        mark="*" if sig else "",
        mark_title=f"p (corrected) = {'–' if _nan(p) else f'{p:.3g}'}; n = {cm.get('n')}",
        gate=gate,
        tone=_tone(m, cm.get("delta"), sig),
    )


def config_diff(configs: Sequence[Mapping[str, Any]]) -> tuple[list[str], list[tuple[str, list[str]]], dict[str, str]]:
    """(config names, [(property, value per config)] for the properties that differ, {property: value}
    for those every config shares). Reads the manifest's config rows.

    >>> names, differ, same = config_diff([
    ...     {"name": "a", "pipeline": "legacy", "mode": "dense",
    ...      "rag": {"rag.top-k": "5", "rag.max-chunks-per-document": "2"}},
    ...     {"name": "b", "pipeline": "evidence", "mode": "dense", "rag": {"rag.max-chunks-per-document": "2"}}])
    >>> differ
    [('rag.max-chunks-per-document', ['2 (not applied by legacy)', '2']), ('rag.top-k', ['5', '(unset)'])]
    >>> same
    {'mode': 'dense'}
    """
    names = [str(c["name"]) for c in configs]
    props: list[dict[str, str]] = []
    for c in configs:
        p = {"mode": str(c.get("mode", ""))}
        p.update({str(k): str(v) for k, v in (c.get("rag") or {}).items()})
        if c.get("pipeline") == "legacy" and "rag.max-chunks-per-document" in p:
            p["rag.max-chunks-per-document"] += " (not applied by legacy)"  # the legacy pipeline has no cap
        props.append(p)
    keys = sorted({k for p in props for k in p}, key=lambda k: (k not in ("rag.pipeline", "mode"), k))
    differ, same = [], {}
    for k in keys:
        values = [p.get(k, "(unset)") for p in props]
        if len(set(values)) > 1:
            differ.append((k, values))
        else:
            same[k] = values[0]
    return names, differ, same
