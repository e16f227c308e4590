"""The served tool's wrapper: the payload as the in-process tool gives it, blank and long queries, a slow
lookup answered within the time limit, failures as answers, and at most ``concurrency`` lookups at a time."""

from __future__ import annotations

import json
import threading
import time
from typing import Any

import anyio
import pytest

from rag_eval.core.config import RagConfig
from rag_eval.core.errors import SearchUnavailableError
from rag_eval.core.lookup import LookupKnowledge
from rag_eval.core.projector import ProjectedPayload
from rag_eval.search.memory import InMemorySearch
from rag_eval.serve.service import LookupFailed, LookupService, payload_dict
from tests.unit.serve.test_tracing import QUERIES, ROWS, encoder


def tool(config: RagConfig | None = None) -> LookupKnowledge:
    return LookupKnowledge(InMemorySearch.from_rows(ROWS, encoder), config)


@pytest.mark.parametrize("query", [q for q in QUERIES if q.strip()])
def test_the_answer_is_the_in_process_payload_as_json(query: str) -> None:
    service = LookupService(tool())
    answer = anyio.run(service.lookup, query)
    expected = tool().lookup_knowledge(query).as_dict()
    assert answer == expected
    assert json.loads(json.dumps(answer)) == answer  # JSON as it is
    assert service.health() == {"status": "ok", "served": 1, "failed": 0, "in_flight": 0}


def test_a_score_that_is_not_a_number_is_null() -> None:
    payload = tool().lookup_knowledge("replica lag")
    first = payload.excerpts[0]
    broken = ProjectedPayload(query=payload.query, excerpts=(type(first)(**{**_fields(first), "score": float("nan")}),),
                              hints=payload.hints, cuts=())  # fmt: skip
    assert payload_dict(broken)["evidence"][0]["score"] is None


def _fields(obj: Any) -> dict[str, Any]:
    return {name: getattr(obj, name) for name in obj.__slots__}


@pytest.mark.parametrize(("query", "why"), [("", "blank"), ("  \t\n", "blank"), ("x" * 101, "101 characters")])
def test_blank_and_too_long_queries_are_answered_with_an_error(query: str, why: str) -> None:
    service = LookupService(tool(), max_query_chars=100)
    with pytest.raises(LookupFailed, match=why):
        anyio.run(service.lookup, query)


class Slow:
    """A tool whose lookups take ``seconds``, recording how many ran at once."""

    def __init__(self, seconds: float, fail: Exception | None = None) -> None:
        self.seconds, self.fail = seconds, fail
        self.running = self.most = 0
        self.lock = threading.Lock()
        self.inner = tool()

    def lookup_knowledge(self, query: str) -> ProjectedPayload:
        with self.lock:
            self.running += 1
            self.most = max(self.most, self.running)
        try:
            time.sleep(self.seconds)
            if self.fail is not None:
                raise self.fail
            return self.inner.lookup_knowledge(query)
        finally:
            with self.lock:
                self.running -= 1


def test_a_lookup_over_the_time_limit_is_answered_with_an_error_at_the_limit() -> None:
    service = LookupService(Slow(1.0), timeout=0.2)
    started = time.perf_counter()
    with pytest.raises(LookupFailed, match=r"longer than 0.2 s"):
        anyio.run(service.lookup, "replica lag")
    assert time.perf_counter() - started < 0.8
    assert service.failed == 1


@pytest.mark.parametrize(
    ("error", "message"),
    [(SearchUnavailableError("Milvus at db:19530 is unreachable", uri="db:19530"), "SearchUnavailableError: "),
     (RuntimeError("a bug with the query text in it"), r"internal error \(RuntimeError\): see the service's log")],
)  # fmt: skip
def test_a_failing_lookup_is_an_answer_and_the_service_goes_on(error: Exception, message: str) -> None:
    service = LookupService(Slow(0.0, fail=error))
    with pytest.raises(LookupFailed, match=message) as caught:
        anyio.run(service.lookup, "replica lag")
    assert "query text" not in str(caught.value)  # an unexpected error's text is the log's, not the client's
    service.tool = tool()
    assert anyio.run(service.lookup, "replica lag")["evidence"]
    assert (service.served, service.failed) == (1, 1)


def test_at_most_concurrency_lookups_run_at_once_and_each_gets_its_own_payload() -> None:
    slow = Slow(0.1)
    service = LookupService(slow, concurrency=3)
    queries = [f"replica lag {i}" for i in range(9)]
    answers: dict[str, Any] = {}

    async def main() -> None:
        async with anyio.create_task_group() as group:
            for q in queries:

                async def one(q: str = q) -> None:
                    answers[q] = await service.lookup(q)

                group.start_soon(one)

    anyio.run(main)
    assert slow.most == 3
    assert {q: a["query"] for q, a in answers.items()} == {q: q for q in queries}
