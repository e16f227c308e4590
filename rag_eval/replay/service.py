"""A deployed ``lookup_knowledge`` asked as a black box: the queries in, each one's payload JSON out.

Three kinds of endpoint (:class:`~rag_eval.experiment.model.ServiceSpec`): an MCP server over streamable HTTP
(``url``) or over stdio (``command``, started here and stopped at the end), both through the official ``mcp``
SDK's client and its ``lookup_knowledge`` tool, or a plain HTTP endpoint (``http``: POST ``{"query": ...}``,
the payload JSON back). ``concurrency`` queries are in flight at once, each given ``timeout`` seconds.

What comes back is checked before it is kept (:func:`check_payload`): a dict with ``evidence``, a list of
excerpts, each with a string ``document_id``. A timeout, an error answer, something that is not a payload, or
a service that stops answering ends the replay with a :class:`~rag_eval.core.errors.ServiceError` (exit 3)
naming the query and the endpoint; every payload received before it is already in the answers file
(:class:`Answers`, one JSON line a query, flushed), so ``--resume`` asks only the others.
"""

from __future__ import annotations

import json
import os
import sys
import urllib.error
import urllib.request
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import anyio.to_thread

from rag_eval.core.errors import ServiceError
from rag_eval.core.parsing import TextError, lone_surrogate, parse_json
from rag_eval.experiment.model import ServiceSpec

TOOL = "lookup_knowledge"
Payload = dict[str, Any]
Call = Callable[[str], Awaitable[Any]]  # a query text in, the answer (parsed JSON) out


def check_payload(value: Any) -> str | None:
    """Why ``value`` is not a payload, or None.

    >>> check_payload({"query": "q", "evidence": [{"document_id": "d#chunk-0", "content": "x"}], "hints": {}})
    >>> check_payload({"query": "q", "evidence": [{"content": "x"}]})
    'evidence[0] has no string document_id'
    >>> check_payload([1, 2])
    'not a JSON object (a list)'
    """
    if not isinstance(value, Mapping):
        return f"not a JSON object (a {type(value).__name__})"
    if (lone := lone_surrogate(value)) is not None:
        return f"holds a lone surrogate (\\u{ord(lone):04x}), which is not Unicode text"
    evidence = value.get("evidence")
    if not isinstance(evidence, list):
        return "no evidence list"
    for i, excerpt in enumerate(evidence):
        if not isinstance(excerpt, Mapping) or not isinstance(excerpt.get("document_id"), str):
            return f"evidence[{i}] has no string document_id"
        if not isinstance(excerpt.get("content", ""), str):
            return f"evidence[{i}] content is not a string"
    return None


class Answers:
    """The payloads received so far, one JSON line a query (``{"query_id": ..., "payload": ...}``) appended and
    flushed as each arrives; a line cut short by a crash is ignored when read back."""

    def __init__(self, path: Path, *, resume: bool) -> None:
        self.path = path
        self.payloads: dict[str, Payload] = self._read() if resume else {}
        path.parent.mkdir(parents=True, exist_ok=True)
        body = "".join(json.dumps({"query_id": k, "payload": v}, ensure_ascii=False) + "\n"
                       for k, v in self.payloads.items())  # fmt: skip
        path.write_text(body, encoding="utf-8")  # rewritten whole: a cut line is gone
        self._file = path.open("a", encoding="utf-8")

    def _read(self) -> dict[str, Payload]:
        out: dict[str, Payload] = {}
        if not self.path.is_file():
            return out
        for line in self.path.read_text(encoding="utf-8").splitlines():
            try:
                row = parse_json(line)
            except TextError:
                continue
            if (
                isinstance(row, dict)
                and isinstance(row.get("query_id"), str)
                and check_payload(row.get("payload")) is None
            ):
                out[row["query_id"]] = row["payload"]
        return out

    def add(self, query_id: str, payload: Payload) -> None:
        self.payloads[query_id] = payload
        self._file.write(json.dumps({"query_id": query_id, "payload": payload}, ensure_ascii=False) + "\n")
        self._file.flush()

    def close(self) -> None:
        self._file.close()


def ask_service(spec: ServiceSpec, queries: Sequence[tuple[str, str]], answers: Answers,
                tick: Callable[[int], None] | None = None) -> None:  # fmt: skip
    """Ask ``spec`` every query of ``queries`` (id, text) that ``answers`` has no payload of, keeping each."""
    todo = [(qid, text) for qid, text in queries if qid not in answers.payloads]
    if not todo:
        return
    anyio.run(_ask, spec, todo, answers, tick or (lambda n: None))


async def _ask(spec: ServiceSpec, todo: Sequence[tuple[str, str]], answers: Answers,
               tick: Callable[[int], None]) -> None:  # fmt: skip
    try:
        async with connect(spec) as call:
            await _fan_out(spec, todo, call, answers, tick)
    except ServiceError:
        raise
    except Exception as exc:  # connecting failed, or the session broke outside a call
        raise _error(spec, f"cannot be reached or stopped answering ({said(exc)})") from exc


async def _fan_out(spec: ServiceSpec, todo: Sequence[tuple[str, str]], call: Call, answers: Answers,
                   tick: Callable[[int], None]) -> None:  # fmt: skip
    """``call(text)`` for every query, ``spec.concurrency`` at a time, each within ``spec.timeout``; the first
    failure stops the others and is raised."""
    failures: list[ServiceError] = []
    pending = iter(todo)

    async def worker() -> None:
        for qid, text in pending:
            if failures:
                return
            try:
                with anyio.fail_after(spec.timeout):
                    raw = await call(text)
            except TimeoutError:
                failures.append(
                    _error(spec, f"query {qid!r} got no answer within {spec.timeout:g} s (service.timeout)")
                )
                return
            except ServiceError as exc:
                failures.append(_error(spec, f"query {qid!r} {exc.args[0]}"))
                return
            except Exception as exc:  # the transport's own: the connection closed, the process ended
                failures.append(_error(spec, f"stopped answering at query {qid!r} ({said(exc)})"))
                return
            why = check_payload(raw)
            if why is not None:
                failures.append(_error(spec, f"query {qid!r} was answered with something that is not a payload: {why}"))
                return
            answers.add(qid, raw)
            tick(1)

    try:
        async with anyio.create_task_group() as group:
            for _ in range(min(spec.concurrency, len(todo))):
                group.start_soon(worker)
    except BaseExceptionGroup as group_error:
        if not failures:
            first = group_error.exceptions[0]
            failures.append(_error(spec, f"stopped answering ({said(first)})"))
    if failures:
        raise failures[0]


def _error(spec: ServiceSpec, message: str) -> ServiceError:
    return ServiceError(f"the service at {spec.endpoint}: {message}; --resume asks the queries left",
                        endpoint=spec.endpoint)  # fmt: skip


def said(exc: BaseException) -> str:
    """An exception in a few words (a group: its first)."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    return f"{type(exc).__name__}: {exc}"[:300]


@asynccontextmanager
async def connect(spec: ServiceSpec) -> AsyncIterator[Call]:
    """A connection to ``spec`` as one coroutine function: ``await call(text)`` is the tool's answer to ``text``
    (parsed, not yet checked: :func:`check_payload`). An error answer, or text that is not JSON, raises
    :class:`~rag_eval.core.errors.ServiceError`; the transport's own errors and timeouts pass through. Every
    caller of a service goes through here: a run's ``[service]`` step and ``rag-eval load --service``."""
    if spec.url or spec.command:
        async with _mcp(spec) as call:
            yield call
    else:
        yield _http(spec)


@asynccontextmanager
async def _mcp(spec: ServiceSpec) -> AsyncIterator[Call]:
    try:
        from mcp import Client
        from mcp.client.stdio import StdioServerParameters, stdio_client
    except ImportError as exc:  # pragma: no cover - the extra is part of dev
        raise ServiceError("an MCP [service] needs the MCP SDK: pip install 'rag-eval[serve]'",
                           endpoint=spec.endpoint) from exc  # fmt: skip
    server: Any = spec.url
    if spec.command:  # the service's stderr to this process's stderr as it is now (the SDK's default is the one
        # of when it was imported, which a caller may have closed since: "I/O operation on closed file")
        params = StdioServerParameters(command=spec.command[0], args=list(spec.command[1:]), env=dict(os.environ))
        server = stdio_client(params, errlog=sys.stderr)
    async with Client(server, read_timeout_seconds=spec.timeout) as client:

        async def call(text: str) -> Any:
            result = await client.call_tool(TOOL, {"query": text})
            if result.is_error:
                said = " ".join(getattr(c, "text", "") for c in result.content).strip()
                raise ServiceError(f"was answered with an error: {said[:300]}", endpoint=spec.endpoint)
            if result.structured_content is not None:
                return result.structured_content
            return _json(" ".join(getattr(c, "text", "") for c in result.content), spec)

        yield call


def _json(text: str, spec: ServiceSpec) -> Any:
    try:
        return parse_json(text)
    except TextError as exc:
        raise ServiceError(f"was answered with text that is not JSON ({exc})",
                           endpoint=spec.endpoint) from None  # fmt: skip


MAX_ANSWER_BYTES = 16 * 1024 * 1024  # the most of a plain JSON endpoint's answer read


def _http(spec: ServiceSpec) -> Call:
    url = spec.http or ""

    def post(text: str) -> Any:
        request = urllib.request.Request(url, data=json.dumps({"query": text}).encode(), method="POST",
                                         headers={"Content-Type": "application/json"})  # fmt: skip
        try:
            with urllib.request.urlopen(request, timeout=spec.timeout) as response:
                body = response.read(MAX_ANSWER_BYTES + 1)
            if len(body) > MAX_ANSWER_BYTES:  # read no further: a payload is a few excerpts, not megabytes
                raise ServiceError(f"was answered with more than {MAX_ANSWER_BYTES:,} bytes, not a payload",
                                   endpoint=spec.endpoint)  # fmt: skip
        except urllib.error.HTTPError as exc:
            raise ServiceError(f"was answered HTTP {exc.code} {exc.reason}", endpoint=spec.endpoint) from None
        except (urllib.error.URLError, OSError) as exc:
            reason = getattr(exc, "reason", exc)
            if isinstance(reason, TimeoutError):
                raise TimeoutError from None
            raise ServiceError(f"could not reach the service ({reason})", endpoint=spec.endpoint) from None
        return _json(body.decode("utf-8", errors="replace"), spec)

    async def call(text: str) -> Any:
        return await anyio.to_thread.run_sync(lambda: post(text), abandon_on_cancel=True)

    return call
