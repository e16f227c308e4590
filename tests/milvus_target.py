"""``target(uri, name)``: the search target the tests open stores and ports on."""

from __future__ import annotations

from rag_eval.search.milvus import DEFAULT_TIMEOUT, DEFAULT_TOKEN_ENV, IndexSpec, SearchTarget


def target(
    uri: str,
    collection: str,
    *,
    index: IndexSpec | None = None,
    token_env: str = DEFAULT_TOKEN_ENV,
    timeout: float = DEFAULT_TIMEOUT,
) -> SearchTarget:
    """A target on ``collection`` at ``uri``; without ``index``, searches use the one recorded at create()."""
    return SearchTarget(uri=uri, collection=collection, index=index, token_env=token_env, timeout=timeout)
