r"""Milvus adapters: :class:`MilvusStore` (schema, ingest, manifest) and :class:`MilvusSearch` (the port).

The only package of rag_eval that imports pymilvus, lazily (:mod:`.lazy`), so importing it stays light;
:mod:`.schema` never imports it. Both adapters open a :class:`SearchTarget`: where to search, as one value.

URIs: ``http(s)://host:port`` or ``tcp://host:port`` is a Milvus server or cluster; anything else is a local
path served by embedded Milvus Lite (its parent directories are created). The token is read from an
environment variable (``RAG_EVAL_MILVUS_TOKEN`` by default) and never written anywhere.

Time limits: connecting gets the target's ``timeout`` (8 s) in all, retries with backoff included, so a
stopped or silent server is reported within 10 s; each data call gets ``call_timeout`` (30 s), index builds
and loads 600 s.

=================  ==============================================================================
module             its one job
=================  ==============================================================================
``schema``         value types, constants, URI checks, filter quoting (pure Python)
``lazy``           importing pymilvus on first use, its loggers quieted
``errors``         the table from Milvus and gRPC failures to the project's errors
``connection``     one client: Lite file locking, gRPC options, deadlines, retries
``collection``     reading one collection: description, row count, load state, its index
``probes``         what the backend really does (grouping, hybrid search, filter templating)
``readiness``      waits until a fresh collection answers from indexed, sealed segments
``store``          :class:`MilvusStore`: create, insert, index, manifest, finalize, drop
``search``         :class:`MilvusSearch`: dense, grouped and hybrid search, tie widening, hits
=================  ==============================================================================

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
