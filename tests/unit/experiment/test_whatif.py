"""The evaluation-only what-if post-processors: ``content-dedup`` (D2, then one block per normalised
text, its copies' hit reasons merged into it, then D3 and D4), as the experiment names it."""

from __future__ import annotations

from rag_eval.core.config import RagConfig
from rag_eval.core.postprocess import Stage
from rag_eval.core.types import KnowledgeSearchHit, to_candidates
from rag_eval.experiment.whatif import WHAT_IF_NOTES, WHAT_IFS, ContentDedupPostProcessor


def hit(vector_id: str, score: float, content: str, doc_id: str = "d", chunk_index: int | None = None
        ) -> KnowledgeSearchHit:  # fmt: skip
    return KnowledgeSearchHit(id=vector_id, content=content, score=score, doc_id=doc_id, chunk_index=chunk_index,
                              vector_id=vector_id)  # fmt: skip


def test_the_what_ifs_an_experiment_can_name_are_built_from_the_config() -> None:
    assert set(WHAT_IFS) == set(WHAT_IF_NOTES) == {"content-dedup"}
    config = RagConfig.from_mapping({"rag.retrieve-k": 20, "rag.return-n": 3, "rag.max-chunks-per-document": 1})
    assert WHAT_IFS["content-dedup"](config) == ContentDedupPostProcessor(return_n=3, max_chunks_per_document=1)


def test_three_copies_of_a_text_are_one_block_with_every_copys_reason_in_rank_order() -> None:
    hits = [
        hit("1", 0.9, "Rotate the logs."),
        hit("2", 0.8, "Keep 30 days.", doc_id="e"),
        hit("3", 0.7, "ROTATE  the logs."),  # a copy after normalising case and spaces
        hit("4", 0.6, "rotate the logs."),
    ]
    out = ContentDedupPostProcessor(return_n=5, max_chunks_per_document=2)(to_candidates(hits))
    assert [s.key for s in out.selected] == ["vector:1", "vector:2"]
    assert [r.original_rank for r in out.selected[0].hit_reasons] == [1, 3, 4]
    assert [(e.key, e.stage, e.merged_into) for e in out.trace] == [
        ("vector:1", Stage.RETURNED, None),
        ("vector:2", Stage.RETURNED, None),
        ("vector:3", Stage.CONTENT_DEDUP, "vector:1"),
        ("vector:4", Stage.CONTENT_DEDUP, "vector:1"),
    ]


def test_different_texts_are_all_kept_and_d3_d4_still_apply() -> None:
    hits = [hit(str(i), 1.0 - i / 10, f"Step {i}.", doc_id="d" if i < 4 else "e") for i in range(1, 6)]
    out = ContentDedupPostProcessor(return_n=3, max_chunks_per_document=2)(to_candidates(hits))
    # d has 1, 2, 3 (cap 2: 3 dropped), e has 4, 5; return-n 3 keeps 1, 2, 4
    assert [s.key for s in out.selected] == ["vector:1", "vector:2", "vector:4"]
    stages = {e.key: e.stage for e in out.trace}
    assert stages["vector:3"] == Stage.CAP and stages["vector:5"] == Stage.TRUNCATION
    assert Stage.CONTENT_DEDUP not in stages.values()


def test_no_candidates_is_an_empty_outcome() -> None:
    out = ContentDedupPostProcessor(return_n=5, max_chunks_per_document=2)([])
    assert (out.selected, out.trace) == ((), ())
