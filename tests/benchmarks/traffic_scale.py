"""A query log at scale: N distinct log queries x 2 configs, vectors cached, latency off (``make bench-traffic``).

    python -m tests.benchmarks.traffic_scale --queries 100000 [--milvus-uri http://127.0.0.1:19530] [--workers 2]

Measures, in one process and one session, on the shipped knowledge base's collection:

- the bare loop, once before the run (in a process of its own) and once after it: batched pymilvus searches of
  the same vectors at the same width with the same output fields and search parameters as the adapter, plus the
  post-process and projection of both configs on the hits it got;
- the run: ``rag_eval.jobs.run_experiment`` of the default experiment's ``legacy-merge`` and ``evidence`` configs
  with the log as ``[traffic]`` (its replay time from the run's summary), and its peak memory (the process's
  maximum resident set);
- the label-free comparison: ``rag-eval compare`` of the run (a process of its own: its wall time and peak memory);
- with ``--workers 2``: the same run on two Dask workers, and whether its rows equal the serial run's (latency
  columns aside).

The log's queries are the data set's queries, each asked in many phrasings (``<query> (variant i)``), their vectors
the base query's vector moved a little at random and normalised: realistic neighbourhoods, no model needed. They
are written to the run's embedding cache, so the run embeds nothing.
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import tempfile
import time
import tomllib
from dataclasses import replace
from pathlib import Path

import numpy as np
import pandas as pd

from rag_eval import jobs
from rag_eval.cluster.settings import Cluster
from rag_eval.core.lookup import Pipeline
from rag_eval.core.transform import KnowledgeQueryTransformer
from rag_eval.embed.vector_files import EmbeddingCache
from rag_eval.experiment import Overrides, load_experiment, with_overrides
from rag_eval.experiment.latency import LatencyMode, TimingPlan
from rag_eval.ingest.collection import IngestSource, ensure_collection
from rag_eval.replay.batches import Signature, batches, replay_gc
from rag_eval.replay.prepare import prepare
from rag_eval.replay.step import Execution
from rag_eval.search.milvus import OUTPUT_FIELDS, VECTOR_FIELD, MilvusSearch
from rag_eval.search.milvus.collection import search_params
from rag_eval.traffic.logs import TrafficSpec
from tests.conftest import SHIPPED

CONFIGS = ("legacy-merge", "evidence")
LATENCY = ("transform_us", "search_us", "postprocess_us", "projection_us", "e2e_us", "postsearch_cpu_us")


def _experiment(uri: str, root: Path, n: int, *, write: bool = True) -> tuple[object, list[str], str]:
    """The experiment, the log's texts and the collection; ``write``: the log and its cached vectors are written
    (the bare loop's child reads those its parent wrote)."""
    exp = with_overrides(load_experiment(SHIPPED / "experiments" / "default.toml"), Overrides(milvus_uri=uri))
    exp = replace(exp, configs=tuple(c for c in exp.configs if c.name in CONFIGS), baseline="legacy-merge",
                  cache_dir=root / "cache", timing=TimingPlan(mode=LatencyMode.OFF), gates=None)  # fmt: skip
    prep = prepare(exp)
    ingested = ensure_collection(exp, IngestSource(dataset=prep.dataset, corpus=prep.corpus, rows=prep.rows),
                                 prep.resolver)  # fmt: skip
    base = [q.text for q in prep.dataset.queries.values()]
    texts = [f"{base[i % len(base)]} (variant {i})" for i in range(n)]
    log = root / "log.jsonl"
    if write:
        transformer = KnowledgeQueryTransformer()
        base_vectors = prep.resolver.resolve([transformer.transform(t).normalized_query for t in base])
        rng = np.random.default_rng(20261204)
        noise = rng.normal(scale=0.02, size=(n, base_vectors.shape[1]))
        vectors = base_vectors[np.arange(n) % len(base)] + noise
        vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
        cache = EmbeddingCache(exp.cache_dir, exp.embedder.model_id)
        cache.put([transformer.transform(t).normalized_query for t in texts], vectors.astype(np.float32))
        cache.flush()
        log.write_text("".join(json.dumps({"query": t}) + "\n" for t in texts))
    exp = replace(exp, traffic=TrafficSpec(path=log))  # beside the 264 labelled queries (0.3% of the rows)
    return exp, texts, ingested.collection


def _bare(exp: object, texts: list[str], collection: str) -> float:
    """Seconds of the bare loop: batched searches at the widest config's width, then both configs' post-process
    and projection on every query's hits."""
    transformer = KnowledgeQueryTransformer()
    hints = [transformer.transform(t) for t in texts]
    cache = EmbeddingCache(exp.cache_dir, exp.embedder.model_id)  # type: ignore[attr-defined]
    vectors = {h.normalized_query: cache.get(h.normalized_query).tolist() for h in hints}  # type: ignore[union-attr]
    specs = exp.configs  # type: ignore[attr-defined]
    width = max(s.config.retrieve_k for s in specs)
    pipelines = [Pipeline(s.config, s.postprocessor()) for s in specs]
    sig = Signature.of(specs[0])
    with MilvusSearch(exp.target.named(collection), lambda ts: [vectors[t] for t in ts]) as port:  # type: ignore[attr-defined]
        client = port._conn.client
        params = search_params(port._coll, port._index, width)
        started = time.perf_counter()
        with replay_gc():
            for batch in batches(len(hints), exp.batch_size):  # type: ignore[attr-defined]
                data = [vectors[hints[i].normalized_query] for i in batch]
                client.search(collection, data=data, limit=width, anns_field=VECTOR_FIELD,
                              output_fields=list(OUTPUT_FIELDS), search_params=params)  # fmt: skip
        searched = time.perf_counter() - started
        # the post-process of both configs on the hits as the port gives them (the fetch not timed), a batch at
        # a time
        processed = 0.0
        for b in batches(len(hints), exp.batch_size):  # type: ignore[attr-defined]
            found = port.search_batch([sig.request(hints[i].normalized_query, width) for i in b])
            started = time.perf_counter()
            for pipeline in pipelines:
                for i, hits in zip(b, found, strict=True):
                    pipeline.process(hints[i], hits)
            processed += time.perf_counter() - started
    return searched + processed


def _bare_in_child(args: argparse.Namespace, root: Path) -> float:
    command = [sys.executable, "-m", "tests.benchmarks.traffic_scale", "--bare-only", "--queries", str(args.queries),
               "--dir", str(root), *(["--milvus-uri", args.milvus_uri] if args.milvus_uri else [])]  # fmt: skip
    done = subprocess.run(command, capture_output=True, text=True, check=True)
    return float(json.loads(done.stdout.strip().splitlines()[-1])["bare_seconds"])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--queries", type=int, default=100_000)
    parser.add_argument("--milvus-uri", default=None, help="a server (default: a Milvus Lite file)")
    parser.add_argument("--workers", type=int, default=0)
    parser.add_argument("--dir", default=None)
    parser.add_argument("--bare-only", action="store_true", help=argparse.SUPPRESS)  # the bare loop alone (a child)
    args = parser.parse_args()
    root = Path(args.dir or tempfile.mkdtemp(prefix="traffic-scale-"))
    uri = args.milvus_uri or str(root / "milvus.db")
    exp, texts, collection = _experiment(uri, root, args.queries, write=not args.bare_only)
    if args.bare_only:
        print(json.dumps({"bare_seconds": _bare(exp, texts, collection)}))
        return 0
    # the bare loop before and after the run: a collection just built (its segments sealed, indexed and
    # compacted in the background) or a machine whose load moves slows whichever runs first; the ratio is
    # taken to the mean of the two, and both are printed. The one before runs in a process of its own (the
    # same collection and cache), so that the run's peak memory is the run's, not the bare loop's vectors'.
    bare_before = _bare_in_child(args, root)
    started = time.perf_counter()
    result = jobs.run_experiment(exp, root / "run")  # type: ignore[arg-type]
    run_wall = time.perf_counter() - started
    peak_run = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # the set-up's, then the run's
    bare_after = _bare(exp, texts, collection)
    bare = (bare_before + bare_after) / 2
    search = result.summary["latency"]["search"]
    replay, replay_cpu = float(search["replay_seconds"]), float(search["replay_cpu_seconds"])
    cpu_share = float(search["replay_cpu_share"])
    # the shipped traffic experiment's gates (the run's latency is off: the default gates' latency check
    # could not be evaluated, and the compare would end with exit 2)
    checks = tomllib.loads((SHIPPED / "experiments" / "traffic.toml").read_text())["gates"]["checks"]
    gates = root / "traffic-gates.toml"
    gates.write_text("[gates]\nchecks = [\n" + "".join(f"    {json.dumps(c)},\n" for c in checks) + "]\n")
    started = time.perf_counter()
    done = subprocess.run(
        ["/usr/bin/time", "-v", sys.executable, "-m", "rag_eval.cli", "compare", str(root / "run"), "-q",
         "--gates", str(gates)],
        capture_output=True, text=True,
    )  # fmt: skip
    compare_wall = time.perf_counter() - started
    peak_compare = next((int(line.split(":")[1]) / 1024 for line in done.stderr.splitlines()
                         if "Maximum resident set size" in line), float("nan"))  # fmt: skip
    print(f"queries {args.queries:,} x {len(CONFIGS)} configs on {'a server' if args.milvus_uri else 'Milvus Lite'}")
    print(f"bare loop (search + post-process of both configs): {bare_before:.1f} s before the run, "
          f"{bare_after:.1f} s after it, mean {bare:.1f} s")  # fmt: skip
    print(f"replay (the run's replay stage): {replay:.1f} s = x{replay / bare:.2f} the bare loop; this process's CPU "
          f"in it {replay_cpu:.1f} s ({cpu_share:.0%} of its wall time)")  # fmt: skip
    print(f"the whole run: {run_wall:.1f} s, peak memory {peak_run:,.0f} MB")
    print(f"rag-eval compare (label-free comparison): {compare_wall:.1f} s, exit {done.returncode}, "
          f"peak memory {peak_compare:,.0f} MB")  # fmt: skip
    if args.workers:
        dask = jobs.run_experiment(exp, root / "run-dask", how=Execution(cluster=Cluster(workers=args.workers)))  # type: ignore[arg-type]
        a = pd.read_parquet(result.out / "per_query.parquet").drop(columns=list(LATENCY))
        b = pd.read_parquet(dask.out / "per_query.parquet").drop(columns=list(LATENCY))
        key = ["config", "query_id"]
        same = a.sort_values(key).reset_index(drop=True).equals(b.sort_values(key).reset_index(drop=True))
        dask_replay = float(dask.summary["latency"]["search"]["replay_seconds"])
        print(f"{args.workers} Dask workers: replay {dask_replay:.1f} s = x{dask_replay / bare:.2f} the bare loop (one "
              f"process); the same rows as the serial run: {same}")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
