"""A comparison's units and their values.

The units of one comparison (baseline config against candidate config) are the queries both sides
answered, or the (query, document) pairs both sides have, in id order, so that the same data in any
row order gives the same units. A metric's units are those where both of its values are defined; its
``positions`` say where they sit among all the comparison's units of that kind, so that one stream of
bootstrap resamples per kind serves every metric: a metric's interval and p-value depend on its own
values and the comparison's seed, not on which other metrics are compared.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from rag_eval.compare.catalog import Metric
from rag_eval.metrics.registry import Per

__all__ = ["UnitFrames", "Units", "columns", "unit_frames", "unit_values"]

PValues = dict[str, tuple[float | None, float | None]]


@dataclass(frozen=True, slots=True, kw_only=True)
class Units:
    """One metric's paired values: baseline and candidate ((units,), or (units, 2) for a rate), and each
    unit's position among the comparison's units of its kind (its query: :meth:`UnitFrames.query_ranks`)."""

    baseline: np.ndarray
    candidate: np.ndarray
    positions: np.ndarray


@dataclass(frozen=True, slots=True, kw_only=True)
class UnitFrames:
    """Both sides' rows of one comparison, indexed by unit and restricted to the units both have."""

    baseline: Mapping[Per, pd.DataFrame]
    candidate: Mapping[Per, pd.DataFrame]
    # read once per comparison, shared by its metrics
    _columns: dict[tuple[bool, Per, str], np.ndarray] = field(default_factory=dict, repr=False, compare=False)
    _ranks: dict[Per, tuple[np.ndarray, list[str]]] = field(default_factory=dict, repr=False, compare=False)

    def width(self, per: Per) -> int:
        return len(self.baseline[per])

    def column(self, candidate: bool, per: Per, name: str) -> np.ndarray:
        """One side's values of a column as floats; a column no row defines reads as missing values."""
        key = (candidate, per, name)
        if key not in self._columns:
            frame = (self.candidate if candidate else self.baseline)[per]
            self._columns[key] = (
                frame[name].to_numpy(dtype=float, na_value=np.nan) if name in frame.columns
                else np.full(len(frame), np.nan)
            )  # fmt: skip
        return self._columns[key]

    def query_ranks(self, per: Per, position: Mapping[str, Any]) -> tuple[np.ndarray, list[str]]:
        """(each unit's query as its rank in the run's order, the queries by rank): ``position`` gives a
        query's place in the run; a query it does not know comes after, by id."""
        if per not in self._ranks:
            index = self.baseline[per].index
            ids = [str(q) for q in (index.get_level_values("query_id") if isinstance(index, pd.MultiIndex) else index)]
            names = sorted(set(ids), key=lambda q: (position.get(q, math.inf), q))
            rank = {q: r for r, q in enumerate(names)}
            self._ranks[per] = (np.fromiter((rank[q] for q in ids), dtype=np.intp, count=len(ids)), names)
        return self._ranks[per]



def unit_frames(
    base: Mapping[Per, pd.DataFrame], cand: Mapping[Per, pd.DataFrame], baseline: str, candidate: str,
    queries: Sequence[str],
) -> UnitFrames:  # fmt: skip
    """The units both configs have (``base`` and ``cand``: per-query values and per-pair rows of each run,
    by kind), among ``queries``, in id order."""
    wanted = set(queries)
    sides: tuple[dict[Per, pd.DataFrame], dict[Per, pd.DataFrame]] = ({}, {})
    keys: tuple[tuple[Per, list[str]], ...] = (("query", ["query_id"]), ("pair", ["query_id", "doc_id"]))
    for per, key in keys:
        b = base[per].loc[base[per]["config"] == baseline].set_index(key)
        c = cand[per].loc[cand[per]["config"] == candidate].set_index(key)
        index = b.index.intersection(c.index).sort_values()
        qids = index.get_level_values("query_id") if isinstance(index, pd.MultiIndex) else index
        index = index[np.asarray([q in wanted for q in qids], dtype=bool)] if len(index) else index
        sides[0][per], sides[1][per] = b.loc[index], c.loc[index]
    return UnitFrames(baseline=sides[0], candidate=sides[1])


def columns(frame: pd.DataFrame, cols: Sequence[str]) -> pd.DataFrame:
    """``frame[cols]``; a column no row defines (no judged query, say) reads as missing values."""
    return frame.reindex(columns=list(cols))


def unit_values(metric: Metric, frames: UnitFrames) -> Units:
    """``metric``'s values on the units where both sides define them."""
    per = metric.unit
    b = np.column_stack([frames.column(False, per, c) for c in metric.columns])
    c = np.column_stack([frames.column(True, per, c) for c in metric.columns])
    defined = ~(np.isnan(b).any(axis=1) | np.isnan(c).any(axis=1))
    positions = np.flatnonzero(defined)
    shape = (len(positions), 2) if metric.kind == "rate" else (len(positions),)
    return Units(
        baseline=b[defined].reshape(shape), candidate=c[defined].reshape(shape),
        positions=positions,
    )  # fmt: skip
