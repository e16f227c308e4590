"""The example trace file and its generator's traffic shape: the calls per query are a function of the seed
(every query at least once, a few many times, most once or twice), and the shipped file holds exactly the
calls its README says, written as the README says (no payload, no retrieved documents)."""

from __future__ import annotations

import importlib.util
import json
import sys
from collections import Counter
from types import ModuleType
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.conftest import ROOT, SHIPPED

SCRIPT = ROOT / "examples" / "traffic" / "make_traces.py"
TRACES = SHIPPED / "traffic" / "lookup-traces.otlp.jsonl"


def load_script() -> ModuleType:
    spec = importlib.util.spec_from_file_location("make_traces", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


maker = load_script()


def test_the_counts_are_the_seeds() -> None:
    counts = maker.call_counts(264, calls=1000, seed=1)
    assert counts == maker.call_counts(264, calls=1000, seed=1)
    assert counts != maker.call_counts(264, calls=1000, seed=2)
    assert maker.call_order(counts, seed=1) == maker.call_order(counts, seed=1)


@pytest.mark.parametrize("seed", [1, 2, 3, 99])
def test_a_few_queries_are_asked_many_times_and_most_once_or_twice(seed: int) -> None:
    counts = maker.call_counts(264, calls=1000, seed=seed)
    assert sum(counts) == 1000 and min(counts) == 1
    assert max(counts) >= 50  # the head: the most asked query, about 1/H(264) of the 736 extra calls
    assert sum(n <= 2 for n in counts) > len(counts) / 2
    top = sorted(counts, reverse=True)
    assert sum(top[:10]) > 0.25 * 1000  # ten queries (4%) carry over a quarter of the calls


@given(queries=st.integers(1, 40), extra=st.integers(0, 200), seed=st.integers(0, 2**32))
def test_every_query_is_asked_and_the_calls_add_up(queries: int, extra: int, seed: int) -> None:
    counts = maker.call_counts(queries, calls=queries + extra, seed=seed)
    assert len(counts) == queries and sum(counts) == queries + extra and min(counts) >= 1
    order = maker.call_order(counts, seed=seed)
    assert Counter(order) == Counter({i: n for i, n in enumerate(counts)})


def test_fewer_calls_than_queries_are_refused() -> None:
    with pytest.raises(ValueError, match="at least once"):
        maker.call_counts(10, calls=9, seed=1)


def attributes(span: dict[str, Any]) -> dict[str, Any]:
    return {a["key"]: next(iter(a["value"].values())) for a in span.get("attributes", [])}


def test_the_shipped_file_holds_the_seeds_calls_without_payloads_or_documents() -> None:
    assert TRACES.stat().st_size < 3_000_000
    spans = [
        span
        for line in TRACES.read_text(encoding="utf-8").splitlines()
        for rs in json.loads(line)["resourceSpans"]
        for ss in rs["scopeSpans"]
        for span in ss["spans"]
    ]
    tools = [attributes(s) for s in spans if s["name"] == "lookup_knowledge"]
    searches = [attributes(s) for s in spans if s["name"] == "knowledge_search"]
    assert len(tools) == len(searches) == 1000 and len(spans) == 2000
    texts = [json.loads(line)["text"] for line in (SHIPPED / "queries.jsonl").read_text().splitlines()]
    want = Counter(dict(zip(texts, maker.call_counts(len(texts), calls=1000, seed=1), strict=True)))
    assert Counter(json.loads(t["input.value"])["query"] for t in tools) == want
    assert all(t["openinference.span.kind"] == "TOOL" and "output.value" not in t for t in tools)
    assert all(set(s) == {"openinference.span.kind", "input.value", "input.mime_type"} for s in searches)
    assert all(s["status"] == {"code": 1} for s in spans)
