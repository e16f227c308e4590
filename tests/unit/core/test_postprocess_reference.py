"""The production post-processors (and the content-dedup what-if) equal the straightforward ones
of ``reference_postprocess.py`` on generated hit lists: same selections, same trace, whether the
candidates come as objects, as columns straight from the hits, or re-processed with merged reasons."""

from __future__ import annotations

import pickle

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rag_eval.core.postprocess import (
    EvidencePostProcessor,
    LegacyFirstPostProcessor,
    LegacyPostProcessor,
    PostProcessOutcome,
    cap_and_return_n,
    dedup_by_key,
    duplicate_trace,
    sort_candidates,
)
from rag_eval.core.types import Candidates, Deferred, KnowledgeSearchHit, RetrievedEvidenceCandidate, to_candidates
from rag_eval.experiment.whatif import ContentDedupPostProcessor
from tests.budget import examples

from .. import reference_postprocess as ref

EXAMPLES = settings(max_examples=examples(500), deadline=None)

_hit = st.builds(
    lambda doc, chunk, vid, score, content, source: KnowledgeSearchHit(
        id=vid or "none",
        content=content,
        score=score,
        doc_id=doc,
        chunk_index=chunk,
        vector_id=vid,
        source=source,
    ),
    doc=st.one_of(st.none(), st.just(""), st.sampled_from(["a", "b", "c"])),
    chunk=st.one_of(st.none(), st.integers(0, 3)),
    vid=st.one_of(st.none(), st.just(""), st.sampled_from([str(i) for i in range(8)])),
    score=st.one_of(st.sampled_from([0.0, -0.0, 0.5, 1.0]), st.floats(allow_nan=True, allow_infinity=True)),
    content=st.sampled_from(["x", "X ", "y"]),
    source=st.one_of(st.none(), st.just(""), st.sampled_from(["kb/a", "kb/b"])),
)
hit_lists = st.lists(_hit, max_size=25)
widths = st.tuples(st.integers(1, 8), st.integers(1, 3))


def _inputs(hits: list[KnowledgeSearchHit], extra: list[RetrievedEvidenceCandidate]) -> list[object]:
    """The same candidates three ways: objects, columns from the hits, and objects with merged reasons added."""
    objects = to_candidates(hits)
    return [objects, Candidates.from_hits(hits), [*objects, *extra]]


def _merged(hits: list[KnowledgeSearchHit]) -> list[RetrievedEvidenceCandidate]:
    """Candidates carrying several hit reasons (a selection as a candidate again), ranks repeated."""
    out = ref.evidence(to_candidates(hits), return_n=3, max_chunks_per_document=5)
    return [s.as_candidate() for s in out.selected]


def _same(mine: PostProcessOutcome, theirs: PostProcessOutcome) -> None:
    assert mine.selected == theirs.selected
    assert mine.trace == theirs.trace
    assert mine == theirs


@EXAMPLES
@given(hit_lists, widths)
def test_evidence_equals_the_reference(hits: list[KnowledgeSearchHit], w: tuple[int, int]) -> None:
    for cands in _inputs(hits, _merged(hits)):
        expected = ref.evidence(list(cands), return_n=w[0], max_chunks_per_document=w[1])  # type: ignore[call-overload]
        _same(EvidencePostProcessor(return_n=w[0], max_chunks_per_document=w[1])(cands), expected)  # type: ignore[arg-type]


@EXAMPLES
@given(hit_lists, st.integers(1, 6))
def test_both_legacies_equal_the_reference(hits: list[KnowledgeSearchHit], top_k: int) -> None:
    for cands in _inputs(hits, _merged(hits)):
        given_list = list(cands)  # type: ignore[call-overload]
        _same(LegacyPostProcessor(top_k=top_k)(cands), ref.legacy(given_list, top_k=top_k, merge=True))  # type: ignore[arg-type]
        _same(LegacyFirstPostProcessor(top_k=top_k)(cands), ref.legacy(given_list, top_k=top_k, merge=False))  # type: ignore[arg-type]


@EXAMPLES
@given(hit_lists, widths)
def test_content_dedup_what_if_equals_the_reference(hits: list[KnowledgeSearchHit], w: tuple[int, int]) -> None:
    for cands in _inputs(hits, _merged(hits)):
        expected = ref.content_dedup(list(cands), return_n=w[0], max_chunks_per_document=w[1])  # type: ignore[call-overload]
        _same(ContentDedupPostProcessor(return_n=w[0], max_chunks_per_document=w[1])(cands), expected)  # type: ignore[arg-type]


@EXAMPLES
@given(hit_lists, widths)
def test_public_steps_equal_the_reference_steps(hits: list[KnowledgeSearchHit], w: tuple[int, int]) -> None:
    cands = [*to_candidates(hits), *_merged(hits)]
    ordered = sort_candidates(cands)
    assert ordered == ref.sort_candidates(cands)
    unique, dups = dedup_by_key(ordered)
    assert (unique, dups) == ref.dedup_by_key(ordered)
    mine = cap_and_return_n(unique, return_n=w[0], max_chunks_per_document=w[1])
    assert mine == ref.cap_and_return_n(unique, return_n=w[0], max_chunks_per_document=w[1])
    assert duplicate_trace(dups, mine[0]) == ref.duplicate_trace(dups, mine[0])


def test_many_copies_of_one_key_merge_every_reason_once() -> None:
    hits = [
        KnowledgeSearchHit(id=str(i), content="c", score=0.5, doc_id="d", chunk_index=1, vector_id=str(i))
        for i in range(300)
    ]
    process = EvidencePostProcessor(return_n=5, max_chunks_per_document=2)
    cands = to_candidates(hits)
    again = [*cands, *(s.as_candidate() for s in process(cands).selected)]
    out = process(again)
    assert out == ref.evidence(again, return_n=5, max_chunks_per_document=2)
    (sel,) = out.selected
    assert len(sel.members) == 301 and len(sel.hit_reasons) == 300


def test_an_outcome_is_immutable_pickles_and_builds_its_trace_once() -> None:
    hits = [KnowledgeSearchHit(id=str(i), content="c", score=1 - i / 10, doc_id="d", chunk_index=i) for i in range(4)]
    out = EvidencePostProcessor(return_n=5, max_chunks_per_document=2)(Candidates.from_hits(hits))
    assert isinstance(out.trace, Deferred) and out.trace.value is out.trace.value
    assert pickle.loads(pickle.dumps(out)) == out
    with pytest.raises(AttributeError):
        out.selected = ()  # type: ignore[misc]
    with pytest.raises(AttributeError):
        out.trace._value = ()  # type: ignore[misc]
