"""The store: create, fill, index, describe and drop one rag_eval collection (a Lite path or a server URI).

Missing values: the Milvus 2.3 server has no nullable fields, so a missing ``doc_id``, ``title``, ``source``
or ``category`` is stored as ``""`` and a missing ``chunk_index``, ``char_start`` or ``char_end`` as ``-1``.
Manifest: a JSON object kept in the collection property ``rag_eval.manifest`` (Lite 3.2 drops the collection
description; the server's etcd refuses properties of 1.4 MB, so manifests are capped at 256 KiB). The
IndexSpec used at create() is kept beside it in ``rag_eval.index``. ``finalize()`` waits until searches are
answered from indexed segments holding every row (:mod:`rag_eval.search.milvus.readiness`).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from rag_eval.core.errors import (
    CollectionNotLoadedError,
    DimensionMismatchError,
    SearchRequestError,
    UnsupportedFeatureError,
)
from rag_eval.core.parsing import parse_json
from rag_eval.core.ports import PortBase
from rag_eval.search.milvus.collection import collection_of, count, describe, ensure_loaded, stored_index
from rag_eval.search.milvus.connection import Connection
from rag_eval.search.milvus.lazy import pymilvus
from rag_eval.search.milvus.probes import probe_grouping, probe_hybrid
from rag_eval.search.milvus.readiness import (
    compact,
    settle,
    stored_segments,
    wait_handed_over,
    wait_indexed,
    wait_visible,
)
from rag_eval.search.milvus.schema import (
    DEFAULT_CALL_TIMEOUT,
    INDEX_PROPERTY,
    MANIFEST_PROPERTY,
    MAX_BATCH_BYTES,
    MAX_MANIFEST_BYTES,
    MAX_VARCHAR_BYTES,
    MISSING_INT,
    MISSING_STR,
    SPARSE_FIELD,
    VECTOR_FIELD,
    BackendFeatures,
    BackendInfo,
    ChunkRow,
    IndexSpec,
    SearchTarget,
)


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
    """Creates, fills and describes the target's collection (a Lite path or a server URI).

    >>> import tempfile
    >>> rows = [ChunkRow(vector_id=i + 1, doc_id="lag", chunk_index=i, content=text, title="Replica lag",
    ...                  source="kb/lag.md", category="db", start=None, end=None, vector=vector)
    ...         for i, (text, vector) in enumerate([("Check the SQL thread.", [1.0, 0.0]),
    ...                                              ("Raise the relay log limit.", [0.6, 0.8])])]
    >>> tmp = tempfile.TemporaryDirectory()
    >>> with MilvusStore(SearchTarget(uri=f"{tmp.name}/milvus.db", collection="kb")) as store:
    ...     store.create(dim=2, index=IndexSpec.flat(), manifest={"dataset": "incident-kb"})
    ...     inserted = store.insert(rows, batch_size=1)
    ...     store.finalize()
    ...     (inserted, store.count(), store.read_manifest())
    (2, 2, {'dataset': 'incident-kb'})
    >>> tmp.cleanup()
    """

    def __init__(self, target: SearchTarget, *, retries: int = 3, call_timeout: float = DEFAULT_CALL_TIMEOUT,
                 handoff_timeout: float | None = None) -> None:  # fmt: skip
        """``handoff_timeout``: how long :meth:`finalize` waits for a server to serve the segments it stored
        (None: bounded by the row count, :func:`rag_eval.search.milvus.readiness.handoff_bound`)."""
        self.target = target
        self.handoff_timeout = handoff_timeout
        self.collection = collection_of(target)
        self._conn = Connection(target, retries=retries, call_timeout=call_timeout)
        self._dim: int | None = None
        self._index: IndexSpec | None = None
        self._inserted = 0

    def close(self) -> None:
        self._conn.close()

    def backend(self) -> BackendInfo:
        """Kind of backend, its version string and the pymilvus version."""
        conn = self._conn
        version = conn.call("get server version", conn.client.get_server_version, budget=conn.timeout)
        return BackendInfo(kind=conn.kind, server_version=str(version), pymilvus_version=pymilvus().__version__)

    def exists(self) -> bool:
        conn = self._conn
        return bool(conn.call("has collection", conn.client.has_collection, self.collection, budget=conn.timeout))

    def read_manifest(self) -> dict[str, Any] | None:
        """The JSON manifest stored with the collection; None when the collection or manifest is absent."""
        if not self.exists():
            return None
        try:
            value = parse_json(describe(self._conn, self.collection).properties.get(MANIFEST_PROPERTY, ""))
        except ValueError:
            return None
        return value if isinstance(value, dict) else None

    def create(self, *, dim: int, index: IndexSpec, manifest: Mapping[str, Any], full_text: bool = False) -> None:
        """(Re)create the collection, dropping an existing one; ``full_text`` adds BM25 for HYBRID search."""
        pm, conn, name = pymilvus(), self._conn, self.collection
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
        if full_text and not describe(conn, name).full_text:
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
        dim = self._dim if self._dim is not None else describe(conn, self.collection).dim
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
        """Flush, build the index and wait until it covers every row, merge a server's segments into one, load,
        and wait until every row is visible to searches from the segments stored: no query is answered from an
        unindexed or a merged-away segment, so two runs give the same hits."""
        conn, name = self._conn, self.collection
        conn.call("flush", conn.client.flush, name, collection=name)
        coll = describe(conn, name)
        index = self._index or stored_index(coll)
        if coll.index_type is None:
            params = pymilvus().MilvusClient.prepare_index_params()
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
        wait_indexed(conn, name, self._inserted)
        # A 2.3 server merges only indexed segments, so the merge comes after the index (one segment has
        # nothing to merge, and no deletes to purge: rows are only inserted); the merged one is indexed anew.
        if conn.kind == "server" and stored_segments(conn, name) > 1 and compact(conn, name):
            wait_indexed(conn, name, self._inserted)
        ensure_loaded(conn, name, load=True)
        wait_visible(conn, name, self._inserted)
        if conn.kind == "server":
            wait_handed_over(conn, name, self._inserted, timeout=self.handoff_timeout)
            settle(conn, name, self._index or stored_index(describe(conn, name)))

    def count(self) -> int:
        """Rows in the collection (Strong consistency; flushes statistics if the collection is not loaded)."""
        conn, name = self._conn, self.collection
        try:
            return count(conn, name)
        except CollectionNotLoadedError:
            conn.call("flush", conn.client.flush, name, collection=name)
            stats = conn.call("collection stats", conn.client.get_collection_stats, name, collection=name)
            return int(stats["row_count"])

    def features(self) -> BackendFeatures:
        """GROUPED and HYBRID as this backend and collection really perform them (probed)."""
        coll = describe(self._conn, self.collection)
        ensure_loaded(self._conn, self.collection, load=True)
        index = self._index or stored_index(coll)
        hybrid = coll.full_text and probe_hybrid(self._conn, coll, index)
        return BackendFeatures(grouping=probe_grouping(self._conn, coll, index), hybrid=hybrid)

    def drop(self) -> None:
        """Drop the collection if it exists."""
        conn = self._conn
        if self.exists():
            conn.call("drop collection", conn.client.drop_collection, self.collection, collection=self.collection)
