r"""Milvus adapters: :class:`MilvusStore` (schema, ingest, manifest) and :class:`MilvusSearch` (the port).

The only package of rag_eval that imports pymilvus, lazily (:mod:`.lazy`), so importing it stays light;
:mod:`.schema` never imports it. Both adapters open a :class:`SearchTarget`: where to search, as one value.
One job a module; URIs, time limits and the module table: docs/harness.md, "The search/milvus/ package".

>>> print(milvus_string_literal('x" or vector_id > 0 or "'))
"x\" or vector_id > 0 or \""
"""

from __future__ import annotations

from rag_eval.search.milvus.builder import MilvusStore
from rag_eval.search.milvus.quoting import milvus_string_literal
from rag_eval.search.milvus.schema import (
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
    SearchTarget,
    is_server_uri,
    one_line,
    redact_uri,
)
from rag_eval.search.milvus.search import MilvusSearch

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
    "SearchTarget",
    "is_server_uri",
    "milvus_string_literal",
    "one_line",
    "redact_uri",
]
