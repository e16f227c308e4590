"""Make the example trace file: the agent tool ``lookup_knowledge`` traced the way a production team traces it
(OpenTelemetry's SDK, OpenInference's conventions, the OTLP JSON file the Collector's file exporter writes),
called with the shipped data set's queries as production traffic asks them.

    python examples/traffic/make_traces.py [--out datasets/incident-kb/traffic/lookup-traces.otlp.jsonl]
                                           [--calls 1000] [--seed 1] [--exponent 1.0] [--limit N]
                                           [--without-output] [--without-documents]
                                           [--milvus-uri FILE] [--cache-dir DIR] [--quiet]

``make traces`` writes the shipped file with ``--without-output --without-documents`` (examples/traffic/README.md).

The collection is the default experiment's (``datasets/incident-kb/experiments/default.toml``), built or
reused on Milvus Lite exactly as ``rag-eval run`` builds it (``prepare``, ``ingest_collection``), and
searched through the port a replay uses; the tool runs the ``evidence`` config
(``experiments/configs/evidence.properties``). Every query is asked at least once; the other calls fall on
the queries by a Zipf law (weight 1/rank^exponent over a seeded shuffle of the queries), so a few queries are
asked many times and most once or twice, in a seeded random order. The queries and their counts are the
same for a seed; the trace and span ids and the times are new on every run.

Needs no model and no network: the query and chunk vectors are the data set's precomputed ones (the script
stops, before searching, if one is missing). Needs the ``trace`` extra (OpenTelemetry's SDK and encoder,
OpenInference's conventions).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
SHIPPED = ROOT / "datasets" / "incident-kb"
EXPERIMENT = SHIPPED / "experiments" / "default.toml"
CONFIG = SHIPPED / "experiments" / "configs" / "evidence.properties"
OUT = SHIPPED / "traffic" / "lookup-traces.otlp.jsonl"
SERVICE = "knowledge-service"


def call_counts(queries: int, *, calls: int, seed: int, exponent: float = 1.0) -> list[int]:
    """How often each of ``queries`` queries is asked in ``calls`` calls: once each, and the other calls drawn
    (seeded) with the weight 1/rank^exponent, the ranks a seeded shuffle of the queries.

    >>> counts = call_counts(5, calls=20, seed=3)
    >>> sum(counts), min(counts) >= 1, counts == call_counts(5, calls=20, seed=3)
    (20, True, True)
    """
    if queries < 1 or calls < queries:
        raise ValueError(f"{calls} calls cannot ask each of {queries} queries at least once")
    rng = random.Random(seed)
    rank_of = list(range(queries))
    rng.shuffle(rank_of)  # query i has the rank rank_of[i] + 1
    weights = [1.0 / (rank_of[i] + 1) ** exponent for i in range(queries)]
    counts = [1] * queries
    for i in rng.choices(range(queries), weights=weights, k=calls - queries):
        counts[i] += 1
    return counts


def call_order(counts: Sequence[int], *, seed: int) -> list[int]:
    """The query index of each call: every query its count of times, in a seeded random order.

    >>> sorted(call_order([2, 1, 3], seed=1))
    [0, 0, 1, 2, 2, 2]
    """
    order = [i for i, n in enumerate(counts) for _ in range(n)]
    random.Random(seed).shuffle(order)
    return order


@dataclass(frozen=True, slots=True, kw_only=True)
class Made:
    """What a run of the script wrote: calls made, distinct queries asked, spans written, the file."""

    calls: int
    queries: int
    spans: int
    path: Path


def arguments(argv: Sequence[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--out", type=Path, default=OUT, help="the OTLP JSON lines file (replaced)")
    p.add_argument("--calls", type=int, default=1000, help="tool calls in all (at least one a query)")
    p.add_argument("--seed", type=int, default=1, help="the seed of the counts and of the order of the calls")
    p.add_argument("--exponent", type=float, default=1.0, help="the Zipf law's exponent")
    p.add_argument("--limit", type=int, default=None, help="only the data set's first N queries")
    p.add_argument(
        "--without-output",
        action="store_true",
        help="leave out output.value (the payload) and the retrieved texts: the query stays",
    )
    p.add_argument("--without-documents", action="store_true",
                   help="leave out the retrieved documents (their ids and scores) of the RETRIEVER spans")  # fmt: skip
    p.add_argument("--milvus-uri", default=None, help="the Milvus Lite file (default: the experiment's)")
    p.add_argument("--cache-dir", type=Path, default=None, help="the embedding cache (default: the experiment's)")
    p.add_argument("--quiet", action="store_true")
    args = p.parse_args(argv)
    if args.limit is not None and args.limit < 1:
        p.error(f"--limit must be at least 1, not {args.limit}")
    if args.calls < (args.limit or 1):
        p.error(f"--calls {args.calls} cannot ask each query at least once")
    return args


def make_traces(args: argparse.Namespace) -> Made:
    from rag_eval.core.config import RagConfig
    from rag_eval.experiment import Overrides, load_experiment, with_overrides
    from rag_eval.replay.prepare import Progress, ingest_collection, prepare
    from rag_eval.replay.strategies import encoder
    from rag_eval.search.milvus import MilvusSearch

    exp = with_overrides(load_experiment(EXPERIMENT), Overrides(milvus_uri=args.milvus_uri))
    if args.cache_dir is not None:
        exp = replace(exp, cache_dir=args.cache_dir)
    prep = prepare(exp)
    texts = [q.text for q in prep.dataset.queries.values()][: args.limit]
    _check_vectors(prep, texts)
    counts = call_counts(len(texts), calls=args.calls, seed=args.seed, exponent=args.exponent)
    calls = [texts[i] for i in call_order(counts, seed=args.seed)]
    collection = ingest_collection(exp, prep, Progress(quiet=args.quiet))
    config = RagConfig.from_properties_file(CONFIG)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    partial = args.out.with_name(args.out.name + ".partial")
    partial.unlink(missing_ok=True)
    try:
        with MilvusSearch(collection.target, encoder(prep.resolver)) as port:
            _traced_calls(port, config, calls, partial, args)
        spans = spans_in(partial)
        if spans != 2 * len(calls):
            raise SystemExit(f"{args.out}: {spans} spans written of {2 * len(calls)}: not replaced")
        os.replace(partial, args.out)
    finally:
        partial.unlink(missing_ok=True)
    return Made(calls=len(calls), queries=len(texts), spans=spans, path=args.out)


def spans_in(path: Path) -> int:
    """The spans in an OTLP JSON lines file (every line parsed)."""
    with path.open(encoding="utf-8") as lines:
        return sum(
            len(scope.get("spans", []))
            for line in lines
            if line.strip()
            for resource in json.loads(line)["resourceSpans"]
            for scope in resource.get("scopeSpans", [])
        )


def _traced_calls(port: Any, config: Any, calls: list[str], path: Path, args: argparse.Namespace) -> None:
    """Call the traced tool with each of ``calls``, its spans into ``path`` (all of them flushed and the file
    closed, whatever happens)."""
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor

    from rag_eval.core.lookup import LookupKnowledge
    from rag_eval.serve.tracing import TracedLookup
    from rag_eval.traffic.otlp_export import OtlpJsonFileExporter

    exporter = OtlpJsonFileExporter(path)
    provider = TracerProvider(resource=Resource.create({"service.name": SERVICE}))
    provider.add_span_processor(BatchSpanProcessor(exporter, max_queue_size=2 * len(calls) + 2048))
    tool = TracedLookup(
        LookupKnowledge(port, config),
        provider.get_tracer("rag_eval.serve"),
        capture_output=not args.without_output,
        capture_documents=not args.without_documents,
    )
    try:
        for query in calls:
            tool.lookup_knowledge(query)
    finally:
        provider.shutdown()  # exports what is queued, then closes the file


def _check_vectors(prep: Any, texts: list[str]) -> None:
    """Every chunk and query has a stored vector: nothing is embedded (no model, no network)."""
    from rag_eval.core.transform import KnowledgeQueryTransformer

    transform = KnowledgeQueryTransformer().transform
    resolver, chunks = prep.resolver, prep.corpus.chunks
    missing = resolver.missing([c.content for c in chunks]) + resolver.missing(
        [transform(t).normalized_query for t in texts]
    )
    if missing:
        raise SystemExit(f"{len(missing)} texts have no precomputed vector (first: {missing[0][:60]!r}): "
                         "run `make embeddings`")  # fmt: skip


def main(argv: Sequence[str] | None = None) -> int:
    from rag_eval.core.errors import RagEvalError

    args = arguments(argv)
    try:
        made = make_traces(args)
    except RagEvalError as exc:  # bad input (2) or Milvus (3): one line, no file written
        print(f"make_traces: {exc}", file=sys.stderr)
        return exc.exit_code
    if not args.quiet:
        size = made.path.stat().st_size
        print(f"{made.path}: {made.calls} calls of {made.queries} queries, {made.spans} spans, {size:,} bytes")
    return 0


if __name__ == "__main__":
    sys.exit(main())
