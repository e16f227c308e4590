"""Measures stay measures: on random lookups with duplicates, re-ingested copies, rows missing identity,
ties, caps, merged blocks, budgets and empty payloads, every bounded measure lies in [0, 1] and every count
adds up. The invariants are stated from the definitions, not from the code that computes them."""

from __future__ import annotations

import math

import pandas as pd
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rag_eval.core.config import RagConfig
from rag_eval.core.lookup import Pipeline
from rag_eval.core.transform import KnowledgeQueryTransformer
from rag_eval.core.types import KnowledgeSearchHit
from rag_eval.datasets.chunking import Chunk
from rag_eval.experiment.whatif import ContentDedupPostProcessor
from rag_eval.ingest.collection import IngestRow
from rag_eval.metrics.measures import summarize
from rag_eval.rundir.rows import RowTiming, Truth, build_row
from tests.budget import examples

HINTS = KnowledgeQueryTransformer().transform("q")
TEXTS = ["alpha beta", "Alpha  BETA", "gamma", "delta epsilon", "zeta"]  # two differ only in case and spacing
KINDS = ("clean", "legacy", "missing_doc")


@st.composite
def lookups(draw: st.DrawFn) -> tuple[list[KnowledgeSearchHit], Truth]:
    n_chunks = draw(st.integers(1, 8))
    chunks = [
        Chunk(
            doc_id=f"d{draw(st.integers(0, 2))}",
            chunk_index=i,
            start=0,
            end=5,
            content=draw(st.sampled_from(TEXTS)),
            source="",
        )
        for i in range(n_chunks)
    ]
    chunks = list({c.key: c for c in chunks}.values())
    rows: list[IngestRow] = []
    for chunk in chunks:
        kind = draw(st.sampled_from(KINDS))
        copies = draw(st.integers(1, 3))  # a re-ingested copy has the same identity and a new vector id
        for _ in range(copies):
            rows.append(
                IngestRow(
                    vector_id=len(rows) + 1,
                    chunk=chunk,
                    doc_id=None if kind == "missing_doc" else chunk.doc_id,
                    chunk_index=None if kind == "legacy" else chunk.chunk_index,
                    kind=kind,
                )
            )
    picked = draw(st.lists(st.sampled_from(rows), max_size=len(rows) + 2, unique_by=lambda r: r.vector_id))
    hits = [
        KnowledgeSearchHit(
            id=str(r.vector_id),
            content=r.chunk.content,
            score=draw(st.sampled_from([0.9, 0.5, 0.5, 0.1, math.nan])),
            doc_id=r.doc_id,
            chunk_index=r.chunk_index,
            vector_id=str(r.vector_id),
            source=f"kb/{r.chunk.doc_id}.md" if draw(st.booleans()) else None,
        )
        for r in picked
    ]
    relevant = {c.key: draw(st.integers(1, 2)) for c in chunks if draw(st.booleans())}
    truth = Truth.of_rows(
        rows,
        relevance={"q": relevant},
        doc_relevance={"q": {k.split("#")[0]: 1 for k in relevant}},
    )
    return hits, truth


CONFIGS = st.sampled_from(
    [
        ("evidence", {"rag.retrieve-k": 6, "rag.return-n": 3, "rag.max-chunks-per-document": 1}),
        ("evidence", {"rag.retrieve-k": 10, "rag.return-n": 5, "rag.max-chunks-per-document": 5}),
        ("evidence", {"rag.retrieve-k": 10, "rag.return-n": 5, "rag.projector.max-total-chars": 12}),
        ("legacy-merge", {"rag.pipeline": "legacy", "rag.top-k": 4, "rag.projector.max-excerpt-chars": 15}),
        ("legacy-first", {"rag.pipeline": "legacy-first", "rag.top-k": 4}),
        ("what-if", {"rag.retrieve-k": 10, "rag.return-n": 4, "rag.max-chunks-per-document": 2}),
    ]
)


@settings(max_examples=examples(400), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(lookups(), CONFIGS, st.integers(1, 3))
def test_measures_are_bounded_and_counts_add_up(lookup: tuple, named: tuple, checked_cap: int) -> None:
    hits, truth = lookup
    kind, values = named
    config = RagConfig.from_mapping(values)
    what_if = ContentDedupPostProcessor(config.return_n, config.max_chunks_per_document) if kind == "what-if" else None
    record = Pipeline(config, what_if).process(HINTS, hits)
    row = build_row(
        query_id="q", query_index=0, config="c", record=record, truth=truth, timing=RowTiming(search_us=1.0)
    )

    # counts add up
    assert sorted(row["delivered_relevant"] + row["lost_chunks"]) == sorted(row["relevant_chunks"])
    assert len(row["lost_chunks"]) == len(row["lost_stages"])
    assert sum(record.outcome.stage_counts().values()) == row["n_hits"] == len(hits[: config.retrieve_k])
    assert len(row["member_keys"]) == len(row["member_chunks"]) == len(row["member_block"])
    assert row["n_blocks"] <= config.max_blocks and row["payload_chars"] <= config.max_total_chars

    legacy = config.pipeline.is_legacy
    cfg = {
        "name": "c",
        "cap": checked_cap,
        "cap_aware": None if legacy else config.max_chunks_per_document,
        "return_n": config.return_n,
    }
    out, frame = summarize(pd.DataFrame([row]), configs=[cfg], cutoffs=[1, 3, 5])
    c = out["c"]
    for key in (
        "same_doc_multi_chunk_recall",
        "same_doc_multi_chunk_recall_cap_aware",
        "duplicate_rate",
        "content_duplicate_rate",
        "content_duplicate_rate_copies",
        "content_duplicate_rate_same_text",
        "raw_duplicate_rate",
        "raw_content_duplicate_rate",
        "cap_compliance",
        "cap_compliance_true",
        "evidence_guard_1to1",
        "return_n_compliance",
    ):
        assert math.isnan(c[key]) or 0.0 <= c[key] <= 1.0, key
    for level in ("chunk", "doc"):
        assert all(math.isnan(v) or 0.0 <= v <= 1.0 for v in c[level].values())
    # cap-aware recall divides by min(cap, relevant) <= relevant: never below the plain recall
    if not math.isnan(c["same_doc_multi_chunk_recall"]):
        assert c["same_doc_multi_chunk_recall_cap_aware"] >= c["same_doc_multi_chunk_recall"] - 1e-12
    # a stored doc id is the true one when present, so the true document never holds fewer chunks
    assert c["cap_compliance_true"] <= c["cap_compliance"]
    dup = c["content_duplicates"]
    assert sum(dup["by_cause"].values()) == sum(dup["by_key_kind"].values()) == dup["total"]
    assert int(frame.loc[0, "dup_content"]) == dup["total"]
    if not legacy:
        assert c["duplicate_rate"] in (0.0,) or math.isnan(c["duplicate_rate"])  # D2
        assert c["return_n_compliance"] == 1.0
    if kind == "what-if":
        assert c["content_duplicate_rate"] in (0.0,) or math.isnan(c["content_duplicate_rate"])
