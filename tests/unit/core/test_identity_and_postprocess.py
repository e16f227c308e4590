"""D1 identity, D2 dedup, D3 cap, D4 return-n: worked examples, and the legacy strategy."""

from __future__ import annotations

import math

import pytest

from rag_eval.core.identity import evidence_key, key_kind
from rag_eval.core.postprocess import EvidencePostProcessor, LegacyPostProcessor, Stage
from rag_eval.core.types import RetrievedEvidenceCandidate, to_candidates

from ..helpers import hit


def run(hits: list, return_n: int = 5, cap: int = 2):  # type: ignore[no-untyped-def]
    return EvidencePostProcessor(return_n=return_n, max_chunks_per_document=cap)(to_candidates(hits))


def test_d1_key_branches() -> None:
    assert evidence_key(doc_id="d", chunk_index=0, vector_id="9", original_rank=1) == "d#chunk-0"
    assert evidence_key(doc_id="d", chunk_index=None, vector_id="9", original_rank=1) == "vector:9"
    assert evidence_key(doc_id=None, chunk_index=4, vector_id="9", original_rank=1) == "vector:9"
    assert evidence_key(doc_id="", chunk_index=4, vector_id="", original_rank=3) == "rank:3"
    assert key_kind("d#chunk-0") == "chunk" and key_kind("vector:9") == "vector" and key_kind("rank:3") == "rank"
    with pytest.raises(ValueError):
        evidence_key(doc_id=None, chunk_index=None, vector_id=None, original_rank=0)


def test_original_rank_is_one_based_position_in_port_order() -> None:
    cands = to_candidates([hit(None, 0.1), hit(None, 0.9)])
    assert [(c.original_rank, c.key) for c in cands] == [(1, "rank:1"), (2, "rank:2")]
    # after sorting the second hit comes first but keeps its original rank
    out = run([hit(None, 0.1), hit(None, 0.9)])
    assert [s.key for s in out.selected] == ["rank:2", "rank:1"]


def test_old_rows_without_chunk_index_stay_distinct_by_vector_id() -> None:
    out = run([hit("11", 0.9, "runbook"), hit("12", 0.8, "runbook")], cap=5)
    assert [s.key for s in out.selected] == ["vector:11", "vector:12"]


def test_rows_with_neither_fall_back_to_rank() -> None:
    out = run([hit(None, 0.5, content="a"), hit(None, 0.7, content="b")], cap=1)
    assert [(s.key, s.primary.hit.content) for s in out.selected] == [("rank:2", "b"), ("rank:1", "a")]


def test_one_key_twice_merges_hit_reasons_and_keeps_first_after_sort() -> None:
    low = hit("1", 0.4, "d", 3, content="older copy")
    high = hit("2", 0.9, "d", 3, content="re-ingested copy")
    out = run([low, high])
    (sel,) = out.selected
    assert sel.key == "d#chunk-3"
    assert sel.primary.hit.content == "re-ingested copy"
    assert [(r.vector_id, r.original_rank) for r in sel.hit_reasons] == [("2", 2), ("1", 1)]
    stages = {(e.vector_id, e.stage, e.merged_into, e.position) for e in out.trace}
    assert stages == {("2", Stage.RETURNED, None, 1), ("1", Stage.DEDUP, "d#chunk-3", 1)}


def test_different_chunks_of_one_document_are_never_merged() -> None:
    out = run([hit("1", 0.9, "d", 0), hit("2", 0.8, "d", 1)])
    assert [s.key for s in out.selected] == ["d#chunk-0", "d#chunk-1"]
    assert all(len(s.members) == 1 for s in out.selected)


def test_three_chunks_of_one_document_under_cap_two() -> None:
    out = run([hit("1", 0.9, "d", 0), hit("2", 0.8, "d", 1), hit("3", 0.7, "d", 2), hit("4", 0.6, "e", 0)])
    assert [s.key for s in out.selected] == ["d#chunk-0", "d#chunk-1", "e#chunk-0"]
    assert [e.stage for e in out.trace] == [Stage.RETURNED, Stage.RETURNED, Stage.CAP, Stage.RETURNED]


def test_missing_doc_id_is_its_own_bucket() -> None:
    out = run([hit("1", 0.9), hit("2", 0.8), hit("3", 0.7)], cap=1)
    assert [s.key for s in out.selected] == ["vector:1", "vector:2", "vector:3"]


def test_return_n_truncates_after_the_cap() -> None:
    hits = [hit(str(i), 1 - i / 100, f"d{i}", 0) for i in range(8)]
    out = run(hits, return_n=3)
    assert len(out.selected) == 3
    assert [e.stage for e in out.trace].count(Stage.TRUNCATION) == 5
    assert [e.position for e in out.trace if e.stage is Stage.RETURNED] == [1, 2, 3]


def test_tie_break_is_original_rank_then_key() -> None:
    hits = [hit("a", 0.5, "x", 0), hit("b", 0.5, "y", 0), hit("c", 0.5, "z", 0)]
    out = run(hits)
    assert [s.key for s in out.selected] == ["x#chunk-0", "y#chunk-0", "z#chunk-0"]
    reversed_cands = tuple(reversed(to_candidates(hits)))
    again = EvidencePostProcessor(return_n=5, max_chunks_per_document=2)(reversed_cands)
    assert again == out


def test_nan_scores_sort_last() -> None:
    out = run([hit("1", math.nan, "a", 0), hit("2", 0.1, "b", 0)])
    assert [s.key for s in out.selected] == ["b#chunk-0", "a#chunk-0"]


def test_trace_has_one_entry_per_candidate_in_original_rank_order() -> None:
    hits = [hit("1", 0.9, "d", 0), hit("1b", 0.85, "d", 0), hit("2", 0.8, "d", 1), hit("3", 0.7, "d", 2)]
    out = run(hits, return_n=1)
    assert [e.original_rank for e in out.trace] == [1, 2, 3, 4]
    assert [e.stage for e in out.trace] == [Stage.RETURNED, Stage.DEDUP, Stage.TRUNCATION, Stage.CAP]
    assert out.stage_counts() == {
        "returned": 1, "dedup": 1, "cap": 1, "truncation": 1, "merged": 0, "document_dedup": 0, "content_dedup": 0
    }


def test_as_candidate_round_trip_keeps_merged_reasons() -> None:
    out = run([hit("1", 0.9, "d", 0), hit("2", 0.3, "d", 0)])
    cand = out.selected[0].as_candidate()
    assert isinstance(cand, RetrievedEvidenceCandidate)
    assert len(cand.hit_reasons) == 2


def test_legacy_merges_chunks_of_a_document_and_uses_one_width() -> None:
    hits = [
        hit("1", 0.9, "d", 0, source="kb/d.md"),
        hit("2", 0.8, "e", 0, source="kb/e.md"),
        hit("3", 0.7, "d", 5, source="kb/d.md"),
        hit("4", 0.6, "f", 0, source="kb/f.md"),
    ]
    out = LegacyPostProcessor(top_k=2)(to_candidates(hits))
    assert [s.key for s in out.selected] == ["kb/d.md", "kb/e.md"]
    assert [m.key for m in out.selected[0].members] == ["d#chunk-0", "d#chunk-5"]
    assert [e.stage for e in out.trace] == [Stage.RETURNED, Stage.RETURNED, Stage.MERGED, Stage.TRUNCATION]


def test_legacy_identity_falls_back_without_source() -> None:
    hits = [hit("1", 0.9, "d", 0, source=""), hit("2", 0.8, None, None, source="")]
    out = LegacyPostProcessor(top_k=5)(to_candidates(hits))
    assert [s.key for s in out.selected] == ["d", "vector:2"]
