"""The stage counts a processor gives without building its trace are the trace's own counts."""

from __future__ import annotations

import pickle
from collections import Counter

from hypothesis import given, settings
from hypothesis import strategies as st

from rag_eval.core.postprocess import (
    EvidencePostProcessor,
    LegacyFirstPostProcessor,
    LegacyPostProcessor,
    PostProcessOutcome,
    Stage,
)
from rag_eval.core.types import Candidates, Deferred, KnowledgeSearchHit, to_candidates

from .test_postprocess_properties import hit_lists

EXAMPLES = settings(max_examples=300, deadline=None)


def _from_trace(outcome: PostProcessOutcome) -> dict[str, int]:
    counts = dict.fromkeys((s.value for s in Stage), 0)
    counts.update(Counter(e.stage.value for e in outcome.trace))
    return counts


@EXAMPLES
@given(hit_lists, st.integers(-1, 8), st.integers(-1, 4), st.booleans())
def test_the_evidence_tally_is_the_traces_counts(
    hits: list[KnowledgeSearchHit], return_n: int, cap: int, shuffled: bool
) -> None:
    # shuffled: candidates handed in against their rank order (ranks not a range: the sorting path)
    cands = to_candidates(hits)[::-1] if shuffled else Candidates.from_hits(hits)
    out = EvidencePostProcessor(return_n=return_n, max_chunks_per_document=cap)(cands)
    assert isinstance(out.tally, Deferred)
    assert out.stage_counts() == _from_trace(out)


@EXAMPLES
@given(hit_lists, st.integers(-2, 6), st.booleans())
def test_the_legacy_tallies_are_the_traces_counts(hits: list[KnowledgeSearchHit], top_k: int, merge: bool) -> None:
    process = LegacyPostProcessor(top_k=top_k) if merge else LegacyFirstPostProcessor(top_k=top_k)
    out = process(Candidates.from_hits(hits))
    assert isinstance(out.tally, Deferred)
    assert out.stage_counts() == _from_trace(out)


def test_an_outcome_without_a_tally_counts_its_trace_and_a_tally_pickles() -> None:
    hits = [
        KnowledgeSearchHit(id=str(i), content="c", score=1 - i / 10, doc_id="d", chunk_index=i % 3) for i in range(6)
    ]
    out = EvidencePostProcessor(return_n=1, max_chunks_per_document=2)(Candidates.from_hits(hits))
    counts = {"dedup": 3, "cap": 1, "truncation": 1, "returned": 1}  # 3 keys twice, doc d: 2 pass the cap
    assert {k: v for k, v in out.stage_counts().items() if v} == {k: v for k, v in counts.items() if v}
    bare = PostProcessOutcome(selected=out.selected, trace=tuple(out.trace))
    assert bare.tally is None and bare.stage_counts() == out.stage_counts() and bare == out
    again = pickle.loads(pickle.dumps(out))
    assert again.stage_counts() == out.stage_counts()
