r"""Milvus adapters: :class:`MilvusStore` (schema, ingest, manifest) and :class:`MilvusSearch` (the port).

The only module of rag_eval that imports pymilvus, lazily, so importing it stays light.

URIs: ``http(s)://host:port`` or ``tcp://host:port`` is a Milvus server or cluster; anything else is a local
path served by embedded Milvus Lite (its parent directories are created). The token is read from an
environment variable (``RAG_EVAL_MILVUS_TOKEN`` by default) and never written anywhere.

Conventions shared by both backends:

* Missing values: the Milvus 2.3 server has no nullable fields, so a missing ``doc_id``, ``title``,
  ``source`` or ``category`` is stored as ``""`` and a missing ``chunk_index``, ``char_start`` or
  ``char_end`` as ``-1``; hits map both back to ``None``. A category filter of ``""`` therefore matches
  nothing, as it does in the in-memory adapter.
* Manifest: a JSON object kept in the collection property ``rag_eval.manifest`` (Lite 3.2 drops the
  collection description; the server's etcd refuses properties of 1.4 MB, so manifests are capped at
  256 KiB). The IndexSpec used at create() is kept beside it in ``rag_eval.index``.
* Time limits: connecting gets ``timeout`` (8 s) in all, retries with backoff included, so a stopped or
  silent server is reported within 10 s; each data call gets ``call_timeout`` (30 s), index builds and
  loads 600 s. ``finalize()`` waits until the server's default Bounded consistency sees every row.
* Filters: pymilvus filter templating (``filter_params``) where a probe shows the backend honours it,
  otherwise a double-quoted literal escaped by :func:`milvus_string_literal`. Every returned hit is checked
  against the requested category, so a filter can never widen the result silently.
* Scores: the similarity Milvus returns for COSINE and IP (higher is better); for L2 the negated squared
  distance, so that higher is better everywhere. HYBRID hits carry the RRF score (``scores["rrf"]``).
* Order: hits come in one documented total order (:func:`rag_eval.core.types.hit_order`: score descending,
  then vector id ascending), so equal scores are ordered the same way on every backend and run. A DENSE search
  asks for a few hits more than ``top_k`` (two and a sixteenth more); when equal scores straddle the
  cut-off and run to the end of that page it searches wider (doubling, up to 16,384; the queries of a batch
  that need it together) until the tied group is complete, so the ``top_k`` hits are exactly
  the first ``top_k`` of the total order, and a narrower width is a prefix of a wider one (exactly so on an
  exact index such as FLAT). GROUPED and HYBRID hits are ordered the same way, without widening (their scores
  depend on the width asked for).
* GROUPED mode groups by ``doc_id``; rows without a doc_id share one group (the in-memory adapter gives each
  its own). Backends that silently ignore grouping (the 2.3 server) are refused.

>>> print(milvus_string_literal('x" or vector_id > 0 or "'))
"x\" or vector_id > 0 or \""
"""

from __future__ import annotations

import json
import logging
import os
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final, Literal, TypeVar

from rag_eval.core.errors import (
    CollectionNotFoundError,
    CollectionNotLoadedError,
    ConfigError,
    ConfigProblem,
    DimensionMismatchError,
    FilterError,
    RagEvalError,
    SearchBackendError,
    SearchRequestError,
    SearchUnavailableError,
    UnsupportedFeatureError,
)
from rag_eval.core.ports import PortBase
from rag_eval.core.types import KnowledgeSearchHit, KnowledgeSearchRequest, SearchMode, fast_constructor, hit_order
from rag_eval.search.milvus_schema import (
    DEFAULT_CALL_TIMEOUT,
    DEFAULT_TIMEOUT,
    DEFAULT_TOKEN_ENV,
    INDEX_PROPERTY,
    MANIFEST_PROPERTY,
    MAX_BATCH_BYTES,
    MAX_MANIFEST_BYTES,
    MAX_NQ,
    MAX_TOPK,
    MAX_VARCHAR_BYTES,
    MISSING_INT,
    MISSING_STR,
    OUTPUT_FIELDS,
    SPARSE_FIELD,
    VECTOR_FIELD,
    BackendFeatures,
    BackendInfo,
    ChunkRow,
    IndexSpec,
    is_server_uri,
    milvus_string_literal,
    one_line,
    redact_uri,
)

__all__ = [
    "DEFAULT_CALL_TIMEOUT",
    "DEFAULT_TIMEOUT",
    "DEFAULT_TOKEN_ENV",
    "INDEX_PROPERTY",
    "MANIFEST_PROPERTY",
    "MAX_BATCH_BYTES",
    "MAX_MANIFEST_BYTES",
    "MAX_NQ",
    "MAX_TOPK",
    "MAX_VARCHAR_BYTES",
    "MISSING_INT",
    "MISSING_STR",
    "OUTPUT_FIELDS",
    "SPARSE_FIELD",
    "VECTOR_FIELD",
    "BackendFeatures",
    "BackendInfo",
    "ChunkRow",
    "IndexSpec",
    "MilvusSearch",
    "MilvusStore",
    "is_server_uri",
    "milvus_string_literal",
    "one_line",
    "redact_uri",
]

_VISIBLE_WAIT_S: Final = 120.0
_INDEX_WAIT_S: Final = 600.0
_SETTLE_WAIT_S: Final = 20.0
# pymilvus pings every 10 s even with no call in flight (while a long ingest embeds, say), and sends
# bandwidth probes on large inserts; a server answers too many of them with "too_many_pings" GOAWAYs that
# gRPC prints on the terminal. Ping only during calls, rarely, and without bandwidth probes.
_GRPC_OPTIONS: Final = {
    "grpc.keepalive_time_ms": 60_000,
    "grpc.keepalive_permit_without_calls": False,
    "grpc.http2.bdp_probe": 0,
}
# words with which Milvus says the request itself is wrong (everything else from a live server is its failure)
_INPUT_WORDS: Final = (
    "invalid",
    "illegal",
    "must be",
    "should be",
    "exceed",
    "out of range",
    "not supported",
    "unsupported",
    "param",
    "syntax",
    "mismatch",
    "wrong",
)
_T = TypeVar("_T")
_LITE_LOCK = threading.Lock()
_LITE_REFS: dict[str, int] = {}


def _pymilvus() -> Any:
    import pymilvus

    # rag_eval reports every Milvus error itself; pymilvus would also log each failed RPC with a traceback.
    for name in ("pymilvus", "pymilvus.milvus_client", "milvus_lite"):
        logging.getLogger(name).setLevel(logging.CRITICAL)
    return pymilvus


class _Connection:
    """One client with retries, deadlines and error translation at the boundary."""

    def __init__(self, uri: str, *, token_env: str, timeout: float, retries: int, call_timeout: float) -> None:
        self.uri = uri
        self.shown = redact_uri(uri)
        self.kind: Literal["lite", "server"] = "server" if is_server_uri(uri) else "lite"
        self.timeout = timeout
        self.retries = max(0, retries)
        self.call_timeout = call_timeout
        self._lite_key: str | None = None
        self._client: Any = self._open_lite() if self.kind == "lite" else self._open_server(token_env)

    @property
    def client(self) -> Any:
        if self._client is None:
            raise SearchUnavailableError(
                f"the connection to Milvus at {self.shown} is closed: open a new one", uri=self.shown
            )
        return self._client

    def _open_server(self, token_env: str) -> Any:
        pm = _pymilvus()
        token = os.environ.get(token_env, "")
        return self._retrying(
            "connect",
            # dedicated: pymilvus shares one channel per URI and token between clients, made with the options of
            # whichever client came first in the process; ours must hold _GRPC_OPTIONS whatever came before
            lambda t: pm.MilvusClient(
                uri=self.uri, token=token, timeout=t, grpc_options=dict(_GRPC_OPTIONS), dedicated=True
            ),
            budget=self.timeout,
        )

    def _open_lite(self) -> Any:
        pm = _pymilvus()
        from milvus_lite.server_manager import server_manager_instance as manager

        path = Path(self.uri).expanduser().absolute()
        path.parent.mkdir(parents=True, exist_ok=True)
        key = str(path)
        reasons: list[str] = []
        handler = _Capture(reasons)
        lite_logger = logging.getLogger("milvus_lite.server_manager")
        with _LITE_LOCK:
            lite_logger.addHandler(handler)
            try:
                local = manager.start_and_get_uri(key)
            finally:
                lite_logger.removeHandler(handler)
            if local is None:
                why = reasons[0] if reasons else "it could not be opened"
                raise SearchUnavailableError(
                    f"Milvus Lite could not open {key} ({why}): only one process at a time can use a Lite file, "
                    "close the other one or use a Milvus server",
                    uri=key,
                )
            _LITE_REFS[key] = _LITE_REFS.get(key, 0) + 1
            self._lite_key = key
        try:
            return pm.MilvusClient(uri=local, timeout=self.timeout)
        except Exception as exc:
            self._release_lite()
            raise (self.translate(exc, "connect") or exc) from exc

    def _release_lite(self) -> None:
        key, self._lite_key = self._lite_key, None
        if key is None:
            return
        with _LITE_LOCK:
            _LITE_REFS[key] -= 1
            if _LITE_REFS[key] <= 0:
                del _LITE_REFS[key]
                from milvus_lite.server_manager import server_manager_instance as manager

                manager.release_server(key)  # frees the file lock for other processes

    def close(self) -> None:
        client, self._client = self._client, None
        if client is not None:
            client.close()
        self._release_lite()

    def call(
        self,
        what: str,
        fn: Callable[..., _T],
        /,
        *args: Any,
        collection: str | None = None,
        budget: float | None = None,
        retry: bool = True,
        **kwargs: Any,
    ) -> _T:
        """``fn(*args, timeout=..., **kwargs)`` with transient failures retried and errors translated."""
        return self._retrying(
            what,
            lambda t: fn(*args, timeout=t, **kwargs),
            collection=collection,
            budget=self.call_timeout if budget is None else budget,
            retry=retry,
        )

    def _retrying(
        self,
        what: str,
        attempt: Callable[[float], _T],
        *,
        budget: float,
        collection: str | None = None,
        retry: bool = True,
    ) -> _T:
        deadline = time.monotonic() + budget
        backoff, tries = 0.25, 0
        while True:
            remaining = max(deadline - time.monotonic(), 0.05)
            try:
                return attempt(remaining)
            except RagEvalError:
                raise
            except Exception as exc:
                timed_out = time.monotonic() >= deadline - 0.1
                error = self.translate(exc, what, collection=collection, budget=budget if timed_out else None)
                if error is None:
                    raise
                tries += 1
                transient = isinstance(error, SearchUnavailableError)
                if not (retry and transient and tries <= self.retries and deadline - time.monotonic() > backoff):
                    raise error from exc
                time.sleep(backoff)
                backoff *= 2

    def translate(
        self, exc: BaseException, what: str, *, collection: str | None = None, budget: float | None = None
    ) -> RagEvalError | None:
        """The project's error for a pymilvus or gRPC exception (None: not a Milvus error).

        ``budget`` is the time that ran out, when it did; otherwise the server refused to talk at once.
        """
        import grpc

        pm = _pymilvus()
        uri, name = self.shown, collection or "?"
        why = f"did not answer within {budget:g} s" if budget is not None else "is not reachable"
        unavailable = SearchUnavailableError(
            f"Milvus at {uri} {why} ({what}): start the server or check --milvus-uri", uri=uri
        )
        if isinstance(exc, grpc.RpcError):
            code = exc.code() if callable(getattr(exc, "code", None)) else None
            if code == grpc.StatusCode.UNIMPLEMENTED:
                return UnsupportedFeatureError(
                    f"Milvus at {uri} does not implement {what}: use a backend that offers it "
                    "(Milvus Lite, or a server >= 2.5) or another search mode",
                    feature=what,
                    uri=uri,
                )
            if code in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED, None):
                return unavailable
            return SearchUnavailableError(
                f"Milvus at {uri} failed {what} ({code.name}): check the server's health and logs", uri=uri
            )
        if not isinstance(exc, pm.MilvusException):
            return None
        code, message = exc.code, one_line(getattr(exc, "message", exc))
        low = message.lower()
        if isinstance(exc, pm.exceptions.ConnectionConfigException):
            return SearchUnavailableError(f"cannot open Milvus at {uri}: {message}: check --milvus-uri", uri=uri)
        if code == 2 or "fail connecting" in low or "retry timeout" in low or "retry run out" in low:
            return unavailable
        if code == 100 or "collection not found" in low or "does not exist" in low or "can't find collection" in low:
            return CollectionNotFoundError(
                f"collection {name!r} does not exist in Milvus at {uri}: ingest the data set first or check "
                "the collection name",
                collection=name,
                uri=uri,
            )
        if code == 101 or "not loaded" in low or "state 'released'" in low:
            return CollectionNotLoadedError(
                f"collection {name!r} in Milvus at {uri} is not loaded: load it (rag_eval loads on open "
                "unless told not to) or re-run ingest",
                collection=name,
                uri=uri,
            )
        if code == 700 or "index not found" in low:
            return CollectionNotLoadedError(
                f"collection {name!r} in Milvus at {uri} has no index: finish ingest (finalize) first",
                collection=name,
                uri=uri,
            )
        if "cannot parse expression" in low or (code == 6 and "column" in low):
            return FilterError(f"Milvus at {uri} refused the filter ({message}): fix the filter value", uri=uri)
        if "sizeof" in low or ("dim" in low and ("mismatch" in low or "should divide" in low or "expected dim" in low)):
            return DimensionMismatchError(
                f"vector dimension does not match collection {name!r} ({message}): embed with the model used at ingest",
                uri=uri,
            )
        if code == 1100 or any(word in low for word in _INPUT_WORDS):
            return SearchRequestError(f"Milvus at {uri} refused {what} on {name!r}: {message}", uri=uri)
        # anything else from a server that answered is the server's failure, not the user's input
        return SearchBackendError(
            f"Milvus at {uri} failed {what} on {name!r}: {message}: check the server's health and logs", uri=uri
        )


class _Capture(logging.Handler):
    def __init__(self, sink: list[str]) -> None:
        super().__init__(logging.DEBUG)
        self.sink = sink

    def emit(self, record: logging.LogRecord) -> None:
        exc = record.exc_info[1] if record.exc_info else None
        self.sink.append(one_line(exc if exc is not None else record.getMessage(), 160))


@dataclass(frozen=True, slots=True)
class _Collection:
    name: str
    dim: int
    metric: str | None
    index_type: str | None
    full_text: bool
    properties: Mapping[str, str]


def _describe(conn: _Connection, name: str) -> _Collection:
    desc = conn.call("describe collection", conn.client.describe_collection, name, collection=name, budget=conn.timeout)
    fields = {f["name"]: f for f in desc.get("fields", [])}
    if VECTOR_FIELD not in fields:
        raise SearchRequestError(
            f"collection {name!r} at {conn.shown} has no {VECTOR_FIELD!r} field: it was "
            "not created by rag_eval, ingest into a new collection",
            uri=conn.shown,
        )
    dim = int(fields[VECTOR_FIELD].get("params", {}).get("dim", 0))
    functions = desc.get("functions") or []
    full_text = SPARSE_FIELD in fields and any(SPARSE_FIELD in f.get("output_field_names", ()) for f in functions)
    metric = index_type = None
    indexes = conn.call(
        "list indexes", conn.client.list_indexes, name, field_name=VECTOR_FIELD, collection=name, budget=conn.timeout
    )
    if indexes:
        info = conn.call(
            "describe index", conn.client.describe_index, name, indexes[0], collection=name, budget=conn.timeout
        )
        metric, index_type = info.get("metric_type"), info.get("index_type")
    props = {str(k): str(v) for k, v in (desc.get("properties") or {}).items()}
    return _Collection(name, dim, metric, index_type, full_text, props)


def _count(conn: _Connection, name: str, consistency: str | None = "Strong") -> int:
    extra: dict[str, Any] = {"consistency_level": consistency} if consistency else {}
    rows = conn.call("count", conn.client.query, name, filter="", output_fields=["count(*)"], collection=name, **extra)
    return int(rows[0]["count(*)"])


def _ensure_loaded(conn: _Connection, name: str, load: bool) -> bool:
    """Load the collection unless it is loaded; True when it had to be loaded now."""
    state = conn.call("get load state", conn.client.get_load_state, name, collection=name, budget=conn.timeout)
    if getattr(state.get("state"), "name", None) == "Loaded":
        return False
    if not load:
        raise CollectionNotLoadedError(
            f"collection {name!r} in Milvus at {conn.shown} is not loaded: load it or open it with load=True",
            collection=name,
            uri=conn.shown,
        )
    conn.call(
        "load collection", conn.client.load_collection, name, collection=name, budget=max(conn.call_timeout, 600.0)
    )
    return True


def _settle(conn: _Connection, name: str, index: IndexSpec) -> None:
    """Wait until a freshly loaded server answers searches the same way twice in a row.

    Right after a load, a server can still hold rows both in the sealed, indexed segment and in the stream
    it loaded from, and answers the first searches partly by brute force; a run started then gets other
    hits than a run a moment later. Probe with stored vectors until three consecutive answers agree.
    """
    rows = conn.call(
        "query",
        conn.client.query,
        name,
        filter="vector_id >= 0",
        output_fields=[VECTOR_FIELD],
        limit=32,
        collection=name,
    )
    probe = [list(r[VECTOR_FIELD]) for r in rows]
    if not probe:
        return
    coll = _describe(conn, name)
    params = _search_params(coll, index, 50)
    deadline = time.monotonic() + _SETTLE_WAIT_S
    seen: list[list[list[Any]]] = []
    while time.monotonic() < deadline:
        answer = conn.call(
            "search",
            conn.client.search,
            name,
            data=probe,
            anns_field=VECTOR_FIELD,
            limit=50,
            search_params=params,
            collection=name,
        )
        seen.append([[h["id"] for h in hits] for hits in answer])
        if len(seen) >= 3 and seen[-1] == seen[-2] == seen[-3]:
            return
        time.sleep(0.3)


def _wait_handed_over(conn: _Connection, name: str, rows: int) -> None:
    """Wait until the query nodes serve exactly the stored segments, sealed, holding every row.

    After a compaction the query nodes swap the merged segment in for its sources in the background; until
    then searches may be answered from the sources (other HNSW graphs, other hits), and agreeing probes do
    not show that the swap is over. Bounded: a server that reports segments another way (another version,
    a cluster with replicas) is left to the settle probe after ``_SETTLE_WAIT_S``.
    """
    deadline = time.monotonic() + _SETTLE_WAIT_S
    while time.monotonic() < deadline:
        try:
            loaded = conn.call("list loaded segments", conn.client.list_loaded_segments, name, collection=name)
            stored = conn.call("list segments", conn.client.list_persistent_segments, name, collection=name)
        except (SearchBackendError, SearchRequestError, UnsupportedFeatureError):
            return  # a server without these calls: the settle probe alone decides
        kept = {s.segment_id for s in stored if _state(s) in ("Flushed", "Sealed")}
        served = {s.segment_id for s in loaded}
        # no index name is asked for: a server builds none for a segment under its size threshold (it is
        # searched brute force for good), and _wait_indexed has already waited for every index it builds
        sealed = all(_state(s) == "Sealed" for s in loaded)
        if served == kept and sealed and sum(s.num_rows for s in loaded) >= rows:
            return
        time.sleep(0.3)


def _state(segment: Any) -> str:
    """A segment's state by name (pymilvus gives an enum, some versions a string)."""
    state = segment.state
    return str(getattr(state, "name", state))


def _search_params(coll: _Collection, index: IndexSpec, limit: int) -> dict[str, Any]:
    params = dict(index.search_params)
    if (coll.index_type or "").upper().startswith("HNSW"):
        params["ef"] = max(int(params.get("ef", 0)), limit)
    return {"metric_type": coll.metric or index.metric, "params": params}


def _probe_grouping(conn: _Connection, coll: _Collection, index: IndexSpec) -> bool:
    """Whether ``group_by_field`` is honoured: one document with two chunks, asked for one hit per group.

    Without any multi-chunk document grouping cannot change a result; the per-result check still applies.
    """
    rows = conn.call(
        "query",
        conn.client.query,
        coll.name,
        filter=f"doc_id != {milvus_string_literal('')}",
        output_fields=["doc_id"],
        limit=2000,
        collection=coll.name,
    )
    repeated = [d for d, n in Counter(r["doc_id"] for r in rows).items() if n >= 2]
    if not repeated:
        return True
    hits = conn.call(
        "grouping search",
        conn.client.search,
        coll.name,
        data=[[1.0] * coll.dim],
        filter=f"doc_id == {milvus_string_literal(repeated[0])}",
        limit=2,
        group_by_field="doc_id",
        group_size=1,
        output_fields=["doc_id"],
        search_params=_search_params(coll, index, 2),
        collection=coll.name,
    )
    return len(hits[0]) <= 1


def _probe_hybrid(conn: _Connection, coll: _Collection, index: IndexSpec) -> bool:
    """Whether the backend implements hybrid_search at all (the 2.3 server answers UNIMPLEMENTED)."""
    pm = _pymilvus()
    req = pm.AnnSearchRequest(
        data=[[1.0] * coll.dim], anns_field=VECTOR_FIELD, param=_search_params(coll, index, 1), limit=1
    )
    try:
        conn.call(
            "hybrid search",
            conn.client.hybrid_search,
            coll.name,
            [req],
            pm.RRFRanker(60),
            limit=1,
            collection=coll.name,
            retry=False,
        )
    except UnsupportedFeatureError:
        return False
    return True


def _probe_templating(conn: _Connection, coll: _Collection) -> bool:
    """Whether the backend honours ``filter_params`` (neither Lite 3.2 nor the 2.3 server does)."""
    try:
        conn.call(
            "templated query",
            conn.client.query,
            coll.name,
            filter="category == {c}",
            filter_params={"c": "\x00probe"},
            output_fields=["vector_id"],
            limit=1,
            collection=coll.name,
            retry=False,
        )
    except (FilterError, SearchRequestError):
        return False
    return True


def _opt_str(value: Any) -> str | None:
    return None if value is None or value == MISSING_STR else str(value)


def _opt_int(value: Any) -> int | None:
    return None if value is None or int(value) == MISSING_INT else int(value)


_new_hit = fast_constructor(KnowledgeSearchHit)


def _to_hit(raw: Any, negate: bool, channel: str) -> KnowledgeSearchHit:
    # a pymilvus hit is a dict: plain dict access skips its Python-level overrides (a third of the time)
    entity = dict.get(raw, "entity") or {}
    get = entity.get
    vid = get("vector_id")
    vid = str(vid if vid is not None else getattr(raw, "pk", None))
    distance = float(dict.__getitem__(raw, "distance"))
    score = -distance if negate else distance
    return _new_hit(
        vid,  # id
        str(get("content", "")),
        score,
        {channel: score},
        {"char_start": _opt_int(get("char_start")), "char_end": _opt_int(get("char_end"))},
        _opt_str(get("doc_id")),
        _opt_int(get("chunk_index")),
        vid,  # vector_id
        _opt_str(get("source")),
        _opt_str(get("title")),
        _opt_str(get("category")),
    )


def _as_list(vector: Sequence[float]) -> list[float]:
    if type(vector) is list:
        return vector  # already what pymilvus sends
    tolist = getattr(vector, "tolist", None)
    return list(tolist()) if callable(tolist) else [float(x) for x in vector]


def _tie_may_continue(hits: Sequence[KnowledgeSearchHit], top_k: int, width: int) -> bool:
    """True when the hits tied with the ``top_k``-th run to the end of a full page of ``width``:
    rows with that score may lie beyond it, so the cut-off cannot be placed by the total order yet."""
    if len(hits) < width or len(hits) <= top_k:
        return False
    return hit_order(hits[top_k - 1])[:2] == hit_order(hits[-1])[:2]  # the same score (NaN: the same too)


def _manifest_json(manifest: Mapping[str, Any], uri: str) -> str:
    text = json.dumps(dict(manifest), sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    if len(text.encode("utf-8")) > MAX_MANIFEST_BYTES:
        raise SearchRequestError(
            f"the manifest is {len(text.encode('utf-8')):,} bytes, over the "
            f"{MAX_MANIFEST_BYTES:,} Milvus can keep with a collection: store large data "
            "beside it and put its checksum in the manifest",
            uri=uri,
        )
    return text


class MilvusStore(PortBase):
    """Creates, fills and describes one rag_eval collection (Lite path or server URI).

    >>> import tempfile
    >>> rows = [ChunkRow(vector_id=i + 1, doc_id="lag", chunk_index=i, content=text, title="Replica lag",
    ...                  source="kb/lag.md", category="db", start=None, end=None, vector=vector)
    ...         for i, (text, vector) in enumerate([("Check the SQL thread.", [1.0, 0.0]),
    ...                                              ("Raise the relay log limit.", [0.6, 0.8])])]
    >>> with tempfile.TemporaryDirectory() as tmp, MilvusStore(f"{tmp}/milvus.db", "kb") as store:
    ...     store.create(dim=2, index=IndexSpec.flat(), manifest={"dataset": "incident-kb"})
    ...     inserted = store.insert(rows, batch_size=1)
    ...     store.finalize()
    ...     (inserted, store.count(), store.read_manifest())
    (2, 2, {'dataset': 'incident-kb'})
    """

    def __init__(
        self,
        uri: str,
        collection: str,
        *,
        token_env: str = DEFAULT_TOKEN_ENV,
        timeout: float = DEFAULT_TIMEOUT,
        retries: int = 3,
        call_timeout: float = DEFAULT_CALL_TIMEOUT,
    ) -> None:
        self.collection = collection
        self._conn = _Connection(uri, token_env=token_env, timeout=timeout, retries=retries, call_timeout=call_timeout)
        self._dim: int | None = None
        self._index: IndexSpec | None = None
        self._inserted = 0

    def close(self) -> None:
        self._conn.close()

    def backend(self) -> BackendInfo:
        """Kind of backend, its version string and the pymilvus version."""
        conn = self._conn
        version = conn.call("get server version", conn.client.get_server_version, budget=conn.timeout)
        return BackendInfo(kind=conn.kind, server_version=str(version), pymilvus_version=_pymilvus().__version__)

    def exists(self) -> bool:
        """Whether the collection exists."""
        conn = self._conn
        return bool(conn.call("has collection", conn.client.has_collection, self.collection, budget=conn.timeout))

    def read_manifest(self) -> dict[str, Any] | None:
        """The JSON manifest stored with the collection; None when the collection or manifest is absent."""
        if not self.exists():
            return None
        try:
            value = json.loads(_describe(self._conn, self.collection).properties.get(MANIFEST_PROPERTY, ""))
        except ValueError:
            return None
        return value if isinstance(value, dict) else None

    def write_manifest(self, manifest: Mapping[str, Any]) -> None:
        """Replace the stored manifest (e.g. to add the row count once ingest is done)."""
        conn, text = self._conn, _manifest_json(manifest, self._conn.shown)
        conn.call(
            "alter collection properties",
            conn.client.alter_collection_properties,
            self.collection,
            properties={MANIFEST_PROPERTY: text},
            collection=self.collection,
            budget=conn.timeout,
        )

    def create(self, *, dim: int, index: IndexSpec, manifest: Mapping[str, Any], full_text: bool = False) -> None:
        """(Re)create the collection, dropping an existing one; ``full_text`` adds BM25 for HYBRID search."""
        pm, conn, name = _pymilvus(), self._conn, self.collection
        text = _manifest_json(manifest, conn.shown)
        self.drop()
        dt = pm.DataType
        schema = pm.MilvusClient.create_schema(auto_id=False, enable_dynamic_field=False)
        schema.add_field("vector_id", dt.INT64, is_primary=True)
        for fname in ("doc_id", "content", "title", "source", "category"):
            analyzer = {"enable_analyzer": True} if full_text and fname == "content" else {}
            schema.add_field(fname, dt.VARCHAR, max_length=MAX_VARCHAR_BYTES, **analyzer)
        for fname in ("chunk_index", "char_start", "char_end"):
            schema.add_field(fname, dt.INT64)
        schema.add_field(VECTOR_FIELD, dt.FLOAT_VECTOR, dim=dim)
        if full_text:
            schema.add_field(SPARSE_FIELD, dt.SPARSE_FLOAT_VECTOR)
            schema.add_function(
                pm.Function(
                    name="content_bm25",
                    function_type=pm.FunctionType.BM25,
                    input_field_names=["content"],
                    output_field_names=[SPARSE_FIELD],
                )
            )
        props = {MANIFEST_PROPERTY: text, INDEX_PROPERTY: json.dumps(index.to_json(), sort_keys=True)}
        conn.call(
            "create collection",
            conn.client.create_collection,
            name,
            schema=schema,
            properties=props,
            collection=name,
            retry=False,
        )
        if full_text and not _describe(conn, name).full_text:
            self.drop()  # the 2.3 server silently drops the BM25 function and keeps an unusable sparse field
            raise UnsupportedFeatureError(
                f"Milvus at {conn.shown} ({self.backend().server_version}) has no BM25 full-text functions: "
                "create the collection without full_text, or use Milvus Lite or a server >= 2.5",
                feature="full_text",
                uri=conn.shown,
            )
        self._dim, self._index, self._inserted = dim, index, 0

    def insert(
        self, rows: Iterable[ChunkRow], *, batch_size: int = 2000, on_batch: Callable[[int], None] | None = None
    ) -> int:
        """Insert in batches (by rows and by bytes), calling ``on_batch(n_rows)`` after each; returns the total."""
        conn = self._conn
        dim = self._dim if self._dim is not None else _describe(conn, self.collection).dim
        self._dim = dim
        total, batch, size = 0, list[dict[str, Any]](), 0

        def send() -> None:
            nonlocal total, batch, size
            conn.call("insert", conn.client.insert, self.collection, batch, collection=self.collection, retry=False)
            total += len(batch)
            self._inserted += len(batch)
            if on_batch is not None:
                on_batch(len(batch))
            batch, size = [], 0

        for row in rows:
            record, nbytes = self._record(row, dim)
            if batch and (len(batch) >= batch_size or size + nbytes > MAX_BATCH_BYTES):
                send()
            batch.append(record)
            size += nbytes
        if batch:
            send()
        return total

    def _record(self, row: ChunkRow, dim: int) -> tuple[dict[str, Any], int]:
        tolist = getattr(row.vector, "tolist", None)
        vector = tolist() if callable(tolist) else [float(x) for x in row.vector]
        if len(vector) != dim:
            raise DimensionMismatchError(
                f"row {row.vector_id} has a {len(vector)}-d vector but collection "
                f"{self.collection!r} holds {dim}-d ones: embed with one model",
                uri=self._conn.shown,
            )
        texts = {
            "doc_id": row.doc_id or MISSING_STR,
            "content": row.content,
            "title": row.title or MISSING_STR,
            "source": row.source or MISSING_STR,
            "category": row.category or MISSING_STR,
        }
        nbytes = dim * 4 + 64
        for fname, text in texts.items():
            size = len(text.encode("utf-8"))
            if size > MAX_VARCHAR_BYTES:
                raise SearchRequestError(
                    f"row {row.vector_id}: {fname} is {size:,} bytes, over Milvus's "
                    f"{MAX_VARCHAR_BYTES:,}: chunk the document smaller",
                    uri=self._conn.shown,
                )
            nbytes += size
        record: dict[str, Any] = {"vector_id": int(row.vector_id), VECTOR_FIELD: vector, **texts}
        for fname, value in (("chunk_index", row.chunk_index), ("char_start", row.start), ("char_end", row.end)):
            record[fname] = MISSING_INT if value is None else int(value)
        return record, nbytes

    def finalize(self) -> None:
        """Flush, build the index and wait until it covers every row, load, and wait until every row is
        visible to searches: no query is answered from an unindexed segment, so two runs give the same hits."""
        conn, name = self._conn, self.collection
        conn.call("flush", conn.client.flush, name, collection=name)
        if conn.kind == "server" and self._segments() > 1:
            self._compact()  # one segment has nothing to merge (and no deletes to purge: rows are only inserted)
        coll = _describe(conn, name)
        index = self._index or _stored_index(coll)
        if coll.index_type is None:
            params = _pymilvus().MilvusClient.prepare_index_params()
            params.add_index(
                VECTOR_FIELD, index_type=index.index_type, metric_type=index.metric, params=dict(index.build_params)
            )
            if coll.full_text:
                params.add_index(SPARSE_FIELD, index_type="SPARSE_INVERTED_INDEX", metric_type="BM25")
            # create_index needs an int timeout: a float one never fires
            conn.call(
                "create index",
                lambda timeout: conn.client.create_index(name, params, timeout=int(timeout)),
                collection=name,
                budget=max(conn.call_timeout, 600.0),
                retry=False,
            )
        self._wait_indexed()
        _ensure_loaded(conn, name, load=True)
        self._wait_visible()
        if conn.kind == "server":
            _wait_handed_over(conn, name, self._inserted)
            _settle(conn, name, self._index or _stored_index(_describe(conn, name)))

    def _segments(self) -> int:
        """The collection's stored segments (all of them when the server cannot list them)."""
        conn, name = self._conn, self.collection
        try:
            stored = conn.call("list segments", conn.client.list_persistent_segments, name, collection=name)
        except (SearchBackendError, SearchRequestError, UnsupportedFeatureError):
            return 2  # unknown: compact, as before
        return sum(1 for s in stored if _state(s) in ("Flushed", "Sealed"))

    def _compact(self) -> None:
        # A server merges the small segments of a fresh collection in the background, and re-indexes them;
        # searches before and after that answer from different HNSW graphs. Merge them now, and wait.
        conn, name = self._conn, self.collection
        job = conn.call("compact", conn.client.compact, name, collection=name)
        deadline = time.monotonic() + _INDEX_WAIT_S
        while conn.call("compaction state", conn.client.get_compaction_state, job, collection=name) != "Completed":
            if time.monotonic() > deadline:
                raise SearchUnavailableError(
                    f"Milvus at {conn.shown} did not finish compacting {name!r} in {_INDEX_WAIT_S:g} s: "
                    "check the data nodes, then ingest again",
                    uri=conn.shown,
                )
            time.sleep(0.2)

    def _wait_indexed(self) -> None:
        # A server builds indexes asynchronously; a segment searched before its index is ready is searched
        # brute force, with other scores than after the hand-off. Lite builds at once and reports no progress.
        conn, name = self._conn, self.collection
        deadline = time.monotonic() + _INDEX_WAIT_S
        for index_name in conn.call("list indexes", conn.client.list_indexes, name, collection=name):
            while True:
                info = conn.call("describe index", conn.client.describe_index, name, index_name, collection=name)
                if "indexed_rows" not in info:
                    break
                total, done = int(info.get("total_rows", 0)), int(info.get("indexed_rows", 0))
                pending, state = int(info.get("pending_index_rows", 0)), str(info.get("state", "Finished"))
                if state == "Failed":
                    raise SearchBackendError(
                        f"Milvus at {conn.shown} failed to build index {index_name!r} of {name!r} "
                        f"({one_line(info.get('index_state_fail_reason', ''))}): check the index parameters",
                        uri=conn.shown,
                    )
                if done >= max(total, self._inserted) and pending == 0 and state == "Finished":
                    break
                if time.monotonic() > deadline:
                    raise SearchUnavailableError(
                        f"Milvus at {conn.shown} indexed {done:,} of {max(total, self._inserted):,} rows of "
                        f"{name!r} in {_INDEX_WAIT_S:g} s: check the index nodes, then ingest again",
                        uri=conn.shown,
                    )
                time.sleep(0.2)

    def _wait_visible(self) -> None:
        # The server searches with Bounded consistency: wait until that view holds every row too.
        conn, name = self._conn, self.collection
        deadline = time.monotonic() + _VISIBLE_WAIT_S
        while True:
            strong = _count(conn, name, "Strong")
            bounded = _count(conn, name, None) if conn.kind == "server" else strong
            if strong >= self._inserted and bounded == strong:
                return
            if time.monotonic() > deadline:
                raise SearchUnavailableError(
                    f"Milvus at {conn.shown} shows {bounded:,} of {max(strong, self._inserted):,} rows of "
                    f"{name!r} after {_VISIBLE_WAIT_S:g} s: check the server's health, then finalize again",
                    uri=conn.shown,
                )
            time.sleep(0.2)

    def count(self) -> int:
        """Rows in the collection (Strong consistency; flushes statistics if the collection is not loaded)."""
        conn, name = self._conn, self.collection
        try:
            return _count(conn, name)
        except CollectionNotLoadedError:
            conn.call("flush", conn.client.flush, name, collection=name)
            stats = conn.call("collection stats", conn.client.get_collection_stats, name, collection=name)
            return int(stats["row_count"])

    def features(self) -> BackendFeatures:
        """GROUPED and HYBRID as this backend and collection really perform them (probed)."""
        coll = _describe(self._conn, self.collection)
        _ensure_loaded(self._conn, self.collection, load=True)
        index = self._index or _stored_index(coll)
        hybrid = coll.full_text and _probe_hybrid(self._conn, coll, index)
        return BackendFeatures(grouping=_probe_grouping(self._conn, coll, index), hybrid=hybrid)

    def drop(self) -> None:
        """Drop the collection if it exists."""
        conn = self._conn
        if self.exists():
            conn.call("drop collection", conn.client.drop_collection, self.collection, collection=self.collection)


def _stored_index(coll: _Collection) -> IndexSpec:
    """The IndexSpec recorded at create(), else one matching the collection's index with default parameters."""
    try:
        return IndexSpec(**json.loads(coll.properties[INDEX_PROPERTY]))
    except (KeyError, ValueError, TypeError):
        if coll.index_type is None or coll.metric is None:
            return IndexSpec()
        return IndexSpec(index_type=coll.index_type, metric=coll.metric, build_params={}, search_params={})


Encoder = Callable[[Sequence[str]], Sequence[Sequence[float]]]
_GroupKey = tuple[SearchMode, int, str | None, int]


class MilvusSearch(PortBase):
    """KnowledgeSearchPort over a rag_eval collection: DENSE, GROUPED and HYBRID where really supported.

    ``encoder`` turns query texts into vectors. Opening connects, checks the collection and its index
    against ``index``, and loads it (unless ``load=False``); errors are the project's own.

    >>> import tempfile
    >>> tmp = tempfile.TemporaryDirectory()
    >>> with MilvusStore(f"{tmp.name}/milvus.db", "kb") as store:
    ...     store.create(dim=2, index=IndexSpec.flat(), manifest={})
    ...     inserted = store.insert(
    ...         ChunkRow(vector_id=i + 1, doc_id="lag", chunk_index=i, content=f"chunk {i}", title="", source="",
    ...                  category="db", start=None, end=None, vector=vector)
    ...         for i, vector in enumerate([[1.0, 0.0], [0.6, 0.8]]))
    ...     store.finalize()
    >>> with MilvusSearch(f"{tmp.name}/milvus.db", "kb", encoder=lambda texts: [[0.8, 0.6] for _ in texts]) as port:
    ...     hits = port.search(KnowledgeSearchRequest(query="replica lag", top_k=10))
    >>> [(h.id, h.doc_id, h.chunk_index, h.source, round(h.score, 2)) for h in hits]
    [('2', 'lag', 1, None, 0.96), ('1', 'lag', 0, None, 0.8)]
    >>> tmp.cleanup()
    """

    def __init__(
        self,
        uri: str,
        collection: str,
        encoder: Encoder,
        *,
        index: IndexSpec | None = None,
        token_env: str = DEFAULT_TOKEN_ENV,
        timeout: float = DEFAULT_TIMEOUT,
        retries: int = 3,
        call_timeout: float = DEFAULT_CALL_TIMEOUT,
        load: bool = True,
    ) -> None:
        self.collection = collection
        self._encoder = encoder
        self._conn = _Connection(uri, token_env=token_env, timeout=timeout, retries=retries, call_timeout=call_timeout)
        try:
            self._coll = _describe(self._conn, collection)
            self._index = index if index is not None else _stored_index(self._coll)
            self._check_index()
            if _ensure_loaded(self._conn, collection, load) and self._conn.kind == "server":
                _settle(self._conn, collection, self._index)
        except BaseException:
            self._conn.close()
            raise
        self._grouping: bool | None = None
        self._hybrid_rpc: bool | None = None
        self._templating: bool | None = None

    def _check_index(self) -> None:
        coll, spec = self._coll, self._index
        if coll.index_type is None:
            raise CollectionNotLoadedError(
                f"collection {coll.name!r} in Milvus at {self._conn.shown} has no "
                "index: finish ingest (finalize) first",
                collection=coll.name,
                uri=self._conn.shown,
            )
        problems = [
            ConfigProblem(
                key=f"index.{attr}",
                message=f"collection {coll.name!r} was built with {built}, not "
                f"{wanted}: use the index of the ingest manifest",
            )
            for attr, built, wanted in (
                ("metric", coll.metric, spec.metric),
                ("index_type", coll.index_type, spec.index_type),
            )
            if built is not None and str(built).upper() != wanted.upper() and wanted.upper() != "AUTOINDEX"
        ]
        if problems:
            raise ConfigError(problems)

    def close(self) -> None:
        self._conn.close()

    def features(self) -> BackendFeatures:
        """GROUPED and HYBRID as this backend and collection really perform them (probed once, cached)."""
        return BackendFeatures(grouping=self._grouping_honoured(), hybrid=self._hybrid_available())

    def search(self, request: KnowledgeSearchRequest) -> tuple[KnowledgeSearchHit, ...]:
        """Hits for ``request.query``, best first, at most ``request.top_k``."""
        return self.search_batch([request])[0]

    def search_batch(self, requests: Sequence[KnowledgeSearchRequest]) -> list[tuple[KnowledgeSearchHit, ...]]:
        """One result per request, in order; many query vectors per call (requests grouped by mode,
        width, filter and group size; at most 16,384 vectors per call)."""
        groups: dict[_GroupKey, list[int]] = {}
        for i, r in enumerate(requests):
            if r.top_k > MAX_TOPK:
                raise SearchRequestError(
                    f"top_k {r.top_k:,} is over Milvus's limit of {MAX_TOPK:,}: ask for fewer hits",
                    uri=self._conn.shown,
                )
            size = r.group_size if r.mode is SearchMode.GROUPED else 1
            groups.setdefault((r.mode, r.top_k, r.category_filter, size), []).append(i)
        results: list[tuple[KnowledgeSearchHit, ...]] = [() for _ in requests]
        for key, positions in groups.items():
            for start in range(0, len(positions), MAX_NQ):
                chunk = positions[start : start + MAX_NQ]
                for pos, hits in zip(chunk, self._run(key, [requests[p].query for p in chunk]), strict=True):
                    results[pos] = hits
        return results

    def _run(self, key: _GroupKey, queries: list[str]) -> list[tuple[KnowledgeSearchHit, ...]]:
        mode, top_k, category, group_size = key
        if mode is SearchMode.HYBRID and not self._hybrid_available():
            raise UnsupportedFeatureError(self._hybrid_refusal(), feature="hybrid", uri=self._conn.shown)
        if mode is SearchMode.GROUPED and not self._grouping_honoured():
            raise UnsupportedFeatureError(self._grouping_refusal(), feature="grouping", uri=self._conn.shown)
        vectors = self._encode(queries)
        expr, params = self._filter(category)
        # DENSE asks for a few hits more than wanted, to see whether equal scores straddle the cut-off;
        # a few, not one: re-ingested copies tie in pairs, and every page that ends in a tie costs a call
        exact = mode is SearchMode.DENSE
        width = min(top_k + 2 + top_k // 16, MAX_TOPK) if exact else top_k
        raws = self._raw_search(mode, vectors, queries, width, expr, params, group_size)
        hits = [self._ordered(raw, mode, category) for raw in raws]
        tied = list(range(len(queries)))
        while exact and width < MAX_TOPK:
            # the queries whose tie at the cut-off may go on: searched again, together, twice as wide
            tied = [i for i in tied if _tie_may_continue(hits[i], top_k, width)]
            if not tied:
                break
            width = min(width * 2, MAX_TOPK)
            raws = self._raw_search(
                mode, [vectors[i] for i in tied], [queries[i] for i in tied], width, expr, params, group_size
            )
            for i, raw in zip(tied, raws, strict=True):
                hits[i] = self._ordered(raw, mode, category)
        out = []
        for found in hits:
            if mode is SearchMode.GROUPED:
                self._check_grouped(found[:top_k], group_size)
            out.append(tuple(found[:top_k]))
        return out

    def _raw_search(
        self,
        mode: SearchMode,
        vectors: list[list[float]],
        queries: list[str],
        limit: int,
        expr: str,
        params: dict[str, str] | None,
        group_size: int,
    ) -> Any:
        if mode is SearchMode.HYBRID:
            return self._hybrid_search(vectors, queries, limit, expr, params)
        extra: dict[str, Any] = {"filter_params": params} if params else {}
        if mode is SearchMode.GROUPED:
            extra.update(group_by_field="doc_id", group_size=group_size, strict_group_size=False)
        return self._conn.call(
            "search",
            self._conn.client.search,
            self.collection,
            data=vectors,
            anns_field=VECTOR_FIELD,
            limit=limit,
            filter=expr,
            output_fields=list(OUTPUT_FIELDS),
            collection=self.collection,
            search_params=_search_params(self._coll, self._index, limit * group_size),
            **extra,
        )

    def _ordered(self, raw: Any, mode: SearchMode, category: str | None) -> list[KnowledgeSearchHit]:
        """One query's hits in the documented total order (score, then vector id), category-checked."""
        metric = self._coll.metric or self._index.metric
        channel = "rrf" if mode is SearchMode.HYBRID else "dense"
        negate = channel == "dense" and metric.upper() == "L2"  # higher is better everywhere
        hits = sorted([_to_hit(h, negate, channel) for h in raw], key=hit_order)
        self._check_category(hits, category)
        return hits

    def _encode(self, queries: list[str]) -> list[list[float]]:
        encoded = self._encoder(queries)
        vectors = [_as_list(v) for v in encoded]
        if len(vectors) != len(queries):
            raise DimensionMismatchError(
                f"the encoder returned {len(vectors)} vectors for {len(queries)} queries: fix the encoder",
                uri=self._conn.shown,
            )
        for v in vectors:
            if len(v) != self._coll.dim:
                raise DimensionMismatchError(
                    f"query vectors have dimension {len(v)} but collection {self.collection!r} holds "
                    f"{self._coll.dim}-d vectors: embed queries with the model used at ingest",
                    uri=self._conn.shown,
                )
        return vectors

    def _filter(self, category: str | None) -> tuple[str, dict[str, str] | None]:
        if category is None:
            return "", None
        never = ' and category != ""' if category == MISSING_STR else ""  # "" stores a missing category
        if self._templating is None:
            self._templating = _probe_templating(self._conn, self._coll)
        if self._templating:
            return "category == {category}" + never, {"category": category}
        return f"category == {milvus_string_literal(category)}{never}", None

    def _check_category(self, hits: list[KnowledgeSearchHit], category: str | None) -> None:
        stray = [h.vector_id for h in hits if category is not None and h.category != category]
        if stray:
            raise FilterError(
                f"Milvus at {self._conn.shown} returned rows {stray[:5]} outside the category filter "
                f"{category!r}: report this backend as unsafe for filtering",
                uri=self._conn.shown,
            )

    def _check_grouped(self, hits: list[KnowledgeSearchHit], group_size: int) -> None:
        per_doc = Counter(h.doc_id for h in hits)
        if per_doc and max(per_doc.values()) > group_size:
            self._grouping = False
            raise UnsupportedFeatureError(self._grouping_refusal(), feature="grouping", uri=self._conn.shown)

    def _hybrid_search(
        self, vectors: list[list[float]], queries: list[str], top_k: int, expr: str, params: dict[str, str] | None
    ) -> Any:
        pm = _pymilvus()
        dense = pm.AnnSearchRequest(
            data=vectors,
            anns_field=VECTOR_FIELD,
            limit=top_k,
            expr=expr or None,
            expr_params=params,
            param=_search_params(self._coll, self._index, top_k),
        )
        sparse = pm.AnnSearchRequest(
            data=queries,
            anns_field=SPARSE_FIELD,
            param={"metric_type": "BM25"},
            limit=top_k,
            expr=expr or None,
            expr_params=params,
        )
        return self._conn.call(
            "hybrid search",
            self._conn.client.hybrid_search,
            self.collection,
            [dense, sparse],
            pm.RRFRanker(60),
            limit=top_k,
            output_fields=list(OUTPUT_FIELDS),
            collection=self.collection,
        )

    def _grouping_honoured(self) -> bool:
        if self._grouping is None:
            self._grouping = _probe_grouping(self._conn, self._coll, self._index)
        return self._grouping

    def _hybrid_available(self) -> bool:
        if self._hybrid_rpc is None:
            self._hybrid_rpc = _probe_hybrid(self._conn, self._coll, self._index)
        return self._hybrid_rpc and self._coll.full_text

    def _grouping_refusal(self) -> str:
        return (
            f"Milvus at {self._conn.shown} ignores grouping search (group_by_field) and would return "
            "ungrouped hits: use mode 'dense' with the client-side per-document cap, or Milvus Lite / a "
            "server >= 2.4"
        )

    def _hybrid_refusal(self) -> str:
        if not self._hybrid_rpc:
            return (
                f"Milvus at {self._conn.shown} has no hybrid search (BM25 full text + RRF): use mode 'dense', "
                "or Milvus Lite / a server >= 2.5"
            )
        return (
            f"collection {self.collection!r} has no BM25 full-text field: re-ingest it with full_text=True "
            "(Milvus Lite or a server >= 2.5), or use mode 'dense'"
        )
