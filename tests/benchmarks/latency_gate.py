"""Post-process latency as a gate, measured on this machine (run once; the numbers are in the README):

1. a three-name twin run (one config under three names, timed interleaved in rotated order): no latency
   metric is significant and the twins' post-process gates pass;
2. ``--pairs`` + 1 back-to-back runs of the same code, each compared with the one before: how often the
   post-process gate fires (at most alpha is the target);
3. power: the twin pairs of run 1 with the candidate's post-process CPU times made 20% slower, resampled
   to 264 queries: how often the growth is significant and the gate does not pass.

    PYTHONPATH=. .venv/bin/python -m tests.benchmarks.latency_gate --out /tmp/latency-gate --pairs 20
"""

from __future__ import annotations

import argparse
import json
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from rag_eval.cli import main
from rag_eval.compare.catalog import catalog, find_metric
from rag_eval.compare.checks import RelativeCheck
from rag_eval.compare.gates import parse_check
from rag_eval.compare.stats import Pairing, Settings, paired_compare
from rag_eval.compare.verdicts import Key, decide, gate_alternative
from tests.conftest import SHIPPED

EVIDENCE = SHIPPED / "experiments" / "configs" / "evidence.properties"
GATE = "fail latency:postsearch_cpu:p50 growth <= 20%"  # the check the shipped gates held before the budget
WALL_P95 = "latency:postprocess:p95"  # the wall-time tail, reported beside it


def run(out: Path, names: list[str], db: Path) -> Path:
    args = ["run", "--dataset", str(SHIPPED), "--milvus-uri", str(db), "--out", str(out), "-q", "--gates", "nightly"]
    for name in names:
        args += ["--config", f"{name}={EVIDENCE}"]
    main(args)
    return out


def twin(out: Path, db: Path) -> pd.DataFrame:
    directory = run(out / "twin", ["a", "b", "c"], db)
    doc = json.loads((directory / "compare.json").read_text())
    for c in doc["comparisons"]:
        significant = [m["metric"] for m in c["metrics"] if m["group"] == "latency" and m["significant"]]
        gates = {g["id"]: g["outcome"] for g in c["gates"] if g["metric"].startswith("latency")}
        print(f"twin {c['baseline']} -> {c['candidate']}: significant latency metrics {significant}; gates {gates}")
    return pd.read_parquet(directory / "per_query.parquet")


def pairs(out: Path, db: Path, n: int) -> None:
    outcomes: Counter[str] = Counter()
    previous = run(out / "night-0", ["evidence"], db)
    for i in range(1, n + 1):
        current = run(out / f"night-{i}", ["evidence"], db)
        main(["compare", str(current), "--against", str(previous), "--gates", "nightly", "--out", str(out / f"c{i}")])
        doc = json.loads((out / f"c{i}" / "compare.json").read_text())
        (gate,) = [g for c in doc["comparisons"] for g in c["gates"] if g["id"] == GATE.removeprefix("fail ")]
        outcomes[gate["outcome"]] += 1
        (tail,) = [m for c in doc["comparisons"] for m in c["metrics"] if m["metric"] == WALL_P95]
        wall = f"wall p95 x{tail['ratio']:.3f} [{tail['ratio_ci_low']:.3f}, {tail['ratio_ci_high']:.3f}]"
        print(f"pair {i}: {gate['outcome']}: {gate['message']}; {wall}")
        previous = current
    print(f"{n} back-to-back pairs: {dict(outcomes)}")


def power(rows: pd.DataFrame, trials: int, units: int = 264) -> None:
    check = parse_check(GATE, path="-")
    assert isinstance(check, RelativeCheck)
    metric = find_metric(catalog((1, 3, 5, 10)), "latency:postsearch_cpu:p50")
    by = rows.pivot(index="query_id", columns="config", values="postsearch_cpu_us").dropna()
    base, cand = by["a"].to_numpy(), by["b"].to_numpy()
    rng = np.random.default_rng(20240601)
    settings = Settings(resamples=999, permutations=1999)
    outcomes: Counter[str] = Counter()
    significant = 0
    for t in range(trials):
        idx = rng.integers(0, len(base), units)
        p = paired_compare(
            base[idx],
            1.2 * cand[idx],
            Pairing(kind="latency", percentile=50, settings=settings, alternative=gate_alternative(metric)),
            rng=np.random.default_rng(t),
        )
        key = (0, metric.name)
        def redraw(keys: Sequence[Key], round_: int, s: Any = p) -> dict[Key, Any]:  # as first drawn
            return dict.fromkeys(keys, s)

        verdicts, _ = decide({key: (metric, p)}, {key: "gates"}, alpha=0.05, redraw=redraw)
        significant += verdicts[key].significant
        outcomes[check.evaluate(metric, p, p_adjusted=verdicts[key].p_holm, settings=settings, family=1,
                                significant=verdicts[key].significant).outcome] += 1  # fmt: skip
    share = significant / trials
    print(f"20% slower at {units} queries, {trials} trials: significant {share:.1%}; gate {dict(outcomes)}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--pairs", type=int, default=20)
    parser.add_argument("--trials", type=int, default=200)
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    db = args.out / "lite.db"
    rows = twin(args.out, db)
    power(rows, args.trials)
    pairs(args.out, db, args.pairs)
