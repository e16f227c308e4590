"""The client side of a load measurement against a served endpoint: what runs inside each client process.

The same pool, barrier and closed-loop windows as :mod:`rag_eval.loadtest.worker`, but each process asks the
endpoint's ``lookup_knowledge`` through the client a run's ``[service]`` uses
(:func:`rag_eval.replay.service.connect`: MCP over streamable HTTP, or plain HTTP) instead of running the
pipeline itself. A window opens its own connection (an MCP session), makes one unrecorded call to warm it, waits
at the barrier, then times each call from the request to its parsed answer: end to end as a client sees it. The
search and post-process stages are inside the server, so they are not recorded.

A request that times out (``[service] timeout``) or is answered with an error or with something that is not a
payload is counted, not fatal; a process that gets no answer at all in a window, or :data:`MAX_FAILED_IN_A_ROW`
failures in a row, stops the measurement with a :class:`~rag_eval.core.errors.ServiceError` (exit 3) naming the
endpoint. Details: docs/serve.md, "Load-testing a served endpoint".
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

import anyio
import anyio.to_thread
import numpy as np

from rag_eval.core.errors import ServiceError
from rag_eval.experiment.model import ServiceSpec
from rag_eval.loadtest.worker import BARRIER_TIMEOUT_S, ERROR, OK, TIMEOUT, WindowResult, failure
from rag_eval.replay.service import Call, check_payload, connect, said

MAX_FAILED_IN_A_ROW = 10  # past this the endpoint is down or refusing, not slow: measuring on would time errors


@dataclass(frozen=True, slots=True, kw_only=True)
class EndpointSetup:
    """What every client process needs: the endpoint, the name its results go under, and the queries."""

    service: ServiceSpec  # url (MCP, streamable HTTP) or http (plain JSON); never a stdio command
    config: str  # the experiment's config the service is meant to run: the name of its results
    queries: tuple[str, ...]  # raw query texts, asked in order from a per-process offset
    warmup: int = 5

    @property
    def shown(self) -> str:
        """Where the endpoint is, as messages and ``load.json`` show it (no credentials)."""
        return self.service.endpoint


_setup: EndpointSetup | None = None
_barrier: Any = None


def init_worker(setup: EndpointSetup, barrier: Any) -> None:
    """The pool's initializer: keep the setup and the barrier (the connections open in each window)."""
    global _setup, _barrier
    _setup, _barrier = setup, barrier


def _error(message: str) -> ServiceError:
    assert _setup is not None
    return ServiceError(f"the service at {_setup.shown}: {message}", endpoint=_setup.shown)


def _own(exc: BaseException) -> ServiceError | None:
    """The project's own error in ``exc``, also when a task group of the transport wrapped it."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    return exc if isinstance(exc, ServiceError) else None


async def _ask(call: Call, text: str) -> tuple[int, str]:
    """One request: its outcome and, when it failed, why (in a few words)."""
    assert _setup is not None
    try:
        with anyio.fail_after(_setup.service.timeout):
            raw = await call(text)
    except TimeoutError:
        return TIMEOUT, f"no answer within {_setup.service.timeout:g} s (service.timeout)"
    except Exception as exc:  # an error answer, or the transport's own: counted, and the loop goes on
        return ERROR, said(exc)
    why = check_payload(raw)
    return (OK, "") if why is None else (ERROR, f"not a payload: {why}")


async def _warm(count: int) -> None:
    assert _setup is not None
    queries = _setup.queries
    try:
        async with connect(_setup.service) as call:
            for i in range(count):
                outcome, why = await _ask(call, queries[i % len(queries)])
                if outcome != OK:
                    raise _error(f"a warm-up request failed ({why})")
    except Exception as exc:  # connecting failed, or the session broke outside a call
        raise _own(exc) or _error(f"cannot be reached ({said(exc)})") from None


def ready(slot: int) -> WindowResult:
    """Connect, make the warm-up requests, then wait for the others: after N of these, the endpoint answered
    each of the level's N processes."""
    try:
        assert _setup is not None, "init_worker was not called"
        anyio.run(_warm, max(1, _setup.warmup))
        _barrier.wait(BARRIER_TIMEOUT_S)
    except Exception as exc:  # reported to the driver, which raises the project's own error
        return failure("", slot, exc, _barrier)
    return WindowResult(config="", slot=slot)


def run_window(config: str, slot: int, offset: int, duration_s: float, max_count: int | None) -> WindowResult:
    """Requests from query ``offset`` on, in a closed loop, for ``duration_s`` or ``max_count`` requests,
    whichever comes first, starting when every process of the level is connected."""
    try:
        result = anyio.run(_window, config, slot, offset, duration_s, max_count)
    except Exception as exc:  # reported to the driver, which raises the project's own error
        return failure(config, slot, exc, _barrier)
    return result


async def _window(config: str, slot: int, offset: int, duration_s: float, max_count: int | None) -> WindowResult:
    setup = _setup
    assert setup is not None, "init_worker was not called"
    queries, n = setup.queries, len(setup.queries)
    cap = max_count if max_count is not None else 1 << 62
    started: list[int] = []
    qidx: list[int] = []
    e2e: list[int] = []
    outcomes: list[int] = []
    clock = time.perf_counter_ns
    try:
        async with connect(setup.service) as call:
            outcome, why = await _ask(call, queries[offset % n])  # unrecorded: the connection warm
            if outcome != OK:
                raise _error(f"a request before the window failed ({why})")
            await anyio.to_thread.run_sync(_barrier.wait, BARRIER_TIMEOUT_S)
            cpu0 = time.process_time()
            t_start = end = clock()
            deadline = t_start + int(duration_s * 1e9)
            failed_in_a_row, i = 0, 0
            while i < cap:
                t0 = clock()
                if t0 >= deadline:
                    break
                q = (offset + i) % n
                outcome, why = await _ask(call, queries[q])
                end = clock()
                started.append(t0 - t_start)
                qidx.append(q)
                e2e.append(end - t0)
                outcomes.append(outcome)
                failed_in_a_row = 0 if outcome == OK else failed_in_a_row + 1
                if failed_in_a_row >= MAX_FAILED_IN_A_ROW:
                    raise _error(f"{failed_in_a_row} requests in a row failed under load (the last: {why})")
                i += 1
            cpu = time.process_time() - cpu0
    except Exception as exc:  # connecting failed, or the session broke outside a call
        raise _own(exc) or _error(f"cannot be reached or stopped answering ({said(exc)})") from None
    if outcomes and OK not in outcomes:
        raise _error(f"answered none of {len(outcomes)} requests of a window (the last: {why})")
    return WindowResult(
        config=config,
        slot=slot,
        started_ns=np.asarray(started, dtype=np.int64),
        query_index=np.asarray(qidx, dtype=np.int32),
        search_ns=None,
        e2e_ns=np.asarray(e2e, dtype=np.int64),
        post_ns=None,
        outcome=np.asarray(outcomes, dtype=np.int8),
        wall_ns=end - t_start,
        cpu_s=cpu,
    )
