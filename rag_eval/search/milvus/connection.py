"""One Milvus client with retries, deadlines and error translation at the boundary.

A server URI gets a client of its own (``dedicated``) with quiet gRPC keepalive options. A Lite path is
served in-process by milvus-lite, which holds a file lock on it: one process at a time can open a Lite file,
and within a process its clients share one Lite server, counted here and released (the lock freed) when the
last of them closes. A connection that only reads (``read_only``: a collection built elsewhere, ``inspect``)
never gives milvus-lite the user's database, which it would write into (an index file on load, its log):
it serves a private copy (:func:`~rag_eval.search.milvus.lite.private_copy`), made when the first such
connection opens and removed when the last closes (a database this process already serves, built here, is
read through that server). A Lite path that names anything but a new path, an empty
directory or a Lite database is refused before milvus-lite is given it (:mod:`~rag_eval.search.milvus.lite`).
Connecting gets the target's ``timeout`` in all, retries with backoff included; each data call gets
``call_timeout`` unless the caller gives it a budget of its own.
"""

from __future__ import annotations

import logging
import os
import shutil
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Final, Literal, TypeVar

from rag_eval.core.errors import LitePathError, RagEvalError, SearchUnavailableError
from rag_eval.search.milvus import errors
from rag_eval.search.milvus.lazy import pymilvus
from rag_eval.search.milvus.lite import lite_path, lite_path_problem, private_copy
from rag_eval.search.milvus.schema import DEFAULT_CALL_TIMEOUT, SearchTarget, one_line

# pymilvus pings every 10 s even with no call in flight (while a long ingest embeds, say), and sends
# bandwidth probes on large inserts; a server answers too many of them with "too_many_pings" GOAWAYs that
# gRPC prints on the terminal. Ping only during calls, rarely, and without bandwidth probes.
_GRPC_OPTIONS: Final = {
    "grpc.keepalive_time_ms": 60_000,
    "grpc.keepalive_permit_without_calls": False,
    "grpc.http2.bdp_probe": 0,
}
_T = TypeVar("_T")
_LITE_LOCK = threading.Lock()
_LITE_REFS: dict[str, int] = {}
_LITE_SERVED: dict[str, Path] = {}  # a key of _LITE_REFS -> the path milvus-lite serves for it (a private copy)


class Connection:
    """One client with retries, deadlines and error translation at the boundary; ``read_only`` (by default:
    a target read through a field map, i.e. a collection built elsewhere) serves a Lite database from a
    private copy."""

    def __init__(
        self,
        target: SearchTarget,
        *,
        retries: int = 3,
        call_timeout: float = DEFAULT_CALL_TIMEOUT,
        read_only: bool | None = None,
    ) -> None:
        self.uri = target.uri
        self.shown = target.redacted_uri
        self.kind: Literal["lite", "server"] = "server" if target.is_server else "lite"
        self.timeout = target.timeout
        self.retries = max(0, retries)
        self.call_timeout = call_timeout
        self.read_only = target.fields is not None if read_only is None else read_only
        self._lite_key: str | None = None
        self._client: Any = self._open_lite() if self.kind == "lite" else self._open_server(target.token_env)

    @property
    def client(self) -> Any:
        if self._client is None:
            raise SearchUnavailableError(
                f"the connection to Milvus at {self.shown} is closed: open a new one", uri=self.shown
            )
        return self._client

    def _open_server(self, token_env: str) -> Any:
        pm = pymilvus()
        token = os.environ.get(token_env, "")
        return self._retrying(
            "connect",
            # dedicated: pymilvus shares one channel per URI and token between clients, made with the options of
            # whichever client came first in the process; ours must hold _GRPC_OPTIONS whatever came before
            lambda t: pm.MilvusClient(
                uri=self.uri, token=token, timeout=t, grpc_options=dict(_GRPC_OPTIONS), dedicated=True
            ),
            budget=self.timeout,
        )

    def _open_lite(self) -> Any:
        pm = pymilvus()
        from milvus_lite.server_manager import server_manager_instance as manager

        path = lite_path(self.uri)
        if why := lite_path_problem(self.uri):
            raise LitePathError(why, path=str(path))
        # a database this process already serves (built in this process: a writer's client is open) is read
        # through that server: a copy would miss what it holds in memory, and its lock is this process's
        read_only = self.read_only and str(path) not in getattr(manager, "_servers", {})
        key = f"{path} (read only)" if read_only else str(path)
        with _LITE_LOCK:
            served = _LITE_SERVED.get(key) or (self._copy(path) if read_only else path)
            if not read_only:
                path.parent.mkdir(parents=True, exist_ok=True)
            with _captured("milvus_lite.server_manager") as capture:
                local = manager.start_and_get_uri(str(served))
            if local is None:
                if key not in _LITE_REFS and served != path:
                    shutil.rmtree(served.parent, ignore_errors=True)
                why = capture.sink[0] if capture.sink else "it could not be opened"
                raise errors.lite_failure(capture.failures[0] if capture.failures else None, why, path=str(path))
            _LITE_REFS[key] = _LITE_REFS.get(key, 0) + 1
            _LITE_SERVED[key] = served
            self._lite_key = key
        try:
            return pm.MilvusClient(uri=local, timeout=self.timeout)
        except Exception as exc:
            self._release_lite()
            raise (self.translate(exc, "connect") or exc) from exc

    def _copy(self, path: Path) -> Path:
        """A private copy of the database at ``path`` (see :func:`private_copy`), its failures the project's."""
        try:
            return private_copy(path)
        except BlockingIOError as exc:
            held = errors.Failure(uri=str(path), what="open", message=f"another process holds the lock on {path}")
            raise errors.LITE_LOCKED.build(held) from exc
        except OSError as exc:
            raise SearchUnavailableError(
                f"cannot copy the Milvus Lite database {path} to read it without writing it: {exc}", uri=str(path)
            ) from exc

    def _release_lite(self) -> None:
        key, self._lite_key = self._lite_key, None
        if key is None:
            return
        with _LITE_LOCK:
            _LITE_REFS[key] -= 1
            if _LITE_REFS[key] <= 0:
                del _LITE_REFS[key]
                served = _LITE_SERVED.pop(key)
                from milvus_lite.server_manager import server_manager_instance as manager

                manager.release_server(str(served))  # frees the file lock for other processes
                if served != lite_path(self.uri):  # a private copy: removed with its last reader
                    shutil.rmtree(served.parent, ignore_errors=True)

    def close(self) -> None:
        client, self._client = self._client, None
        if client is not None:
            client.close()
        self._release_lite()

    def call(
        self,
        what: str,
        fn: Callable[..., _T],
        /,
        *args: Any,
        collection: str | None = None,
        budget: float | None = None,
        retry: bool = True,
        **kwargs: Any,
    ) -> _T:
        """``fn(*args, timeout=..., **kwargs)`` with transient failures retried and errors translated."""
        return self._retrying(
            what,
            lambda t: fn(*args, timeout=t, **kwargs),
            collection=collection,
            budget=self.call_timeout if budget is None else budget,
            retry=retry,
        )

    def _retrying(
        self,
        what: str,
        attempt: Callable[[float], _T],
        *,
        budget: float,
        collection: str | None = None,
        retry: bool = True,
    ) -> _T:
        deadline = time.monotonic() + budget
        backoff, tries = 0.25, 0
        while True:
            remaining = max(deadline - time.monotonic(), 0.05)
            try:
                return attempt(remaining)
            except RagEvalError:
                raise
            except Exception as exc:
                timed_out = time.monotonic() >= deadline - 0.1
                error = self.translate(exc, what, collection=collection, budget=budget if timed_out else None)
                if error is None:
                    raise
                tries += 1
                transient = isinstance(error, SearchUnavailableError)
                if not (retry and transient and tries <= self.retries and deadline - time.monotonic() > backoff):
                    raise error from exc
                time.sleep(backoff)
                backoff *= 2

    def translate(
        self, exc: BaseException, what: str, *, collection: str | None = None, budget: float | None = None
    ) -> RagEvalError | None:
        """The project's error for a pymilvus or gRPC exception (None: not a Milvus error); see
        :mod:`rag_eval.search.milvus.errors`."""
        return errors.translate(exc, what, uri=self.shown, collection=collection, budget=budget)


@contextmanager
def _captured(name: str) -> Iterator[_Capture]:
    """What the logger ``name`` logs within the block, kept rather than shown: milvus-lite says why it did not
    open a path only in its log (its loggers are quieted to CRITICAL by :func:`pymilvus`, so the level is
    lowered for the block, and nothing propagates to the terminal)."""
    logger = logging.getLogger(name)
    capture = _Capture([], [])
    level, propagate = logger.level, logger.propagate
    logger.setLevel(logging.ERROR)
    logger.propagate = False
    logger.addHandler(capture)
    try:
        yield capture
    finally:
        logger.removeHandler(capture)
        logger.setLevel(level)
        logger.propagate = propagate


class _Capture(logging.Handler):
    """What milvus-lite logs while it opens a path: its words on one line, and the exceptions it logs."""

    def __init__(self, sink: list[str], failures: list[BaseException]) -> None:
        super().__init__(logging.DEBUG)
        self.sink = sink
        self.failures = failures

    def emit(self, record: logging.LogRecord) -> None:
        exc = record.exc_info[1] if record.exc_info else None
        self.sink.append(one_line(exc if exc is not None else record.getMessage(), 160))
        if exc is not None:
            self.failures.append(exc)
