"""The traffic replay's own sections on Milvus Lite (or a server), beside the bare loop, in one process.

    python -m tests.benchmarks.replay_sections --queries 5000 --dir /tmp/sections [--label before] [--milvus-uri URI]

The log of :mod:`tests.benchmarks.traffic_scale` (N variants of the data set's queries, vectors cached, latency
off, the ``legacy-merge`` and ``evidence`` configs) is run by ``rag_eval.jobs.run_experiment``, then the bare loop
(``traffic_scale._bare``) runs on the same collection. Wall-clock sections, no profiler: ``Replayer.rows`` (the
rows, ``build_row``), ``RunStore.write_batch`` (the parts), ``Replayer._post_process`` and
``MilvusSearch.search_batch`` (the replay's and the bare loop's), and ``read_parts``: the time spent reading the
parts back after the replay (``RunStore.iter_parts``, every pass: the per-query table, the summary, the texts,
the rankings), with ``parts_read`` the number of parts read. Prints one JSON line: the replay's seconds (from
the run's summary), the bare loop's, their ratio, the whole run's wall seconds, and each section's seconds;
``own`` is rows + parts. ``--milvus-uri``: a server instead of a Lite file in ``--dir``.
Run it on two trees one after the other (``PYTHONPATH``), alternating, to compare them in one session.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from rag_eval import jobs
from rag_eval.replay.batches import Replayer
from rag_eval.rundir.directory import RunStore
from rag_eval.search.milvus import MilvusSearch
from tests.benchmarks import traffic_scale

SECTIONS = {
    "rows": (Replayer, "rows"),
    "write_batch": (RunStore, "write_batch"),
    "post_process": (Replayer, "_post_process"),
    "search_batch": (MilvusSearch, "search_batch"),
}


def _timed(spent: dict[str, float], name: str, method: Callable[..., Any]) -> Callable[..., Any]:
    def timed(*args: Any, **kwargs: Any) -> Any:
        started = time.perf_counter()
        try:
            return method(*args, **kwargs)
        finally:
            spent[name] += time.perf_counter() - started

    return timed


def _timed_reads(spent: dict[str, float], method: Callable[..., Iterator[Any]]) -> Callable[..., Iterator[Any]]:
    def timed(*args: Any, **kwargs: Any) -> Iterator[Any]:
        parts = method(*args, **kwargs)
        while True:
            started = time.perf_counter()
            try:
                part = next(parts)
            except StopIteration:
                return
            finally:
                spent["read_parts"] += time.perf_counter() - started
            spent["parts_read"] += 1
            yield part

    return timed


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--queries", type=int, default=5_000)
    parser.add_argument("--dir", required=True, help="the Lite file, the log and the runs (reused between runs)")
    parser.add_argument("--label", default="run")
    parser.add_argument("--milvus-uri", default=None, help="a server (default: a Milvus Lite file in --dir)")
    args = parser.parse_args()
    root = Path(args.dir)
    root.mkdir(parents=True, exist_ok=True)
    spent = dict.fromkeys([*SECTIONS, "read_parts", "parts_read"], 0.0)
    for name, (cls, attr) in SECTIONS.items():
        setattr(cls, attr, _timed(spent, name, getattr(cls, attr)))
    RunStore.iter_parts = _timed_reads(spent, RunStore.iter_parts)  # type: ignore[method-assign]
    uri = args.milvus_uri or str(root / "milvus.db")
    exp, texts, collection = traffic_scale._experiment(uri, root, args.queries)
    out = root / f"run-{args.label}"
    shutil.rmtree(out, ignore_errors=True)
    started = time.perf_counter()
    result = jobs.run_experiment(exp, out)  # type: ignore[arg-type]
    run = time.perf_counter() - started
    replay = float(result.summary["latency"]["search"]["replay_seconds"])
    bare = traffic_scale._bare(exp, texts, collection)
    line = {"label": args.label, "queries": args.queries, "replay": replay, "bare": bare, "ratio": replay / bare,
            "run": run, "own": spent["rows"] + spent["write_batch"], **spent}  # fmt: skip
    print(json.dumps({k: round(v, 3) if isinstance(v, float) else v for k, v in line.items()}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
