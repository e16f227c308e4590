"""Every measure, declared once: name, label, group, direction, unit, precision and how it is compared.

The summary (:mod:`rag_eval.metrics.measures`), the comparison catalog (:mod:`rag_eval.compare.catalog`), the
console (:mod:`rag_eval.reports.console`) and the reports (:mod:`rag_eval.reports.display`) read a measure's
entry here, so its label is written in one place and a new mean or rate over queries is its per-query column
(:mod:`rag_eval.metrics.perquery`) and one entry in :data:`MISSION`. Names, fields and the open families:
docs/measures.md. For a per-query column ``cap_ok_true`` (1.0 where no true document is over the cap):

>>> entry = Measure(name="cap_compliance_true", label="cap compliance (true documents)", group="mission",
...                 higher_is_better=True, unit="share", digits=1,
...                 compared=Compared(kind="mean", column="cap_ok_true"))
>>> entry in MISSION, find("cap_compliance_true") == entry
(True, True)
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Literal

from rag_eval.rundir.rows import LATENCY_COLUMNS

Group = Literal["mission", "chunk", "doc", "payload", "latency", "counts", "traffic"]
Unit = Literal["share", "score", "count", "chars", "us", "qps"]
Kind = Literal["mean", "rate", "max", "percentile", "latency"]
Per = Literal["query", "pair"]

GROUPS: tuple[Group, ...] = ("mission", "chunk", "doc", "payload", "latency", "counts", "traffic")

LATENCY_STAGES = tuple(column.removesuffix("_us") for column in LATENCY_COLUMNS)  # in pipeline order
STAGE_WORDS = {"postsearch_cpu": "post-search CPU"}  # post-process + projection, the thread's CPU time
LATENCY_STATISTICS = ("p50", "p90", "p95", "p99", "max", "mean")  # the summary's, per stage
LATENCY_PERCENTILES = (50, 95)  # the ones a comparison compares

STANDARD = ("P", "R", "nDCG", "Success")  # at each cutoff; then RR
READING_ORDER = ("nDCG", "R", "P", "RR", "Success")  # the order the console and the reports list them in
LEVEL_WORDS = {"chunk": "chunk", "doc": "document"}


@dataclass(frozen=True, slots=True, kw_only=True)
class Compared:
    """How a comparison derives a measure from per-unit values (the kinds of :mod:`rag_eval.compare.catalog`).

    ``kind``: ``mean`` of ``column``; ``rate``, the sum of ``numerator`` over the sum of
    ``denominator``; ``max`` of ``column`` (an invariant, not tested); ``percentile`` of ``column``
    (compared as a ratio); ``latency``, the same for a timing column. ``per``: the unit paired on,
    a query (:func:`~rag_eval.metrics.measures.query_values`) or a (query, document) pair
    (:func:`~rag_eval.metrics.measures.pair_frame`).
    """

    kind: Kind
    per: Per = "query"
    column: str = ""
    numerator: str = ""
    denominator: str = ""
    percentile: float = 50.0


@dataclass(frozen=True, slots=True, kw_only=True)
class Measure:
    """One measure: what it is called, in words and in the report, and how it is read and compared."""

    name: str
    label: str
    group: Group
    higher_is_better: bool | None
    unit: Unit
    digits: int
    compared: Compared | None = None


# the mission's measures, in the order a reviewer reads them (and the comparison lists them)
MISSION: tuple[Measure, ...] = (
    Measure(
        name="same_doc_multi_chunk_recall", label="same-document multi-chunk recall", group="mission",
        higher_is_better=True, unit="score", digits=3, compared=Compared(kind="mean", per="pair", column="recall"),
    ),
    Measure(
        name="same_doc_multi_chunk_recall_cap_aware", label="same-document multi-chunk recall, cap-aware",
        group="mission", higher_is_better=True, unit="score", digits=3,
        compared=Compared(kind="mean", per="pair", column="recall_cap_aware"),
    ),
    Measure(
        name="same_doc_pairs", label="(query, document) pairs with >= 2 relevant chunks", group="mission",
        higher_is_better=None, unit="count", digits=0,
    ),
    Measure(
        name="duplicate_rate", label="duplicate rate (evidence key)", group="mission", higher_is_better=False,
        unit="share", digits=1, compared=Compared(kind="rate", numerator="dup_keys", denominator="members"),
    ),
    Measure(
        name="content_duplicate_rate", label="duplicate rate (content)", group="mission", higher_is_better=False,
        unit="share", digits=1, compared=Compared(kind="rate", numerator="dup_content", denominator="members"),
    ),
    Measure(
        name="content_duplicate_rate_copies", label="duplicate rate (content): re-ingested copies", group="mission",
        higher_is_better=False, unit="share", digits=1,
        compared=Compared(kind="rate", numerator="dup_content_copy", denominator="members"),
    ),
    Measure(
        name="content_duplicate_rate_same_text", label="duplicate rate (content): same text, other chunk",
        group="mission", higher_is_better=False, unit="share", digits=1,
        compared=Compared(kind="rate", numerator="dup_content_same_text", denominator="members"),
    ),
    Measure(
        name="raw_duplicate_rate", label="raw Milvus hits: duplicate rate (key)", group="mission",
        higher_is_better=False, unit="share", digits=1,
        compared=Compared(kind="rate", numerator="raw_dup_keys", denominator="hits"),
    ),
    Measure(
        name="raw_content_duplicate_rate", label="raw Milvus hits: duplicate rate (content)", group="mission",
        higher_is_better=False, unit="share", digits=1,
        compared=Compared(kind="rate", numerator="raw_dup_content", denominator="hits"),
    ),
    Measure(
        name="evidence_guard_1to1", label="chunk references 1:1 with an excerpt (EvidenceGuard)", group="mission",
        higher_is_better=True, unit="share", digits=1,
        compared=Compared(kind="rate", numerator="guard_ok", denominator="guard_refs"),
    ),
    Measure(
        name="cap_compliance", label="cap compliance (stored doc ids)", group="mission", higher_is_better=True,
        unit="share", digits=1, compared=Compared(kind="mean", column="cap_ok"),
    ),
    Measure(
        name="cap_compliance_true", label="cap compliance (true documents)", group="mission", higher_is_better=True,
        unit="share", digits=1, compared=Compared(kind="mean", column="cap_ok_true"),
    ),
    Measure(
        name="n_cap_violations", label="cap violations (stored doc ids)", group="mission", higher_is_better=False,
        unit="count", digits=0,
    ),
    Measure(
        name="n_true_cap_violations", label="cap violations (true documents)", group="mission",
        higher_is_better=False, unit="count", digits=0,
    ),
    Measure(
        name="max_chunks_per_document", label="most delivered chunks of one document in a payload", group="mission",
        higher_is_better=None, unit="count", digits=0, compared=Compared(kind="max", column="max_doc_chunks"),
    ),
    Measure(
        name="return_n_compliance", label="return-n compliance", group="mission", higher_is_better=True,
        unit="share", digits=1, compared=Compared(kind="mean", column="return_n_ok"),
    ),
    Measure(
        name="cap_checked", label="cap checked against", group="mission", higher_is_better=None, unit="count",
        digits=0,
    ),
    Measure(
        name="content_duplicates", label="content duplicates", group="mission", higher_is_better=False,
        unit="count", digits=0,
    ),
)  # fmt: skip

PAYLOAD: tuple[Measure, ...] = (
    Measure(
        name="payload:chars_p50", label="payload characters p50", group="payload", higher_is_better=None,
        unit="chars", digits=0, compared=Compared(kind="percentile", column="payload_chars", percentile=50),
    ),
    Measure(
        name="payload:chars_p95", label="payload characters p95", group="payload", higher_is_better=None,
        unit="chars", digits=0, compared=Compared(kind="percentile", column="payload_chars", percentile=95),
    ),
    Measure(
        name="payload:blocks_p50", label="blocks p50", group="payload", higher_is_better=None, unit="count", digits=1,
    ),
    Measure(
        name="payload:blocks_p95", label="blocks p95", group="payload", higher_is_better=None, unit="count", digits=1,
    ),
    Measure(
        name="payload:chunks_delivered_mean", label="chunks delivered per query", group="payload",
        higher_is_better=None, unit="count", digits=2, compared=Compared(kind="mean", column="members"),
    ),
)  # fmt: skip

LATENCY: tuple[Measure, ...] = (
    *(
        Measure(
            name=f"latency:{stage}:{stat}", label=f"{STAGE_WORDS.get(stage, stage)} latency {stat}", group="latency",
            higher_is_better=False,
            unit="us", digits=0,
            compared=(
                Compared(kind="latency", column=f"{stage}_us", percentile=int(stat[1:]))
                if stat in {f"p{q}" for q in LATENCY_PERCENTILES}
                else None
            ),
        )
        for stage in LATENCY_STAGES
        for stat in LATENCY_STATISTICS
    ),
    Measure(
        name="qps_serial", label="queries per second (serial)", group="latency", higher_is_better=True, unit="qps",
        digits=1,
    ),
    Measure(
        name="search_latency:p95_ci_low_us", label="search p95, 95% interval, low", group="latency",
        higher_is_better=None, unit="us", digits=0,
    ),
    Measure(
        name="search_latency:p95_ci_high_us", label="search p95, 95% interval, high", group="latency",
        higher_is_better=None, unit="us", digits=0,
    ),
    Measure(
        name="search_latency:p95_ci_coverage", label="search p95, 95% interval, coverage", group="latency",
        higher_is_better=None, unit="share", digits=1,
    ),
    Measure(
        name="search_latency:timed_queries", label="queries with a timed search", group="latency",
        higher_is_better=None, unit="count", digits=0,
    ),
)  # fmt: skip

COUNTS: tuple[Measure, ...] = (
    Measure(name="queries", label="queries", group="counts", higher_is_better=None, unit="count", digits=0),
    Measure(
        name="judged_queries", label="judged queries", group="counts", higher_is_better=None, unit="count", digits=0
    ),
)

TRAFFIC_PREFIX = "traffic:"
# the measures of a query log's queries (rag_eval.metrics.labelfree): against the baseline config's payload on
# the same query, then every measure above that needs no label, again on the log's queries
OVERLAP_MEASURES: tuple[Measure, ...] = (
    Measure(
        name="traffic:payload_changed", label="traffic: payloads changed (against the baseline)", group="traffic",
        higher_is_better=None, unit="share", digits=1, compared=Compared(kind="mean", column="traffic:changed"),
    ),
    Measure(
        name="traffic:requests_changed", label="traffic: requests whose payload changed", group="traffic",
        higher_is_better=None, unit="share", digits=1,
        compared=Compared(kind="rate", numerator="traffic:changed_requests", denominator="traffic:requests"),
    ),
    Measure(
        name="traffic:rbo", label="traffic: rank-biased overlap with the baseline (p = 0.9)", group="traffic",
        higher_is_better=None, unit="score", digits=3, compared=Compared(kind="mean", column="traffic:rbo"),
    ),
    Measure(
        name="traffic:jaccard", label="traffic: Jaccard with the baseline", group="traffic", higher_is_better=None,
        unit="score", digits=3, compared=Compared(kind="mean", column="traffic:jaccard"),
    ),
    Measure(
        name="traffic:top_changed", label="traffic: top chunk changed", group="traffic", higher_is_better=None,
        unit="share", digits=1, compared=Compared(kind="mean", column="traffic:top_changed"),
    ),
    Measure(
        name="traffic:multi_chunk_payloads", label="traffic: payloads with >= 2 chunks of one document",
        group="traffic", higher_is_better=True, unit="share", digits=1,
        compared=Compared(kind="mean", column="traffic:multi_doc"),
    ),
    Measure(
        name="traffic:empty_payloads", label="traffic: empty payloads", group="traffic", higher_is_better=False,
        unit="share", digits=1, compared=Compared(kind="mean", column="traffic:empty"),
    ),
    Measure(name="traffic:requests", label="traffic: requests", group="traffic", higher_is_better=None,
            unit="count", digits=0),
)  # fmt: skip
LABEL_FREE: tuple[str, ...] = (  # measured again on a query log's queries, under traffic:<name>
    "queries", "duplicate_rate", "content_duplicate_rate", "content_duplicate_rate_copies",
    "content_duplicate_rate_same_text", "raw_duplicate_rate", "raw_content_duplicate_rate", "evidence_guard_1to1",
    "cap_checked", "cap_compliance", "n_cap_violations", "cap_compliance_true", "n_true_cap_violations",
    "max_chunks_per_document", "return_n_compliance",
    *(m.name for m in PAYLOAD), *(m.name for m in LATENCY if m.name.startswith("latency:")), "qps_serial",
)  # fmt: skip


def on_traffic(measure: Measure) -> Measure:
    """``measure`` measured on a query log's queries: its name, label and columns under ``traffic:``.

    >>> m = on_traffic(find("duplicate_rate"))
    >>> m.name, m.label, m.group, m.compared.numerator
    ('traffic:duplicate_rate', 'traffic: duplicate rate (evidence key)', 'traffic', 'traffic:dup_keys')
    """
    how = measure.compared
    moved = None
    if how is not None:
        moved = replace(how, **{f: TRAFFIC_PREFIX + getattr(how, f) for f in ("column", "numerator", "denominator")
                                if getattr(how, f)})  # fmt: skip
    return replace(measure, name=TRAFFIC_PREFIX + measure.name, label=f"traffic: {measure.label}", group="traffic",
                   compared=moved)  # fmt: skip


# which measures each view leads with, in reading order (said once: the console, report.md and the HTML read these)
IDENTITY_TABLE: tuple[str, ...] = (  # the evidence-identity table of the console and the reports
    "same_doc_multi_chunk_recall",
    "same_doc_multi_chunk_recall_cap_aware",
    "same_doc_pairs",
    "duplicate_rate",
    "content_duplicate_rate",
    "content_duplicate_rate_copies",
    "content_duplicate_rate_same_text",
    "raw_duplicate_rate",
    "raw_content_duplicate_rate",
    "evidence_guard_1to1",
    "cap_checked",
    "cap_compliance",
    "cap_compliance_true",
    "return_n_compliance",
)
VERDICT_LINE: tuple[str, ...] = (  # the measures a comparison's verdict line names
    "same_doc_multi_chunk_recall",
    "duplicate_rate",
    "content_duplicate_rate",
    "content_duplicate_rate_copies",
    "cap_compliance",
    "cap_compliance_true",
    "latency:postprocess:p95",
)
CHART_MEASURE = "same_doc_multi_chunk_recall"  # the measure of the report's first chart (an interval per config)
FIXED = MISSION + PAYLOAD + LATENCY + COUNTS  # every measure but the standard ones and the open families
_BY_NAME = {m.name: m for m in FIXED}
TRAFFIC: tuple[Measure, ...] = OVERLAP_MEASURES + tuple(on_traffic(_BY_NAME[name]) for name in LABEL_FREE)
_BY_NAME |= {m.name: m for m in TRAFFIC}
# a deployed service replayed beside the configs ([service], rag_eval.metrics.conformance): its payloads against
# the pipeline's on the same queries; read from the run's service.json, gated there (compare/shipped/service.toml)
SERVICE: tuple[Measure, ...] = (
    Measure(name="conformance", label="conformance: payloads identical to the pipeline's", group="payload",
            higher_is_better=True, unit="share", digits=1),
    Measure(name="unscoped_excerpts", label="service excerpts without a chunk-scoped document_id", group="payload",
            higher_is_better=False, unit="count", digits=0),
)  # fmt: skip
_BY_NAME |= {m.name: m for m in SERVICE}

_STANDARD_NAME = re.compile(rf"(?:{'|'.join(STANDARD)})@[0-9]+|RR")  # a name of measure_names, at any cutoff

# content_duplicates:<breakdown>:<value>, as the summary breaks the content duplicates down
BREAKDOWNS = {"cause": "cause", "key_kind": "key kind", "row_identity": "row identity"}


def measure_names(cutoffs: Sequence[int]) -> list[str]:
    """The standard measures at ``cutoffs``, as ir_measures names them, in the summary's order.

    >>> measure_names([1, 5])
    ['P@1', 'P@5', 'R@1', 'R@5', 'nDCG@1', 'nDCG@5', 'Success@1', 'Success@5', 'RR']
    """
    names: list[str] = []
    for prefix in STANDARD:
        names.extend(f"{prefix}@{k}" for k in cutoffs)
    return [*names, "RR"]


def standard(level: Literal["chunk", "doc"], cutoffs: Sequence[int]) -> tuple[Measure, ...]:
    """P, R, nDCG, Success at each cutoff and RR, at chunk or document level (judged queries).

    >>> [(m.name, m.label) for m in standard("doc", [5])][-1]
    ('doc:RR', 'document RR')
    """
    return tuple(_standard(level, name) for name in measure_names(cutoffs))


def _standard(level: Literal["chunk", "doc"], name: str) -> Measure:
    return Measure(
        name=f"{level}:{name}",
        label=f"{LEVEL_WORDS[level]} {name}",
        group=level,
        higher_is_better=True,
        unit="score",
        digits=3,
        compared=Compared(kind="mean", column=f"{level}:{name}"),
    )


def declared(cutoffs: Sequence[int], *, traffic: bool = False) -> tuple[Measure, ...]:
    """Every measure of a run with these cutoffs (the open families aside), group by group; ``traffic``:
    with the measures of a query log's queries.

    >>> names = [m.name for m in declared([5])]
    >>> names[0], "chunk:nDCG@5" in names, names[-1]
    ('same_doc_multi_chunk_recall', True, 'judged_queries')
    >>> [m.name for m in declared([5], traffic=True)][-1]
    'traffic:qps_serial'
    """
    found = MISSION + standard("chunk", cutoffs) + standard("doc", cutoffs) + PAYLOAD + LATENCY + COUNTS
    return found + TRAFFIC if traffic else found


def find(name: str) -> Measure | None:
    """The entry of a measure by name: a declared one, a standard measure at any cutoff, the relevant
    chunks lost at any stage, a content-duplicate count by any breakdown value; None for a name the
    registry does not declare.

    >>> find("doc:nDCG@20").label, find("lost:cap").label, find("content_duplicates:cause:x").label
    ('document nDCG@20', 'relevant chunks lost: cap', 'content duplicates by cause: x')
    >>> find("chunk:MAP") is None, find("lost:") is None, find("content_duplicates:total") is None
    (True, True, True)
    """
    if name in _BY_NAME:
        return _BY_NAME[name]
    head, _, rest = name.partition(":")
    if head in ("chunk", "doc"):
        if _STANDARD_NAME.fullmatch(rest):
            level: Literal["chunk", "doc"] = "chunk" if head == "chunk" else "doc"
            return _standard(level, rest)
    elif head == "lost" and rest:
        label = f"relevant chunks lost: {rest}"
        return Measure(name=name, label=label, group="counts", higher_is_better=False, unit="count", digits=0)
    elif head == "content_duplicates":
        breakdown, _, value = rest.partition(":")
        if breakdown in BREAKDOWNS and value:
            label = f"content duplicates by {BREAKDOWNS[breakdown]}: {value}"
            return Measure(name=name, label=label, group="mission", higher_is_better=False, unit="count", digits=0)
    return None
