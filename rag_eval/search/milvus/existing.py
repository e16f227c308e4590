"""A collection built elsewhere, read and never written: its description, a few rows, its rows by document.

:func:`describe_any` reads what ``rag-eval inspect`` prints and a run's provenance records (fields and their
types, dynamic fields, indexes with their metric, row count, load state, partitions); :class:`CollectionRows`
reads rows, a page at a time (``query_iterator``), mapped by a :class:`FieldMap` into the
:class:`StoredRow` the label resolution locates. Every call here is a read: nothing is created, written,
indexed, compacted, loaded or dropped (loading is :func:`rag_eval.search.milvus.collection.ensure_loaded`'s,
asked for by the experiment's ``load = true``), and a Milvus Lite database is read from a private copy (Milvus
Lite writes an index file into a database whose collection it loads): its files stay byte for byte.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from rag_eval.core.errors import CollectionNotFoundError, CollectionNotLoadedError, FilterError, SearchRequestError
from rag_eval.core.types import KnowledgeSearchHit, fast_constructor
from rag_eval.datasets.placement import StoredRow
from rag_eval.search.milvus.collection import (
    Collection,
    collection_of,
    count,
    ensure_loaded,
    load_state,
    read_description,
)
from rag_eval.search.milvus.connection import Connection
from rag_eval.search.milvus.fields import VECTOR_TYPES, FieldMap, as_index, as_text
from rag_eval.search.milvus.lazy import pymilvus
from rag_eval.search.milvus.schema import IndexSpec, SearchTarget

_new_hit = fast_constructor(KnowledgeSearchHit)
PAGE_ROWS = 1_000  # rows a query_iterator page holds
DOCS_PER_FILTER = 64  # documents named in one filter (a filter of ``or``-ed equalities stays short)


@dataclass(frozen=True, slots=True, kw_only=True)
class FieldInfo:
    name: str
    type: str  # Milvus's type name: VARCHAR, INT64, JSON, FLOAT_VECTOR, ...
    primary: bool = False
    auto_id: bool = False
    nullable: bool = False
    params: Mapping[str, Any] = field(default_factory=dict)  # dim, max_length, ...


@dataclass(frozen=True, slots=True, kw_only=True)
class IndexInfo:
    field_name: str
    index_type: str
    metric: str
    params: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True, kw_only=True)
class CollectionInfo:
    """A collection as Milvus describes it (any schema)."""

    name: str
    fields: tuple[FieldInfo, ...]
    dynamic: bool
    indexes: tuple[IndexInfo, ...]
    rows: int
    load_state: str | None
    partitions: tuple[str, ...]
    functions: tuple[str, ...] = ()

    def schema(self) -> dict[str, str]:
        """Field name -> type name."""
        return {f.name: f.type for f in self.fields}

    def field_info(self, name: str) -> FieldInfo | None:
        return next((f for f in self.fields if f.name == name), None)

    def vector_fields(self) -> list[FieldInfo]:
        return [f for f in self.fields if f.type in VECTOR_TYPES]

    def index_of(self, name: str) -> IndexInfo | None:
        return next((i for i in self.indexes if i.field_name == name), None)

    def dim(self, name: str) -> int:
        info = self.field_info(name)
        return int(info.params.get("dim", 0)) if info is not None else 0

    def schema_digest(self) -> str:
        """A short hash of the fields, their types and parameters, and the dynamic flag."""
        text = repr((sorted((f.name, f.type, f.primary, sorted(f.params.items())) for f in self.fields), self.dynamic))
        return hashlib.sha256(text.encode()).hexdigest()[:16]

    def as_dict(self) -> dict[str, Any]:
        """What provenance records of the collection."""
        return {
            "name": self.name,
            "fields": [{"name": f.name, "type": f.type, "primary": f.primary} for f in self.fields],
            "dynamic_fields": self.dynamic,
            "indexes": [{"field": i.field_name, "index_type": i.index_type, "metric": i.metric} for i in self.indexes],
            "rows": self.rows,
            "partitions": list(self.partitions),
            "schema_digest": self.schema_digest(),
        }


def _type_name(value: Any) -> str:
    if isinstance(value, int):
        return str(pymilvus().DataType(value).name)
    return str(getattr(value, "name", value))


def describe_any(conn: Connection, name: str) -> CollectionInfo:
    """Every fact ``inspect`` shows of ``name``; a missing collection is the project's own error."""
    exists = conn.call("has collection", conn.client.has_collection, name, collection=name, budget=conn.timeout)
    if not exists:
        raise CollectionNotFoundError(
            f"Milvus at {conn.shown} has no collection {name!r}", collection=name, uri=conn.shown
        )
    desc = read_description(conn, name)
    fields = tuple(
        FieldInfo(
            name=str(f["name"]), type=_type_name(f.get("type")), primary=bool(f.get("is_primary")),
            auto_id=bool(f.get("auto_id")), nullable=bool(f.get("nullable")), params=dict(f.get("params") or {}),
        )
        for f in desc.get("fields", [])
    )  # fmt: skip
    indexes = []
    for f in fields:
        if f.type not in VECTOR_TYPES:
            continue
        names = conn.call("list indexes", conn.client.list_indexes, name, field_name=f.name, collection=name,
                          budget=conn.timeout)  # fmt: skip
        for index_name in names or ():
            info = conn.call("describe index", conn.client.describe_index, name, index_name, collection=name,
                             budget=conn.timeout)  # fmt: skip
            params = {k: v for k, v in info.items() if k not in ("index_type", "metric_type", "field_name",
                      "index_name", "total_rows", "indexed_rows", "pending_index_rows", "state")}  # fmt: skip
            indexes.append(IndexInfo(field_name=f.name, index_type=str(info.get("index_type")),
                                     metric=str(info.get("metric_type")).upper(), params=params))  # fmt: skip
    partitions = conn.call("list partitions", conn.client.list_partitions, name, collection=name, budget=conn.timeout)
    state = load_state(conn, name)
    return CollectionInfo(
        name=name,
        fields=fields,
        dynamic=bool(desc.get("enable_dynamic_field")),
        indexes=tuple(indexes),
        rows=_rows(conn, name, state),
        load_state=state,
        partitions=tuple(str(p) for p in partitions),
        functions=tuple(str(f.get("name")) for f in desc.get("functions") or ()),
    )


def _rows(conn: Connection, name: str, state: str | None) -> int:
    """Rows a query counts when the collection is loaded (Strong consistency: rows another client wrote a moment
    ago included, so a run's fingerprint taken again at its end sees them); else what its statistics say."""
    if state == "Loaded":
        return count(conn, name)
    stats = conn.call("collection statistics", conn.client.get_collection_stats, name, collection=name)
    return int(stats.get("row_count", 0))


def foreign_hit(raw: Any, negate: bool, fields: FieldMap) -> KnowledgeSearchHit:
    """A hit of a collection built elsewhere, its values read through ``fields`` (the key: the hit's id)."""
    entity = dict.get(raw, "entity") or {}
    pk = entity.get(fields.id)
    if pk is None:
        pk = dict.get(raw, "id", dict.get(raw, "pk"))
    vid = str(pk)
    distance = float(dict.__getitem__(raw, "distance"))
    score = -distance if negate else distance
    read = {k: ref.read(entity) for k, ref in fields.refs().items()}
    text = read.get("text")
    return _new_hit(
        vid,
        text if isinstance(text, str) else "",
        score,
        {"dense": score},
        {"char_start": as_index(read.get("start")), "char_end": as_index(read.get("end"))},
        as_text(read.get("doc_id")),
        as_index(read.get("chunk_index")),
        vid,
        as_text(read.get("source")),
        as_text(read.get("title")),
        as_text(read.get("category")),
    )


def foreign_collection(conn: Connection, name: str, fields: FieldMap) -> tuple[Collection, IndexSpec]:
    """A collection built elsewhere as the port searches it: its vector field's dimension and the metric
    and type of the index on it (read, never assumed); no index there is the project's own error."""
    info = describe_any(conn, name)
    index = info.index_of(fields.vector)
    if index is None:
        raise CollectionNotLoadedError(
            f"collection {name!r} in Milvus at {conn.shown} has no index on {fields.vector!r}: "
            "build it with the ingest that made the collection",
            collection=name,
            uri=conn.shown,
        )
    coll = Collection(name, info.dim(fields.vector), index.metric, index.index_type, False, {})
    return coll, IndexSpec(index_type=index.index_type, metric=index.metric, build_params=dict(index.params),
                           search_params={})  # fmt: skip


class CollectionRows:
    """Rows of one collection, read with a :class:`FieldMap` (and optionally only some partitions)."""

    def __init__(self, conn: Connection, info: CollectionInfo, fields: FieldMap, partitions: Sequence[str] = ()):
        self._conn, self.info, self.fields, self.partitions = conn, info, fields, list(partitions)

    def raw(self, expr: str, output_fields: Sequence[str], *, limit: int | None = None) -> Iterator[dict[str, Any]]:
        """Rows matching ``expr`` ("" for all), a page at a time; at most ``limit`` of them."""
        conn, name = self._conn, self.info.name
        extra: dict[str, Any] = {"partition_names": self.partitions} if self.partitions else {}
        it = conn.call(
            "query iterator", conn.client.query_iterator, name, batch_size=PAGE_ROWS, limit=limit if limit else -1,
            filter=expr, output_fields=list(output_fields), collection=name, **extra,
        )  # fmt: skip
        try:
            while True:
                page = conn.call("query iterator page", lambda timeout: it.next(), collection=name, retry=False)
                if not page:
                    return
                yield from (dict(r) for r in page)
        finally:
            it.close()

    def stored(self, row: Mapping[str, Any]) -> StoredRow:
        """One row as the label resolution reads it (the key as text; missing values None)."""
        f = self.fields
        read = {k: ref.read(row) for k, ref in f.refs().items()}
        text = read.get("text")
        return StoredRow(
            pk=str(row[f.id]),
            doc_id=as_text(read.get("doc_id")),
            text=text if isinstance(text, str) else "",
            chunk_index=as_index(read.get("chunk_index")),
            start=as_index(read.get("start")),
            end=as_index(read.get("end")),
        )

    def _doc_field_is_scalar(self) -> bool:
        ref = self.fields.doc_id
        return ref is not None and not ref.dynamic and not ref.path and self.info.schema().get(ref.field) == "VARCHAR"

    def of_documents(self, doc_ids: Sequence[str]) -> Iterator[StoredRow]:
        """The rows whose doc id is one of ``doc_ids``, then the rows with no doc id at all, each once; every
        row when the collection maps no doc id (or no filter reaches it there: a key inside a JSON text)."""
        wanted = self.fields.output_fields()
        given: set[str] = set()
        for row in self._of_documents(doc_ids, wanted):
            if row.pk not in given:
                given.add(row.pk)
                yield row

    def _of_documents(self, doc_ids: Sequence[str], wanted: list[str]) -> Iterator[StoredRow]:
        ref = self.fields.doc_id
        if ref is None:
            yield from (self.stored(r) for r in self.raw("", wanted))
            return
        scalar = self._doc_field_is_scalar()
        filters = [self.fields.doc_filter(doc_ids[i : i + DOCS_PER_FILTER], field_is_scalar=scalar)
                   for i in range(0, len(doc_ids), DOCS_PER_FILTER)]  # fmt: skip
        filters.append(self.fields.missing_doc_filter(field_is_scalar=scalar))
        try:
            for expr in filters:
                yield from (self.stored(r) for r in self.raw(expr, wanted))
        except (FilterError, SearchRequestError):
            if not ref.path:
                raise
            # no filter reaches into a JSON text: read every row and keep those of these documents
            known = set(doc_ids)
            for r in self.raw("", wanted):
                row = self.stored(r)
                if row.doc_id is None or row.doc_id in known:
                    yield row

class ForeignCollection:
    """One collection built elsewhere, opened to be read: described at once, loaded only when ``load``
    (a collection that is not loaded is refused otherwise, unless ``describe_only``: its description then,
    and no rows), closed with the block.

    >>> import tempfile
    >>> from rag_eval.search.milvus import ChunkRow, IndexSpec, MilvusStore, SearchTarget
    >>> tmp = tempfile.TemporaryDirectory()
    >>> target = SearchTarget(uri=f"{tmp.name}/milvus.db", collection="kb", index=IndexSpec.flat())
    >>> with MilvusStore(target) as store:
    ...     store.create(dim=2, index=IndexSpec.flat(), manifest={})
    ...     _ = store.insert([ChunkRow(vector_id=1, doc_id="lag", chunk_index=0, content="Check the lag.", title="",
    ...                                source="", category="", start=None, end=None, vector=[1.0, 0.0])])
    ...     store.finalize()
    >>> with ForeignCollection(target, load=True) as coll:
    ...     (coll.info.rows, coll.info.index_of("vector").metric, coll.sample(1)[0]["content"])
    (1, 'COSINE', 'Check the lag.')
    >>> tmp.cleanup()
    """

    def __init__(self, target: SearchTarget, *, load: bool, describe_only: bool = False) -> None:
        self.target = target
        self.name = name = collection_of(target)
        self._conn = Connection(target, read_only=True)
        try:
            info = describe_any(self._conn, name)
            if info.load_state != "Loaded" and not describe_only:
                ensure_loaded(self._conn, name, load)
                info = describe_any(self._conn, name)
            self.info = info
        except BaseException:
            self._conn.close()
            raise

    def rows(self, fields: FieldMap, partitions: Sequence[str] = ()) -> CollectionRows:
        return CollectionRows(self._conn, self.info, fields, partitions)

    def sample(self, n: int) -> list[dict[str, Any]]:
        """The first ``n`` rows, every field but vectors, dynamic fields included."""
        conn, name = self._conn, self.name
        rows = conn.call("query", conn.client.query, name, filter="", output_fields=["*"], limit=n, collection=name)
        vectors = {f.name for f in self.info.vector_fields()}
        return [{k: v for k, v in dict(r).items() if k not in vectors} for r in rows]

    def close(self) -> None:
        self._conn.close()

    def __enter__(self) -> ForeignCollection:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def collections_at(target: SearchTarget) -> tuple[str, list[str]]:
    """What answers at the target's URI (``Milvus Lite 3.2.2``, ``Milvus server v2.3.5``) and the
    collections it holds, sorted: what ``rag-eval inspect URI`` shows without ``--collection``."""
    conn = Connection(target, read_only=True)
    try:
        version = conn.call("get server version", conn.client.get_server_version, budget=conn.timeout)
        names = conn.call("list collections", conn.client.list_collections, budget=conn.timeout)
        kind = "Milvus Lite" if conn.kind == "lite" else "Milvus server"
        return f"{kind} {version}", sorted(str(n) for n in names)
    finally:
        conn.close()
