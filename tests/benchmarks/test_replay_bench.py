"""The replay against a bare loop of batched pymilvus searches (`make bench` times them).

The shipped knowledge base (264 queries), one dense config (retrieve-k 20, return-n 5), search latency
not timed (``[timing] latency = "off"``): the retrieval pass alone, as a run spends it (transform, one
batched search per batch of 64, hits, post-process, rows, Parquet parts). The bare loop sends the same
vectors in the same batches with the same limit, output fields and search parameters, and reads
nothing back. Both run with the collector kept off the long-lived data, as a replay does.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import pytest

from rag_eval.core.transform import KnowledgeQueryTransformer
from rag_eval.experiment import Experiment, Overrides, load_experiment, with_overrides
from rag_eval.experiment.latency import LatencyMode, TimingPlan
from rag_eval.ingest.collection import IngestSource, ensure_collection
from rag_eval.replay.batches import Replayer, batches, replay_gc
from rag_eval.replay.prepare import prepare
from rag_eval.rundir.directory import RunStore
from rag_eval.rundir.rows import Truth
from rag_eval.search.milvus import OUTPUT_FIELDS, VECTOR_FIELD, MilvusSearch, MilvusStore, SearchTarget
from rag_eval.search.milvus.collection import search_params
from tests.benchmarks.conftest import SERVER_ENV, Results
from tests.conftest import SHIPPED


@dataclass
class Setup:
    exp: Experiment
    collection: str
    queries: list[tuple[str, str]]
    vectors: dict[str, list[float]]
    truth: Truth
    backend: str

    def port(self) -> MilvusSearch:
        return MilvusSearch(self.exp.target.named(self.collection), lambda texts: [self.vectors[t] for t in texts])


def _setup(uri: str, tmp: Path, collection: str | None) -> Setup:
    default = load_experiment(SHIPPED / "experiments" / "default.toml")
    exp = with_overrides(default, Overrides(milvus_uri=uri, collection=collection))
    evidence = next(c for c in exp.configs if c.name == "evidence")
    exp = replace(exp, configs=(evidence,), baseline="evidence", cache_dir=tmp / "cache")
    prep = prepare(exp)
    source = IngestSource(dataset=prep.dataset, corpus=prep.corpus, rows=prep.rows)
    ingested = ensure_collection(exp, source, prep.resolver)
    transformer = KnowledgeQueryTransformer()
    queries = [(q.id, q.text) for q in prep.dataset.queries.values()]
    texts = [transformer.transform(t).normalized_query for _, t in queries]
    vectors = {t: v.tolist() for t, v in zip(texts, prep.resolver.resolve(texts), strict=True)}
    truth = Truth.of_rows(
        prep.rows,
        relevance=prep.labels.relevance,
        doc_relevance=prep.dataset.relevant_docs(),
    )
    return Setup(exp, ingested.collection, queries, vectors, truth, "server" if "://" in uri else "lite")


@pytest.fixture(scope="module")
def lite(tmp_path_factory: pytest.TempPathFactory) -> Setup:
    tmp = tmp_path_factory.mktemp("bench-replay")
    return _setup(str(tmp / "milvus.db"), tmp, None)


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Setup]:
    uri = os.environ.get(SERVER_ENV)
    if not uri:
        pytest.skip(f"no Milvus server: set {SERVER_ENV}")
    name = f"bench_replay_{uuid.uuid4().hex[:10]}"
    try:
        yield _setup(uri, tmp_path_factory.mktemp("bench-replay-server"), name)
    finally:
        with MilvusStore(SearchTarget(uri=uri, collection=name)) as store:
            store.drop()


def _bare(benchmark: Any, results: Results, setup: Setup) -> None:
    texts = list(setup.vectors)
    k = setup.exp.configs[0].config.retrieve_k
    with setup.port() as port:
        client = port._conn.client  # the adapter's own pymilvus client: the same connection, nothing around it
        params = search_params(port._coll, port._index, k)  # as the adapter sends them (query cache skipped)

        def loop() -> None:
            with replay_gc():
                for batch in batches(len(texts), setup.exp.batch_size):
                    client.search(
                        setup.collection,
                        data=[setup.vectors[texts[i]] for i in batch],
                        limit=k,
                        anns_field=VECTOR_FIELD,
                        output_fields=list(OUTPUT_FIELDS),
                        search_params=params,
                    )

        loop()  # warm-up
        benchmark.pedantic(loop, rounds=7, iterations=1)
    results.record(f"bare_search[{setup.backend}]", benchmark)


def _replay(benchmark: Any, results: Results, setup: Setup, tmp: Path) -> None:
    rounds = iter(range(1000))

    def fresh_store() -> tuple[tuple[Any, ...], dict[str, Any]]:
        store = RunStore(tmp / f"run-{next(rounds)}")
        store.begin({"experiment": "bench"}, resume=False)
        return (store,), {}

    with setup.port() as port:
        replayer = Replayer(
            port,
            setup.exp.configs,
            setup.truth,
            timing=TimingPlan(mode=LatencyMode.OFF),
            warmup=setup.exp.warmup,
        )

        def replay(store: RunStore) -> int:
            return replayer.run(setup.queries, store, batch_size=setup.exp.batch_size)

        replay(fresh_store()[0][0])  # warm-up
        ran = benchmark.pedantic(replay, setup=fresh_store, rounds=7, iterations=1)
    results.record(f"replay[{setup.backend}]", benchmark)
    assert ran == len(batches(len(setup.queries), setup.exp.batch_size))


@pytest.mark.milvus_lite
def test_bare_search_lite(benchmark, results: Results, lite: Setup) -> None:  # type: ignore[no-untyped-def]
    _bare(benchmark, results, lite)


@pytest.mark.milvus_lite
def test_replay_lite(benchmark, results: Results, lite: Setup, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    _replay(benchmark, results, lite, tmp_path)


@pytest.mark.milvus_server
def test_bare_search_server(benchmark, results: Results, server: Setup) -> None:  # type: ignore[no-untyped-def]
    _bare(benchmark, results, server)


@pytest.mark.milvus_server
def test_replay_server(benchmark, results: Results, server: Setup, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    _replay(benchmark, results, server, tmp_path)
