"""The measures of docs/measures.md on worked examples, each computed by hand from its definition.

Hits are written as production has them (re-ingested copies, rows without chunk_index or doc_id, a row
the ingest plan does not know), and go through the pipeline, ``build_row`` and ``summarize`` exactly as
in a replay. Every expected number is derived in a comment from its definition in docs/measures.md.
"""

from __future__ import annotations

import math

import pytest

from rag_eval.core.config import RagConfig
from rag_eval.metrics.measures import summarize
from rag_eval.rundir.rows import RowTiming, build_row, content_sha
from tests.unit.frames import per_query_frame

from ..rowkit import as_table, replay_record, replay_row, stored, truth_for

CUTOFFS = (1, 3)


def summary(rows: list, **cfg: object) -> dict:  # type: ignore[type-arg]
    config = {"name": "c", "cap": 2, "cap_aware": 2, "return_n": 10, **cfg}
    out, _ = summarize(as_table(rows), configs=[config], cutoffs=CUTOFFS)
    return out[str(config["name"])]  # type: ignore[no-any-return]


# -- content duplicates: the same normalised text under a different key ---------------------------


def test_content_hash_folds_case_and_whitespace_only() -> None:
    assert content_sha("Restart the replica SQL thread.") == content_sha("  restart THE\treplica\n sql  thread. ")
    assert content_sha("Restart the replica SQL thread.") != content_sha("Restart the replica SQL thread")
    assert content_sha("a b") != content_sha("ab")
    assert len(content_sha("x")) == 16 and content_sha("x") == content_sha("X")


def _copies() -> list:  # type: ignore[type-arg]
    text = "Restart the replica SQL thread."
    d0 = stored(1, "d#chunk-0", content=text)
    d0_copy = stored(3, "d#chunk-0", content=text)  # re-ingested: same key, new vector id
    d0_old_page = stored(2, "d#chunk-0", chunk_index=False, content="restart the  Replica sql\nthread.")
    e0 = stored(4, "e#chunk-0", content="Check free disk space.")
    # port order: the copy ties with its original and comes second
    return [(d0, 0.9), (d0_copy, 0.9), (d0_old_page, 0.8), (e0, 0.7)]


def test_duplicate_rates_of_the_evidence_pipeline() -> None:
    row = replay_row(RagConfig(), _copies(), {"d#chunk-0": 1})
    # D2 merged the copy; the old page (key vector:2) is the same text in other case and spacing
    assert row["member_keys"] == ["d#chunk-0", "vector:2", "e#chunk-0"]
    c = summary([row])
    assert c["duplicate_rate"] == 0.0
    assert c["content_duplicate_rate"] == pytest.approx(1 / 3)
    # raw hits: d#chunk-0 twice (one repeated key), the old page once more (one content duplicate) of 4
    assert c["raw_duplicate_rate"] == pytest.approx(1 / 4)
    assert c["raw_content_duplicate_rate"] == pytest.approx(1 / 4)


def test_duplicate_rates_of_the_legacy_pipeline() -> None:
    legacy = RagConfig.from_mapping({"rag.pipeline": "legacy", "rag.top-k": 5})
    row = replay_row(legacy, _copies(), {"d#chunk-0": 1})
    # one document block carries the chunk, its copy and the old page: 4 delivered chunks
    assert row["member_keys"] == ["d#chunk-0", "d#chunk-0", "vector:2", "e#chunk-0"]
    c = summary([row], cap_aware=None)
    assert c["duplicate_rate"] == pytest.approx(1 / 4)
    assert c["content_duplicate_rate"] == pytest.approx(1 / 4)
    assert c["payload"]["chunks_delivered_mean"] == 4


# -- same-document multi-chunk recall and its cap-aware variant ------------------------------------


def _three_documents() -> tuple[list, list, dict]:  # type: ignore[type-arg]
    d = [stored(1, "d#chunk-0"), stored(2, "d#chunk-1"), stored(3, "d#chunk-2")]
    e = [stored(4 + i, f"e#chunk-{i}") for i in range(4)]
    f0, f1 = stored(8, "f#chunk-0"), stored(9, "f#chunk-1")
    hits = [(e[0], 0.95), (d[0], 0.9), (e[1], 0.88), (d[2], 0.85), (e[2], 0.8), (e[3], 0.78), (d[1], 0.7), (f0, 0.6)]
    relevant = {"d#chunk-0": 1, "d#chunk-2": 1, "f#chunk-0": 1, "f#chunk-1": 1} | {f"e#chunk-{i}": 1 for i in range(4)}
    return hits, [f1], relevant


def test_cap_aware_recall_divides_by_the_smaller_of_cap_and_relevant_chunks() -> None:
    hits, extra, relevant = _three_documents()
    cap3 = RagConfig(retrieve_k=20, return_n=10, max_chunks_per_document=3)
    row = replay_row(cap3, hits, relevant, extra_rows=extra)
    assert dict(zip(row["lost_chunks"], row["lost_stages"], strict=True)) == {
        "e#chunk-3": "cap",
        "f#chunk-1": "not_retrieved",
    }
    # d: 2 relevant, both delivered: 2/2; cap 3 is more than d's 2 relevant chunks: 2/min(3, 2) = 1
    # e: 4 relevant, 3 delivered: 3/4; cap-aware 3/min(3, 4) = 1
    # f: 2 relevant, 1 delivered: 1/2 and 1/min(3, 2)
    c = summary([row], cap=3, cap_aware=3)
    assert c["same_doc_pairs"] == 3
    assert c["same_doc_multi_chunk_recall"] == pytest.approx((1 + 3 / 4 + 1 / 2) / 3)
    assert c["same_doc_multi_chunk_recall_cap_aware"] == pytest.approx((1 + 1 + 1 / 2) / 3)
    frame = per_query_frame(as_table([row]), CUTOFFS, {"c": 3})
    assert frame.loc[0, "same_doc_pairs"] == 3
    assert frame.loc[0, "same_doc_recall_cap_aware"] == pytest.approx(5 / 6)


def test_without_a_cap_the_cap_aware_recall_is_the_plain_one() -> None:
    hits, extra, relevant = _three_documents()
    legacy = RagConfig.from_mapping({"rag.pipeline": "legacy", "rag.top-k": 5})
    row = replay_row(legacy, hits, relevant, extra_rows=extra)
    # top-k 5: e0 d0 e1 d2 e2, merged into the blocks of e and d; f not retrieved
    assert row["returned_keys"] == ["kb/e.md", "kb/d.md"]
    c = summary([row], cap_aware=None)
    assert c["same_doc_multi_chunk_recall"] == pytest.approx((2 / 2 + 3 / 4 + 0 / 2) / 3)
    assert c["same_doc_multi_chunk_recall_cap_aware"] == c["same_doc_multi_chunk_recall"]
    # three chunks of e in one block: over the cap of 2 that compliance is checked against
    assert c["cap_compliance"] == 0.0
    assert c["cap_violations"] == [{"query_id": "q", "doc_id": "e", "chunks": 3, "cap": 2}]


def test_docless_copies_can_deliver_more_than_the_cap_and_recall_stays_at_most_one() -> None:
    g = [stored(1, "g#chunk-0"), stored(2, "g#chunk-1"), stored(3, "g#chunk-2", doc_id=False)]
    g3 = stored(4, "g#chunk-3")
    row = replay_row(
        RagConfig(), [(g[0], 0.9), (g[1], 0.8), (g[2], 0.7)], {f"g#chunk-{i}": 1 for i in range(4)}, extra_rows=[g3]
    )
    # the doc-less row is a bucket of its own (D3): three chunks of g delivered under cap 2
    assert row["member_chunks"] == ["g#chunk-0", "g#chunk-1", "g#chunk-2"]
    assert row["member_doc_ids"] == ["g", "g", ""]
    c = summary([row])
    assert c["same_doc_multi_chunk_recall"] == pytest.approx(3 / 4)
    assert c["same_doc_multi_chunk_recall_cap_aware"] == 1.0  # 3/min(2, 4), at most 1
    # no stored docId has more than 2 delivered chunks
    assert c["cap_compliance"] == 1.0 and c["n_cap_violations"] == 0


def test_documents_with_one_relevant_chunk_are_not_pairs() -> None:
    rows = [stored(1, "d#chunk-0"), stored(2, "e#chunk-0")]
    row = replay_row(RagConfig(), [(rows[0], 0.9), (rows[1], 0.8)], {"d#chunk-0": 1, "e#chunk-0": 1})
    c = summary([row])
    assert c["same_doc_pairs"] == 0 and math.isnan(c["same_doc_multi_chunk_recall"])
    frame = per_query_frame(as_table([row]), CUTOFFS, {"c": 2})
    assert math.isnan(frame.loc[0, "same_doc_recall"]) and math.isnan(frame.loc[0, "same_doc_recall_cap_aware"])


# -- a delivered chunk the harness cannot identify ------------------------------------------------


def test_an_unknown_chunk_is_a_non_relevant_chunk_and_no_document() -> None:
    unknown = stored(99, "x#chunk-0")  # returned by Milvus, absent from the ingest plan
    d1, e0 = stored(1, "d#chunk-1"), stored(2, "e#chunk-0")
    relevance = {"d#chunk-1": 2}
    record = replay_record(RagConfig(), [(unknown, 0.9), (d1, 0.8), (e0, 0.7)])
    row = build_row(
        query_id="q",
        query_index=0,
        config="c",
        record=record,
        truth=truth_for([d1, e0], relevance),
        timing=RowTiming(search_us=1.0),
    )
    assert row["member_chunks"] == ["unknown:99", "d#chunk-1", "e#chunk-0"]
    c = summary([row])
    # chunk ranking unknown:99, d#chunk-1, e#chunk-0: first relevant at rank 2
    assert c["chunk"]["RR"] == 0.5 and c["chunk"]["P@1"] == 0.0
    assert c["chunk"]["nDCG@3"] == pytest.approx((2 / math.log2(3)) / 2)
    # document ranking d, e: the unknown chunk belongs to no document
    assert c["doc"]["RR"] == 1.0 and c["doc"]["P@1"] == 1.0 and c["doc"]["Success@1"] == 1.0
    assert c["doc"]["P@3"] == pytest.approx(1 / 3) and c["doc"]["nDCG@3"] == 1.0


# -- D4 widths of the legacy pipeline --------------------------------------------------------------


@pytest.mark.parametrize(
    "text",
    ["rag.pipeline=legacy", "rag.pipeline = legacy\nrag.category-filter=db", "rag.pipeline: legacy\n# rag.top-k=20"],
)
def test_legacy_without_top_k_uses_five_for_both_widths(text: str) -> None:
    config = RagConfig.from_properties_text(text)
    assert (config.pipeline.value, config.retrieve_k, config.return_n, config.top_k) == ("legacy-merge", 5, 5, None)


def test_legacy_widths_from_top_k_and_the_evidence_defaults() -> None:
    assert RagConfig.from_mapping({"rag.pipeline": "legacy", "rag.top-k": 8}).retrieve_k == 8
    assert RagConfig.from_mapping({"rag.pipeline": "legacy", "rag.top-k": 8}).return_n == 8
    assert RagConfig.from_toml_text("[rag]\npipeline = 'legacy'\n").retrieve_k == 5
    evidence = RagConfig.from_mapping({})
    assert (evidence.retrieve_k, evidence.return_n, evidence.max_chunks_per_document) == (20, 5, 2)
    assert (RagConfig.from_mapping({"rag.top-k": 8}).retrieve_k, RagConfig.from_mapping({"rag.top-k": 8}).return_n) == (
        8,
        8,
    )
