"""The agent tool as a service answers it: bounded concurrency, a time limit a lookup, errors as answers.

:class:`LookupService` wraps the production tool (:class:`~rag_eval.core.lookup.LookupKnowledge`, traced by
:class:`~rag_eval.serve.tracing.TracedLookup` when spans are exported) for a server's event loop: a lookup
runs on a worker thread, at most ``concurrency`` at a time (the others wait their turn), and one that takes
longer than ``timeout`` seconds, fails in Milvus or in the embedder, or is given a blank or too long query is
answered with a :class:`LookupFailed` whose one-line message the client sees as the tool's error: the
server never stops for a failed lookup. The answer is the payload the tool returns, as JSON
(:func:`payload_dict`): exactly what :meth:`ProjectedPayload.as_dict` gives, a score that is not a number as
null.

>>> import anyio
>>> from rag_eval.core.lookup import LookupKnowledge
>>> from rag_eval.search.memory import InMemorySearch
>>> port = InMemorySearch.scripted({"replica lag": [
...     dict(id="7", content="Check the SQL thread.", score=0.9, doc_id="lag", chunk_index=0, source="lag.md")]})
>>> service = LookupService(LookupKnowledge(port), concurrency=2, timeout=5.0)
>>> [e["document_id"] for e in anyio.run(service.lookup, "replica lag")["evidence"]]
['lag#chunk-0']
>>> anyio.run(service.lookup, "   ")
Traceback (most recent call last):
...
rag_eval.serve.service.LookupFailed: the query is blank
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import anyio
import anyio.to_thread

from rag_eval.core.errors import RagEvalError
from rag_eval.core.projector import ProjectedPayload
from rag_eval.files import json_safe

log = logging.getLogger("rag_eval.serve")


class LookupFailed(Exception):
    """A lookup the service answers with an error (the message is the tool error's text)."""


def payload_dict(payload: ProjectedPayload) -> dict[str, Any]:
    """The tool's result as JSON: ``payload.as_dict()``, a score that is not a number as null."""
    out: dict[str, Any] = json_safe(payload.as_dict())
    return out


@dataclass(slots=True)
class LookupService:
    """``tool`` (anything with ``lookup_knowledge(query) -> ProjectedPayload``) served: at most ``concurrency``
    lookups at a time, each answered within ``timeout`` seconds or failed."""

    tool: Any
    concurrency: int = 8
    timeout: float = 30.0
    max_query_chars: int = 4096
    log_queries: bool = False
    served: int = 0
    failed: int = 0
    _limiter: anyio.CapacityLimiter | None = field(default=None, init=False, repr=False)

    @property
    def limiter(self) -> anyio.CapacityLimiter:
        if self._limiter is None:  # made inside the event loop that uses it
            self._limiter = anyio.CapacityLimiter(self.concurrency)
        return self._limiter

    @property
    def in_flight(self) -> int:
        return 0 if self._limiter is None else self._limiter.borrowed_tokens

    async def lookup(self, query: str) -> dict[str, Any]:
        """The payload of ``query`` as JSON, or :class:`LookupFailed` with the reason in one line."""
        if not isinstance(query, str) or not query.strip():
            raise LookupFailed("the query is blank")
        if len(query) > self.max_query_chars:
            raise LookupFailed(f"the query has {len(query):,} characters, over the limit of {self.max_query_chars:,}")
        started = time.perf_counter()
        try:
            with anyio.fail_after(self.timeout):
                payload = await anyio.to_thread.run_sync(
                    _call(self.tool.lookup_knowledge, query), limiter=self.limiter, abandon_on_cancel=True
                )
        except TimeoutError:
            self.failed += 1
            raise LookupFailed(f"the lookup took longer than {self.timeout:g} s (serve.request_timeout)") from None
        except RagEvalError as exc:
            self.failed += 1
            raise LookupFailed(f"{type(exc).__name__}: {exc}") from None
        except Exception as exc:  # the service answers; its log keeps the traceback when queries may be logged
            self.failed += 1
            log.error("lookup failed: %s", type(exc).__name__, exc_info=self.log_queries)
            raise LookupFailed(f"internal error ({type(exc).__name__}): see the service's log") from None
        self.served += 1
        if self.log_queries:
            log.info("lookup %r: %d excerpts in %.1f ms", query, len(payload.excerpts),
                     (time.perf_counter() - started) * 1e3)  # fmt: skip
        return payload_dict(payload)

    def health(self) -> dict[str, Any]:
        """What ``GET /healthz`` answers."""
        return {"status": "ok", "served": self.served, "failed": self.failed, "in_flight": self.in_flight}


def _call(fn: Callable[[str], ProjectedPayload], query: str) -> Callable[[], ProjectedPayload]:
    return lambda: fn(query)
