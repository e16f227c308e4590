"""The served tool with the MCP SDK's own client, over stdio and streamable HTTP, on Milvus Lite and on a
Milvus server: its payloads are the in-process ``lookup_knowledge``'s, eight clients at once get their own,
SIGTERM ends it with exit 0, and a bad target is refused with exit 2 and one line."""

from __future__ import annotations

import json
import signal
import subprocess
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client
from mcp.client.stdio import StdioServerParameters

from rag_eval.core.config import RagConfig
from rag_eval.core.lookup import LookupKnowledge
from rag_eval.search.milvus import MilvusSearch, is_server_uri
from rag_eval.serve.service import payload_dict
from tests.integration.serve_kit import QUERIES, ROOT, build_kb, encode, env, free_port, serve_argv, wait_healthy

PROPERTIES = "rag.pipeline=evidence\nrag.retrieve-k=20\nrag.return-n=5\nrag.max-chunks-per-document=2\n"


@pytest.fixture(scope="module")
def server_kb(server_uri: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    """The knowledge base on the session's server, built once for this module's server tests: they only read it
    (the services search it), and a collection on the server costs seconds of flush, index and load."""
    from rag_eval.search.milvus import MilvusStore

    name = f"t_serve_{uuid.uuid4().hex[:8]}"
    target = build_kb(server_uri, name)
    try:
        yield _kb(server_uri, name, tmp_path_factory.mktemp("serve-kb"))
    finally:
        with MilvusStore(target) as store:
            store.drop()


@pytest.fixture
def kb(milvus_uri: str, collection_name: str, tmp_path: Path, request: pytest.FixtureRequest) -> dict[str, Any]:
    """The knowledge base, its config, and the in-process tool's payloads of every query: a fresh Lite file for
    each test (closed again before a service opens it), one collection for the module on the server."""
    if is_server_uri(milvus_uri):
        return dict(request.getfixturevalue("server_kb"))
    build_kb(milvus_uri, collection_name)
    return _kb(milvus_uri, collection_name, tmp_path)


def _kb(uri: str, collection: str, folder: Path) -> dict[str, Any]:
    props = folder / "evidence.properties"
    props.write_text(PROPERTIES)
    target = _target(uri, collection)
    with MilvusSearch(target, encode) as port:
        tool = LookupKnowledge(port, RagConfig.from_properties_file(props))
        expected = {q: payload_dict(tool.lookup_knowledge(q)) for q in QUERIES}
    return {"uri": uri, "collection": collection, "properties": props, "expected": expected}


def _target(uri: str, collection: str) -> Any:
    from rag_eval.search.milvus import SearchTarget

    return SearchTarget(uri=uri, collection=collection, index=None)


def _same(got: dict[str, Any], expected: dict[str, Any]) -> bool:
    """The payloads are the same, each score to a float32 rounding (1e-6): a server computes the distance of a
    vector the service normalised again an ulp or two apart from the in-process one's; every other field, the
    order of the evidence included, is compared exactly."""

    def unscored(payloads: dict[str, Any]) -> dict[str, Any]:
        return {q: {**p, "evidence": [{k: v for k, v in e.items() if k != "score"} for e in p["evidence"]]}
                for q, p in payloads.items()}  # fmt: skip

    def scores(payloads: dict[str, Any]) -> list[float]:
        return [e["score"] for q in sorted(payloads) for e in payloads[q]["evidence"]]

    return unscored(got) == unscored(expected) and scores(got) == pytest.approx(scores(expected), abs=1e-6)


async def _ask(client: Client, queries: list[str]) -> dict[str, Any]:
    out = {}
    for q in queries:
        result = await client.call_tool("lookup_knowledge", {"query": q})
        assert not result.is_error, result.content
        out[q] = result.structured_content
    return out


def test_over_stdio_the_payloads_are_the_in_process_tools(kb: dict[str, Any]) -> None:
    argv = serve_argv(kb["properties"], kb["uri"], kb["collection"])
    params = StdioServerParameters(command=argv[0], args=argv[1:], cwd=str(ROOT), env=env())

    async def main() -> dict[str, Any]:
        async with Client(params) as client:
            return await _ask(client, QUERIES)

    got = anyio.run(main)
    assert _same(got, kb["expected"])
    assert all(p["evidence"] for p in got.values())


@pytest.fixture
def http_service(kb: dict[str, Any]) -> Iterator[tuple[subprocess.Popen[bytes], int]]:
    port = free_port()
    argv = serve_argv(kb["properties"], kb["uri"], kb["collection"], "--transport", "http", "--port", str(port),
                      "--concurrency", "4")  # fmt: skip
    process = subprocess.Popen(argv, cwd=ROOT, env=env(), stderr=subprocess.PIPE)
    try:
        wait_healthy(port, process)
        yield process, port
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()


def test_over_http_eight_clients_at_once_get_their_own_payloads_and_sigterm_ends_it(
    kb: dict[str, Any], http_service: tuple[subprocess.Popen[bytes], int]
) -> None:
    process, port = http_service
    url = f"http://127.0.0.1:{port}/mcp"
    got: dict[int, dict[str, Any]] = {}

    async def client(i: int) -> None:
        mine = QUERIES[i:] + QUERIES[:i]  # each client asks in its own order
        async with Client(url) as c:
            got[i] = await _ask(c, mine * 2)

    async def main() -> None:
        async with anyio.create_task_group() as group:
            for i in range(8):
                group.start_soon(client, i)

    anyio.run(main)
    assert set(got) == set(range(8))
    assert all(_same(answers, kb["expected"]) for answers in got.values())
    process.send_signal(signal.SIGTERM)
    assert process.wait(timeout=30) == 0


def test_over_http_a_body_past_4_mib_is_answered_413_unread_and_the_service_goes_on(
    kb: dict[str, Any], http_service: tuple[subprocess.Popen[bytes], int]
) -> None:
    """The MCP SDK's own limit on a request body (``max_request_body_size``, 4 MiB by default), which the service
    keeps: 20 MB declared is refused before any of it is read, 5 MiB sent in chunks once 4 MiB has arrived; a
    query over ``max_query_chars`` but under the limit stays a tool error naming the limit
    (tests/unit/serve/test_service.py)."""
    import http.client

    process, port = http_service
    headers = {"accept": "application/json, text/event-stream", "content-type": "application/json"}
    declared = http.client.HTTPConnection("127.0.0.1", port, timeout=10)  # 20 MB declared, 7 bytes sent
    declared.putrequest("POST", "/mcp")
    for key, value in {**headers, "content-length": "20000000"}.items():
        declared.putheader(key, value)
    declared.endheaders(b'{"id": ')
    response = declared.getresponse()  # answered before the rest: it is never read
    assert response.status == 413 and response.read() == b"Request body too large"
    declared.close()
    chunked = http.client.HTTPConnection("127.0.0.1", port, timeout=10)  # 5 MiB in chunks, no length
    chunked.request("POST", "/mcp", body=iter([b" " * 1024 * 1024] * 5), headers=headers, encode_chunked=True)
    response = chunked.getresponse()
    assert response.status == 413 and response.read() == b"Request body too large"
    chunked.close()

    async def main() -> dict[str, Any]:
        async with Client(f"http://127.0.0.1:{port}/mcp") as c:
            return await _ask(c, QUERIES)

    assert _same(anyio.run(main), kb["expected"]) and process.poll() is None


def test_a_collection_that_is_not_there_is_refused_with_exit_2_and_one_line(kb: dict[str, Any]) -> None:
    argv = serve_argv(kb["properties"], kb["uri"], "no_such_collection")
    done = subprocess.run(
        argv, cwd=ROOT, env=env(), capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL
    )
    assert done.returncode == 2, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "no_such_collection" in lines[0], done.stderr


def test_a_field_map_that_does_not_fit_the_collection_is_refused(kb: dict[str, Any]) -> None:
    argv = serve_argv(kb["properties"], kb["uri"], kb["collection"], "--field", "id=vector_id", "--field",
                      "vector=vector", "--field", "text=no_such_field")  # fmt: skip
    done = subprocess.run(
        argv, cwd=ROOT, env=env(), capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL
    )
    assert done.returncode == 2, done.stderr
    assert "milvus.fields.text" in done.stderr and len(done.stderr.strip().splitlines()) == 1


def test_a_port_in_use_is_refused_with_exit_2(kb: dict[str, Any], http_service: Any) -> None:
    _, port = http_service
    argv = serve_argv(kb["properties"], kb["uri"], kb["collection"], "--transport", "http", "--port", str(port))
    done = subprocess.run(argv, cwd=ROOT, env=env(), capture_output=True, text=True, timeout=120)
    assert done.returncode == 2 and "serve.port" in done.stderr, done.stderr


def _handshaken(argv: list[str], environ: dict[str, str] | None = None) -> subprocess.Popen[bytes]:
    """The service over stdio, up: it has answered ``initialize`` (the MCP SDK's client would take the Lite
    file's only opening) and been told ``initialized``."""
    process = subprocess.Popen(argv, cwd=ROOT, env=environ or env(), stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE)  # fmt: skip
    client = {"name": "test", "version": "1"}
    hello = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
             "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": client}}  # fmt: skip
    _send(process, hello)
    assert process.stdout is not None and json.loads(process.stdout.readline())["id"] == 1
    _send(process, {"jsonrpc": "2.0", "method": "notifications/initialized"})
    return process


def _send(process: subprocess.Popen[bytes], message: dict[str, Any]) -> None:
    assert process.stdin is not None
    process.stdin.write((json.dumps(message) + "\n").encode())
    process.stdin.flush()


def _ended(process: subprocess.Popen[bytes]) -> None:
    if process.poll() is None:
        process.kill()
        process.wait()


def test_over_stdio_sigterm_ends_it_with_exit_0_whenever_it_arrives(kb: dict[str, Any]) -> None:
    """SIGTERM the moment an answer is out, while the event loop is still busy: three times. A handler raising in
    the main thread was swallowed by asyncio in a callback and left the service running (1 in 5 on Lite)."""
    argv = serve_argv(kb["properties"], kb["uri"], kb["collection"])
    for _ in range(3):
        process = _handshaken(argv)
        try:
            process.send_signal(signal.SIGTERM)
            assert process.wait(timeout=30) == 0
        finally:
            _ended(process)


@pytest.mark.parametrize("ending", ["SIGTERM", "SIGINT", "stdin closed"])
def test_a_lookup_under_way_is_answered_before_the_service_ends(
    kb: dict[str, Any], ending: str, tmp_path: Path
) -> None:
    argv = serve_argv(kb["properties"], kb["uri"], kb["collection"])
    argv[argv.index("tests.integration.serve_kit:encode")] = "tests.integration.serve_kit:slow_encode"
    started = tmp_path / "started"
    process = _handshaken(argv, {**env(), "SERVE_KIT_STARTED": str(started)})
    try:
        started.unlink(missing_ok=True)  # the startup lookup's
        query = QUERIES[0]
        _send(process, {"jsonrpc": "2.0", "id": 2, "method": "tools/call",
                        "params": {"name": "lookup_knowledge", "arguments": {"query": query}}})  # fmt: skip
        deadline = time.monotonic() + 60
        while not started.exists() and process.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        assert started.exists(), "the lookup never started"
        assert process.stdin is not None and process.stdout is not None
        if ending == "stdin closed":
            process.stdin.close()
        else:
            process.send_signal(getattr(signal, ending))
        out: list[bytes] = []
        reader = threading.Thread(target=lambda: out.append(process.stdout.read()), daemon=True)  # type: ignore[union-attr]
        reader.start()
        reader.join(timeout=60)
        assert out, "the service did not end"
        assert process.wait(timeout=30) == (130 if ending == "SIGINT" else 0)
    finally:
        _ended(process)
    [answer] = [json.loads(line) for line in out[0].splitlines()]
    assert answer["id"] == 2 and "error" not in answer and not answer["result"].get("isError"), answer
    assert _same({query: answer["result"]["structuredContent"]}, {query: kb["expected"][query]})


def test_the_spans_of_the_served_tool_are_a_query_log_the_run_can_replay(kb: dict[str, Any], tmp_path: Path) -> None:
    from rag_eval.traffic.logs import TrafficSpec, read_traffic

    traces = tmp_path / "traces.jsonl"
    argv = serve_argv(kb["properties"], kb["uri"], kb["collection"], "--trace-file", str(traces))
    params = StdioServerParameters(command=argv[0], args=argv[1:], cwd=str(ROOT), env=env())
    asked = [*QUERIES[:3], QUERIES[0]]

    async def main() -> None:
        async with Client(params) as client:
            await _ask(client, asked)

    anyio.run(main)  # the client closes stdin: the server ends and flushes its spans
    traffic = read_traffic(TrafficSpec(path=traces, format="otlp"))
    assert {q.text: q.count for q in traffic.queries} == {QUERIES[0]: 2, QUERIES[1]: 1, QUERIES[2]: 1}
    spans = [s for line in traces.read_text().splitlines() for r in json.loads(line)["resourceSpans"]
             for scope in r["scopeSpans"] for s in scope["spans"]]  # fmt: skip
    assert sorted({s["name"] for s in spans}) == ["knowledge_search", "lookup_knowledge"]
    assert not any(a["key"] == "output.value" for s in spans for a in s["attributes"])  # no payload in the spans


def test_an_embedder_that_does_not_fit_the_collection_is_refused_at_startup(kb: dict[str, Any]) -> None:
    argv = serve_argv(kb["properties"], kb["uri"], kb["collection"])
    argv[argv.index("tests.integration.serve_kit:encode")] = "tests.integration.serve_kit:shipped_encode"  # 384-d
    done = subprocess.run(
        argv, cwd=ROOT, env=env(), capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL
    )
    assert done.returncode == 2, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "startup lookup failed" in lines[0] and "dimension" in lines[0], done.stderr
