"""The operating characteristic of the shipped relative gates, measured on real per-query pairs.

For each relative check of the shipped gates, the per-unit values of one comparison of a run (by default the
default experiment's ``evidence`` against ``legacy-merge``) are made into a population whose true change is
known: the per-unit differences are centred and a change of 0, 0.5, 1, 1.5 and 2 times the threshold planted
in the bad direction (a mean's differences shifted; a percentile's candidate values scaled so that the ratio
of the population's percentiles is 1 + the change). Each trial resamples ``units`` units of it with
replacement, compares them as ``rag-eval compare`` does (the same paired test, interval and verdict) and
evaluates the check under each fire rule. Printed: P(fail), P(pass), P(underpowered) per rule, change and size,
with a 95% Wilson interval for P(fail).

    PYTHONPATH=. .venv/bin/python -m tests.benchmarks.operating_characteristic RUN_DIR --trials 200

The gate's family is that of one comparison's relative checks (4 in the shipped gates), at Holm's first step
(alpha / 4: a bound for every step). Seeds are fixed: the same run gives the same table.
"""

from __future__ import annotations

import argparse
import math
from collections import Counter
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np

from rag_eval.compare.catalog import RATIO_KINDS, Metric, catalog, find_metric
from rag_eval.compare.checks import RelativeCheck
from rag_eval.compare.gates import load_gates
from rag_eval.compare.runs import ComparedRun
from rag_eval.compare.stats import RULES, Pairing, Settings, aggregate, paired_compare
from rag_eval.compare.units import unit_frames, unit_values
from rag_eval.compare.verdicts import Key, decide, gate_alternative

MULTIPLES = (0.0, 0.5, 1.0, 1.5, 2.0)
SIZES = (264, 1000)
FAMILY = 4  # one comparison's relative checks in the shipped gates


def population(metric: Metric, base: np.ndarray, cand: np.ndarray, change: float, check: RelativeCheck) -> np.ndarray:
    """Candidate values whose true change from ``base`` (over these units) is ``change`` in the bad direction."""
    if metric.kind in RATIO_KINDS:
        agg = aggregate(metric.kind, np.concatenate([base, cand]), metric.percentile)
        n = len(base)
        ratio = float(agg(np.arange(n) + n)) / float(agg(np.arange(n)))
        factor = (1 + change) if check.direction == "growth" else (1 - change)
        return np.asarray(cand / ratio * factor)
    if metric.kind != "mean":
        raise ValueError(f"{metric.name}: planting a change in a {metric.kind} is not implemented here")
    d = cand - base
    scale = abs(float(base.mean())) if check.relative else 1.0
    sign = 1.0 if check.direction == "growth" else -1.0
    return np.asarray(base + (d - d.mean()) + sign * change * scale)


def trial(
    metric: Metric, check: RelativeCheck, base: np.ndarray, cand: np.ndarray, *, settings: Settings, seed: int
) -> dict[str, str]:
    """One compared resample: its outcome under each rule."""
    p = paired_compare(
        base, cand, Pairing(kind=metric.kind, percentile=metric.percentile, settings=settings,
                            alternative=gate_alternative(metric)), rng=np.random.default_rng(seed),
    )  # fmt: skip
    key: Key = (0, metric.name)

    def redraw(keys: Sequence[Key], round_: int) -> dict[Key, Any]:  # as first drawn: one draw per trial
        return dict.fromkeys(keys, p)

    # Holm's first step of a family of FAMILY: alpha / FAMILY for this one number
    verdicts, _ = decide({key: (metric, p)}, {key: "gates"}, alpha=settings.alpha / FAMILY, redraw=redraw)
    v = verdicts[key]
    p_holm = None if v.p_holm is None else min(1.0, v.p_holm * FAMILY)
    return {
        rule: check.evaluate(metric, p, p_adjusted=p_holm, settings=replace(settings, rule=rule), family=FAMILY,
                             significant=v.significant).outcome
        for rule in RULES
    }  # fmt: skip


def wilson(k: int, n: int, z: float = 1.96) -> tuple[float, float]:
    """The Wilson score interval of a share ``k / n``.

    >>> [round(v, 3) for v in wilson(26, 50)]
    [0.385, 0.652]
    """
    if n == 0:
        return math.nan, math.nan
    phat = k / n
    centre = (phat + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(phat * (1 - phat) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return centre - half, centre + half


def measure(run_dir: Path, baseline: str, candidate: str, trials: int, gates: str) -> list[dict[str, Any]]:
    """Every (check, size, multiple, rule): the outcome counts over ``trials`` resamples."""
    run = ComparedRun.from_dir(run_dir)
    metrics = catalog(run.cutoffs)
    frames = unit_frames({"query": run.values, "pair": run.pairs}, {"query": run.values, "pair": run.pairs},
                         baseline, candidate, run.query_ids)  # fmt: skip
    gate_set = load_gates(gates)
    settings = replace(gate_set.settings, resamples=999, permutations=1999)
    rows: list[dict[str, Any]] = []
    for check in gate_set.checks:
        if not isinstance(check, RelativeCheck):
            continue
        metric = find_metric(metrics, check.metric)
        u = unit_values(metric, frames)
        base, cand = u.baseline, u.candidate
        queries = len(run.query_ids)
        for size in SIZES:
            units = round(len(base) * size / queries)  # a per-pair measure: its pairs in the real proportion
            for multiple in MULTIPLES:
                planted = population(metric, base, cand, multiple * check.threshold, check)
                counts: dict[str, Counter[str]] = {r: Counter() for r in RULES}
                rng = np.random.default_rng([20240601, size, int(multiple * 10)])
                for t in range(trials):
                    idx = rng.integers(0, len(base), units)
                    out = trial(metric, check, base[idx], planted[idx], settings=settings, seed=t)
                    for rule, outcome in out.items():
                        counts[rule]["fail" if outcome in ("fail", "warn") else outcome] += 1
                for rule in RULES:
                    rows.append({"check": check.id, "queries": size, "units": units, "multiple": multiple,
                                 "rule": rule, **{k: counts[rule][k] for k in ("fail", "pass", "underpowered")},
                                 "trials": trials})  # fmt: skip
                print(_line(rows[-2]), "\n", _line(rows[-1]), flush=True)
    return rows


def _line(r: dict[str, Any]) -> str:
    low, high = wilson(r["fail"], r["trials"])
    share = {k: r[k] / r["trials"] for k in ("fail", "pass", "underpowered")}
    return (
        f"{r['check']:<42} {r['queries']:>5} q ({r['units']:>5} units) {r['multiple']:.1f}x {r['rule']:<9} "
        f"fail {share['fail']:6.1%} [{low:.1%}, {high:.1%}]  pass {share['pass']:6.1%}  "
        f"underpowered {share['underpowered']:6.1%}"
    )


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("run_dir", type=Path)
    parser.add_argument("--baseline", default="legacy-merge")
    parser.add_argument("--candidate", default="evidence")
    parser.add_argument("--trials", type=int, default=200)
    parser.add_argument("--gates", default="default")
    args = parser.parse_args()
    measure(args.run_dir, args.baseline, args.candidate, args.trials, args.gates)
