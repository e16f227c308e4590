"""Stars and gate outcomes that no seed moves: a run's comparison under several seeds, and a check that every
number's test and interval agree.

For each seed the run is compared again (``rag-eval compare``'s own code, the run's gates with that seed);
printed: how many stars (``significant``) and gate outcomes differ from the first seed's, and which. Then, on
every seed's document, every tested number: its p-value below alpha exactly when its interval excludes no
change (two-sided: the 95% interval; one-sided: on the side tested, the 95% interval's end at 97.5% and the p-value
below alpha / 2, no number between asserted).

    PYTHONPATH=. .venv/bin/python -m tests.benchmarks.seed_stability RUN_DIR --seeds 20
"""

from __future__ import annotations

import argparse
from collections.abc import Iterable, Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

from rag_eval.compare.comparison import compare
from rag_eval.compare.gates import manifest_gates
from rag_eval.compare.runs import ComparedRun


def verdicts(document: Mapping[str, Any]) -> dict[tuple[str, str], Any]:
    """(candidate, metric or gate) -> its star or outcome."""
    out: dict[tuple[str, str], Any] = {}
    for c in document["comparisons"]:
        out.update({(c["candidate"], m["metric"]): bool(m["significant"]) for m in c["metrics"]})
        out.update({(c["candidate"], "gate " + g["id"]): g["outcome"] for g in c["gates"]})
    return out


def disagreements(document: Mapping[str, Any]) -> Iterable[str]:
    """Every tested number whose p-value and interval disagree about no change."""
    alpha = float(document["alpha"])
    for c in document["comparisons"]:
        for m in c["metrics"]:
            p = m["p_value"]
            if p is None or m["ci_low"] is None:
                continue
            ratio = m["kind"] in ("percentile", "latency")
            low, high = (m["ratio_ci_low"], m["ratio_ci_high"]) if ratio else (m["ci_low"], m["ci_high"])
            if low is None or high is None:
                continue
            zero = 1.0 if ratio else 0.0
            alternative = m["alternative"]
            if alternative == "two-sided":
                agree = (low > zero or high < zero) == (p < alpha)
            else:  # the 95% interval's end on the tested side is a one-sided 97.5% bound
                beyond = low > zero if alternative == "greater" else high < zero
                agree = beyond == (p < alpha / 2) or alpha / 2 <= p < alpha
            if not agree:
                yield f"{c['candidate']} {m['metric']}: p = {p:.4g} ({alternative}), interval [{low:.4g}, {high:.4g}]"


def measure(run_dir: Path, seeds: int) -> tuple[int, int]:
    """(star or outcome flips over the seeds, disagreements between test and interval), printed as found."""
    run = ComparedRun.from_dir(run_dir)
    gates = manifest_gates(run.manifest)
    first: dict[tuple[str, str], Any] | None = None
    flips: dict[tuple[str, str], int] = {}
    disagreeing = 0
    for seed in range(seeds):
        document = compare(run, None, replace(gates, settings=replace(gates.settings, seed=seed))).document
        found = list(disagreements(document))
        disagreeing += len(found)
        now = verdicts(document)
        first = now if first is None else first
        moved = [k for k in now if now[k] != first.get(k)]
        for k in moved:
            flips[k] = flips.get(k, 0) + 1
        stars = sum(1 for v in now.values() if v is True)
        print(f"seed {seed}: {stars} stars, {len(moved)} differ from seed 0; {len(found)} disagreements", flush=True)
        for line in found:
            print("  disagrees:", line)
    for (candidate, name), times in sorted(flips.items()):
        print(f"moved: {candidate} {name} in {times} of {seeds - 1} seeds")
    print(f"{seeds} seeds: {len(flips)} stars or outcomes moved; {disagreeing} disagreements between test and interval")
    return len(flips), disagreeing


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("run_dir", type=Path)
    parser.add_argument("--seeds", type=int, default=20)
    args = parser.parse_args()
    measure(args.run_dir, args.seeds)
