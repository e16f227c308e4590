"""How the reports show a measure: flat names, the registry's entry, reading order and formatting.

What a measure is called and what its values are come from :mod:`rag_eval.metrics.registry`;
this module adds the reading order and the text of a value. Names follow ``summary_frame``:
scalar measures by their summary key, ``chunk:nDCG@5``, ``doc:R@10``, ``payload:chars_p95``,
``latency:search:p95`` (microseconds), ``lost:cap``, ``content_duplicates:cause:<cause>``.
Measures the summary holds but the registry does not declare (new ones) are shown too, after
the known ones of their group, with a label made from their name.

>>> flat = flatten_config({"duplicate_rate": 0.05, "chunk": {"RR": 0.5}, "latency_us": {"e2e": {"p95": 1200.0}},
...                        "stage_losses": {"cap": 3}, "cap_violations": [{"query_id": "q"}]})
>>> sorted(flat)
['chunk:RR', 'duplicate_rate', 'latency:e2e:p95', 'lost:cap']
>>> m = measure("duplicate_rate")
>>> (m.group, m.higher_is_better, fmt(m, 0.049), fmt_delta(m, -0.049))
('mission', False, '4.9%', '−4.9 pts')
>>> fmt_ratio(1.3), fmt(measure("latency:postprocess:p95"), 1234.5, none="-", grouping=False)
('×1.30', '1.23 ms')
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from rag_eval.core.parsing import ascii_int
from rag_eval.metrics.registry import (
    BREAKDOWNS,
    FIXED,
    GROUPS,
    LEVEL_WORDS,
    READING_ORDER,
    Group,
    Measure,
    Unit,
    find,
)

__all__ = [
    "GROUPS", "GROUP_TITLES", "Measure", "flatten_config", "fmt", "fmt_delta", "fmt_ratio", "loss_label",
    "loss_order", "measure", "normalise_key", "order", "ordered", "prefers_ratio",
]  # fmt: skip

GROUP_TITLES: dict[Group, str] = {
    "mission": "What the design is about",
    "chunk": "Standard measures, chunk level",
    "doc": "Standard measures, document level",
    "payload": "Payload",
    "latency": "Latency (serial, warm-up excluded)",
    "counts": "Counts",
    "traffic": "Production traffic, no labels (against the baseline config's payload)",
}
_RENAMED = {"latency_us": "latency", "stage_losses": "lost"}
_SKIPPED = {"cap_violations"}
_POSITION = {m.name: i for i, m in enumerate(FIXED)}
_UNKNOWN = len(FIXED)  # measures the registry does not declare: after the known ones of their group


def flatten_config(cfg: Mapping[str, Any], prefix: str = "") -> dict[str, float | int | None]:
    """One config's summary as flat measure names (numbers only; lists are left out)."""
    out: dict[str, float | int | None] = {}
    for key, value in cfg.items():
        if key in _SKIPPED:
            continue
        name = f"{prefix}{_RENAMED.get(key, key)}"
        if isinstance(value, Mapping):
            out.update(flatten_config(value, f"{name}:"))
        elif isinstance(value, bool):
            out[_frame_name(name)] = int(value)
        elif isinstance(value, int | float) or value is None:
            out[_frame_name(name)] = value
    return out


def _frame_name(name: str) -> str:
    """The content duplicates' breakdown as ``summary_frame`` names it: the total as ``content_duplicates``,
    ``by_cause`` counts as ``content_duplicates:cause:<cause>``."""
    if name == "content_duplicates:total":
        return "content_duplicates"
    return re.sub(r"^content_duplicates:by_", "content_duplicates:", name)


def normalise_key(metric: str) -> str:
    """A compare.json metric id in this module's naming (``latency_us.search.p95`` -> ``latency:search:p95``)."""
    key = metric.replace(".", ":")
    parts = [_RENAMED.get(p, p) for p in key.split(":")]
    return ":".join(parts)


def _label(text: str) -> str:
    return text.replace("_", " ").replace(":", ": ")


def _guess(name: str) -> Measure:
    """An entry for a measure the registry does not declare, from its name."""
    low = name.lower()
    head, _, rest = name.partition(":")
    better: bool | None = None
    unit: Unit = "score"
    group: Group = "mission"
    if head in ("chunk", "doc"):
        level: Group = "chunk" if head == "chunk" else "doc"
        return Measure(name=name, label=f"{LEVEL_WORDS[head]} {rest}", group=level, higher_is_better=True,
                       unit="score", digits=3)  # fmt: skip
    if head == "latency":
        stage, _, stat = rest.partition(":")
        return Measure(name=name, label=f"{stage} latency {stat}", group="latency", higher_is_better=False,
                       unit="us", digits=0)  # fmt: skip
    if head == "payload":
        group, unit = "payload", "chars" if rest.startswith("chars") else "score"
    elif "duplicate" in low or "violation" in low:
        better, unit = False, "share" if "rate" in low or "share" in low else "count"
    elif any(w in low for w in ("rate", "share", "compliance", "1to1", "fraction")):
        unit = "share"
    elif "recall" in low or "precision" in low:
        better = True
    digits = {"share": 1, "score": 3}.get(unit, 0)
    label = _label(rest) if head == "payload" else _label(name)
    return Measure(name=name, label=label, group=group, higher_is_better=better, unit=unit, digits=digits)


def measure(name: str) -> Measure:
    """The registry's entry of one flat measure name (a guess from the name for new ones)."""
    return find(name) or _guess(name)


def order(m: Measure) -> tuple[int, int, int, str]:
    """Where a measure is shown: by group, then as the registry declares them (the standard
    measures by family, in reading order, then cutoff; losses in pipeline order)."""
    head, _, rest = m.name.partition(":")
    group = GROUPS.index(m.group)
    if m.name in _POSITION:
        return group, _POSITION[m.name], 0, m.name
    if head in ("chunk", "doc") and m.group == head:
        family, _, cutoff = rest.partition("@")
        known = READING_ORDER.index(family) if family in READING_ORDER else len(READING_ORDER)
        return group, known, ascii_int(cutoff) or 0, rest
    if head == "lost":
        return group, _UNKNOWN, loss_order(rest), rest
    if head == "content_duplicates" and rest.partition(":")[0] in BREAKDOWNS:
        return group, _POSITION[head], 1 + list(BREAKDOWNS).index(rest.partition(":")[0]), rest
    return group, _UNKNOWN, 0, m.name


def ordered(names: Iterable[str]) -> list[Measure]:
    return sorted((measure(k) for k in set(names)), key=order)


def _missing(v: Any) -> bool:
    return v is None or (isinstance(v, float) and math.isnan(v))


def fmt(m: Measure, v: Any, *, none: str = "–", grouping: bool = True) -> str:
    """A value as the reports show it: a share in percent, microseconds as µs or (from 1 ms) ms,
    a whole count as an integer, anything else with the measure's decimals (``grouping``: thousands separated
    by commas)."""
    if _missing(v):
        return none
    if m.unit == "share":
        return f"{v:.{m.digits}%}"
    if m.unit == "us":
        return f"{v / 1e3:.2f} ms" if abs(v) >= 1000 else f"{v:.{m.digits}f} µs"
    digits = 0 if m.unit == "count" and float(v).is_integer() else m.digits  # a whole count reads as one
    return f"{v:,.{digits}f}" if grouping else f"{v:.{digits}f}"


def fmt_delta(m: Measure, d: Any) -> str:
    """A difference: signed, a share's in percentage points."""
    if _missing(d):
        return "–"
    sign = "+" if d > 0 else ("−" if d < 0 else "±")
    a = abs(d)
    if m.unit == "share":
        return f"{sign}{a * 100:.{m.digits}f} pts"
    return sign + fmt(m, a)


def fmt_ratio(r: Any) -> str:
    if _missing(r) or (isinstance(r, float) and math.isinf(r)):
        return "–"
    return f"×{r:.2f}"


def prefers_ratio(m: Measure) -> bool:
    """Timings are compared as ratios (a change of 30% reads better than one of 12 µs)."""
    return m.unit == "us"


_LOSS_ORDER = ("not_in_collection", "not_retrieved", "dedup", "document_dedup", "cap", "return_n")


def loss_order(stage: str) -> int:
    """Pipeline order of loss stages: retrieval, post-processing (unknown new stages after the
    known ones), then projector budgets."""
    if stage in _LOSS_ORDER:
        return _LOSS_ORDER.index(stage)
    if stage.startswith("projector"):
        return 100 + (0 if stage == "projector" else 1)
    return 50


def loss_label(stage: str) -> str:
    return re.sub(r"^projector_", "projector: ", stage).replace("_", " ")


BUDGET_STAGES = ("projector", "projector_blocks", "projector_excerpt_chars", "projector_total_chars")


def budget_note(summary: Mapping[str, Any]) -> str | None:
    """What a run says when the payload budget changed its measures: the relevant chunks the pipeline
    selected that the projector's limits cut (a truncated excerpt is not delivered), per config; None when
    the budget cut none.

    >>> budget_note({"configs": {"a": {"stage_losses": {"projector_excerpt_chars": 3, "projector_blocks": 1}},
    ...                          "b": {"stage_losses": {"cap": 2}}}})  # doctest: +NORMALIZE_WHITESPACE
    "the payload budget changed the measures: relevant chunks the pipeline had selected and the projector's
     limits cut, per config: a: 4 (excerpt chars 3, blocks 1); b: 0; they count as not delivered ([experiment]
     payload_budget = false measures retrieval alone)"
    >>> budget_note({"configs": {"a": {"stage_losses": {"cap": 2}}}}) is None
    True
    """
    configs: Mapping[str, Mapping[str, Any]] = summary.get("configs") or {}
    parts, total = [], 0
    for name, cfg in configs.items():
        losses = {s: int(n) for s, n in (cfg.get("stage_losses") or {}).items() if s in BUDGET_STAGES and n}
        lost = sum(losses.values())
        total += lost
        detail = ", ".join(f"{loss_label(s).removeprefix('projector: ')} {n}" for s, n in losses.items())
        parts.append(f"{name}: {lost}" + (f" ({detail})" if lost else ""))
    if not total:
        return None
    return (
        f"the payload budget changed the measures: relevant chunks the pipeline had selected and the "
        f"projector's limits cut, per config: {'; '.join(parts)}; they count as not delivered ([experiment] "
        "payload_budget = false measures retrieval alone)"
    )


def lead_first(names: Sequence[str], lead: Sequence[int]) -> list[str]:
    """``names`` with the measures at the ``lead`` cutoffs first (in the order of ``lead``), the others after
    them as they were.

    >>> lead_first(["nDCG@1", "nDCG@5", "R@10", "nDCG@10", "RR"], [10])
    ['R@10', 'nDCG@10', 'nDCG@1', 'nDCG@5', 'RR']
    """
    ends = [f"@{k}" for k in lead]

    def rank(name: str) -> int:
        return next((i for i, end in enumerate(ends) if name.endswith(end)), len(ends))

    return sorted(names, key=rank)


def lead_of(manifest: Mapping[str, Any]) -> list[int]:
    """The cutoffs a run's report leads with, as the experiment named them (none: the report's own order)."""
    lead = (manifest.get("experiment") or {}).get("lead_cutoffs") or []
    return [int(k) for k in lead if isinstance(k, int)]
