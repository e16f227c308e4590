"""D6: KnowledgeSearchPort, the thin port between the pipeline and a vector store.

One method, ``search``, plus a context-managed lifecycle. Adapters live in
``rag_eval.search`` (``memory`` ships as public API for tests; ``milvus`` for Lite,
servers and clusters). Adapters that can send many queries in one call also offer
``search_batch`` (:class:`BatchKnowledgeSearchPort`); the pipeline itself never needs it.
"""

from __future__ import annotations

from collections.abc import Sequence
from types import TracebackType
from typing import Protocol, Self, runtime_checkable

from rag_eval.core.types import KnowledgeSearchHit, KnowledgeSearchRequest


@runtime_checkable
class KnowledgeSearchPort(Protocol):
    def search(self, request: KnowledgeSearchRequest) -> tuple[KnowledgeSearchHit, ...]:
        """Hits for ``request.query``, best first, at most ``request.top_k``."""
        ...

    def close(self) -> None: ...

    def __enter__(self) -> Self: ...

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None: ...


@runtime_checkable
class BatchKnowledgeSearchPort(KnowledgeSearchPort, Protocol):
    def search_batch(self, requests: Sequence[KnowledgeSearchRequest]) -> list[tuple[KnowledgeSearchHit, ...]]:
        """One result per request, in order; requests must share mode, width and filter."""
        ...


class PortBase:
    """Lifecycle boilerplate for adapters: ``with Adapter(...) as port:`` closes it."""

    def close(self) -> None:  # pragma: no cover - adapters override when they hold resources
        return None

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()
