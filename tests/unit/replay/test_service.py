"""The black-box client of a deployed lookup_knowledge, on a plain HTTP endpoint served here: every query asked
once, ``concurrency`` at a time, each payload kept as it arrives; an answer that is not a payload, an error and
an unreachable endpoint stop it with one line naming the query; the answers file survives a cut line."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from rag_eval.core.errors import ServiceError
from rag_eval.experiment.model import ServiceSpec
from rag_eval.replay.service import Answers, ask_service, check_payload


class Endpoint:
    def __init__(self) -> None:
        self.asked: list[str] = []
        self.running = self.most = 0
        self.lock = threading.Lock()
        self.answer: Any = None  # None: the payload of the query
        endpoint = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def do_POST(self) -> None:
                query = json.loads(self.rfile.read(int(self.headers["Content-Length"])))["query"]
                with endpoint.lock:
                    endpoint.asked.append(query)
                    endpoint.running += 1
                    endpoint.most = max(endpoint.most, endpoint.running)
                time.sleep(0.02)
                with endpoint.lock:
                    endpoint.running -= 1
                body = (
                    endpoint.answer
                    if endpoint.answer is not None
                    else {
                        "query": query,
                        "evidence": [{"document_id": f"{query}#chunk-0", "content": query}],
                        "hints": {},
                    }
                )
                self.send_response(200)
                self.end_headers()
                self.wfile.write(body if isinstance(body, bytes) else json.dumps(body).encode())

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/lookup"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()


@pytest.fixture
def endpoint() -> Iterator[Endpoint]:
    e = Endpoint()
    yield e
    e.server.shutdown()
    e.server.server_close()


QUERIES = [(f"q{i}", f"query {i}") for i in range(12)]


def test_every_query_is_asked_once_at_most_concurrency_at_a_time(endpoint: Endpoint, tmp_path: Path) -> None:
    answers = Answers(tmp_path / "a.jsonl", resume=False)
    ask_service(ServiceSpec(http=endpoint.url, concurrency=3), QUERIES, answers)
    answers.close()
    assert sorted(endpoint.asked) == sorted(t for _, t in QUERIES) and endpoint.most <= 3
    assert {q: p["query"] for q, p in answers.payloads.items()} == dict(QUERIES)
    again = Answers(tmp_path / "a.jsonl", resume=True)
    ask_service(ServiceSpec(http=endpoint.url), QUERIES, again)  # nothing left to ask
    again.close()
    assert len(endpoint.asked) == 12 and again.payloads == answers.payloads


@pytest.mark.parametrize(
    ("answer", "said"),
    [(b"not json", "not JSON"), ({"evidence": "none"}, "not a payload: no evidence list"),
     ([1], "not a payload: not a JSON object")],
)  # fmt: skip
def test_an_answer_that_is_not_a_payload_stops_the_replay_naming_the_query(
    endpoint: Endpoint, tmp_path: Path, answer: Any, said: str
) -> None:
    endpoint.answer = answer
    answers = Answers(tmp_path / "a.jsonl", resume=False)
    with pytest.raises(ServiceError, match=said) as caught:
        ask_service(ServiceSpec(http=endpoint.url, concurrency=1), QUERIES, answers)
    answers.close()
    assert "query 'q0'" in str(caught.value) and caught.value.exit_code == 3
    assert str(caught.value).count("\n") == 0 and answers.payloads == {}


def test_an_answer_larger_than_a_payload_can_be_is_not_read_to_its_end(
    endpoint: Endpoint, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A plain JSON endpoint's answer is read up to 16 MiB (here lowered to 1,000 bytes): a hostile or broken
    endpoint streaming gigabytes is stopped there, exit 3 naming the query; an answer of exactly the limit is read."""
    from rag_eval.replay import service

    monkeypatch.setattr(service, "MAX_ANSWER_BYTES", 1_000)
    payload = {"query": "q", "evidence": [{"document_id": "d#chunk-0", "content": ""}], "hints": {}}
    filler = 1_000 - len(json.dumps(payload).encode())
    whole = {**payload, "evidence": [{"document_id": "d#chunk-0", "content": "x" * filler}]}
    endpoint.answer = json.dumps(whole).encode()
    answers = Answers(tmp_path / "a.jsonl", resume=False)
    ask_service(ServiceSpec(http=endpoint.url, concurrency=1), QUERIES[:1], answers)  # 1,000 bytes: read
    assert len(answers.payloads["q0"]["evidence"][0]["content"]) == filler
    endpoint.answer = endpoint.answer.replace(b'"x', b'"xx')  # 1,001 bytes
    with pytest.raises(ServiceError, match="was answered with more than 1,000 bytes, not a payload") as caught:
        ask_service(ServiceSpec(http=endpoint.url, concurrency=1), QUERIES[1:2], answers)
    answers.close()
    assert "query 'q1'" in str(caught.value) and caught.value.exit_code == 3


def test_an_endpoint_nobody_listens_on_is_exit_3(tmp_path: Path) -> None:
    answers = Answers(tmp_path / "a.jsonl", resume=False)
    with pytest.raises(ServiceError, match="could not reach the service"):
        ask_service(ServiceSpec(http="http://127.0.0.1:9/lookup", timeout=2), QUERIES[:1], answers)
    answers.close()


def test_a_line_cut_by_a_crash_is_left_out_and_its_query_asked_again(tmp_path: Path) -> None:
    path = tmp_path / "a.jsonl"
    good = {"query_id": "q1", "payload": {"query": "x", "evidence": [], "hints": {}}}
    path.write_text(json.dumps(good) + "\n" + '{"query_id": "q2", "payl')
    answers = Answers(path, resume=True)
    answers.close()
    assert list(answers.payloads) == ["q1"]
    assert path.read_text() == json.dumps(good) + "\n"
    assert Answers(path, resume=False).payloads == {} and path.read_text() == ""


@pytest.mark.parametrize(
    ("value", "why"),
    [({"evidence": []}, None), ({"evidence": [{"document_id": 3}]}, "evidence[0] has no string document_id"),
     ({"evidence": [{"document_id": "a", "content": 1}]}, "evidence[0] content is not a string"),
     ("text", "not a JSON object (a str)")],
)  # fmt: skip
def test_what_a_payload_must_have(value: Any, why: str | None) -> None:
    assert check_payload(value) == why


def _mcp(*args: str) -> ServiceSpec:
    import sys

    return ServiceSpec(command=(sys.executable, "-m", "tests.unit.replay.mcp_fake", *args), timeout=20, concurrency=1)


def test_an_mcp_service_over_stdio_answers_every_query(tmp_path: Path) -> None:
    answers = Answers(tmp_path / "a.jsonl", resume=False)
    ask_service(_mcp(), QUERIES[:4], answers)
    answers.close()
    assert {q: p["query"] for q, p in answers.payloads.items()} == dict(QUERIES[:4])


def test_an_mcp_service_over_stdio_does_not_write_to_the_stderr_the_sdk_was_imported_with(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The SDK's stdio client takes ``sys.stderr`` as it was when the SDK was imported; a caller that has closed
    that stream since (a second in-process pytest session, an embedding application) still gets its answers."""
    import sys

    from mcp.client import stdio

    closed = (tmp_path / "closed.txt").open("w")
    closed.close()
    inner: Any = stdio.stdio_client  # under asynccontextmanager: the function its defaults are bound to
    monkeypatch.setattr(inner.__wrapped__, "__defaults__", (closed,))
    monkeypatch.setattr(sys, "stderr", (tmp_path / "now.txt").open("w"))
    answers = Answers(tmp_path / "a.jsonl", resume=False)
    ask_service(_mcp(), QUERIES[:2], answers)
    answers.close()
    sys.stderr.close()
    assert list(answers.payloads) == ["q0", "q1"]


def test_an_mcp_tool_error_names_the_query(tmp_path: Path) -> None:
    answers = Answers(tmp_path / "a.jsonl", resume=False)
    with pytest.raises(ServiceError, match=r"query 'q1' was answered with an error: .*knowledge base is unavailable"):
        ask_service(_mcp(), [("q0", "fine"), ("q1", "an error please"), ("q2", "never asked")], answers)
    answers.close()
    assert list(answers.payloads) == ["q0"]


def test_an_mcp_service_that_dies_mid_run_keeps_what_it_answered(tmp_path: Path) -> None:
    answers = Answers(tmp_path / "a.jsonl", resume=False)
    with pytest.raises(ServiceError, match=r"stopped answering|cannot be reached") as caught:
        ask_service(_mcp("3"), QUERIES[:6], answers)
    answers.close()
    assert caught.value.exit_code == 3 and "--resume" in str(caught.value)
    assert list(answers.payloads) == ["q0", "q1"]
    resumed = Answers(tmp_path / "a.jsonl", resume=True)
    ask_service(_mcp(), QUERIES[:6], resumed)
    resumed.close()
    assert list(resumed.payloads) == ["q0", "q1", "q2", "q3", "q4", "q5"]
