"""What a comparison compares: one declarative entry per metric.

An entry names the metric (as :func:`rag_eval.metrics.measures.summary_frame` names it),
says how its per-unit values are read from the per-query values
(:func:`rag_eval.metrics.measures.query_values`, or :func:`~rag_eval.metrics.measures.pair_frame`
for ``unit="pair"``), which direction is better, and how units aggregate (``kind``):

``mean``        the mean of a per-unit value (``column``); paired differences per unit
``rate``        sum of ``numerator`` / sum of ``denominator`` over units (a share of chunks, not of queries)
``max``         the largest per-unit value (an invariant, not a test: no p-value)
``percentile``  the ``percentile`` of a per-unit value, compared as a ratio (payload size)
``latency``     the same, for a timing column: a gate on it must be beyond timing noise

A new measure needs one entry here once its per-query column exists:

>>> Metric(name="cap_compliance_true", label="cap compliance (true documents)", group="mission",
...        higher_is_better=True, kind="mean", column="cap_ok_true").columns
('cap_ok_true',)
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from rag_eval.metrics.measures import measure_names

Group = Literal["mission", "chunk", "doc", "payload", "latency"]
Kind = Literal["mean", "rate", "max", "percentile", "latency"]
Unit = Literal["query", "pair"]

RATIO_KINDS = ("percentile", "latency")
TESTED_KINDS = ("mean", "rate", "percentile", "latency")  # kinds with a paired test (a p-value)


@dataclass(frozen=True, slots=True, kw_only=True)
class Metric:
    """One comparable metric and how to derive it from per-unit values."""

    name: str
    label: str
    group: Group
    higher_is_better: bool | None  # None: neither direction is better (payload size)
    kind: Kind
    unit: Unit = "query"
    column: str = ""
    numerator: str = ""
    denominator: str = ""
    percentile: float = 50.0

    @property
    def columns(self) -> tuple[str, ...]:
        """The per-unit columns this metric reads."""
        return (self.numerator, self.denominator) if self.kind == "rate" else (self.column,)

    @property
    def tested(self) -> bool:
        return self.kind in TESTED_KINDS


def _rate(name: str, label: str, numerator: str, denominator: str, higher_is_better: bool) -> Metric:
    return Metric(
        name=name,
        label=label,
        group="mission",
        higher_is_better=higher_is_better,
        kind="rate",
        numerator=numerator,
        denominator=denominator,
    )


MISSION: tuple[Metric, ...] = (
    Metric(
        name="same_doc_multi_chunk_recall",
        label="same-document multi-chunk recall",
        group="mission",
        higher_is_better=True,
        kind="mean",
        unit="pair",
        column="recall",
    ),
    Metric(
        name="same_doc_multi_chunk_recall_cap_aware",
        label="same-document multi-chunk recall, cap-aware",
        group="mission",
        higher_is_better=True,
        kind="mean",
        unit="pair",
        column="recall_cap_aware",
    ),
    _rate("duplicate_rate", "duplicate rate (evidence key)", "dup_keys", "members", False),
    _rate("content_duplicate_rate", "duplicate rate (content)", "dup_content", "members", False),
    _rate(
        "content_duplicate_rate_copies",
        "duplicate rate (content): re-ingested copies",
        "dup_content_copy",
        "members",
        False,
    ),
    _rate(
        "content_duplicate_rate_same_text",
        "duplicate rate (content): same text, other chunk",
        "dup_content_same_text",
        "members",
        False,
    ),
    _rate("raw_duplicate_rate", "raw Milvus hits: duplicate rate (key)", "raw_dup_keys", "hits", False),
    _rate("raw_content_duplicate_rate", "raw Milvus hits: duplicate rate (content)", "raw_dup_content", "hits", False),
    _rate(
        "evidence_guard_1to1", "chunk references 1:1 with an excerpt (EvidenceGuard)", "guard_ok", "guard_refs", True
    ),
    Metric(
        name="cap_compliance",
        label="cap compliance (stored doc ids)",
        group="mission",
        higher_is_better=True,
        kind="mean",
        column="cap_ok",
    ),
    Metric(
        name="cap_compliance_true",
        label="cap compliance (true documents)",
        group="mission",
        higher_is_better=True,
        kind="mean",
        column="cap_ok_true",
    ),
    Metric(
        name="max_chunks_per_document",
        label="most delivered chunks of one document in a payload",
        group="mission",
        higher_is_better=None,
        kind="max",
        column="max_doc_chunks",
    ),
    Metric(
        name="return_n_compliance",
        label="return-n compliance",
        group="mission",
        higher_is_better=True,
        kind="mean",
        column="return_n_ok",
    ),
)

PAYLOAD: tuple[Metric, ...] = (
    Metric(
        name="payload:chars_p50",
        label="payload characters p50",
        group="payload",
        higher_is_better=None,
        kind="percentile",
        column="payload_chars",
        percentile=50,
    ),
    Metric(
        name="payload:chars_p95",
        label="payload characters p95",
        group="payload",
        higher_is_better=None,
        kind="percentile",
        column="payload_chars",
        percentile=95,
    ),
    Metric(
        name="payload:chunks_delivered_mean",
        label="chunks delivered per query",
        group="payload",
        higher_is_better=None,
        kind="mean",
        column="members",
    ),
)

LATENCY_STAGES = ("transform", "search", "postprocess", "projection", "e2e")
LATENCY_PERCENTILES = (50, 95)

LATENCY: tuple[Metric, ...] = tuple(
    Metric(
        name=f"latency:{stage}:p{q}",
        label=f"{stage} latency p{q}",
        group="latency",
        higher_is_better=False,
        kind="latency",
        column=f"{stage}_us",
        percentile=q,
    )
    for stage in LATENCY_STAGES
    for q in LATENCY_PERCENTILES
)


def standard(level: Literal["chunk", "doc"], cutoffs: Sequence[int]) -> tuple[Metric, ...]:
    """P, R, nDCG, Success at each cutoff and RR, at chunk or document level (judged queries)."""
    where = "chunk" if level == "chunk" else "document"
    return tuple(
        Metric(
            name=f"{level}:{m}",
            label=f"{where} {m}",
            group=level,
            higher_is_better=True,
            kind="mean",
            column=f"{level}:{m}",
        )
        for m in measure_names(cutoffs)
    )


def catalog(cutoffs: Sequence[int]) -> tuple[Metric, ...]:
    """Every metric a comparison reports, the mission's own first.

    >>> [m.name for m in catalog([5])][:2], len(catalog([1, 3, 5, 10]))
    (['same_doc_multi_chunk_recall', 'same_doc_multi_chunk_recall_cap_aware'], 60)
    """
    return MISSION + standard("chunk", cutoffs) + standard("doc", cutoffs) + PAYLOAD + LATENCY


def find(metrics: Sequence[Metric], name: str) -> Metric | None:
    return next((m for m in metrics if m.name == name), None)
