"""What ``rag-eval serve`` runs: a serve TOML file (``[serve]``, ``[milvus]``, ``[embedder]``) and the flags on top.

The service is configured by what production already has: the ``.properties`` file of the pipeline (every
``rag.*`` key of docs/pipeline.md, ``rag.top-k`` included), the Milvus target (URI, collection, the field map
of a collection built elsewhere: none is rag_eval's own schema) and the query embedder (any provider of
:mod:`rag_eval.embed.providers` that embeds a text: ``sentence-transformers``, ``openai``, ``python``). Every
problem is reported together, as ``message @ table.key``, before anything is opened (exit 2).

>>> from pathlib import Path
>>> s = serve_settings({"serve": {"properties": "evidence.properties", "port": 9000},
...                     "milvus": {"uri": "kb.db", "collection": "kb"}}, base=Path("/etc/kb"))
>>> s.properties, s.milvus_uri, s.port, s.transport
(PosixPath('/etc/kb/evidence.properties'), '/etc/kb/kb.db', 9000, 'stdio')
"""

from __future__ import annotations

import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from rag_eval.core.config import RagConfig
from rag_eval.core.errors import ConfigError, ConfigProblem, quoted
from rag_eval.core.parsing import check_regular, parse_toml
from rag_eval.core.types import SearchMode
from rag_eval.embed.providers import EmbedSettings, settings_problems
from rag_eval.experiment.model import MAX_CONCURRENCY
from rag_eval.experiment.section import TableReader
from rag_eval.experiment.tables import embed_settings
from rag_eval.search.milvus.schema import DEFAULT_TOKEN_ENV, uri_problem

TRANSPORTS = ("stdio", "http")
TABLES = ("serve", "milvus", "embedder")
DEFAULT_PORT = 8765
MCP_PATH = "/mcp"  # the streamable HTTP endpoint
HEALTH_PATH = "/healthz"


@dataclass(frozen=True, slots=True, kw_only=True)
class ServeSettings:
    """Everything the service needs; built unchecked, checked by :func:`problems`."""

    properties: Path | None = None  # the pipeline's .properties (None: the defaults, refused by the check)
    milvus_uri: str = ""
    collection: str = ""
    fields: Mapping[str, str] | None = None  # a collection built elsewhere; None: rag_eval's own schema
    partitions: tuple[str, ...] = ()
    token_env: str = DEFAULT_TOKEN_ENV
    milvus_timeout: float = 10.0
    embedder: EmbedSettings = field(default_factory=EmbedSettings)
    mode: SearchMode = SearchMode.DENSE
    transport: str = "stdio"
    host: str = "127.0.0.1"
    port: int = DEFAULT_PORT
    concurrency: int = 8  # lookups at a time; the others wait their turn
    request_timeout: float = 30.0  # seconds one lookup may take before it is answered with a tool error
    max_query_chars: int = 4096  # a longer query is answered with a tool error
    log_queries: bool = False  # queries are what users asked: written to the log only when asked
    trace_file: Path | None = None  # spans as OTLP JSON lines (rag_eval.traffic.otlp_export)

    def config(self) -> RagConfig:
        """The pipeline config of the ``.properties`` file (a bad key is exit 2, naming the file)."""
        if self.properties is None:
            raise ConfigError([ConfigProblem("serve.properties", "required: the pipeline's .properties file")])
        return RagConfig.from_properties_file(self.properties)

    @property
    def url(self) -> str:
        """The streamable HTTP endpoint an MCP client is given."""
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}{MCP_PATH}"


def problems(s: ServeSettings) -> list[ConfigProblem]:
    """Every value of ``s`` that cannot work."""
    out: list[ConfigProblem] = []
    if s.properties is None:
        out.append(ConfigProblem("serve.properties", "required: the pipeline's .properties file (--properties)"))
    elif not s.properties.is_file():
        out.append(ConfigProblem("serve.properties", f"{s.properties}: no such file"))
    if not s.milvus_uri:
        out.append(ConfigProblem("milvus.uri", "required: a Milvus Lite file or http(s)://host:port (--milvus-uri)"))
    elif why := uri_problem(s.milvus_uri):
        out.append(ConfigProblem("milvus.uri", why))
    elif "://" not in s.milvus_uri and not Path(s.milvus_uri).exists():
        out.append(ConfigProblem("milvus.uri", f"{s.milvus_uri}: no such Milvus Lite file"))
    if not s.collection:
        out.append(ConfigProblem("milvus.collection", "required: the collection to search (--collection)"))
    if s.transport not in TRANSPORTS:
        out.append(ConfigProblem("serve.transport", f"{quoted(s.transport)} is not one of {', '.join(TRANSPORTS)}"))
    if not 0 < s.port < 65536:
        out.append(ConfigProblem("serve.port", f"a TCP port from 1 to 65535, got {s.port}"))
    if not 1 <= s.concurrency <= MAX_CONCURRENCY:
        why = f"1 to {MAX_CONCURRENCY} lookups at a time (a worker thread each), got {s.concurrency}"
        out.append(ConfigProblem("serve.concurrency", why))
    if s.max_query_chars < 1:
        out.append(ConfigProblem("serve.max_query_chars", f"must be >= 1, got {s.max_query_chars}"))
    if not 0 < s.request_timeout <= 3600:
        out.append(
            ConfigProblem("serve.request_timeout", f"must be > 0 and <= 3600 seconds, got {s.request_timeout:g}")
        )
    if s.embedder.provider == "precomputed":
        out.append(ConfigProblem("embedder.provider", "a service embeds any query: precomputed vectors cannot serve"))
    else:
        out.extend(ConfigProblem(f"embedder.{k}", m) for k, m in settings_problems(s.embedder, existing=True))
    return out


def serve_settings(table: Mapping[str, Any], *, base: Path, source: str | None = None) -> ServeSettings:
    """The settings of a parsed serve TOML document; its relative paths start at ``base``."""
    found = [ConfigProblem(str(k), f"unknown table (known: {', '.join(TABLES)})") for k in table if k not in TABLES]
    readers = {name: _reader(table, name, base, found) for name in TABLES}
    serve, milvus = readers["serve"], readers["milvus"]
    properties = serve.path("properties")
    uri = milvus.get("uri", str, "")
    if uri and "://" not in uri:
        uri = str(milvus.beside(uri) if not Path(uri).is_absolute() else Path(uri))
    fields = milvus.get("fields", Mapping)
    mode = serve.get("mode", str, SearchMode.DENSE.value)
    if mode not in {m.value for m in SearchMode}:
        serve.problem("mode", f"{quoted(mode)} is not one of {', '.join(m.value for m in SearchMode)}")
        mode = SearchMode.DENSE.value
    trace_file = serve.output_path("trace_file")
    number = (int, float)
    settings = ServeSettings(
        properties=properties.resolve() if properties is not None else None, milvus_uri=uri,
        collection=milvus.get("collection", str, ""), fields=dict(fields) if fields is not None else None,
        partitions=tuple(milvus.get("partitions", list, [])), token_env=milvus.get("token_env", str, DEFAULT_TOKEN_ENV),
        milvus_timeout=float(milvus.get("timeout", number, 10.0)), embedder=embed_settings(readers["embedder"]),
        mode=SearchMode(mode), transport=serve.get("transport", str, "stdio"), host=serve.get("host", str, "127.0.0.1"),
        port=serve.get("port", int, DEFAULT_PORT), concurrency=serve.get("concurrency", int, 8),
        request_timeout=float(serve.get("request_timeout", number, 30.0)),
        max_query_chars=serve.get("max_query_chars", int, 4096), log_queries=serve.get("log_queries", bool, False),
        trace_file=trace_file,
    )  # fmt: skip
    for reader in readers.values():
        reader.finish()
    if found:
        raise ConfigError(found, path=source)
    return settings


def _reader(table: Mapping[str, Any], name: str, base: Path, found: list[ConfigProblem]) -> TableReader:
    value = table.get(name)
    if value is not None and not isinstance(value, Mapping):
        found.append(ConfigProblem(name, "expected a table"))
    return TableReader(value if isinstance(value, Mapping) else {}, name, found, base=base, present=value is not None)


def load_serve_file(path: str | Path) -> ServeSettings:
    """The settings of a serve TOML file (exit 2 naming the file when it cannot be read)."""
    p = Path(path)
    try:
        check_regular(p)
        text = p.read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError([ConfigProblem("(file)", f"cannot read it: {exc.strerror}")], path=str(p)) from exc
    except UnicodeDecodeError as exc:
        raise ConfigError([ConfigProblem("(file)", f"not UTF-8 ({exc.reason} at byte {exc.start:,})")],
                          path=str(p)) from exc  # fmt: skip
    try:
        table = parse_toml(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError([ConfigProblem("(file)", f"not valid TOML: {exc}")], path=str(p)) from exc
    return serve_settings(table, base=p.parent.resolve(), source=str(p))


def parse_fields(items: list[str]) -> dict[str, str]:
    """``--field KEY=FIELD`` flags as a field map.

    >>> parse_fields(["id=pk", "vector=embedding", "doc_id=metadata.doc_id"])
    {'id': 'pk', 'vector': 'embedding', 'doc_id': 'metadata.doc_id'}
    """
    out: dict[str, str] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key.strip() or not value.strip():
            raise ConfigError([ConfigProblem("--field", f"expected KEY=FIELD, got {quoted(item)}")])
        out[key.strip()] = value.strip()
    return out


def with_flags(s: ServeSettings, flags: Mapping[str, Any]) -> ServeSettings:
    """``s`` with the flags given (None: not given) on top; the embedder's flags replace its keys one by one."""
    changes: dict[str, Any] = {}
    for key in ("milvus_uri", "collection", "transport", "host", "port", "concurrency", "request_timeout"):
        if flags.get(key) is not None:
            changes[key] = flags[key]
    if flags.get("properties") is not None:
        changes["properties"] = Path(flags["properties"]).resolve()
    if flags.get("field"):
        changes["fields"] = parse_fields(list(flags["field"]))
    if flags.get("log_queries"):
        changes["log_queries"] = True
    if flags.get("trace_file") is not None:
        changes["trace_file"] = Path(flags["trace_file"])
    embed = {k: flags[f"embedder_{k}"] for k in ("provider", "model", "base_url", "callable")
             if flags.get(f"embedder_{k}") is not None}  # fmt: skip
    if embed:
        changes["embedder"] = replace(s.embedder, **embed)
    return replace(s, **changes)


def checked(s: ServeSettings) -> ServeSettings:
    """``s`` when it can work, else every problem at once (exit 2)."""
    found = problems(s)
    if found:
        raise ConfigError(found)
    return s
