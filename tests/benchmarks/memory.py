"""Peak memory of a whole run (`make bench-memory`): a synthetic data set with many queries, replayed
through the default experiment's five configs on Milvus Lite, in a process of its own; prints the peak
resident set size of that process (``getrusage``), with the time the run took.

    python -m tests.benchmarks.memory --queries 100000 [--latency off] [--keep DIR]
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


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--queries", type=int, default=100_000)
    parser.add_argument("--latency", default="sample", help="the run's --latency (default: sample, 1,000 timed)")
    parser.add_argument("--keep", help="build the data set and run here (kept), not in a temporary directory")
    args = parser.parse_args(argv)
    work = Path(args.keep) if args.keep else Path(tempfile.mkdtemp(prefix="rag-eval-memory-"))
    data = work / "data"
    if not (data / "queries.jsonl").is_file():
        write_dataset(data, args.queries)
    exp = work / "memory.toml"
    exp.write_text(
        f'[experiment]\nname = "memory"\nproduction_cap = 2\n\n[dataset]\npath = "{data}"\n\n'
        f'[milvus]\nuri = "{work / "milvus.db"}"\n\n[ingest]\nprofile = "production"\n\n{CONFIGS}'
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
    print(json.dumps({"queries": args.queries, "configs": 5, "exit": proc.returncode, "peak_rss_mib": round(peak_mib),
                      "seconds": round(seconds, 1), "latency": args.latency}))
    if proc.returncode not in (0, 1):
        print(proc.stderr[-3000:], file=sys.stderr)
    return proc.returncode


if __name__ == "__main__":
    sys.exit(main())
