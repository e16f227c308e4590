"""Peak memory of a whole run: a synthetic data set with many queries, replayed on Milvus Lite under D1-D5
(``--configs 5``: the default experiment's five configs), in a process of its own; prints the peak resident
set size of that process (``getrusage``), with the time the run took.

    python -m tests.benchmarks.memory --queries 100000 [--configs 1|5] [--latency off] [--keep DIR]

With five configs a run also compares four of them with the baseline, and the comparison's resampling
(10,000 resamples over every query, for every metric) takes hours at 100,000 queries.
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from tests.benchmarks.synthetic import write_dataset
from tests.conftest import ROOT, SHIPPED

CONFIGS = "\n".join(
    f'[[configs]]\nname = "{name}"\nproperties = "{SHIPPED / "experiments" / "configs" / props}"\n{extra}'
    for name, props, extra in (
        ("legacy-merge", "legacy.properties", "baseline = true\n"),
        ("legacy-first", "legacy-first.properties", ""),
        ("evidence", "evidence.properties", ""),
        ("evidence-top-k-only", "evidence-legacy-topk.properties", ""),
        ("whatif-content-dedup", "evidence.properties", 'what_if = "content-dedup"\n'),
    )
)

EVIDENCE = f'[[configs]]\nname = "evidence"\nproperties = "{SHIPPED / "experiments/configs/evidence.properties"}"\n'


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--queries", type=int, default=100_000)
    parser.add_argument("--latency", default="sample", help="the run's --latency (default: sample, 1,000 timed)")
    parser.add_argument("--configs", type=int, choices=(1, 5), default=1, help="D1-D5 alone, or the default five")
    parser.add_argument("--keep", help="build the data set and run here (kept), not in a temporary directory")
    args = parser.parse_args(argv)
    work = Path(args.keep) if args.keep else Path(tempfile.mkdtemp(prefix="rag-eval-memory-"))
    data = work / "data"
    if not (data / "queries.jsonl").is_file():
        write_dataset(data, args.queries)
    exp = work / "memory.toml"
    configs = CONFIGS if args.configs == 5 else EVIDENCE
    exp.write_text(
        f'[experiment]\nname = "memory"\nproduction_cap = 2\n\n[dataset]\npath = "{data}"\n\n'
        f'[milvus]\nuri = "{work / "milvus.db"}"\n\n[ingest]\nprofile = "production"\n\n{configs}'
    )
    started = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, "-m", "rag_eval.cli", "run", str(exp), "--out", str(work / "run"), "-q",
         "--latency", args.latency],
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    seconds = time.perf_counter() - started
    peak_mib = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024  # Linux: kilobytes
    measured = {"queries": args.queries, "configs": args.configs, "latency": args.latency, "exit": proc.returncode}
    print(json.dumps({**measured, "peak_rss_mib": round(peak_mib), "seconds": round(seconds, 1)}))
    if proc.returncode not in (0, 1):
        print(proc.stderr[-3000:], file=sys.stderr)
    return proc.returncode


if __name__ == "__main__":
    sys.exit(main())
