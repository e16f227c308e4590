"""Post-process + projection (everything after the port returns, up to the payload), and the search it
is a share of (`make bench` times them; `make test` runs each once).

Inputs are the realistic candidate mix of :mod:`tests.benchmarks.synthetic` at retrieve-k 20 to 10,000
and return-n 5 and 50; the worst case is 10,000 copies of one chunk against 10,000 distinct hits; the
search is one query per call through the adapter at the same k, on Milvus Lite and (when one is named)
a Milvus server, on a collection of the same mix.
"""

from __future__ import annotations

import pytest

from rag_eval.core.config import RagConfig
from rag_eval.core.lookup import Pipeline
from rag_eval.core.transform import KnowledgeQueryTransformer
from rag_eval.core.types import KnowledgeSearchRequest, to_candidates
from tests.benchmarks import synthetic
from tests.benchmarks.conftest import K_SWEEP, Collection, Results, queries_cycle

HINTS = KnowledgeQueryTransformer().transform("replica lag keeps growing after the failover")
CASES = [(k, n) for k in K_SWEEP for n in (5, 50) if k >= n]


@pytest.mark.parametrize(("k", "n"), CASES, ids=[f"evidence-k{k}-n{n}" for k, n in CASES])
def test_postprocess(benchmark, results: Results, k: int, n: int) -> None:  # type: ignore[no-untyped-def]
    pipeline = Pipeline(RagConfig.from_mapping({"rag.retrieve-k": k, "rag.return-n": n}))
    hits = synthetic.hits(k)
    record = benchmark(pipeline.process, HINTS, hits)
    results.record(f"postprocess[evidence-k{k}-n{n}]", benchmark)
    assert len(record.payload.excerpts) <= n and len(record.hits) == k


@pytest.mark.parametrize("k", [20, 10_000], ids=["k20", "k10000"])
def test_sort_of_the_same_pairs(benchmark, results: Results, k: int) -> None:  # type: ignore[no-untyped-def]
    """What post-processing is measured against: CPython's ``sorted()`` of the same hits' (score,
    evidence key) pairs, in the port's order (the cost of one sort, with nothing made)."""
    hits = synthetic.hits(k)
    pairs = [(h.score, c.key) for h, c in zip(hits, to_candidates(hits), strict=True)]
    ordered = benchmark(sorted, pairs)
    results.record(f"sort[k{k}]", benchmark)
    assert len(ordered) == k


@pytest.mark.parametrize("pipeline", ["legacy-merge", "legacy-first"])
@pytest.mark.parametrize("k", [5, 20])
def test_postprocess_legacy(benchmark, results: Results, pipeline: str, k: int) -> None:  # type: ignore[no-untyped-def]
    config = RagConfig.from_mapping({"rag.pipeline": pipeline, "rag.top-k": k})
    record = benchmark(Pipeline(config).process, HINTS, synthetic.hits(k))
    results.record(f"postprocess[{pipeline}-k{k}]", benchmark)
    assert len(record.payload.excerpts) <= k


@pytest.mark.parametrize("case", ["copies", "distinct"])
def test_worst_case_many_copies_of_one_chunk(benchmark, results: Results, case: str) -> None:  # type: ignore[no-untyped-def]
    pipeline = Pipeline(RagConfig.from_mapping({"rag.retrieve-k": 10_000, "rag.return-n": 5}))
    hits = synthetic.copies(10_000) if case == "copies" else synthetic.distinct(10_000)
    record = benchmark(pipeline.process, HINTS, hits)
    results.record(f"worst_case[{case}]", benchmark)
    blocks = record.result.blocks
    assert len(blocks) == (1 if case == "copies" else 5)
    if case == "copies":
        assert len(blocks[0].hit_reasons) == 10_000  # every copy's reason merged, once


def _search(benchmark, results: Results, collection: Collection, k: int) -> None:  # type: ignore[no-untyped-def]
    next_query = queries_cycle()
    with collection.port() as port:
        port.search(KnowledgeSearchRequest(query=next_query(), top_k=k))  # warm-up
        hits = benchmark(lambda: port.search(KnowledgeSearchRequest(query=next_query(), top_k=k)))
    results.record(f"search[{collection.backend}-k{k}]", benchmark)
    assert 0 < len(hits) <= k


@pytest.mark.milvus_lite
@pytest.mark.parametrize("k", K_SWEEP, ids=[f"lite-k{k}" for k in K_SWEEP])
def test_search_lite(benchmark, results: Results, lite_collection: Collection, k: int) -> None:  # type: ignore[no-untyped-def]
    _search(benchmark, results, lite_collection, k)


@pytest.mark.milvus_server
@pytest.mark.parametrize("k", K_SWEEP, ids=[f"server-k{k}" for k in K_SWEEP])
def test_search_server(benchmark, results: Results, server_collection: Collection, k: int) -> None:  # type: ignore[no-untyped-def]
    _search(benchmark, results, server_collection, k)
