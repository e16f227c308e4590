"""Feature probes: what a backend and collection really do, asked of Milvus rather than assumed.

The 2.3 server accepts ``group_by_field`` and returns ungrouped hits, answers ``hybrid_search`` with
UNIMPLEMENTED, and (like Lite 3.2) refuses ``filter_params``; each probe is one small call that shows it.
"""

from __future__ import annotations

from collections import Counter

from rag_eval.core.errors import FilterError, SearchRequestError, UnsupportedFeatureError
from rag_eval.search.milvus.collection import Collection, search_params
from rag_eval.search.milvus.connection import Connection
from rag_eval.search.milvus.lazy import pymilvus
from rag_eval.search.milvus.schema import VECTOR_FIELD, IndexSpec, milvus_string_literal


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
