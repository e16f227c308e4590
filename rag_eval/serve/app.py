"""``rag-eval serve``: ``lookup_knowledge`` as an MCP tool (the official ``mcp`` SDK's :class:`MCPServer`), over
stdio (an agent starts the process) or streamable HTTP (a service on a port, ``/mcp``, with ``GET /healthz``).

The tool's input schema is ``{"query": string}`` and nothing else; its result is the projected payload as
structured content (and the same JSON as its text). Everything is opened before the server answers: the
``.properties`` read, the embedder built, the collection described (its field map checked against its schema)
and loaded (a Lite file) or found loaded (a server): a bad config or target is refused with exit 2 and one
line. SIGTERM (or Ctrl-C) ends the server gracefully: lookups under way finish (over stdio: every request read is
answered, :mod:`rag_eval.serve.stdio`), Milvus is closed, spans are flushed. Spans are exported when
``OTEL_EXPORTER_OTLP_ENDPOINT`` is set (the OTLP/HTTP exporter) or a ``trace_file`` is given (OTLP JSON lines,
:mod:`rag_eval.traffic.otlp_export`). docs/serve.md has the rest.
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import socket
import sys
from collections.abc import Iterator
from typing import Any

import anyio

from rag_eval.core.errors import ConfigError, ConfigProblem, InfrastructureError, RagEvalError
from rag_eval.core.lookup import LookupKnowledge
from rag_eval.serve.service import LookupFailed, LookupService
from rag_eval.serve.settings import HEALTH_PATH, MCP_PATH, ServeSettings, checked
from rag_eval.serve.stdio import run_stdio

try:
    from mcp.server.mcpserver import MCPServer
    from mcp.server.mcpserver.exceptions import ToolError
except ImportError as missing:  # pragma: no cover - the extra is part of dev
    raise ImportError(
        f"rag-eval serve needs the MCP SDK ({missing.name} is missing): pip install 'rag-eval[serve]'"
    ) from missing

TOOL_NAME = "lookup_knowledge"
TOOL_DESCRIPTION = (
    "Look up the knowledge base (runbooks): excerpts relevant to the query, each with its own citable "
    "document_id, best first, and keyword hints beside them."
)
log = logging.getLogger("rag_eval.serve")


def build_server(service: LookupService, *, name: str = "rag-eval-knowledge", log_level: Any = "WARNING") -> MCPServer:
    """The MCP server of ``service``: the one tool, and ``GET /healthz`` on the HTTP transport."""
    server: MCPServer = MCPServer(
        name=name, instructions="lookup_knowledge(query): excerpts from the knowledge base", log_level=log_level
    )

    async def lookup_knowledge(query: str) -> dict[str, Any]:
        try:
            return await service.lookup(query)
        except LookupFailed as exc:
            raise ToolError(str(exc)) from None

    server.add_tool(lookup_knowledge, name=TOOL_NAME, description=TOOL_DESCRIPTION, structured_output=True)

    from starlette.requests import Request
    from starlette.responses import JSONResponse, Response

    async def health(request: Request) -> Response:
        return JSONResponse(service.health())

    server.custom_route(HEALTH_PATH, methods=["GET"])(health)
    return server


@contextlib.contextmanager
def opened_tool(s: ServeSettings) -> Iterator[Any]:
    """The production tool of ``s`` (traced when spans are exported), its Milvus client closed and its spans
    flushed at the end; a target that cannot be opened is an input error (exit 2)."""
    from rag_eval.search.milvus import MilvusSearch

    config = s.config()
    embedder = s.embedder.build()
    target = _target(s)

    def encode(texts: Any) -> Any:
        return embedder.encode(list(texts)).tolist()

    try:
        port = MilvusSearch(target, encode, load=not target.is_server)
    except InfrastructureError as exc:
        raise ConfigError([ConfigProblem("milvus", str(exc))]) from exc
    tracing = None
    try:
        port.check_mode(s.mode)
        tool: Any = LookupKnowledge(port, config, mode=s.mode)
        _first_lookup(tool)
        tracing = _tracer_provider(s)
        if tracing is not None:
            from rag_eval.serve.tracing import TracedLookup

            tool = TracedLookup(tool, tracing.get_tracer("rag_eval.serve"), capture_output=False)
        yield tool
    finally:
        port.close()
        if tracing is not None:
            tracing.shutdown()
        close = getattr(embedder, "close", None)
        if close is not None:
            close()


def _first_lookup(tool: LookupKnowledge) -> None:
    """One lookup before the first client's, through every step (the embedder, the search, the pipeline): an
    embedder that cannot embed, or vectors the collection does not hold, refuse the start (exit 2)."""
    try:
        tool.lookup_knowledge("rag-eval serve: startup check")
    except RagEvalError as exc:
        raise ConfigError([ConfigProblem("serve", f"the startup lookup failed: {exc}")]) from exc


def _target(s: ServeSettings) -> Any:
    """The search target; a collection built elsewhere has its field map read against its schema."""
    from rag_eval.search.milvus.existing import ForeignCollection
    from rag_eval.search.milvus.fields import FieldMapError, parse_field_map
    from rag_eval.search.milvus.schema import SearchTarget

    target = SearchTarget(uri=s.milvus_uri, collection=s.collection, index=None, token_env=s.token_env,
                          timeout=s.milvus_timeout)  # fmt: skip
    if s.fields is None:
        return target
    try:
        with ForeignCollection(target, load=False, describe_only=True) as coll:
            fields = parse_field_map(s.fields, schema=coll.info.schema(), dynamic=coll.info.dynamic)
    except FieldMapError as exc:
        raise ConfigError([ConfigProblem(f"milvus.fields.{exc.key}", str(exc))]) from exc
    except InfrastructureError as exc:
        raise ConfigError([ConfigProblem("milvus", str(exc))]) from exc
    return target.reading(fields, s.partitions)


def _tracer_provider(s: ServeSettings) -> Any:
    """An SDK tracer provider exporting to the OTLP endpoint of the environment or to ``trace_file``, or None."""
    endpoint = os.environ.get("OTEL_EXPORTER_OTLP_ENDPOINT") or os.environ.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
    if not endpoint and s.trace_file is None:
        return None
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor

    provider = TracerProvider(resource=Resource.create({"service.name": os.environ.get("OTEL_SERVICE_NAME",
                                                                                       "rag-eval-serve")}))  # fmt: skip
    if s.trace_file is not None:
        from rag_eval.traffic.otlp_export import OtlpJsonFileExporter

        provider.add_span_processor(BatchSpanProcessor(OtlpJsonFileExporter(s.trace_file, append=True)))
    if endpoint:
        try:
            from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
        except ImportError as exc:
            raise ConfigError(
                [
                    ConfigProblem(
                        "OTEL_EXPORTER_OTLP_ENDPOINT",
                        "is set, but the OTLP exporter is not "
                        "installed: pip install opentelemetry-exporter-otlp-proto-http",
                    )
                ]
            ) from exc
        provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter()))
    return provider


def serve(s: ServeSettings) -> int:
    """Run the service of ``s`` until its client goes (stdio) or SIGTERM; 0 when it ended as asked (Ctrl-C over
    stdio: KeyboardInterrupt once the service has ended the same way)."""
    s = checked(s)
    if s.log_queries:
        logging.basicConfig(level=logging.INFO, stream=sys.stderr, format="%(asctime)s %(name)s %(message)s")
    listener = _listen(s) if s.transport == "http" else None
    received = None
    try:
        with contextlib.redirect_stdout(sys.stderr), opened_tool(s) as tool:  # stdout is the stdio transport's
            service = LookupService(tool, concurrency=s.concurrency, timeout=s.request_timeout,
                                    max_query_chars=s.max_query_chars, log_queries=s.log_queries)  # fmt: skip
            server = build_server(service, log_level="INFO" if s.log_queries else "WARNING")
            if listener is None:
                received = run_stdio(server, grace=s.request_timeout + 5.0)
            else:
                print(f"rag-eval serve: lookup_knowledge at {s.url} (health: {HEALTH_PATH})", file=sys.stderr)
                anyio.run(_http, server, s, listener)
    finally:
        if listener is not None:
            listener.close()
    if received == signal.SIGINT:  # Milvus is closed and the spans flushed
        raise KeyboardInterrupt
    return 0


def _listen(s: ServeSettings) -> socket.socket:
    """The listening socket, bound before anything else is opened (a port in use is exit 2)."""
    family = socket.AF_INET6 if ":" in s.host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((s.host, s.port))
    except OSError as exc:
        sock.close()
        raise ConfigError([ConfigProblem("serve.port", f"cannot listen on {s.host}:{s.port}: {exc.strerror}")]) from exc
    sock.listen(128)
    return sock


async def _http(server: MCPServer, s: ServeSettings, listener: socket.socket) -> None:
    """The streamable HTTP app on ``listener`` under uvicorn, which ends gracefully on SIGTERM / SIGINT (and
    raises the signal again when it has: SIGTERM then finds a handler that lets the service close and exit 0)."""
    import uvicorn

    signal.signal(signal.SIGTERM, lambda signum, frame: None)
    app = server.streamable_http_app(streamable_http_path=MCP_PATH, host=s.host)
    config = uvicorn.Config(app, log_level="info" if s.log_queries else "warning", access_log=s.log_queries,
                            timeout_graceful_shutdown=max(5, int(s.request_timeout)))  # fmt: skip
    await uvicorn.Server(config).serve(sockets=[listener])


__all__ = ["TOOL_NAME", "build_server", "opened_tool", "serve"]
