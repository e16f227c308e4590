"""Packing, D5 projection identity, projector budgets, EvidenceGuard, L0/L1 boundary."""

from __future__ import annotations

from rag_eval.core.config import RagConfig
from rag_eval.core.guard import EvidenceGuard
from rag_eval.core.lookup import Pipeline
from rag_eval.core.projector import Budget
from rag_eval.core.transform import KnowledgeQueryTransformer

from ..helpers import hit

HINTS = KnowledgeQueryTransformer().transform("replica lag on db-7 ERROR 1205")


def chunks_of_two_docs() -> list:  # type: ignore[type-arg]
    return [
        hit("1", 0.9, "lag", 0, content="a" * 100, source="kb/lag.md"),
        hit("2", 0.8, "lag", 1, content="b" * 100, source="kb/lag.md"),
        hit("3", 0.7, "locks", 4, content="c" * 100, source="kb/locks.md"),
        hit("4", 0.6, "lag", 2, content="d" * 100, source="kb/lag.md"),
    ]


def test_d5_document_id_is_the_evidence_key_and_source_may_repeat() -> None:
    payload = Pipeline(RagConfig()).process(HINTS, chunks_of_two_docs()).payload
    assert payload.document_ids == ("lag#chunk-0", "lag#chunk-1", "locks#chunk-4")
    assert [e.source for e in payload.excerpts] == ["kb/lag.md", "kb/lag.md", "kb/locks.md"]
    assert payload.as_dict()["evidence"][0]["document_id"] == "lag#chunk-0"


def test_every_returned_excerpt_maps_one_to_one_under_the_guard() -> None:
    payload = Pipeline(RagConfig()).process(HINTS, chunks_of_two_docs()).payload
    report = EvidenceGuard().check(payload, payload.document_ids)
    assert report.ok
    assert EvidenceGuard().check(payload, ["lag#chunk-2"]).unmapped == ("lag#chunk-2",)


def test_legacy_projection_is_document_level_and_fails_the_guard_for_chunks() -> None:
    legacy = RagConfig.from_properties_text("rag.pipeline=legacy\nrag.top-k=4")
    record = Pipeline(legacy).process(HINTS, chunks_of_two_docs())
    payload = record.payload
    assert payload.document_ids == ("kb/lag.md", "kb/locks.md")
    assert payload.excerpts[0].content == "\n\n".join(["a" * 100, "b" * 100, "d" * 100])
    assert payload.excerpts[0].delivered_members == ("lag#chunk-0", "lag#chunk-1", "lag#chunk-2")
    # a chunk-scoped citation cannot map to a merged document excerpt
    assert EvidenceGuard().check(payload, ["lag#chunk-1"]).unmapped == ("lag#chunk-1",)


def test_hints_travel_beside_evidence_and_are_not_references() -> None:
    payload = Pipeline(RagConfig()).process(HINTS, chunks_of_two_docs()).payload
    as_dict = payload.as_dict()
    assert as_dict["hints"]["level"] == "L0"
    assert "error 1205" not in " ".join(e["content"] for e in as_dict["evidence"]).lower()
    assert all(e.document_id not in HINTS.keywords + HINTS.identifiers for e in payload.excerpts)
    report = EvidenceGuard().check(payload, list(HINTS.identifiers))
    assert report.unmapped == HINTS.identifiers


def test_guard_reports_ambiguous_references() -> None:
    from dataclasses import replace

    payload = Pipeline(RagConfig()).process(HINTS, chunks_of_two_docs()).payload
    doubled = replace(payload, excerpts=(payload.excerpts[0], payload.excerpts[0]))
    report = EvidenceGuard().check(doubled, ["lag#chunk-0", "lag#chunk-0"])
    assert report.ambiguous == ("lag#chunk-0",) and report.unmapped == ()
    assert not report.ok


def test_block_budget_cuts_and_records() -> None:
    config = RagConfig().with_(max_blocks=2)
    payload = Pipeline(config).process(HINTS, chunks_of_two_docs()).payload
    assert len(payload.excerpts) == 2
    assert [(c.document_id, c.budget) for c in payload.cuts] == [("locks#chunk-4", Budget.BLOCKS)]
    assert [(m.key, m.budget) for m in payload.member_losses] == [("locks#chunk-4", Budget.BLOCKS)]


def test_excerpt_and_total_char_budgets_cut_and_record() -> None:
    config = RagConfig().with_(max_excerpt_chars=60, max_total_chars=150)
    payload = Pipeline(config).process(HINTS, chunks_of_two_docs()).payload
    assert [len(e.content) for e in payload.excerpts] == [60, 60, 30]
    assert all(e.truncated for e in payload.excerpts)
    assert payload.total_chars == 150
    budgets = [(c.document_id, c.budget, c.chars_before, c.chars_after) for c in payload.cuts]
    assert budgets == [
        ("lag#chunk-0", Budget.EXCERPT_CHARS, 100, 60),
        ("lag#chunk-1", Budget.EXCERPT_CHARS, 100, 60),
        ("locks#chunk-4", Budget.EXCERPT_CHARS, 100, 60),
        ("locks#chunk-4", Budget.TOTAL_CHARS, 60, 30),
    ]
    # each cut member is named once, with the first budget that reached it
    assert [(m.key, m.budget) for m in payload.member_losses] == [
        ("lag#chunk-0", Budget.EXCERPT_CHARS),
        ("lag#chunk-1", Budget.EXCERPT_CHARS),
        ("locks#chunk-4", Budget.EXCERPT_CHARS),
    ]


def test_total_budget_exhausted_drops_later_blocks() -> None:
    config = RagConfig().with_(max_total_chars=200)
    payload = Pipeline(config).process(HINTS, chunks_of_two_docs()).payload
    assert payload.document_ids == ("lag#chunk-0", "lag#chunk-1")
    assert payload.cuts[-1].budget is Budget.TOTAL_CHARS and payload.cuts[-1].chars_after == 0


def test_legacy_excerpt_budget_cuts_later_members_of_a_merged_block() -> None:
    legacy = RagConfig.from_properties_text("rag.pipeline=legacy\nrag.top-k=4\nrag.projector.max-excerpt-chars=150")
    payload = Pipeline(legacy).process(HINTS, chunks_of_two_docs()).payload
    assert payload.excerpts[0].delivered_members == ("lag#chunk-0",)
    assert {(m.key, m.budget) for m in payload.member_losses} == {
        ("lag#chunk-1", Budget.EXCERPT_CHARS),
        ("lag#chunk-2", Budget.EXCERPT_CHARS),
    }


def test_projector_dedupes_by_document_id() -> None:
    from dataclasses import replace

    record = Pipeline(RagConfig()).process(HINTS, chunks_of_two_docs())
    doubled = replace(record.result, blocks=record.result.blocks + record.result.blocks[:1])
    payload = Pipeline(RagConfig()).projector.project(doubled)
    assert payload.document_ids == ("lag#chunk-0", "lag#chunk-1", "locks#chunk-4")
    assert payload.cuts[-1].budget is Budget.DUPLICATE_DOCUMENT_ID
