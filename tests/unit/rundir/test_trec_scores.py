"""The scores a TREC run writes: the search scores, made strictly decreasing along the delivered order, so that
a tool ranking by score (trec_eval, pytrec_eval) reads the order rag-eval delivered."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytrec_eval
from hypothesis import given
from hypothesis import strategies as st

from rag_eval.reports.artifacts import scored_rankings
from rag_eval.rundir.directory import trec_scores

SCORES = st.lists(st.floats(min_value=-1.0, max_value=1.0, allow_nan=False), max_size=30)


@given(SCORES)
def test_score_order_is_the_delivered_order_and_a_score_moves_only_to_break_an_order(scores: list[float]) -> None:
    written = trec_scores(scores)
    single = [np.float32(w) for w in written]
    assert all(a > b for a, b in itertools.pairwise(single))  # in the precision trec_eval keeps
    for i, (score, out) in enumerate(zip(scores, written, strict=True)):
        if i == 0 or np.float32(score) < np.float32(written[i - 1]):
            assert out == score  # nothing to break: the search score as it is
        else:  # the largest single-precision float below the line before (trec_eval reads a C float)
            assert out == float(np.nextafter(np.float32(written[i - 1]), np.float32(-np.inf)))


@given(st.lists(st.sampled_from([0.9, 0.5, 0.5, 0.25]), min_size=1, max_size=12))
def test_pytrec_eval_ranks_the_written_scores_in_delivered_order(scores: list[float]) -> None:
    docs = [f"d{i:02d}" for i in range(len(scores))]
    run = {"q": dict(zip(docs, trec_scores(scores), strict=True))}
    relevant = {"q": {docs[0]: 1}}  # the first delivered: reciprocal rank 1 whatever the names
    assert pytrec_eval.RelevanceEvaluator(relevant, {"recip_rank"}).evaluate(run)["q"]["recip_rank"] == 1.0
    last = {"q": {docs[-1]: 1}}  # the last delivered: at rank len(docs)
    assert pytrec_eval.RelevanceEvaluator(last, {"recip_rank"}).evaluate(run)["q"]["recip_rank"] == 1 / len(docs)


def test_a_merged_block_s_chunks_keep_their_own_search_scores() -> None:
    row = {"member_chunks": ["a#chunk-0", "a#chunk-2", "b#chunk-0", "a#chunk-2"], "member_block": [1, 1, 2, 2],
           "returned_scores": [0.8, 0.7], "hit_chunks": ["a#chunk-0", "b#chunk-0", "a#chunk-2", "a#chunk-2"],
           "hit_scores": [0.8, 0.7, 0.6, 0.55]}  # fmt: skip
    chunks, docs = scored_rankings(row)
    assert chunks == [("a#chunk-0", 0.8), ("a#chunk-2", 0.6), ("b#chunk-0", 0.7)]  # a copy delivered again: once
    assert docs == [("a", 0.8), ("b", 0.7)]
    b = trec_scores([s for _, s in chunks])[2]
    assert b < 0.6 and math.isclose(b, 0.6, rel_tol=1e-6)  # b after a's later chunk, a hair below it
