"""Which stage lost each relevant chunk (docs/harness.md, "The run directory"), on awkward hits.

The stage of a lost chunk is the fate of its best-ranked copy among the config's hits; a true duplicate
(same evidence key) is carried by the copy that kept the key, so its own ``dedup`` entry never names the
stage. The examples mix copies under different keys (a doc-less row, a re-ingested row), port order that
differs from score order, and projector budgets that end exactly at a member's end.
"""

from __future__ import annotations

from rag_eval.core.config import RagConfig
from rag_eval.core.postprocess import Stage
from rag_eval.rundir.rows import RowTiming, Truth, build_row

from ..rowkit import replay_record, replay_row, stored

EVIDENCE = RagConfig(retrieve_k=20, return_n=3, max_chunks_per_document=2)


def losses(row: dict) -> dict[str, str]:  # type: ignore[type-arg]
    return dict(zip(row["lost_chunks"], row["lost_stages"], strict=True))


def test_a_chunk_capped_under_its_key_and_cut_as_a_docless_copy_is_lost_to_the_cap() -> None:
    d0, d1, d2, e0 = stored(1, "d#chunk-0"), stored(2, "d#chunk-1"), stored(3, "d#chunk-2"), stored(4, "e#chunk-0")
    d2_docless = stored(5, "d#chunk-2", doc_id=False)  # key vector:5, a bucket of its own
    hits = [(d0, 0.9), (d1, 0.8), (d2, 0.7), (e0, 0.6), (d2_docless, 0.5)]
    record = replay_record(EVIDENCE, hits)
    assert [(e.vector_id, e.stage) for e in record.outcome.trace] == [
        ("1", Stage.RETURNED),
        ("2", Stage.RETURNED),
        ("3", Stage.CAP),
        ("4", Stage.RETURNED),
        ("5", Stage.TRUNCATION),
    ]
    row = replay_row(EVIDENCE, hits, {"d#chunk-2": 1, "e#chunk-0": 1})
    # the best-ranked copy (rank 3) was capped; the worse one (rank 5) was cut by return-n
    assert losses(row) == {"d#chunk-2": "cap"}
    assert row["delivered_relevant"] == ["e#chunk-0"]


def test_when_the_docless_copy_ranks_better_its_return_n_cut_names_the_stage() -> None:
    d0, d1, d2, e0 = stored(1, "d#chunk-0"), stored(2, "d#chunk-1"), stored(3, "d#chunk-2"), stored(4, "e#chunk-0")
    d2_docless = stored(5, "d#chunk-2", doc_id=False)
    hits = [(d0, 0.9), (d1, 0.8), (e0, 0.75), (d2_docless, 0.72), (d2, 0.7)]
    row = replay_row(EVIDENCE, hits, {"d#chunk-2": 1})
    assert losses(row) == {"d#chunk-2": "return_n"}
    assert (row["n_cap"], row["n_truncated"]) == (1, 1)


def test_port_order_unlike_score_order_a_dedup_copy_does_not_name_the_stage() -> None:
    d0, d1, d2 = stored(1, "d#chunk-0"), stored(2, "d#chunk-1"), stored(3, "d#chunk-2")
    d2_copy = stored(6, "d#chunk-2")  # a re-ingested copy: same evidence key, new vector id
    # the port returns the low-scored copy first
    hits = [(d2_copy, 0.5), (d0, 0.9), (d1, 0.8), (d2, 0.7)]
    record = replay_record(RagConfig(), hits)
    assert {e.vector_id: e.stage for e in record.outcome.trace} == {
        "6": Stage.DEDUP,
        "1": Stage.RETURNED,
        "2": Stage.RETURNED,
        "3": Stage.CAP,
    }
    row = replay_row(RagConfig(), hits, {"d#chunk-2": 1, "d#chunk-0": 1})
    assert losses(row) == {"d#chunk-2": "cap"}
    assert row["n_dedup"] == 1 and row["n_cap"] == 1


def test_a_dedup_copy_of_a_delivered_key_is_not_lost() -> None:
    d0, d0_copy = stored(1, "d#chunk-0"), stored(7, "d#chunk-0")
    row = replay_row(RagConfig(), [(d0_copy, 0.4), (d0, 0.9)], {"d#chunk-0": 1})
    assert row["lost_chunks"] == [] and row["delivered_relevant"] == ["d#chunk-0"]
    assert row["member_keys"] == ["d#chunk-0"] and row["hit_keys"] == ["d#chunk-0", "d#chunk-0"]


def test_not_retrieved_and_return_n_and_blocks_budget() -> None:
    rows = [stored(i + 1, f"doc{i}#chunk-0") for i in range(5)]
    config = RagConfig(retrieve_k=4, return_n=3, max_blocks=2)
    hits = [(r, 1 - i / 10) for i, r in enumerate(rows)]  # the fifth is beyond retrieve-k
    row = replay_row(config, hits, {f"doc{i}#chunk-0": 1 for i in range(5)})
    assert losses(row) == {
        "doc2#chunk-0": "projector_blocks",
        "doc3#chunk-0": "return_n",
        "doc4#chunk-0": "not_retrieved",
    }
    assert row["n_hits"] == 4 and row["hit_keys"] == [f"doc{i}#chunk-0" for i in range(4)]


def test_legacy_excerpt_budget_ending_exactly_at_a_member_end_delivers_that_member() -> None:
    a = stored(1, "d#chunk-0", content="a" * 100)
    b = stored(2, "d#chunk-1", content="b" * 100)
    legacy = RagConfig.from_mapping({"rag.pipeline": "legacy", "rag.top-k": 5, "rag.projector.max-excerpt-chars": 100})
    row = replay_row(legacy, [(a, 0.9), (b, 0.8)], {"d#chunk-0": 1, "d#chunk-1": 1})
    assert row["returned_keys"] == ["kb/d.md"] and row["returned_chars"] == [100]
    assert row["member_chunks"] == ["d#chunk-0"]
    assert losses(row) == {"d#chunk-1": "projector_excerpt_chars"}


def test_legacy_total_budget_ending_exactly_at_a_member_end_delivers_that_member() -> None:
    a = stored(1, "d#chunk-0", content="a" * 100)
    b = stored(2, "d#chunk-1", content="b" * 50)
    legacy = RagConfig.from_mapping({"rag.pipeline": "legacy", "rag.top-k": 5, "rag.projector.max-total-chars": 100})
    row = replay_row(legacy, [(a, 0.9), (b, 0.8)], {"d#chunk-0": 1, "d#chunk-1": 1})
    assert row["member_chunks"] == ["d#chunk-0"] and row["payload_chars"] == 100
    assert losses(row) == {"d#chunk-1": "projector_total_chars"}


def test_a_chunk_no_row_holds_is_lost_to_the_collection_and_every_later_chunk_is_still_judged() -> None:
    d0, e0 = stored(1, "d#chunk-0"), stored(2, "e#chunk-0")
    relevance = {"a#chunk-0": 1, "d#chunk-0": 1, "z#chunk-9": 1}  # a: in no row; d: delivered; z: not retrieved
    truth = Truth(chunks={"1": "d#chunk-0", "2": "e#chunk-0"}, relevance={"q": relevance},
                  doc_relevance={"q": {"a": 1, "d": 1, "z": 1}}, lost=frozenset({"a#chunk-0"}))  # fmt: skip
    record = replay_record(EVIDENCE, [(d0, 0.9), (e0, 0.8)])
    row = build_row(
        query_id="q", query_index=0, config="c", record=record, truth=truth, timing=RowTiming(search_us=10.0)
    )
    assert losses(row) == {"a#chunk-0": "not_in_collection", "z#chunk-9": "not_retrieved"}
    assert row["lost_chunks"] == ["a#chunk-0", "z#chunk-9"] and row["delivered_relevant"] == ["d#chunk-0"]
