"""Post-process latency (pytest-benchmark; `make bench`). `make test` runs each once, untimed.

Inputs are realistic: hits from a clapnq-like result list (several chunks per document, some
true duplicates and legacy rows), at the retrieve widths the experiments use.
"""

from __future__ import annotations

import random

import pytest

from rag_eval.core.config import RagConfig
from rag_eval.core.lookup import Pipeline
from rag_eval.core.transform import KnowledgeQueryTransformer
from rag_eval.core.types import KnowledgeSearchHit, to_candidates

HINTS = KnowledgeQueryTransformer().transform("replica lag keeps growing after the failover")


def hits(n: int, seed: int = 1) -> list[KnowledgeSearchHit]:
    rnd = random.Random(seed)
    out = []
    for i in range(n):
        doc = f"doc-{rnd.randrange(max(2, n // 4))}"
        legacy = rnd.random() < 0.1
        out.append(
            KnowledgeSearchHit(
                id=str(i),
                content="x" * rnd.randrange(100, 400),
                score=1.0 - i / (n * 1.5) + rnd.random() * 1e-3,
                doc_id=doc,
                chunk_index=None if legacy else rnd.randrange(12),
                vector_id=str(i),
                source=f"kb/{doc}.md",
            )
        )
    return out


@pytest.mark.parametrize(
    ("pipeline", "width"), [("evidence", 20), ("evidence", 50), ("evidence", 200), ("legacy", 5)]
)
def test_postprocess_pack_project(benchmark, pipeline: str, width: int) -> None:  # type: ignore[no-untyped-def]
    """The whole post-search path of one lookup: candidates, post-process, pack, assemble, project."""
    if pipeline == "legacy":
        config = RagConfig.from_mapping({"rag.pipeline": "legacy", "rag.top-k": width})
    else:
        config = RagConfig.from_mapping({"rag.retrieve-k": width, "rag.return-n": 5})
    record = benchmark(Pipeline(config).process, HINTS, hits(width))
    assert len(record.payload.excerpts) <= 5 and len(record.candidates) == width


@pytest.mark.parametrize("width", [20, 200])
def test_postprocessor_alone(benchmark, width: int) -> None:  # type: ignore[no-untyped-def]
    pipe = Pipeline(RagConfig().with_(retrieve_k=width))
    candidates = to_candidates(hits(width))
    outcome = benchmark(pipe.postprocessor, candidates)
    assert len(outcome.trace) == width
