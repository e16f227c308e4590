"""Projector budgets at their edges (D5 and the budgets): what is whole, what is cut, what is lost.

``truncated`` is true only when an excerpt lost characters; a member of a merged legacy block is delivered
when the excerpt holds its whole content, even when the budget ends exactly at the member's last character.
"""

from __future__ import annotations

from rag_eval.core.config import RagConfig
from rag_eval.core.lookup import Pipeline
from rag_eval.core.projector import Budget, ProjectedPayload

from ..helpers import hit
from ..rowkit import HINTS

LEGACY = {"rag.pipeline": "legacy", "rag.top-k": 5}


def project(settings: dict[str, object], hits: list) -> ProjectedPayload:  # type: ignore[type-arg]
    return Pipeline(RagConfig.from_mapping(settings)).process(HINTS, hits).payload


def hundreds(*docs: str) -> list:  # type: ignore[type-arg]
    """One 100-character chunk per entry, scores decreasing; ``d:1`` is chunk 1 of d."""
    out = []
    for i, spec in enumerate(docs):
        doc, _, chunk = spec.partition(":")
        out.append(hit(str(i + 1), 0.9 - i / 100, doc, int(chunk or 0), content=chr(ord("a") + i) * 100))
    return out


def test_whole_excerpts_are_not_truncated() -> None:
    payload = project({}, hundreds("x", "y"))
    assert [(e.truncated, len(e.content)) for e in payload.excerpts] == [(False, 100), (False, 100)]
    assert [e["truncated"] for e in payload.as_dict()["evidence"]] == [False, False]
    assert payload.cuts == () and payload.member_losses == ()


def test_an_excerpt_exactly_at_the_excerpt_budget_is_whole() -> None:
    payload = project({"rag.projector.max-excerpt-chars": 100}, hundreds("x", "y"))
    assert [e.truncated for e in payload.excerpts] == [False, False]
    assert [e.delivered_members for e in payload.excerpts] == [("x#chunk-0",), ("y#chunk-0",)]
    assert payload.cuts == ()


def test_one_character_over_the_excerpt_budget_truncates_and_loses_the_member() -> None:
    payload = project({"rag.projector.max-excerpt-chars": 99}, hundreds("x"))
    (excerpt,) = payload.excerpts
    assert (excerpt.truncated, len(excerpt.content), excerpt.delivered_members) == (True, 99, ())
    assert [(c.budget, c.chars_before, c.chars_after) for c in payload.cuts] == [(Budget.EXCERPT_CHARS, 100, 99)]
    assert [(m.key, m.budget) for m in payload.member_losses] == [("x#chunk-0", Budget.EXCERPT_CHARS)]


def test_payload_exactly_at_the_total_budget_is_whole() -> None:
    payload = project({"rag.projector.max-total-chars": 300}, hundreds("x", "y", "z"))
    assert [e.truncated for e in payload.excerpts] == [False, False, False]
    assert payload.total_chars == 300 and payload.cuts == ()


def test_total_budget_truncates_the_last_excerpt_only() -> None:
    payload = project({"rag.projector.max-total-chars": 250}, hundreds("x", "y", "z"))
    assert [(e.truncated, len(e.content)) for e in payload.excerpts] == [(False, 100), (False, 100), (True, 50)]
    assert [(m.key, m.budget) for m in payload.member_losses] == [("z#chunk-0", Budget.TOTAL_CHARS)]


def test_blocks_budget_drops_whole_excerpts_and_keeps_ranks_dense() -> None:
    payload = project({"rag.projector.max-blocks": 2}, hundreds("x", "y", "z"))
    assert [(e.rank, e.truncated) for e in payload.excerpts] == [(1, False), (2, False)]
    assert [(c.document_id, c.budget, c.chars_after) for c in payload.cuts] == [("z#chunk-0", Budget.BLOCKS, 0)]


def test_legacy_budget_ending_exactly_at_a_member_end_delivers_it_and_loses_only_the_next() -> None:
    payload = project({**LEGACY, "rag.projector.max-excerpt-chars": 100}, hundreds("d:0", "d:1", "d:2"))
    (excerpt,) = payload.excerpts
    assert excerpt.content == "a" * 100 and excerpt.truncated
    assert excerpt.delivered_members == ("d#chunk-0",)
    assert [(m.key, m.budget) for m in payload.member_losses] == [
        ("d#chunk-1", Budget.EXCERPT_CHARS),
        ("d#chunk-2", Budget.EXCERPT_CHARS),
    ]


def test_legacy_budget_ending_inside_the_joiner_loses_only_later_members() -> None:
    # "a"*100 + "\n\n" + "b"*100: a budget of 101 keeps the first member and one joiner character
    payload = project({**LEGACY, "rag.projector.max-excerpt-chars": 101}, hundreds("d:0", "d:1"))
    assert payload.excerpts[0].delivered_members == ("d#chunk-0",)
    assert [m.key for m in payload.member_losses] == ["d#chunk-1"]


def test_legacy_total_budget_ending_exactly_at_a_member_end() -> None:
    payload = project({**LEGACY, "rag.projector.max-total-chars": 202}, hundreds("d:0", "d:1", "d:2"))
    (excerpt,) = payload.excerpts
    assert excerpt.delivered_members == ("d#chunk-0", "d#chunk-1")
    assert [(m.key, m.budget) for m in payload.member_losses] == [("d#chunk-2", Budget.TOTAL_CHARS)]
    assert [(c.budget, c.chars_before, c.chars_after) for c in payload.cuts] == [(Budget.TOTAL_CHARS, 304, 202)]


def test_legacy_block_within_budget_delivers_every_member_untruncated() -> None:
    payload = project({**LEGACY, "rag.projector.max-excerpt-chars": 304}, hundreds("d:0", "d:1", "d:2"))
    (excerpt,) = payload.excerpts
    assert not excerpt.truncated and len(excerpt.content) == 304
    assert excerpt.delivered_members == ("d#chunk-0", "d#chunk-1", "d#chunk-2")
    assert payload.member_losses == ()


def test_each_budget_records_only_the_cut_it_makes_when_both_apply() -> None:
    """Two budgets on one excerpt, each exactly at the other's edge, record one cut between them: an excerpt
    exactly at the excerpt budget is cut by the total one alone, and an excerpt cut by the excerpt budget to
    exactly what the total leaves is cut by the excerpt budget alone (no cut from a length to itself)."""
    at_excerpt = project({"rag.projector.max-excerpt-chars": 100, "rag.projector.max-total-chars": 150},
                         hundreds("x", "y"))  # fmt: skip
    assert [(c.document_id, c.budget, c.chars_before, c.chars_after) for c in at_excerpt.cuts] == [
        ("y#chunk-0", Budget.TOTAL_CHARS, 100, 50)
    ]
    at_total = project({"rag.projector.max-excerpt-chars": 50, "rag.projector.max-total-chars": 100},
                       hundreds("x", "y"))  # fmt: skip
    assert [(c.document_id, c.budget, c.chars_before, c.chars_after) for c in at_total.cuts] == [
        ("x#chunk-0", Budget.EXCERPT_CHARS, 100, 50), ("y#chunk-0", Budget.EXCERPT_CHARS, 100, 50)
    ]
    assert [len(e.content) for e in at_total.excerpts] == [50, 50]
