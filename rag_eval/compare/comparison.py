"""Compare runs: every metric of the catalog, paired by unit, with intervals, p-values and gates.

``compare(run, against, gates)`` returns the document written as ``compare.json`` and the exit
code of the gates (0 every gate passed or only warned; 1 a fail gate fired; 2 a fail gate could not
be evaluated). Within one run every config is compared with the run's baseline; against another
run every config with the same-named config there (else that run's baseline), paired by query id.

>>> sorted(SCHEMA_KEYS)[:4]
['against', 'alpha', 'comparisons', 'exit_code']
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from rag_eval.compare.catalog import Metric, catalog
from rag_eval.compare.caveats import advisory, backends, cap_aware_note
from rag_eval.compare.checks import RULE_MEANING
from rag_eval.compare.gates import AbsoluteCheck, GateResult, GateSet, RelativeCheck, shown_source
from rag_eval.compare.loadtest_gates import LoadPair, LoadSource, is_load_metric
from rag_eval.compare.loadtest_gates import evaluate as evaluate_load
from rag_eval.compare.runs import ComparedRun, common_queries, differences, pairings, unjudged_note
from rag_eval.compare.stats import (
    Paired,
    Settings,
    aggregate,
)
from rag_eval.compare.tasks import (
    Measured,
    Names,
    PairingTask,
    RedrawTask,
    Shared,
    TaskMap,
    in_process,
    measure,
    redraw,
)
from rag_eval.compare.units import UnitFrames, Units, columns, unit_frames, unit_values
from rag_eval.compare.verdicts import (
    FAMILY_TEXT,
    MC_ROUNDS,
    Family,
    Key,
    Redraw,
    Verdict,
    decide,
)
from rag_eval.core.errors import RunDirectoryError
from rag_eval.metrics.labelfree import against_payloads
from rag_eval.metrics.registry import OVERLAP_MEASURES

COMPARE_SCHEMA_VERSION = 1
SCHEMA_KEYS = (
    "schema_version", "alpha", "seed", "resamples", "test", "run", "against", "queries_compared", "left_out",
    "gates_file", "gates_purpose", "exit_code", "comparisons",
)  # fmt: skip
TEST_NAME = (
    "the interval's own test: a mean's paired t-test (scipy.stats.ttest_rel's p-value), any other kind's bootstrap "
    "interval inverted (the level at which its BCa or percentile end is no change); one-sided in a relative gate's "
    "direction for the metrics it names, else two-sided; redrawn with more resamples near alpha"
)
INTERVAL_NAME = (
    "a mean's Student's t interval; any other kind's bootstrap over units, one stream of resamples per comparison "
    "and set of units (scipy.stats.bootstrap's BCa; percentile where BCa is undefined or beyond 5,000 units; "
    "from 20,000 units the normal interval of the resamples' standard error, its p-value from the normal curve)"
)
EXIT_PASS, EXIT_FAIL, EXIT_ERROR = 0, 1, 2


@dataclass(frozen=True, slots=True, kw_only=True)
class Comparison:
    """The compare.json document and the gates' exit code."""

    document: dict[str, Any]
    exit_code: int

    @property
    def gates(self) -> list[tuple[str, dict[str, Any]]]:
        """(candidate, gate entry) for every gate evaluated."""
        return [(c["candidate"], g) for c in self.document["comparisons"] for g in c["gates"]]


@dataclass(frozen=True, slots=True)
class _Pairing:
    baseline: str
    candidate: str
    source: str  # "run" or "against"
    base_run: ComparedRun

    @property
    def names(self) -> Names:
        return Names(self.baseline, self.candidate, self.source)


@dataclass(frozen=True, slots=True, kw_only=True)
class _Plan:
    """What a comparison compares, decided before any statistic is computed: the runs, the shared queries,
    the notes, the metrics, every pairing (a candidate against its baseline) with its config, units and
    frames, the settings (resamples for the number of tests) and each metric's family."""

    run: ComparedRun
    against: ComparedRun | None
    gates: GateSet
    queries: list[str]
    left_out: tuple[list[str], list[str]]  # (only in the run, only in the run it is compared with)
    notes: list[str]
    metrics: Sequence[Metric]
    pairings: list[_Pairing]
    settings: Settings
    configs: list[dict[str, Any]]  # each pairing's candidate config, named
    families: dict[Key, Family]
    frames: list[UnitFrames]
    units: list[dict[str, Units]]
    position: dict[str, Any]  # query id -> its query index (the order of the flips)


@dataclass(frozen=True, slots=True, kw_only=True)
class _Decided:
    """What a comparison decided: each pairing's numbers (p-values redrawn near alpha), the one verdict of
    every tested number, and each pairing's gate results."""

    results: list[Measured]
    verdicts: Mapping[Key, Verdict]
    gates: list[list[GateResult]]


def compare(
    run: ComparedRun,
    against: ComparedRun | None,
    gates: GateSet,
    *,
    intersection: bool = False,
    notes: Sequence[str] = (),
    tasks: TaskMap = in_process,
) -> Comparison:
    """Compare ``run`` within itself (``against`` None) or with ``against``; evaluate ``gates``. Each
    comparison (a candidate against its baseline) is a task run through ``tasks`` (here, one after
    another, by default; on Dask workers when given their map): the document is the same either way.
    Whether ``against`` is a run of the same experiment is its callers' to check, as they read it
    (:func:`~rag_eval.compare.runs.check_same_experiment`)."""
    plan = _plan(run, against, gates, intersection=intersection, notes=notes)
    results = _measure(plan, tasks)
    decided = _decide(plan, results, tasks)
    return _document(plan, decided)


def _plan(
    run: ComparedRun, against: ComparedRun | None, gates: GateSet, *, intersection: bool, notes: Sequence[str]
) -> _Plan:
    queries, only_run, only_against = common_queries(run, against)
    unjudged = unjudged_note(run.summary)
    all_notes = [
        *((unjudged,) if unjudged is not None else ()),
        *notes,
        *_pairing_notes(run, against, only_run, only_against, intersection=intersection),
    ]
    cutoffs = sorted(set(run.cutoffs) & set(against.cutoffs)) if against is not None else list(run.cutoffs)
    metrics = catalog(cutoffs, traffic=run.has_traffic or (against is not None and against.has_traffic))
    gates.validate(metrics)
    plan = [_Pairing(b, c, s, against if s == "against" and against is not None else run)
            for b, c, s in pairings(run, against)]  # fmt: skip
    tested = sum(1 for m in metrics if m.tested) * len(plan)
    settings = replace(gates.settings, permutations=gates.resamples_for(tested))
    configs = [{**run.config(p.candidate), "name": p.candidate} for p in plan]
    caps = cap_aware_note(
        ((p.baseline, p.base_run.config(p.baseline).get("cap_aware")), (p.candidate, c.get("cap_aware")))
        for p, c in zip(plan, configs, strict=True)
    )
    all_notes.extend(() if caps is None else (caps,))
    frames = [
        unit_frames({"query": p.base_run.values, "pair": p.base_run.pairs}, {"query": run.values, "pair": run.pairs},
                    p.baseline, p.candidate, queries)
        for p in plan
    ]  # fmt: skip
    if any(m.name in OVERLAP_NAMES for m in metrics):  # against another run: payloads against that run's
        frames = [_against(f, p, run) if p.source == "against" else f for f, p in zip(frames, plan, strict=True)]
    return _Plan(
        run=run, against=against, gates=gates, queries=queries, left_out=(only_run, only_against), notes=all_notes,
        metrics=metrics, pairings=plan, settings=settings, configs=configs,
        families=_families(gates, configs, metrics), frames=frames,
        units=[{m.name: unit_values(m, frames[i]) for m in metrics} for i in range(len(plan))],
        position=dict(zip(run.table["query_id"].astype(str), run.table["query_index"], strict=True)),
    )  # fmt: skip


OVERLAP_NAMES = frozenset(m.name for m in OVERLAP_MEASURES)  # measured against a pairing's baseline payload


def _against(frames: UnitFrames, pairing: _Pairing, run: ComparedRun) -> UnitFrames:
    """A pairing with another run's config: the overlap measures between the two runs' payloads."""
    payloads = (pairing.base_run.payloads(pairing.baseline), run.payloads(pairing.candidate))
    base, cand = against_payloads(frames.baseline["query"], frames.candidate["query"], payloads)
    return UnitFrames(baseline={**frames.baseline, "query": base}, candidate={**frames.candidate, "query": cand})


def _measure(plan: _Plan, tasks: TaskMap) -> list[Measured]:
    """Every pairing's numbers, a task each."""
    first = [
        PairingTask(index=i, names=pairing.names, units=plan.units[i], frames=plan.frames[i],
                    families={m: f for (j, m), f in plan.families.items() if j == i})
        for i, pairing in enumerate(plan.pairings)
    ]  # fmt: skip
    shared = Shared(metrics=tuple(plan.metrics), settings=plan.settings, position=plan.position)
    return tasks(measure, first, shared)


def _decide(plan: _Plan, results: list[Measured], tasks: TaskMap) -> _Decided:
    """One verdict per tested number (p-values near alpha drawn again), then the gates."""
    tested_pairs = {(i, m.name): (m, p) for i, rows in enumerate(results) for m, p, _ in rows if m.tested}
    verdicts, redrawn = decide(
        tested_pairs, plan.families, alpha=plan.settings.alpha, redraw=_redrawer(plan, tested_pairs, tasks)
    )
    results = [[(m, redrawn.get((i, m.name), p), ch) for m, p, ch in rows] for i, rows in enumerate(results)]
    return _Decided(results=results, verdicts=verdicts, gates=_gates(plan, results, verdicts))


def _document(plan: _Plan, decided: _Decided) -> Comparison:
    """``compare.json``'s document and the gates' exit code."""
    run, against = plan.run, plan.against
    comparisons = [
        {
            "baseline": pairing.baseline,
            "candidate": pairing.candidate,
            "baseline_source": pairing.source,
            "metrics": [
                _metric_entry(m, p, ch, decided.verdicts.get((i, m.name), Verdict())) for m, p, ch in rows
            ],
            "gates": [_gate_entry(g) for g in gate_list],
        }
        for i, (pairing, rows, gate_list) in enumerate(
            zip(plan.pairings, decided.results, decided.gates, strict=True)
        )
    ]
    exit_code = _exit_code([(g.severity, g.outcome) for gate_list in decided.gates for g in gate_list])
    document = {
        **_method(plan.settings),
        "run": {"dir": run.label, "experiment": run.experiment, **run.started},
        "against": None if against is None else {"dir": against.label, "experiment": against.experiment},
        "queries_compared": len(plan.queries),
        "left_out": {"only_in_run": plan.left_out[0], "only_in_against": plan.left_out[1]},
        "gates_file": shown_source(plan.gates.source),
        "gates_purpose": plan.gates.purpose,
        "exit_code": exit_code,
        "notes": plan.notes,
        "comparisons": comparisons,
    }
    return Comparison(document=document, exit_code=exit_code)


def _method(settings: Settings) -> dict[str, Any]:
    """The document's account of how it was made: schema, test, interval, resamples, seed."""
    return {
        "schema_version": COMPARE_SCHEMA_VERSION,
        "alpha": settings.alpha,
        "seed": settings.seed,
        "resamples": settings.permutations,
        "bootstrap_resamples": settings.permutations,
        "test": TEST_NAME,
        "interval": INTERVAL_NAME,
        "confidence": settings.confidence,
        "power": settings.power,
        "rule": settings.rule,
        "rule_meaning": dict(RULE_MEANING[settings.rule]),
        "multiple_testing": FAMILY_TEXT,
        "monte_carlo": f"bootstrapped numbers whose p-value lies within 3 Monte Carlo standard errors of alpha (after "
        f"Holm) redrawn, interval and p-value together, with 4x the resamples, then 16x ({MC_ROUNDS} times at most); "
        "p_mc_error is the standard error left (the share of resamples below no change, binomial, through BCa's map; "
        "0 for a mean's t-test)",
    }


def _pairing_notes(
    run: ComparedRun,
    against: ComparedRun | None,
    only_run: Sequence[str],
    only_against: Sequence[str],
    *,
    intersection: bool,
) -> list[str]:
    """Refuse to pair runs over other data or other queries unless ``intersection``; the notes that say
    how the runs differ and what they were compared on."""
    if against is None:
        return []
    if not set(run.query_ids) & set(against.query_ids):
        raise RunDirectoryError(
            f"no shared queries: none of {run.label}'s {len(run.query_ids)} queries is among {against.label}'s "
            f"{len(against.query_ids)}; compare runs over the same queries",
            path=against.label,
        )
    data_diff, setting_diff = differences(run, against)
    mismatch = data_diff + ([f"query sets: {len(only_run)} only in {run.label}, {len(only_against)} only in "
                             f"{against.label}"] if only_run or only_against else [])  # fmt: skip
    if mismatch and not intersection:
        raise RunDirectoryError(
            f"does not pair with {run.label}: {'; '.join(mismatch)}; "
            "give --intersection to compare on what both share",
            path=against.label,
        )
    notes = [f"the runs differ in {d}" for d in setting_diff]
    if mismatch:
        notes.append(f"compared on the intersection: {'; '.join(mismatch)}")
    for baseline, candidate, _ in pairings(run, against):
        how = "the same name" if baseline == candidate else f"no {candidate} there: its baseline"
        notes.append(f"paired {candidate} with {against.label}'s {baseline} ({how})")
    return notes


def _redrawer(plan: _Plan, tested: Mapping[Key, tuple[Metric, Paired]], tasks: TaskMap) -> Redraw:
    """Numbers drawn again (interval and p-value together) with 4**round times the resamples, each
    comparison's together (a task each), from its own bootstrap streams of the seed for that round."""

    settings, pairings, units = plan.settings, plan.pairings, plan.units

    def again(keys: Sequence[Key], round_: int) -> dict[Key, Paired]:
        more = (settings.permutations + 1) * 4**round_ - 1
        batch = [
            RedrawTask(index=i, names=pairings[i].names, resamples=more, round_=round_,
                       confidence=settings.confidence,
                       batch={name: (tested[(i, name)][0], units[i][name], tested[(i, name)][1])
                              for j, name in keys if j == i})
            for i in sorted({i for i, _ in keys})
        ]  # fmt: skip
        out: dict[Key, Paired] = {}
        for drawn in tasks(redraw, batch, settings.seed):
            out.update(drawn)
        return out

    return again


def _families(
    gates: GateSet, configs: Sequence[Mapping[str, Any]], metrics: Sequence[Metric]
) -> dict[Key, Family]:
    """The family of every tested (comparison, metric): ``gates`` where a relative gate names it for that
    comparison's candidate, else ``descriptive``."""
    out: dict[Key, Family] = {}
    for i, config in enumerate(configs):
        gated = {c.metric for c in gates.checks if isinstance(c, RelativeCheck) and c.applies_to(config)}
        for m in metrics:
            if m.tested:
                out[(i, m.name)] = "gates" if m.name in gated else "descriptive"
    return out


def _exit_code(outcomes: Sequence[tuple[str, str]]) -> int:
    """1 when a gate failed, else 2 when a fail gate could not be evaluated, else 0 ((severity, outcome) each).

    >>> _exit_code([("fail", "fail")]), _exit_code([("fail", "error"), ("warn", "pass")]), _exit_code([])
    (1, 2, 0)
    """
    if any(o == "fail" for _, o in outcomes):
        return EXIT_FAIL
    if any(s == "fail" and o == "error" for s, o in outcomes):
        return EXIT_ERROR
    return EXIT_PASS


def _metric_entry(metric: Metric, p: Paired, changes: Mapping[str, Any], verdict: Verdict) -> dict[str, Any]:
    return {
        "metric": metric.name,
        "label": metric.label,
        "group": metric.group,
        "kind": metric.kind,
        "unit": metric.unit,
        "higher_is_better": metric.higher_is_better,
        "n": p.n,
        "baseline": p.baseline,
        "candidate": p.candidate,
        "delta": p.delta,
        "ratio": p.ratio,
        "ci_low": p.ci_low,
        "ci_high": p.ci_high,
        "ratio_ci_low": p.ratio_ci_low,
        "ratio_ci_high": p.ratio_ci_high,
        "se": p.se,
        "p_value": p.p_value,
        "p_holm": verdict.p_holm,
        "significant": verdict.significant,
        "family": verdict.family,
        "alternative": p.alternative,
        "p_mc_error": p.p_mc_error,
        "held_level": verdict.level,
        "held_ci_low": verdict.ci_low,
        "held_ci_high": verdict.ci_high,
        **changes,
    }


def _gates(
    plan: _Plan, results: Sequence[Sequence[tuple[Metric, Paired, Mapping[str, Any]]]], verdicts: Mapping[Key, Verdict]
) -> list[list[GateResult]]:
    gates, run, settings, configs = plan.gates, plan.run, plan.settings, plan.configs
    gate_family = [k for k, f in plan.families.items() if f == "gates"]
    relative: list[tuple[int, RelativeCheck, Metric, Paired]] = []
    out: list[list[GateResult | None]] = []
    load_family = sum(1 for c in configs for k in gates.checks if is_load_metric(k.metric) and k.applies_to(c))
    sources: dict[int, LoadSource] = {}
    for i, (pairing, rows) in enumerate(zip(plan.pairings, results, strict=True)):
        by_name = {m.name: (m, p) for m, p, _ in rows}
        config = configs[i]
        slots: list[GateResult | None] = []
        for check in gates.checks:
            if not check.applies_to(config):
                continue
            if is_load_metric(check.metric):  # from load.json, judged against the noise between rounds
                mine = sources.setdefault(id(run), LoadSource(run))
                base = sources.setdefault(id(pairing.base_run), LoadSource(pairing.base_run))
                pair = LoadPair(candidate=pairing.candidate, baseline=pairing.baseline, run=mine, base=base)
                result = evaluate_load(check, pair, settings=settings, family=load_family)
                slots.append(result)
                continue
            metric, paired = by_name[check.metric]
            if isinstance(check, AbsoluteCheck) and metric.name in OVERLAP_NAMES:  # against this pairing's baseline
                slots.append(check.evaluate(_paired_value(metric, plan.units[i][metric.name])))
            elif isinstance(check, AbsoluteCheck):
                slots.append(check.evaluate(_own_value(metric, run, pairing.candidate)))
            else:
                relative.append((i, check, metric, paired))
                slots.append(None)  # filled once the family's p-values are adjusted
        out.append(slots)
    family = len(gate_family)  # every gated number, tested or not (identical values, too few units)

    def judged(i: int, check: RelativeCheck, metric: Metric, paired: Paired) -> GateResult:
        verdict = verdicts.get((i, metric.name), Verdict())  # the number's one verdict, as every report shows it
        return check.evaluate(
            metric, paired, p_adjusted=verdict.p_holm, settings=settings, family=max(1, family),
            significant=verdict.significant,
        )  # fmt: skip

    filled = iter(judged(*entry) for entry in relative)
    sides = [backends(run.manifest, p.base_run.manifest) for p in plan.pairings]  # latency on Lite: advisory
    return [
        [advisory(g if g is not None else next(filled), backends=sides[i]) for g in slots]
        for i, slots in enumerate(out)
    ]


def _own_value(metric: Metric, run: ComparedRun, config: str) -> float:
    """The metric over every unit of one config (an absolute check holds on all of its queries)."""
    frame = run.pairs if metric.unit == "pair" else run.values
    rows = columns(frame.loc[frame["config"] == config], metric.columns).dropna()
    if rows.empty:
        return math.nan
    values = rows.to_numpy(dtype=float)
    values = values if metric.kind == "rate" else values[:, 0]
    return float(aggregate(metric.kind, values, metric.percentile)(np.arange(len(values))))


def _paired_value(metric: Metric, units: Units) -> float:
    """The candidate's value over the units of its pairing (an overlap with the pairing's baseline)."""
    values = units.candidate
    if len(values) == 0:
        return math.nan
    return float(aggregate(metric.kind, values, metric.percentile)(np.arange(len(values))))


def _gate_entry(g: GateResult) -> dict[str, Any]:
    return {
        "id": g.id,
        "spec": g.spec,
        "metric": g.metric,
        "severity": g.severity,
        "kind": g.kind,
        "outcome": g.outcome,
        "message": g.message,
        "value": g.value,
        "threshold": g.threshold,
        "mde": g.mde,
        "p_value": g.p_value,
        "units_needed": g.units_needed,
    }
