"""Feature probes: what a backend and collection really do, asked of Milvus rather than assumed.

The 2.3 server accepts ``group_by_field`` and returns ungrouped hits, answers ``hybrid_search`` with
UNIMPLEMENTED, and (like Lite 3.2) refuses ``filter_params``; each probe is one small call that shows it.
Both accept the HNSW search parameter that skips the index's query cache; a backend that refused it would
be searched without it (:func:`probe_query_cache`).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from rag_eval.core.errors import (
    FilterError,
    SearchBackendError,
    SearchRequestError,
    UnsupportedFeatureError,
)
from rag_eval.search.milvus.collection import Collection, is_hnsw, search_params
from rag_eval.search.milvus.connection import Connection
from rag_eval.search.milvus.lazy import pymilvus
from rag_eval.search.milvus.quoting import milvus_string_literal
from rag_eval.search.milvus.schema import VECTOR_FIELD, IndexSpec


def probe_grouping(conn: Connection, coll: Collection, index: IndexSpec, *, doc_field: str = "doc_id",
                   vector_field: str = VECTOR_FIELD) -> bool:  # fmt: skip
    """Whether ``group_by_field`` is honoured: one document with two chunks, asked for one hit per group.

    Without any multi-chunk document grouping cannot change a result; the per-result check still applies.
    """
    rows = conn.call(
        "query",
        conn.client.query,
        coll.name,
        filter=f"{doc_field} != {milvus_string_literal('')}",
        output_fields=[doc_field],
        limit=2000,
        collection=coll.name,
    )
    repeated = [d for d, n in Counter(r[doc_field] for r in rows).items() if n >= 2]
    if not repeated:
        return True
    hits = conn.call(
        "grouping search",
        conn.client.search,
        coll.name,
        data=[[1.0] * coll.dim],
        anns_field=vector_field,
        filter=f"{doc_field} == {milvus_string_literal(repeated[0])}",
        limit=2,
        group_by_field=doc_field,
        group_size=1,
        output_fields=[doc_field],
        search_params=search_params(coll, index, 2),
        collection=coll.name,
    )
    return len(hits[0]) <= 1


def probe_hybrid(conn: Connection, coll: Collection, index: IndexSpec) -> bool:
    """Whether the backend implements hybrid_search at all (the 2.3 server answers UNIMPLEMENTED)."""
    pm = pymilvus()
    req = pm.AnnSearchRequest(
        data=[[1.0] * coll.dim], anns_field=VECTOR_FIELD, param=search_params(coll, index, 1), limit=1
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


def probe_templating(conn: Connection, coll: Collection, *, field_expr: str = "category") -> bool:
    """Whether the backend honours ``filter_params`` (neither Lite 3.2 nor the 2.3 server does)."""
    try:
        conn.call(
            "templated query",
            conn.client.query,
            coll.name,
            filter=f"{field_expr} == {{c}}",
            filter_params={"c": "\x00probe"},
            limit=1,
            collection=coll.name,
            retry=False,
        )
    except (FilterError, SearchRequestError):
        return False
    return True


def probe_query_cache(conn: Connection, coll: Collection, index: IndexSpec, *,
                      vector_field: str = VECTOR_FIELD) -> Collection:  # fmt: skip
    """``coll`` as its searches are to be sent: asking the HNSW index to skip its query cache, unless this
    backend refuses a search that asks it and answers the same search without (one or two small searches;
    none for another index type)."""
    if not is_hnsw(coll) or not coll.skip_query_cache:
        return coll
    plain = search_params(replace(coll, skip_query_cache=False), index, 1)
    if refuses(conn, coll, search_params(coll, index, 1), plain, vector_field=vector_field):
        return replace(coll, skip_query_cache=False)
    return coll


def refuses(conn: Connection, coll: Collection, tried: Mapping[str, Any], plain: Mapping[str, Any], *,
            vector_field: str = VECTOR_FIELD) -> bool:  # fmt: skip
    """Whether the backend refuses a one-hit search with the search parameters ``tried`` and answers it
    with ``plain``. A failure of both is not a refusal of ``tried``: the second one is raised."""

    def search(params: Mapping[str, Any]) -> None:
        conn.call(
            "search",
            conn.client.search,
            coll.name,
            data=[[1.0] * coll.dim],
            anns_field=vector_field,
            limit=1,
            search_params=dict(params),
            collection=coll.name,
            retry=False,
        )

    try:
        search(tried)
    except (SearchRequestError, SearchBackendError, UnsupportedFeatureError):
        search(plain)
        return True
    return False
