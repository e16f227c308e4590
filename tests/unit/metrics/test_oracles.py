"""Property tests judged by oracles written from the README, independent of the code under test.

- The post-processor against a reference written from the ordering rule and D2-D4 ("score descending,
  NaN last, then original rank ascending, then evidence key"): selection, content kept, trace stages.
- The standard measures against pytrec_eval (trec_eval semantics), through ir_measures.
- The project's per-query measures (same-document recall, duplicate counts) against from-scratch
  computations of their README definitions.
"""

from __future__ import annotations

import math
from functools import cmp_to_key
from typing import Any

import ir_measures
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rag_eval.core.postprocess import EvidencePostProcessor
from rag_eval.core.types import KnowledgeSearchHit, RetrievedEvidenceCandidate, to_candidates
from tests.budget import examples
from tests.unit.frames import per_query_frame
from tests.unit.rowwise_measures import standard_measures

SETTINGS = settings(max_examples=examples(300), deadline=None)

# -- the post-processor ----------------------------------------------------------------------------

_score = st.one_of(
    st.sampled_from([0.0, 0.5, 1.0, -1.0]),  # ties are common
    st.sampled_from([math.nan, math.inf, -math.inf]),
    st.floats(allow_nan=True, allow_infinity=True),
)
_hit = st.builds(
    lambda doc, chunk, vid, score, text: KnowledgeSearchHit(
        id=vid or "-", content=text, score=score, doc_id=doc, chunk_index=chunk, vector_id=vid
    ),
    doc=st.one_of(st.none(), st.just(""), st.sampled_from(["a", "b", "c"])),
    chunk=st.one_of(st.none(), st.integers(0, 3)),
    vid=st.one_of(st.none(), st.just(""), st.sampled_from([str(i) for i in range(8)])),
    score=_score,
    text=st.sampled_from(["x", "y", "z", "w"]),
)


def rule_before(a: RetrievedEvidenceCandidate, b: RetrievedEvidenceCandidate) -> int:
    """The README's ordering rule as a comparison, spelled out case by case."""
    a_nan, b_nan = math.isnan(a.score), math.isnan(b.score)
    if a_nan != b_nan:
        return 1 if a_nan else -1  # NaN last, below every number, minus infinity included
    if not a_nan and a.score != b.score:
        return -1 if a.score > b.score else 1
    if a.original_rank != b.original_rank:
        return -1 if a.original_rank < b.original_rank else 1
    return -1 if a.key < b.key else (1 if a.key > b.key else 0)


def reference(cands: list[RetrievedEvidenceCandidate], return_n: int, cap: int) -> dict[str, Any]:
    """D2-D4 from the README: dedup by key (first after sorting keeps content), at most ``cap`` blocks
    per docId (no docId: a bucket of its own), at most ``return_n`` blocks."""
    ordered = sorted(cands, key=cmp_to_key(rule_before))
    kept: list[RetrievedEvidenceCandidate] = []
    stage: dict[tuple[int, str], str] = {}
    first_of_key: dict[str, RetrievedEvidenceCandidate] = {}
    for c in ordered:
        if c.key in first_of_key:
            stage[(c.original_rank, c.key)] = "dedup"
            continue
        first_of_key[c.key] = c
        # D3 comes before D4: blocks cut by return-n still count towards their document's cap
        same_doc = [
            k
            for k in first_of_key.values()
            if k is not c and c.hit.doc_id and k.hit.doc_id == c.hit.doc_id and stage[(k.original_rank, k.key)] != "cap"
        ]
        if len(same_doc) >= cap:
            stage[(c.original_rank, c.key)] = "cap"
        elif len(kept) >= return_n:
            stage[(c.original_rank, c.key)] = "truncation"
        else:
            kept.append(c)
            stage[(c.original_rank, c.key)] = "returned"
    return {"selected": [(c.key, c.hit) for c in kept], "stages": stage}


@SETTINGS
@given(st.lists(_hit, max_size=25), st.integers(1, 8), st.integers(1, 3), st.randoms(use_true_random=False))
def test_post_processor_matches_the_reference(hits: list[KnowledgeSearchHit], n: int, cap: int, rnd: Any) -> None:
    cands = list(to_candidates(hits))
    rnd.shuffle(cands)  # the output must not depend on the order candidates are handed in
    out = EvidencePostProcessor(return_n=n, max_chunks_per_document=cap)(cands)
    ref = reference(cands, n, cap)
    assert [(s.key, s.primary.hit) for s in out.selected] == ref["selected"]
    assert {(e.original_rank, e.key): e.stage.value for e in out.trace} == ref["stages"]
    assert [e.original_rank for e in out.trace] == sorted(e.original_rank for e in out.trace)


def test_nan_comes_after_minus_infinity_whatever_the_port_order() -> None:
    hits = [
        KnowledgeSearchHit(id="1", content="x", score=math.nan, doc_id="a", chunk_index=0),
        KnowledgeSearchHit(id="2", content="y", score=-math.inf, doc_id="b", chunk_index=0),
        KnowledgeSearchHit(id="3", content="z", score=0.0, doc_id="c", chunk_index=0),
    ]
    out = EvidencePostProcessor(return_n=5, max_chunks_per_document=2)(to_candidates(hits))
    assert [s.key for s in out.selected] == ["c#chunk-0", "b#chunk-0", "a#chunk-0"]


# -- standard measures against pytrec_eval ---------------------------------------------------------

CUTOFFS = (1, 3, 5, 10)
IR_NAMES = {f"{m}@{k}": ir_measures.parse_measure(f"{m}@{k}") for m in ("P", "R", "nDCG", "Success") for k in CUTOFFS}
IR_NAMES["RR"] = ir_measures.RR

_items = st.lists(st.sampled_from([f"d{i}" for i in range(15)]), unique=True, min_size=1, max_size=12)


@st.composite
def judged_queries(draw: st.DrawFn) -> tuple[list[str], dict[str, int]]:
    ranking = draw(_items)
    judged = draw(st.lists(st.sampled_from([f"d{i}" for i in range(15)]), unique=True, min_size=1, max_size=8))
    grades = draw(st.lists(st.integers(0, 3), min_size=len(judged), max_size=len(judged)))
    qrels = dict(zip(judged, grades, strict=True))
    if not any(g >= 1 for g in qrels.values()):
        qrels[judged[0]] = draw(st.integers(1, 3))
    return ranking, qrels


@settings(max_examples=examples(200), deadline=None)
@given(judged_queries())
def test_standard_measures_equal_pytrec_eval(query: tuple[list[str], dict[str, int]]) -> None:
    ranking, qrels = query
    ours = standard_measures(ranking, qrels, CUTOFFS)
    run = [ir_measures.ScoredDoc("q", doc, float(len(ranking) - i)) for i, doc in enumerate(ranking)]
    judged = [ir_measures.Qrel("q", doc, grade) for doc, grade in qrels.items()]
    theirs = {m.measure: m.value for m in ir_measures.iter_calc(list(IR_NAMES.values()), judged, run)}
    for name, measure in IR_NAMES.items():
        assert ours[name] == pytest.approx(theirs[measure], abs=1e-9), name


def test_an_empty_ranking_scores_zero_on_every_measure() -> None:
    assert set(standard_measures([], {"a": 2}, CUTOFFS).values()) == {0.0}


# -- the project's per-query measures from scratch -------------------------------------------------

_keys = st.sampled_from(["d#chunk-0", "d#chunk-1", "e#chunk-0", "vector:7", "rank:2"])
_shas = st.sampled_from(["s1", "s2", "s3"])
_chunks = st.sampled_from([f"{d}#chunk-{i}" for d in "def" for i in range(4)])


@st.composite
def rows(draw: st.DrawFn) -> dict[str, Any]:
    members = draw(st.lists(st.tuples(_keys, _shas, _chunks, st.sampled_from(["d", "e", ""])), max_size=8))
    hits = draw(st.lists(st.tuples(_keys, _shas), max_size=10))
    relevant = sorted(draw(st.sets(_chunks, max_size=8)))
    delivered = sorted(draw(st.sets(st.sampled_from(relevant))) if relevant else set())
    return {
        "query_id": "q",
        "config": "c",
        "judged": bool(relevant),
        "member_keys": [m[0] for m in members],
        "member_content_sha": [m[1] for m in members],
        "member_chunks": [m[2] for m in members],
        "member_doc_ids": [m[3] for m in members],
        "hit_keys": [k for k, _ in hits],
        "hit_content_sha": [s for _, s in hits],
        "relevant_chunks": relevant,
        "relevant_grades": [1] * len(relevant),
        "relevant_docs": [],
        "relevant_doc_grades": [],
        "delivered_relevant": delivered,
    }


def repeated_keys(keys: list[str]) -> int:
    """Delivered chunks whose evidence key was already delivered for the query."""
    return sum(1 for i, k in enumerate(keys) if k in keys[:i])


def same_text_other_key(keys: list[str], shas: list[str]) -> int:
    """Chunks with a new key whose normalised text was already delivered under another key."""
    return sum(
        1
        for i, (k, s) in enumerate(zip(keys, shas, strict=True))
        if k not in keys[:i] and any(s == shas[j] and keys[j] != k for j in range(i))
    )


def same_doc_oracle(row: dict[str, Any], cap: int | None) -> tuple[int, float, float]:
    docs = sorted({c.split("#")[0] for c in row["relevant_chunks"]})
    plain, aware = [], []
    for doc in docs:
        rel = [c for c in row["relevant_chunks"] if c.startswith(doc + "#")]
        if len(rel) < 2:
            continue
        got = len([c for c in rel if c in row["delivered_relevant"]])
        plain.append(got / len(rel))
        aware.append(min(1.0, got / (len(rel) if cap is None else min(cap, len(rel)))))
    if not plain:
        return 0, math.nan, math.nan
    return len(plain), sum(plain) / len(plain), sum(aware) / len(aware)


@SETTINGS
@given(rows(), st.one_of(st.none(), st.integers(1, 4)))
def test_per_query_measures_match_their_definitions(row: dict[str, Any], cap: int | None) -> None:
    got = per_query_frame(pd.DataFrame([row]), CUTOFFS, {"c": cap}).iloc[0]
    assert got["dup_keys"] == repeated_keys(row["member_keys"])
    assert got["dup_content"] == same_text_other_key(row["member_keys"], row["member_content_sha"])
    assert got["raw_dup_keys"] == repeated_keys(row["hit_keys"])
    assert got["raw_dup_content"] == same_text_other_key(row["hit_keys"], row["hit_content_sha"])
    assert (got["members"], got["hits"]) == (len(row["member_keys"]), len(row["hit_keys"]))
    pairs, plain, aware = same_doc_oracle(row, cap)
    assert got["same_doc_pairs"] == pairs
    if pairs:
        assert got["same_doc_recall"] == pytest.approx(plain)
        assert got["same_doc_recall_cap_aware"] == pytest.approx(aware)
    else:
        assert math.isnan(got["same_doc_recall"]) and math.isnan(got["same_doc_recall_cap_aware"])
