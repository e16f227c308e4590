"""Reading one collection: its description, row count, load state and loading, the index it was built with.

Each function takes a :class:`~rag_eval.search.milvus.connection.Connection` and a collection name and makes
only the calls it says. :class:`Collection` is what the adapter needs to know of one of rag_eval's own
collections (:func:`describe` refuses any other); :func:`read_description`, :func:`field_index`,
:func:`load_state` and :func:`count` assume no schema of rag_eval's and serve any collection, one built
elsewhere included.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

from rag_eval.core.errors import CollectionNotLoadedError, SearchRequestError
from rag_eval.core.parsing import parse_json
from rag_eval.search.milvus.connection import Connection
from rag_eval.search.milvus.schema import INDEX_PROPERTY, SPARSE_FIELD, VECTOR_FIELD, IndexSpec, SearchTarget


@dataclass(frozen=True, slots=True)
class Collection:
    """A rag_eval collection as Milvus describes it: the vector field's dimension, metric and index type
    (None before the index is built), whether BM25 full text feeds its sparse field, and its properties
    (the manifest and the IndexSpec recorded at create). ``skip_query_cache``: whether its HNSW searches
    ask the index to skip its query cache (False only where the backend refuses to be asked:
    :func:`rag_eval.search.milvus.probes.probe_query_cache`)."""

    name: str
    dim: int
    metric: str | None
    index_type: str | None
    full_text: bool
    properties: Mapping[str, str]
    skip_query_cache: bool = True


def collection_of(target: SearchTarget) -> str:
    """The target's collection; a target without one cannot be opened (the ingest names it first)."""
    if target.collection is None:
        raise ValueError(f"the search target at {target.redacted_uri} names no collection: use target.named(...)")
    return target.collection


def read_description(conn: Connection, name: str) -> dict[str, Any]:
    """``describe_collection`` as pymilvus gives it: fields (with their params), functions, properties."""
    desc: dict[str, Any] = conn.call(
        "describe collection", conn.client.describe_collection, name, collection=name, budget=conn.timeout
    )
    return desc


def field_index(conn: Connection, name: str, field: str) -> tuple[str | None, str | None]:
    """The metric and index type of the first index on ``field``; (None, None) when it has none."""
    indexes = conn.call(
        "list indexes", conn.client.list_indexes, name, field_name=field, collection=name, budget=conn.timeout
    )
    if not indexes:
        return None, None
    info = conn.call(
        "describe index", conn.client.describe_index, name, indexes[0], collection=name, budget=conn.timeout
    )
    return info.get("metric_type"), info.get("index_type")


def describe(conn: Connection, name: str) -> Collection:
    """The collection as rag_eval built it; refused when it has no ``vector`` field (not built by rag_eval)."""
    desc = read_description(conn, name)
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
    metric, index_type = field_index(conn, name, VECTOR_FIELD)
    props = {str(k): str(v) for k, v in (desc.get("properties") or {}).items()}
    return Collection(name, dim, metric, index_type, full_text, props)


def count(conn: Connection, name: str, consistency: str | None = "Strong") -> int:
    """Rows in the collection as a query with ``consistency`` sees them (None: the collection's default)."""
    extra: dict[str, Any] = {"consistency_level": consistency} if consistency else {}
    rows = conn.call("count", conn.client.query, name, filter="", output_fields=["count(*)"], collection=name, **extra)
    return int(rows[0]["count(*)"])


def load_state(conn: Connection, name: str) -> str | None:
    """The collection's load state by name (``Loaded``, ``NotLoad``, ``Loading``; None when unnamed)."""
    state = conn.call("get load state", conn.client.get_load_state, name, collection=name, budget=conn.timeout)
    return getattr(state.get("state"), "name", None)


def ensure_loaded(conn: Connection, name: str, load: bool) -> bool:
    """Load the collection unless it is loaded; True when it had to be loaded now."""
    if load_state(conn, name) == "Loaded":
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


def stored_index(coll: Collection) -> IndexSpec:
    """The IndexSpec recorded at create(), else one matching the collection's index with default parameters."""
    try:
        return IndexSpec(**parse_json(coll.properties[INDEX_PROPERTY]))
    except (KeyError, ValueError, TypeError):
        if coll.index_type is None or coll.metric is None:
            return IndexSpec()
        return IndexSpec(index_type=coll.index_type, metric=coll.metric, build_params={}, search_params={})


# The HNSW index of a 2.3 server (knowhere) keeps, per loaded segment, a cache from a query vector to its
# last top hit, and starts the next search of that vector there instead of at the graph's entry point: the
# first search of a vector after a load answers differently from every later one (ClapNQ, ef 64: 6 of 600
# queries). ``for_tuning`` makes the index skip that cache, so every search of a vector is its first.
SKIP_QUERY_CACHE: Final = "for_tuning"


def is_hnsw(coll: Collection) -> bool:
    return (coll.index_type or "").upper().startswith("HNSW")


def search_params(coll: Collection, index: IndexSpec, limit: int) -> dict[str, Any]:
    """What a search of ``limit`` hits sends: the index's search parameters, HNSW's ``ef`` at least ``limit``
    and its query cache skipped (:data:`SKIP_QUERY_CACHE`), so that a search answers the same whatever
    searched that vector before."""
    params = dict(index.search_params)
    if is_hnsw(coll):
        params["ef"] = max(int(params.get("ef", 0)), limit)
        if coll.skip_query_cache:
            params[SKIP_QUERY_CACHE] = True
    return {"metric_type": coll.metric or index.metric, "params": params}
