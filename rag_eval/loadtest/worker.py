"""The client side of a load measurement: what runs inside each client process.

Each process gets its setup and the level's barrier through the pool's initializer, opens its own Milvus
client, warms it up and runs closed-loop windows that all N processes start together at the barrier. A failure
is returned, not raised: the project's own error with its cause cut (pymilvus's or gRPC's need not pickle), a
bug as its traceback's text, and the barrier aborted so the others stop. Details: docs/performance.md,
"Latency under load".
"""

from __future__ import annotations

import threading
import time
import traceback
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from rag_eval.core.errors import RagEvalError
from rag_eval.core.lookup import LookupKnowledge, Pipeline
from rag_eval.core.transform import KnowledgeQueryTransformer
from rag_eval.experiment import ConfigSpec
from rag_eval.search.milvus.schema import SearchTarget

BARRIER_TIMEOUT_S = 120.0  # a process that never arrives (it died) breaks the window instead of hanging it
OK, ERROR, TIMEOUT = 0, 1, 2  # a request's outcome (a served endpoint's requests can fail and be counted)
OUTCOMES = ("ok", "error", "timeout")


@dataclass(frozen=True, slots=True, kw_only=True)
class WorkerSetup:
    """What every client process needs: where to search, the configs and the queries with their vectors."""

    target: SearchTarget  # a server's, its collection named
    configs: tuple[ConfigSpec, ...]
    queries: tuple[str, ...]  # raw query texts, replayed in order from a per-process offset
    normalized: tuple[str, ...]  # what the encoder is asked for (the transformer's normalised query)
    vectors: np.ndarray  # one row per query, in the order of ``queries``
    warmup: int = 5


@dataclass(slots=True, kw_only=True)
class WindowResult:
    """One process's share of one window (times in nanoseconds from the window's start)."""

    config: str
    slot: int
    ok: bool = True
    error: RagEvalError | None = None  # the project's own error (it pickles), its cause cut
    aborted: bool = False  # this process stopped because another one failed or did not arrive
    bug: str = ""  # the traceback of any other exception (a bug)
    started_ns: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    query_index: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int32))
    search_ns: np.ndarray | None = field(default_factory=lambda: np.zeros(0, dtype=np.int64))  # None: not seen
    e2e_ns: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    post_ns: np.ndarray | None = field(default_factory=lambda: np.zeros(0, dtype=np.int64))  # None: not seen
    outcome: np.ndarray | None = None  # per request, OK, ERROR or TIMEOUT (None: every one answered)
    wall_ns: int = 0  # from the barrier's release to the end of the last lookup
    cpu_s: float = 0.0  # this process's CPU time during the window (user + system)


_setup: WorkerSetup | None = None
_barrier: Any = None
_tools: dict[str, LookupKnowledge] = {}
_port: Any = None
_lock = threading.Lock()


def init_worker(setup: WorkerSetup, barrier: Any) -> None:
    """The pool's initializer: keep the setup and the barrier (cheap; the client opens on first use)."""
    global _setup, _barrier
    _setup, _barrier = setup, barrier


def _open() -> dict[str, LookupKnowledge]:
    """This process's Milvus client and one production tool per config, warmed up once."""
    global _port
    with _lock:
        if _tools:
            return _tools
        from rag_eval.search.milvus import MilvusSearch

        setup = _setup
        assert setup is not None, "init_worker was not called"
        vector_of = {text: row for text, row in zip(setup.normalized, setup.vectors.tolist(), strict=True)}

        def encoder(texts: Sequence[str]) -> list[list[float]]:
            return [vector_of[t] for t in texts]

        _port = MilvusSearch(setup.target, encoder)
        transformer = KnowledgeQueryTransformer()
        for spec in setup.configs:
            tool = LookupKnowledge(_port, spec.config, transformer=transformer, mode=spec.mode)
            if spec.what_if is not None:  # an evaluation-only post-processor replaces the config's own
                tool.pipeline = Pipeline(spec.config, spec.postprocessor())
            for text in setup.queries[: setup.warmup]:
                tool.run(text)
            _tools[spec.name] = tool
        return _tools


def _failure(config: str, slot: int, exc: BaseException) -> WindowResult:
    return failure(config, slot, exc, _barrier)


def failure(config: str, slot: int, exc: BaseException, barrier: Any) -> WindowResult:
    """``exc`` as a window result the driver can receive (see the module docstring); the barrier is aborted."""
    if barrier is not None:
        barrier.abort()  # the others stop waiting for this process
    failed = WindowResult(config=config, slot=slot, ok=False)
    if isinstance(exc, RagEvalError):
        # to the driver as the project's error alone: its cause is pymilvus's or gRPC's, which need not pickle
        exc.__cause__ = exc.__context__ = None
        exc.__suppress_context__ = True
        failed.error = exc
    elif isinstance(exc, threading.BrokenBarrierError):
        failed.aborted = True
    else:
        failed.bug = "".join(traceback.format_exception(exc))
    return failed


def ready(slot: int) -> WindowResult:
    """Open and warm up this process's client, then wait for the others: after N of these, N processes
    of the level are up, connected and warm."""
    try:
        _open()
        _barrier.wait(BARRIER_TIMEOUT_S)
    except Exception as exc:  # reported to the driver, which raises the project's own error
        return _failure("", slot, exc)
    return WindowResult(config="", slot=slot)


def run_window(config: str, slot: int, offset: int, duration_s: float, max_count: int | None) -> WindowResult:
    """Lookups of ``config`` from query ``offset`` on, in a closed loop, for ``duration_s`` or
    ``max_count`` lookups, whichever comes first, starting when every process of the level is ready."""
    try:
        tool = _open()[config]
        setup = _setup
        assert setup is not None
        queries, n = setup.queries, len(setup.queries)
        cap = max_count if max_count is not None else 1 << 62
        started, qidx, search, e2e, post = [], [], [], [], []
        clock = time.perf_counter_ns
        _barrier.wait(BARRIER_TIMEOUT_S)
        cpu0 = time.process_time()
        t_start = clock()
        deadline = t_start + int(duration_s * 1e9)
        end = t_start
        i = 0
        while i < cap:
            t0 = clock()
            if t0 >= deadline:
                break
            q = (offset + i) % n
            record = tool.run(queries[q])
            end = clock()
            started.append(t0 - t_start)
            qidx.append(q)
            search.append(record.timings.search_ns)
            e2e.append(end - t0)
            post.append(record.timings.postprocess_ns + record.timings.projection_ns)
            i += 1
        cpu = time.process_time() - cpu0
    except Exception as exc:  # reported to the driver, which raises the project's own error
        return _failure(config, slot, exc)
    return WindowResult(
        config=config,
        slot=slot,
        started_ns=np.asarray(started, dtype=np.int64),
        query_index=np.asarray(qidx, dtype=np.int32),
        search_ns=np.asarray(search, dtype=np.int64),
        e2e_ns=np.asarray(e2e, dtype=np.int64),
        post_ns=np.asarray(post, dtype=np.int64),
        wall_ns=end - t_start,
        cpu_s=cpu,
    )
