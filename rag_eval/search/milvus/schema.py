"""The pure-Python half of the Milvus adapter: schema constants, value types, URI checks (filter literals: quoting).

Never imports pymilvus (the other modules of :mod:`rag_eval.search.milvus` do, lazily), so that the
experiment, the command line and tests can build rows, index specs and search targets without loading
the client.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final, Literal
from urllib.parse import urlsplit, urlunsplit

from rag_eval.core.errors import as_written, quoted
from rag_eval.core.types import SearchMode
from rag_eval.redact import redact_value
from rag_eval.search.milvus.fields import FieldMap

DEFAULT_TOKEN_ENV: Final = "RAG_EVAL_MILVUS_TOKEN"
DEFAULT_TIMEOUT: Final = 8.0  # seconds to connect, retries included: a dead server is reported within 10 s
DEFAULT_CALL_TIMEOUT: Final = 30.0  # seconds for one data call (search, insert, flush); index and load get 600
MAX_NQ: Final = 16_384  # query vectors per call (server cap)
MAX_TOPK: Final = 16_384  # limit per call (server cap)
MAX_VARCHAR_BYTES: Final = 65_535
MAX_MANIFEST_BYTES: Final = 256 * 1024
MAX_BATCH_BYTES: Final = 32 * 1024 * 1024  # the server refuses gRPC messages over 64 MB
MANIFEST_PROPERTY: Final = "rag_eval.manifest"
INDEX_PROPERTY: Final = "rag_eval.index"
MISSING_STR: Final = ""
MISSING_INT: Final = -1
VECTOR_FIELD: Final = "vector"
SPARSE_FIELD: Final = "content_sparse"
OUTPUT_FIELDS: Final = (
    "vector_id",
    "doc_id",
    "chunk_index",
    "content",
    "title",
    "source",
    "category",
    "char_start",
    "char_end",
)


@dataclass(frozen=True, slots=True, kw_only=True)
class IndexSpec:
    """Vector index type, metric and parameters (HNSW + COSINE by default).

    ``search_params`` are sent with every search; for HNSW ``ef`` is raised to the request's limit.

    >>> IndexSpec.flat().index_type
    'FLAT'
    """

    index_type: str = "HNSW"
    metric: str = "COSINE"
    build_params: Mapping[str, Any] = field(default_factory=lambda: {"M": 16, "efConstruction": 200})
    search_params: Mapping[str, Any] = field(default_factory=lambda: {"ef": 64})

    @classmethod
    def flat(cls, metric: str = "COSINE") -> IndexSpec:
        """Exact search: every backend returns the same order."""
        return cls(index_type="FLAT", metric=metric, build_params={}, search_params={})

    @classmethod
    def of_type(cls, index_type: str, metric: str = "COSINE") -> IndexSpec:
        """An index of ``index_type`` with its default parameters: HNSW's ``M``, ``efConstruction`` and
        ``ef``; none for any other type (FLAT has none, the others take what the experiment gives).

        >>> IndexSpec.of_type("FLAT").to_json()
        {'index_type': 'FLAT', 'metric': 'COSINE', 'build_params': {}, 'search_params': {}}
        """
        if index_type.upper() == "HNSW":
            return cls(metric=metric)
        return cls(index_type=index_type.upper(), metric=metric, build_params={}, search_params={})

    def search_record(self) -> dict[str, Any]:
        """The search parameters every search sends, as provenance records them: HNSW's ``ef`` is raised to
        each search's limit (and its query cache skipped where the backend takes ``for_tuning``).

        >>> IndexSpec().search_record(), IndexSpec.flat().search_record()
        ({'params': {'ef': 64}, 'ef': 'at least the search limit'}, {'params': {}})
        """
        record: dict[str, Any] = {"params": dict(self.search_params)}
        if self.index_type.upper().startswith("HNSW"):
            record["ef"] = "at least the search limit"
        return record

    def to_json(self) -> dict[str, Any]:
        return {
            "index_type": self.index_type,
            "metric": self.metric,
            "build_params": dict(self.build_params),
            "search_params": dict(self.search_params),
        }


@dataclass(frozen=True, slots=True, kw_only=True)
class ChunkRow:
    """One chunk as stored: ``None`` identity fields become ``""`` / ``-1`` in Milvus."""

    vector_id: int
    doc_id: str | None
    chunk_index: int | None
    content: str
    title: str
    source: str
    category: str
    start: int | None
    end: int | None
    vector: Sequence[float]


@dataclass(frozen=True, slots=True, kw_only=True)
class BackendInfo:
    """What answers at a URI: ``kind`` is ``"lite"`` or ``"server"``."""

    kind: Literal["lite", "server"]
    server_version: str
    pymilvus_version: str


@dataclass(frozen=True, slots=True, kw_only=True)
class BackendFeatures:
    """Optional search modes as the backend really performs them (probed, not assumed)."""

    grouping: bool
    hybrid: bool


@dataclass(frozen=True, slots=True, kw_only=True)
class ModeSupport:
    """Whether a search mode runs as asked, decided here alone (the experiment's checks, the replay's
    preflight and the adapter's every search ask it). ``None``: not known yet (not probed), so not refused.

    >>> ModeSupport(uri="kb.db", collection="kb", built_elsewhere=True).refusal(SearchMode.HYBRID)
    "collection 'kb' was built elsewhere and has no BM25 full-text field of rag_eval's: use mode 'dense'"
    >>> ModeSupport(uri="kb.db", collection="kb").refusal(SearchMode.GROUPED) is None
    True
    """

    uri: str  # as shown (redacted)
    collection: str
    built_elsewhere: bool = False
    grouping: bool | None = None  # the backend really groups (the 2.3 server silently does not)
    hybrid_rpc: bool | None = None  # the backend has hybrid search (BM25 full text + RRF)
    full_text: bool | None = None  # the collection has rag_eval's BM25 field

    def refusal(self, mode: SearchMode) -> str | None:
        """Why ``mode`` is refused, in one sentence that says what to do; None when it is not."""
        if mode is SearchMode.GROUPED and self.grouping is False:
            return (
                f"Milvus at {self.uri} ignores grouping search (group_by_field) and would return ungrouped hits: "
                "use mode 'dense' with the client-side per-document cap, or Milvus Lite / a server >= 2.4"
            )
        if mode is not SearchMode.HYBRID:
            return None
        if self.built_elsewhere:
            return (
                f"collection {self.collection!r} was built elsewhere and has no BM25 full-text field of rag_eval's: "
                "use mode 'dense'"
            )
        if self.hybrid_rpc is False:
            return (
                f"Milvus at {self.uri} has no hybrid search (BM25 full text + RRF): use mode 'dense', or Milvus "
                "Lite / a server >= 2.5"
            )
        if self.full_text is False:
            return (
                f"collection {self.collection!r} has no BM25 full-text field: re-ingest it with full_text=True "
                "(Milvus Lite or a server >= 2.5), or use mode 'dense'"
            )
        return None


@dataclass(frozen=True, slots=True, kw_only=True)
class SearchTarget:
    """Where to search: one Milvus (a Lite file path or a server/cluster URI), one collection and its
    index, the environment variable that holds the token, and how long to wait for the server.

    ``collection`` is None until the ingest names it (a collection derived from the data set); ``index``
    None means the index the collection was built with (recorded at create); the token is read from the
    environment when a client connects and is never held here. A collection built elsewhere carries its
    ``fields`` (where each hit value is read from: :mod:`rag_eval.search.milvus.fields`; None is rag_eval's
    own schema) and the ``partitions`` searched (none: all).

    >>> t = SearchTarget(uri="http://user:pw@db.example:19530", collection="kb")
    >>> (t.redacted_uri, t.is_server)
    ('http://db.example:19530', True)
    >>> t.named("other").collection
    'other'
    """

    uri: str
    collection: str | None = None
    index: IndexSpec | None = field(default_factory=IndexSpec)
    token_env: str = DEFAULT_TOKEN_ENV
    timeout: float = DEFAULT_TIMEOUT
    fields: FieldMap | None = None
    partitions: tuple[str, ...] = ()

    @property
    def redacted_uri(self) -> str:
        """The URI as messages, manifests and reports may show it (no credentials, query or fragment)."""
        return redact_uri(self.uri)

    @property
    def is_server(self) -> bool:
        return is_server_uri(self.uri)

    def named(self, collection: str) -> SearchTarget:
        """The same Milvus, another collection (of rag_eval's schema)."""
        return SearchTarget(
            uri=self.uri, collection=collection, index=self.index, token_env=self.token_env, timeout=self.timeout
        )

    def reading(self, fields: FieldMap, partitions: Sequence[str] = ()) -> SearchTarget:
        """The same collection, read through ``fields`` (a collection built elsewhere), in ``partitions``."""
        return SearchTarget(uri=self.uri, collection=self.collection, index=None, token_env=self.token_env,
                            timeout=self.timeout, fields=fields, partitions=tuple(partitions))  # fmt: skip

    def as_dict(self) -> dict[str, Any]:
        """What a manifest records (the URI redacted, the token's variable name, never its value)."""
        index = self.index.to_json() if self.index is not None else None
        out: dict[str, Any] = {"uri": self.redacted_uri, "collection": self.collection, "index": index}
        if self.fields is not None:
            out |= {"fields": self.fields.as_table(), "partitions": list(self.partitions)}
        return out


def is_server_uri(uri: str) -> bool:
    """True for a server or cluster URI, False for a local Milvus Lite path."""
    return uri.lower().startswith(("http://", "https://", "tcp://"))


def redact_uri(uri: str) -> str:
    """The URI without credentials, query or fragment: what messages and manifests may show."""
    if not is_server_uri(uri):
        return uri
    parts = urlsplit(uri)
    host = parts.hostname or ""
    try:
        port = parts.port
    except ValueError:
        return redact_uri_loosely(uri)
    netloc = f"{host}:{port}" if port else host
    return urlunsplit((parts.scheme, netloc, parts.path, "", ""))


INDEX_TYPES: Final = ("AUTOINDEX", "FLAT", "IVF_FLAT", "IVF_SQ8", "IVF_PQ", "HNSW", "HNSW_SQ", "SCANN", "DISKANN")
METRICS: Final = ("COSINE", "IP", "L2")
SERVER_SCHEMES: Final = ("http", "https", "tcp")
_HOST_PORT = re.compile(r"^(\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9.-]+):[0-9]*(/.*)?$")


def uri_problem(uri: str) -> str | None:
    """Why ``uri`` is neither a usable server URI nor plainly a local Milvus Lite path (None when it is one).

    The message never repeats credentials.

    >>> uri_problem("reports/milvus/kb.db") is None and uri_problem("http://127.0.0.1:19530") is None
    True
    >>> uri_problem("127.0.0.1:19530")
    "'127.0.0.1:19530' looks like a server address without a scheme: write http://127.0.0.1:19530"
    >>> "secret" in uri_problem("user:secret@db.example:19530")
    False
    """
    if not uri.strip():
        return "is blank: give a Lite file path or http(s)://host:port"
    if uri != uri.strip() or any(ch in uri for ch in "\n\r\t\x00"):
        return "has leading/trailing whitespace or control characters"
    scheme, sep, _ = uri.partition("://")
    if sep:
        if scheme.lower() not in SERVER_SCHEMES:
            return f"scheme {quoted(scheme)} is not one of {', '.join(SERVER_SCHEMES)} (a Lite file is a plain path)"
        parts = urlsplit(uri)
        try:
            port = parts.port
        except ValueError:
            return f"{as_written(redact_uri_loosely(uri))} has a port that is not a number from 1 to 65535"
        if not parts.hostname:
            return f"{as_written(redact_uri_loosely(uri))} names no host"
        if port == 0:
            return f"{as_written(redact_uri_loosely(uri))} has port 0"
        return None
    if "@" in uri.split("/", 1)[0]:
        host = uri.split("/", 1)[0].rsplit("@", 1)[1]
        return (
            f"a URI with credentials but no scheme is not a file path: write http://{as_written(host)} and give the "
            "token in the token environment variable"
        )
    if _HOST_PORT.match(uri) and not uri.endswith(".db"):
        return f"{quoted(uri)} looks like a server address without a scheme: write http://{as_written(uri)}"
    return None


def redact_uri_loosely(uri: str) -> str:
    """Like :func:`redact_uri`, for URIs that may not even parse: credentials cut at the last ``@``, the
    query and fragment dropped (:func:`rag_eval.redact.redact_value`, which the lock's records use too)."""
    return redact_value(uri)


def one_line(text: object, limit: int = 240) -> str:
    """``text`` on one line, shortened to ``limit`` characters."""
    flat = " ".join(str(text).split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"
