"""What a comparison compares: every measure of the registry that says how it is compared.

An entry names the metric, how its per-unit values are read from the per-query values, which direction is
better, and how units aggregate (``kind``: ``mean``, ``rate``, ``max``, ``percentile``, ``latency``; see
docs/deciding.md, "Which test, and why"). The entries are made from :mod:`rag_eval.metrics.registry`, where a
measure is declared once, so a new measure is compared once it has an entry there:

>>> m = find_metric(catalog([5]), "cap_compliance_true")
>>> m.label, m.kind, m.columns
('cap compliance (true documents)', 'mean', ('cap_ok_true',))
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from rag_eval.metrics.registry import Group, Kind, Measure, Per, declared

__all__ = ["RATIO_KINDS", "TESTED_KINDS", "Group", "Kind", "Metric", "catalog", "find_metric", "metric"]

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
    unit: Per = "query"  # what a comparison pairs on: a query, or a (query, document) pair
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


def metric(measure: Measure) -> Metric:
    """The comparison's view of a registry entry that says how it is compared."""
    how = measure.compared
    if how is None:
        raise ValueError(f"{measure.name} is not compared")
    return Metric(
        name=measure.name,
        label=measure.label,
        group=measure.group,
        higher_is_better=measure.higher_is_better,
        kind=how.kind,
        unit=how.per,
        column=how.column,
        numerator=how.numerator,
        denominator=how.denominator,
        percentile=how.percentile,
    )


def catalog(cutoffs: Sequence[int], *, traffic: bool = False) -> tuple[Metric, ...]:
    """Every metric a comparison reports, the mission's own first (``traffic``: with a query log's).

    >>> [m.name for m in catalog([5])][:2], len(catalog([1, 3, 5, 10]))
    (['same_doc_multi_chunk_recall', 'same_doc_multi_chunk_recall_cap_aware'], 62)
    """
    return tuple(metric(m) for m in declared(cutoffs, traffic=traffic) if m.compared is not None)


def find_metric(metrics: Sequence[Metric], name: str) -> Metric | None:
    return next((m for m in metrics if m.name == name), None)
