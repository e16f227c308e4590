"""The measures a report shows: flat names, labels, groups, order, direction and formatting.

Names follow ``summary_frame``: scalar measures by their summary key, ``chunk:nDCG@5``,
``doc:R@10``, ``payload:chars_p95``, ``latency:search:p95`` (microseconds), ``lost:cap``.
Measures the summary holds but this module does not know (new ones) are shown too, after
the known ones of their group, with a label made from their name.

>>> flat = flatten_config({"duplicate_rate": 0.05, "chunk": {"RR": 0.5}, "latency_us": {"e2e": {"p95": 1200.0}},
...                        "stage_losses": {"cap": 3}, "cap_violations": [{"query_id": "q"}]})
>>> sorted(flat)
['chunk:RR', 'duplicate_rate', 'latency:e2e:p95', 'lost:cap']
>>> m = measure("duplicate_rate")
>>> (m.group, m.higher_is_better, m.fmt(0.049), m.fmt_delta(-0.049))
('mission', False, '4.9%', '−4.9 pts')
>>> measure("latency:postprocess:p95").fmt_ratio(1.3)
'×1.30'
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

Kind = Literal["rate", "score", "count", "us", "chars", "qps"]
GROUPS = ("mission", "chunk", "doc", "payload", "latency", "counts")
GROUP_TITLES = {
    "mission": "What the design is about",
    "chunk": "Standard measures, chunk level",
    "doc": "Standard measures, document level",
    "payload": "Payload",
    "latency": "Latency (serial, warm-up excluded)",
    "counts": "Counts",
}
_RENAMED = {"latency_us": "latency", "stage_losses": "lost"}
_SKIPPED = {"cap_violations"}

# known measures in the order a reviewer reads them: (key, label, higher is better, kind)
_MISSION: tuple[tuple[str, str, bool | None, Kind], ...] = (
    ("same_doc_multi_chunk_recall", "same-document multi-chunk recall", True, "score"),
    ("same_doc_multi_chunk_recall_cap_aware", "same-document multi-chunk recall, cap-aware", True, "score"),
    ("same_doc_pairs", "(query, document) pairs with >= 2 relevant chunks", None, "count"),
    ("duplicate_rate", "duplicate rate (evidence key)", False, "rate"),
    ("content_duplicate_rate", "duplicate rate (content)", False, "rate"),
    ("content_duplicate_rate_copies", "duplicate rate (content): re-ingested copies", False, "rate"),
    ("content_duplicate_rate_same_text", "duplicate rate (content): same text, other chunk", False, "rate"),
    ("raw_duplicate_rate", "raw Milvus hits: duplicate rate (key)", None, "rate"),
    ("raw_content_duplicate_rate", "raw Milvus hits: duplicate rate (content)", None, "rate"),
    ("evidence_guard_1to1", "chunk references 1:1 with an excerpt (EvidenceGuard)", True, "rate"),
    ("cap_compliance", "cap compliance (stored doc ids)", True, "rate"),
    ("cap_compliance_true", "cap compliance (true documents)", True, "rate"),
    ("n_cap_violations", "cap violations", False, "count"),
    ("return_n_compliance", "return-n compliance", True, "rate"),
)
_COUNTS = ("queries", "judged_queries")
_FAMILIES = ("nDCG", "R", "P", "RR", "Success")
LATENCY_STAGES = ("transform", "search", "postprocess", "projection", "e2e")
_STATS = ("p50", "p90", "p95", "p99", "max", "mean")
_STAGE_LABEL = {"postprocess": "post-process", "e2e": "end to end"}
_PAYLOAD_LABEL = {
    "chars_p50": "payload characters p50",
    "chars_p95": "payload characters p95",
    "blocks_p50": "blocks p50",
    "blocks_p95": "blocks p95",
    "chunks_delivered_mean": "chunks delivered per query",
}


@dataclass(frozen=True, slots=True, kw_only=True)
class Measure:
    key: str
    label: str
    group: str
    higher_is_better: bool | None
    kind: Kind
    order: tuple[int, int, str]

    def fmt(self, v: Any) -> str:
        if v is None or (isinstance(v, float) and math.isnan(v)):
            return "–"
        if self.kind == "rate":
            return f"{v:.1%}"
        if self.kind == "us":
            return f"{v / 1e3:.2f} ms" if abs(v) >= 1000 else f"{v:.0f} µs"
        if self.kind in ("count", "chars"):
            return f"{v:,.0f}"
        if self.kind == "qps":
            return f"{v:,.1f}"
        return f"{v:.3f}"

    def fmt_delta(self, d: Any) -> str:
        if d is None or (isinstance(d, float) and math.isnan(d)):
            return "–"
        sign = "+" if d > 0 else ("−" if d < 0 else "±")
        a = abs(d)
        if self.kind == "rate":
            return f"{sign}{a * 100:.1f} pts"
        if self.kind == "us":
            return f"{sign}{a / 1e3:.2f} ms" if a >= 1000 else f"{sign}{a:.0f} µs"
        if self.kind in ("count", "chars"):
            return f"{sign}{a:,.0f}"
        if self.kind == "qps":
            return f"{sign}{a:,.1f}"
        return f"{sign}{a:.3f}"

    def fmt_ratio(self, r: Any) -> str:
        if r is None or (isinstance(r, float) and (math.isnan(r) or math.isinf(r))):
            return "–"
        return f"×{r:.2f}"

    @property
    def prefers_ratio(self) -> bool:
        return self.kind == "us"


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
            out[name] = int(value)
        elif isinstance(value, int | float) or value is None:
            out[name] = value
    return out


def normalise_key(metric: str) -> str:
    """A compare.json metric id in this module's naming (``latency_us.search.p95`` -> ``latency:search:p95``)."""
    key = metric.replace(".", ":")
    parts = [_RENAMED.get(p, p) for p in key.split(":")]
    return ":".join(parts)


def _label(text: str) -> str:
    return text.replace("_", " ").replace(":", ": ")


def _guess(name: str) -> tuple[bool | None, Kind]:
    low = name.lower()
    if "duplicate" in low or "violation" in low:
        return False, "rate" if "rate" in low or "share" in low else "count"
    if any(w in low for w in ("rate", "share", "compliance", "1to1", "fraction")):
        return None, "rate"
    if "recall" in low or "precision" in low:
        return True, "score"
    return None, "score"


def measure(key: str) -> Measure:
    """What the report knows about one flat measure name (a guess from the name for new ones)."""
    for i, (k, label, hib, kind) in enumerate(_MISSION):
        if key == k:
            return Measure(key=key, label=label, group="mission", higher_is_better=hib, kind=kind, order=(0, i, key))
    if key in _COUNTS:
        return Measure(
            key=key, label=_label(key), group="counts", higher_is_better=None, kind="count", order=(5, 0, key)
        )
    head, _, rest = key.partition(":")
    if head in ("chunk", "doc") and rest:
        fam, _, cut = rest.partition("@")
        fam_i = _FAMILIES.index(fam) if fam in _FAMILIES else len(_FAMILIES)
        order = (GROUPS.index(head), fam_i * 1000 + (int(cut) if cut.isdigit() else 0), rest)
        return Measure(key=key, label=f"{head} {rest}", group=head, higher_is_better=True, kind="score", order=order)
    if head == "payload":
        payload_kind: Kind = "chars" if rest.startswith("chars") else "score"
        known = list(_PAYLOAD_LABEL)
        i = known.index(rest) if rest in known else len(known)
        return Measure(
            key=key,
            label=_PAYLOAD_LABEL.get(rest, _label(rest)),
            group="payload",
            higher_is_better=None,
            kind=payload_kind,
            order=(3, i, rest),
        )
    if head == "latency":
        stage, _, stat = rest.partition(":")
        si = LATENCY_STAGES.index(stage) if stage in LATENCY_STAGES else len(LATENCY_STAGES)
        ti = _STATS.index(stat) if stat in _STATS else len(_STATS)
        label = f"{_STAGE_LABEL.get(stage, stage)} {stat}"
        order = (4, si * 10 + ti, rest)
        return Measure(key=key, label=label, group="latency", higher_is_better=False, kind="us", order=order)
    if key == "qps_serial":
        label = "queries per second (serial)"
        return Measure(key=key, label=label, group="latency", higher_is_better=True, kind="qps", order=(4, 9999, key))
    if head == "lost":
        label, order = f"relevant chunks lost: {rest}", (5, 100 + loss_order(rest), rest)
        return Measure(key=key, label=label, group="counts", higher_is_better=False, kind="count", order=order)
    hib, kind = _guess(key)
    return Measure(key=key, label=_label(key), group="mission", higher_is_better=hib, kind=kind, order=(0, 1000, key))


def ordered(keys: Iterable[str]) -> list[Measure]:
    return sorted((measure(k) for k in set(keys)), key=lambda m: m.order)


_LOSS_ORDER = ("not_retrieved", "dedup", "document_dedup", "cap", "return_n")


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
