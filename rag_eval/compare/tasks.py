"""One comparison's work (a candidate config against its baseline), as a task that runs where it is sent.

Every stream is seeded by the seed and the comparison's names (:func:`stable`), never by what ran before, so
a comparison gives the same numbers first or last, here or on a Dask worker. :class:`PairingTask` pickles;
:func:`measure` is its first pass, :func:`redraw` its p-values drawn again near alpha. A ``TaskMap`` runs
them :func:`in_process` or on Dask (:func:`rag_eval.cluster.tasks.tasks_on`). Details: docs/scale.md.
"""

from __future__ import annotations

import zlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

import numpy as np

from rag_eval.compare.bootstrap import NORMAL_RESAMPLES, BootTest, Interval, intervals
from rag_eval.compare.catalog import Metric
from rag_eval.compare.stats import Alternative, Paired, Pairing, Settings, bootstrapped, paired_compare, with_interval
from rag_eval.compare.units import UnitFrames, Units
from rag_eval.compare.verdicts import Family, Key, gate_alternative
from rag_eval.metrics.registry import Per
from rag_eval.threads import default_workers, ordered_map

T = TypeVar("T")
S = TypeVar("S")
R = TypeVar("R")
TaskMap = Callable[[Callable[[Any, Any], Any], Sequence[Any], Any], list[Any]]
Measured = list[tuple[Metric, Paired, dict[str, Any]]]


def in_process(fn: Callable[[T, S], R], tasks: Sequence[T], shared: S) -> list[R]:
    """The tasks here: one alone as it is; several on two threads, with the BLAS library held to one
    thread each (numpy's sums, sorts and cumulated counts run without the GIL, and two threads of BLAS
    under each of two tasks would fight for two cores)."""
    if len(tasks) < 2 or default_workers() < 2:
        return [fn(task, shared) for task in tasks]
    from threadpoolctl import threadpool_limits

    with threadpool_limits(limits=1, user_api="blas"):
        return [result for _, result in ordered_map(lambda task: fn(task, shared), tasks)]


@dataclass(frozen=True, slots=True)
class Names:
    """What names a comparison in its seeds: its configs and where its baseline comes from."""

    baseline: str
    candidate: str
    source: str  # "run" or "against"


@dataclass(frozen=True, slots=True, kw_only=True)
class Shared:
    """What every comparison of a run reads: the metrics, the settings and the run's query order
    (``position``: query id -> index)."""

    metrics: tuple[Metric, ...]
    settings: Settings
    position: Mapping[str, Any]


@dataclass(frozen=True, slots=True, kw_only=True)
class PairingTask:
    """One comparison's own part of its first pass: its metrics' units, its unit frames and each tested
    metric's family."""

    index: int
    names: Names
    units: Mapping[str, Units]
    frames: UnitFrames
    families: Mapping[str, Family]  # tested metric -> family, for this comparison


def stable(names: Names, name: str) -> int:
    """A seed per (comparison, metric or flip stream): adding a metric or a config changes no other result."""
    return zlib.crc32(f"{names.baseline}|{names.candidate}|{names.source}|{name}".encode())


def measure(task: PairingTask, shared: Shared) -> Measured:
    """Every metric of one comparison, paired by unit: the interval, the queries that moved, and the
    test (one-sided for a gated metric), the Monte Carlo ones drawn together from one flip matrix."""
    settings, units, frames = shared.settings, task.units, task.frames
    rows: Measured = []
    for metric in shared.metrics:
        u = units[metric.name]
        rng = np.random.default_rng([settings.seed, stable(task.names, metric.name)])
        alternative: Alternative = (
            gate_alternative(metric) if task.families.get(metric.name) == "gates" else "two-sided"
        )
        paired = paired_compare(
            u.baseline,
            u.candidate,
            Pairing(
                kind=metric.kind,
                settings=settings,
                percentile=metric.percentile,
                test=metric.tested,
                alternative=alternative,
                interval=False,
            ),
            rng=rng,
        )
        ranks, names = frames.query_ranks(metric.unit, shared.position)
        rows.append((metric, paired, changes(metric, u.baseline, u.candidate, ranks[u.positions], names)))
    wanted = [(m, units[m.name]) for m, p, _ in rows if bootstrapped(m.kind, p)]
    boxes = _intervals(
        task.names, wanted, settings.permutations, seed=settings.seed, round_=0, confidence=settings.confidence
    )
    return [(m, _completed(m, p, boxes.get(m.name)), ch) for m, p, ch in rows]


@dataclass(frozen=True, slots=True, kw_only=True)
class RedrawTask:
    """One comparison's bootstrap-tested numbers to draw again: the metrics (with their units and their
    numbers as first drawn), at ``resamples``, from the bootstrap streams of ``round_``."""

    index: int
    names: Names
    batch: Mapping[str, tuple[Metric, Units, Paired]]
    resamples: int
    round_: int
    confidence: float


def redraw(task: RedrawTask, seed: int) -> dict[Key, Paired]:
    """One comparison's numbers drawn again: interval and p-value together, from more resamples."""
    wanted = [(metric, u) for metric, u, _ in task.batch.values()]
    boxes = _intervals(task.names, wanted, task.resamples, seed=seed, round_=task.round_, confidence=task.confidence)
    return {(task.index, name): _completed(m, p, boxes.get(name)) for name, (m, _, p) in task.batch.items()}


def _completed(metric: Metric, paired: Paired, box: Interval | None) -> Paired:
    """``paired`` with its bootstrap interval and, for a tested metric, the p-value that interval gives."""
    return paired if box is None else with_interval(paired, box, kind=metric.kind, test=metric.tested)


def _intervals(
    names: Names, wanted: Sequence[tuple[Metric, Units]], resamples: int, *, seed: int, round_: int,
    confidence: float = 0.95,
) -> dict[str, Interval]:  # fmt: skip
    """The bootstrap interval of every metric in ``wanted``, one stream of resamples per set of units (a
    metric's interval depends on its values, its units and the seed, not on which other metrics share them);
    a redraw (``round_`` > 0) draws from a stream of its own."""
    sets: dict[tuple[Per, bytes], list[tuple[Metric, Units]]] = {}
    for metric, u in wanted:
        sets.setdefault((metric.unit, np.asarray(u.positions, dtype=np.int64).tobytes()), []).append((metric, u))
    out: dict[str, Interval] = {}
    for (per, positions), members in sets.items():
        key = [seed, stable(names, f"bootstrap:{per}:{zlib.crc32(positions)}"), *((round_,) if round_ else ())]
        rng = np.random.default_rng(key)
        tests = [BootTest(kind=m.kind, baseline=u.baseline, candidate=u.candidate, percentile=m.percentile)
                 for m, u in members]  # fmt: skip
        found = intervals(tests, resamples=resamples, confidence=confidence, rng=rng,
                          normal_resamples=(NORMAL_RESAMPLES + 1) * 4**round_ - 1)  # a redraw's 4**round times
        out.update({m.name: box for (m, _), box in zip(members, found, strict=True)})
    return out


def changes(
    metric: Metric, base: np.ndarray, cand: np.ndarray, ranks: np.ndarray, names: Sequence[str]
) -> dict[str, Any]:
    """Queries improved / degraded (per-query change in the better / worse direction) and unchanged: each
    unit's query by its rank in the run's order (``ranks``; ``names`` the queries by rank)."""
    if metric.kind == "rate":
        with np.errstate(divide="ignore", invalid="ignore"):
            per_unit = cand[:, 0] / cand[:, 1] - base[:, 0] / base[:, 1]
    else:
        per_unit = cand - base
    units = np.bincount(ranks, minlength=len(names))
    n_queries = int(np.count_nonzero(units))
    if metric.higher_is_better is None:
        return {"improved": [], "degraded": [], "unchanged": n_queries}
    # a query's change is the mean over its units (its pairs) that define one
    defined = ~np.isnan(per_unit)
    sums = np.bincount(ranks, weights=np.where(defined, per_unit, 0.0), minlength=len(names))
    counts = np.bincount(ranks, weights=defined, minlength=len(names))
    with np.errstate(divide="ignore", invalid="ignore"):
        change = (1.0 if metric.higher_is_better else -1.0) * np.where(counts > 0, sums / counts, np.nan)
    better = [names[r] for r in np.flatnonzero(change > 1e-12).tolist()]
    worse = [names[r] for r in np.flatnonzero(change < -1e-12).tolist()]
    return {"improved": better, "degraded": worse, "unchanged": n_queries - len(better) - len(worse)}
