"""Invariants of the post-processor (hypothesis, 1,000 examples each)."""

from __future__ import annotations

import itertools
import math
from collections import Counter

from hypothesis import given, settings
from hypothesis import strategies as st

from rag_eval.core.postprocess import EvidencePostProcessor, PostProcessOutcome
from rag_eval.core.types import KnowledgeSearchHit, RetrievedEvidenceCandidate, to_candidates
from tests.budget import examples

EXAMPLES = settings(max_examples=examples(1000), deadline=None)

_hit = st.builds(
    lambda doc, chunk, vid, score, content: KnowledgeSearchHit(
        id=vid or "none",
        content=content,
        score=score,
        doc_id=doc,
        chunk_index=chunk,
        vector_id=vid,
        source=f"kb/{doc}" if doc else None,
    ),
    doc=st.one_of(st.none(), st.sampled_from(["a", "b", "c", "d"])),
    chunk=st.one_of(st.none(), st.integers(0, 4)),
    vid=st.one_of(st.none(), st.sampled_from([str(i) for i in range(12)])),
    # few distinct values: ties are common; NaN and infinities too
    score=st.one_of(st.sampled_from([0.0, 0.25, 0.5, 0.75, 1.0]), st.floats(allow_nan=True, allow_infinity=True)),
    content=st.sampled_from(["x", "y", "z"]),
)
hit_lists = st.lists(_hit, max_size=30)
params = st.tuples(st.integers(1, 10), st.integers(1, 4))


def _process(
    cands: tuple[RetrievedEvidenceCandidate, ...] | list[RetrievedEvidenceCandidate], p: tuple[int, int]
) -> PostProcessOutcome:
    return EvidencePostProcessor(return_n=p[0], max_chunks_per_document=p[1])(cands)


@EXAMPLES
@given(hit_lists, params)
def test_no_two_blocks_share_an_evidence_key(hits: list[KnowledgeSearchHit], p: tuple[int, int]) -> None:
    keys = [s.key for s in _process(to_candidates(hits), p).selected]
    assert len(keys) == len(set(keys))


@EXAMPLES
@given(hit_lists, params)
def test_no_document_exceeds_the_cap(hits: list[KnowledgeSearchHit], p: tuple[int, int]) -> None:
    out = _process(to_candidates(hits), p)
    per_doc = Counter(s.primary.doc_id for s in out.selected if s.primary.doc_id)
    assert all(n <= p[1] for n in per_doc.values())


@EXAMPLES
@given(hit_lists, params)
def test_at_most_return_n_blocks(hits: list[KnowledgeSearchHit], p: tuple[int, int]) -> None:
    out = _process(to_candidates(hits), p)
    assert len(out.selected) <= p[0]
    assert len(out.trace) == len(hits)


@EXAMPLES
@given(hit_lists, params)
def test_scores_non_increasing_in_returned_order(hits: list[KnowledgeSearchHit], p: tuple[int, int]) -> None:
    selected = _process(to_candidates(hits), p).selected
    scores = [-math.inf if math.isnan(s.primary.score) else s.primary.score for s in selected]  # NaN last
    assert all(a >= b for a, b in itertools.pairwise(scores))


@EXAMPLES
@given(hit_lists, params, st.randoms(use_true_random=False))
def test_output_does_not_depend_on_input_order(hits: list[KnowledgeSearchHit], p: tuple[int, int], rnd) -> None:  # type: ignore[no-untyped-def]
    cands = list(to_candidates(hits))
    shuffled = cands[:]
    rnd.shuffle(shuffled)
    assert _process(shuffled, p) == _process(cands, p)


@EXAMPLES
@given(hit_lists, params)
def test_post_processing_the_output_again_changes_nothing(hits: list[KnowledgeSearchHit], p: tuple[int, int]) -> None:
    out = _process(to_candidates(hits), p)
    again = _process([s.as_candidate() for s in out.selected], p)
    assert [(s.key, s.primary.hit, s.hit_reasons) for s in again.selected] == [
        (s.key, s.primary.hit, s.hit_reasons) for s in out.selected
    ]
    assert all(e.stage.value == "returned" for e in again.trace)
