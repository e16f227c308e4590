"""The conformance diff and the measures read from payloads alone, on worked examples; the standard measures
against pytrec_eval on the delivered chunks (an oracle that reads neither the rows nor this code)."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest
import pytrec_eval

from rag_eval.metrics.conformance import conformance, delivered_chunks, first_difference, payload_measures

PAYLOAD: dict[str, Any] = {
    "query": "replica lag",
    "evidence": [
        {"document_id": "lag#chunk-0", "source": "kb/lag.md", "title": "Lag", "content": "Check the SQL thread.",
         "score": 0.9, "rank": 1, "truncated": False},
        {"document_id": "lag#chunk-2", "source": "kb/lag.md", "title": "Lag", "content": "Raise the relay",
         "score": 0.8, "rank": 2, "truncated": True},
        {"document_id": "vector:41", "source": "kb/disk.md", "title": None, "content": "Purge binary logs.",
         "score": 0.5, "rank": 3, "truncated": False},
    ],
    "hints": {"keywords": ["replica", "lag"], "error_codes": []},
}  # fmt: skip


def _changed(path: tuple[Any, ...], value: Any) -> dict[str, Any]:
    out = copy.deepcopy(PAYLOAD)
    target: Any = out
    for key in path[:-1]:
        target = target[key]
    target[path[-1]] = value
    return out


@pytest.mark.parametrize(
    ("path", "value", "where"),
    [
        (("query",), "replica  lag", "query"),
        (("evidence", 0, "document_id"), "lag", "evidence[0].document_id"),
        (("evidence", 1, "content"), "Raise the relay log", "evidence[1].content"),
        (("evidence", 2, "score"), 0.5000001, "evidence[2].score"),
        (("evidence", 2, "title"), "", "evidence[2].title"),
        (("evidence", 1, "truncated"), 1, "evidence[1].truncated"),  # true and 1 are not the same JSON
        (("hints", "keywords"), ["lag"], "hints.keywords"),
        (("evidence", 0, "extra"), "x", "evidence[0].extra"),
    ],
)
def test_the_first_field_that_differs_is_named(path: tuple[Any, ...], value: Any, where: str) -> None:
    assert first_difference(PAYLOAD, _changed(path, value)) == where


def test_identical_payloads_and_numbers_written_either_way() -> None:
    assert first_difference(PAYLOAD, copy.deepcopy(PAYLOAD)) is None
    assert first_difference(PAYLOAD, _changed(("evidence", 0, "rank"), 1.0)) is None


def test_blocks_missing_or_extra_are_named_after_the_shared_ones() -> None:
    fewer = copy.deepcopy(PAYLOAD)
    fewer["evidence"] = fewer["evidence"][:2]
    assert first_difference(PAYLOAD, fewer) == "evidence: 3 block(s) expected, 2 given"
    assert first_difference(fewer, PAYLOAD) == "evidence: 2 block(s) expected, 3 given"
    reordered = copy.deepcopy(PAYLOAD)
    reordered["evidence"] = reordered["evidence"][::-1]
    assert first_difference(PAYLOAD, reordered) == "evidence[0].document_id"


def test_conformance_is_the_share_identical() -> None:
    assert conformance({}) == 1.0
    assert conformance({"a": None, "b": None}) == 1.0
    assert conformance({"a": None, "b": "query", "c": "hints.keywords"}) == pytest.approx(1 / 3)


def test_delivered_chunks_of_a_chunk_scoped_and_of_a_legacy_payload() -> None:
    assert delivered_chunks(PAYLOAD, {"41": "disk#chunk-3"}.get) == (["lag#chunk-0", "disk#chunk-3"], 0)
    assert delivered_chunks(PAYLOAD, {}.get) == (["lag#chunk-0"], 0)  # a vector id no row names: nothing
    legacy = {"evidence": [{**e, "document_id": e["source"]} for e in PAYLOAD["evidence"]]}
    assert delivered_chunks(legacy, {}.get) == ([], 3)


def test_payload_measures_match_pytrec_eval_on_the_delivered_chunks() -> None:
    relevance = {"q1": {"lag#chunk-0": 2, "lag#chunk-2": 1, "lag#chunk-5": 1}, "q2": {"disk#chunk-3": 1}}
    second = {"query": "disk", "evidence": [{"document_id": "x#chunk-0", "content": "a"},
                                            {"document_id": "vector:41", "content": "b"}], "hints": {}}  # fmt: skip
    traffic = {"query": "logged", "evidence": [{"document_id": "kb/a.md", "content": "c"}], "hints": {}}
    payloads = {"q1": PAYLOAD, "q2": second, "traffic:t1": traffic}
    got = payload_measures(payloads, relevance, {"41": "disk#chunk-3"}.get, [1, 3])
    assert (got["queries"], got["judged_queries"], got["unscoped_excerpts"]) == (3, 2, 1)
    run = {"q1": {"lag#chunk-0": 3.0, "disk#chunk-3": 2.0}, "q2": {"x#chunk-0": 3.0, "disk#chunk-3": 2.0}}
    names = {"P_1", "P_3", "recall_1", "recall_3", "ndcg_cut_1", "ndcg_cut_3", "success_1", "success_3", "recip_rank"}
    oracle = pytrec_eval.RelevanceEvaluator(relevance, names).evaluate(run)
    mean = {n: sum(q[n] for q in oracle.values()) / 2 for n in names}
    ours = {"P_1": "chunk:P@1", "P_3": "chunk:P@3", "recall_1": "chunk:R@1", "recall_3": "chunk:R@3",
            "ndcg_cut_1": "chunk:nDCG@1", "ndcg_cut_3": "chunk:nDCG@3", "success_1": "chunk:Success@1",
            "success_3": "chunk:Success@3", "recip_rank": "chunk:RR"}  # fmt: skip
    assert {n: got[ours[n]] for n in names} == pytest.approx(mean)


@pytest.mark.parametrize(
    ("given", "where"),
    [
        ({**PAYLOAD, "hints": {**PAYLOAD["hints"], "topics": ["lag"]}}, "hints.topics"),  # a hint only one side has
        ({**PAYLOAD, "trace_id": "abc"}, "trace_id"),  # a top-level key only the service sends
        (_changed(("evidence", 0, "score"), "0.9"), "evidence[0].score"),  # a number is not its text
        (_changed(("evidence", 0, "score"), float("nan")), "evidence[0].score"),  # NaN is no number but NaN
    ],
)
def test_a_key_or_value_one_side_lacks_is_a_difference(given: dict[str, Any], where: str) -> None:
    assert first_difference(PAYLOAD, given) == where


def test_not_a_number_on_both_sides_and_hints_missing_or_empty_are_no_difference() -> None:
    nan = _changed(("evidence", 0, "score"), float("nan"))
    assert first_difference(nan, json.loads(json.dumps(nan))) is None  # two NaNs, as two JSON answers give them
    assert first_difference({**PAYLOAD, "hints": None}, {**PAYLOAD, "hints": {}}) is None


def test_unscoped_excerpts_are_counted_for_every_query_judged_or_not() -> None:
    """A legacy service's excerpts (its document_id is the source) count as unscoped in the labelled queries'
    payloads and in the log's; a log payload's vector id is looked up as any other."""
    legacy = {"query": "q", "evidence": [{"document_id": "kb/lag.md"}, {"document_id": "kb/disk.md"}], "hints": {}}
    logged = {"query": "t", "evidence": [{"document_id": "kb/x.md"}, {"document_id": "vector:41"}], "hints": {}}
    relevance = {"q1": {"lag#chunk-0": 1}, "q2": {"disk#chunk-3": 1}}
    got = payload_measures({"q1": legacy, "q2": legacy, "t1": logged}, relevance, {"41": "disk#chunk-3"}.get, [1])
    assert (got["queries"], got["judged_queries"], got["unscoped_excerpts"]) == (3, 2, 5)
    assert got["chunk:P@1"] == 0.0 and got["chunk:RR"] == 0.0  # nothing delivered, and it says so


def test_a_top_level_key_both_sides_send_alike_is_no_difference() -> None:
    same = {**PAYLOAD, "trace_id": "abc", "model": "m1"}
    assert first_difference(same, copy.deepcopy(same)) is None
    assert first_difference(same, {**same, "model": "m2"}) == "model"
