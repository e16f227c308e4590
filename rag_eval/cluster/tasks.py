"""Dask, and nothing else of the project: a client on a cluster (local worker processes or a scheduler's),
tasks streamed to it a few at a time, or mapped over it. The replay and the comparison hand it their tasks
(:mod:`rag_eval.replay.workers`, :mod:`rag_eval.compare.tasks`); scheduling, retries after a lost worker and
data transfer are Dask's. Only this module imports dask; the flags are read by :mod:`rag_eval.cluster.settings`.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager, nullcontext, suppress
from dataclasses import dataclass
from itertools import islice
from typing import Any

from rag_eval.cluster.settings import Cluster
from rag_eval.core.errors import ClusterError, RunStoreError

IN_FLIGHT = 2  # tasks per worker thread submitted ahead: the next one is there when one finishes


@dataclass(frozen=True, slots=True, kw_only=True)
class Stream:
    """Tasks run one by one on the workers, a few per worker thread in flight: ``fn(shared, task)`` for
    each, ``shared`` sent to every worker once, each task's Dask key ``f"{prefix}-{key(task)}"``;
    ``cleanup(token)`` runs on every worker at the end (its errors ignored). ``lost`` ends the message of a
    run whose workers or scheduler were lost (what to do then)."""

    fn: Callable[[Any, Any], Any]
    shared: Any
    prefix: str
    key: Callable[[Any], str]
    what: str  # what the tasks are, for the messages ("the replay")
    lost: str
    cleanup: Callable[[str], Any] | None = None
    token: str = ""


@contextmanager
def connect(cluster: Cluster) -> Iterator[Any]:
    """A Dask client on ``cluster``: a LocalCluster of processes started now (closed after), or the
    scheduler's; refused (exit 3) when it cannot be reached or has no worker within the timeout."""
    import dask
    from distributed import Client, LocalCluster

    local = None
    try:
        if cluster.scheduler is None:
            # processes (the GIL would serialise the post-processing), one thread each: one batch at a time;
            # without the workers' sampling profiler, which takes the GIL every 10 ms from the replay; the
            # scheduler's HTTP server on a free port (a fixed one would collide with another run's)
            with dask.config.set({"distributed.worker.profile.enabled": False}):
                local = LocalCluster(
                    n_workers=cluster.workers or 1, threads_per_worker=1, processes=True, dashboard_address=":0",
                    silence_logs=logging.ERROR,
                )  # fmt: skip
            client = Client(local, set_as_default=False)
        else:
            client = Client(cluster.scheduler, timeout=cluster.connect_timeout, set_as_default=False)
    except (OSError, TimeoutError) as exc:
        if local is not None:
            local.close()
        where = cluster.scheduler or "a local cluster"
        raise ClusterError(
            f"cannot reach the Dask scheduler at {where} ({exc}): start it, or check the address and the network",
            address=cluster.scheduler,
        ) from exc
    try:
        try:
            client.wait_for_workers(1, timeout=cluster.connect_timeout)
        except (OSError, TimeoutError) as exc:
            raise ClusterError(
                f"the Dask scheduler at {cluster.scheduler} has no worker: start some (dask worker ADDRESS)",
                address=cluster.scheduler,
            ) from exc
        yield client
    finally:
        client.close()
        if local is not None:
            local.close()


def stream(
    cluster: Cluster,
    work: Stream,
    tasks: Iterable[Any],
    *,
    done: Callable[[Any], None] = lambda result: None,
    client: Any = None,
) -> int:
    """Run every task of ``tasks`` as ``work`` says on ``cluster`` (through ``client`` when already connected
    to it). ``done(result)`` after each task, before the next is submitted: an error it raises ends the
    stream as a task's does. Returns the tasks run. The first failing task's error is raised (the project's
    own errors as they are); lost workers or a lost scheduler are exit 3."""
    from distributed import as_completed
    from distributed.client import FutureCancelledError

    ran = 0
    with connect(cluster) if client is None else nullcontext(client) as client:
        shared = client.scatter(work.shared, broadcast=True, hash=False)
        threads = max(1, sum(client.nthreads().values()))
        pending = iter(tasks)

        def submit(task: Any) -> Any:
            return client.submit(work.fn, shared, task, key=f"{work.prefix}-{work.key(task)}", pure=False)

        running = as_completed([submit(t) for t in islice(pending, IN_FLIGHT * threads)], loop=client.loop)
        try:
            for future in running:
                done(future.result())
                ran += 1
                following = next(pending, None)
                if following is not None:
                    running.add(submit(following))
        except BaseException as exc:
            client.cancel(list(running.futures))
            if isinstance(exc, FutureCancelledError | OSError) and not isinstance(exc, RunStoreError):
                raise ClusterError(
                    f"{work.what} lost its Dask workers or scheduler ({type(exc).__name__}: {exc}): {work.lost}",
                    address=cluster.scheduler,
                ) from exc
            if type(exc).__name__ == "KilledWorker":
                raise ClusterError(
                    f"a Dask worker died in {work.what} ({exc}): {work.lost}", address=cluster.scheduler
                ) from exc
            raise
        finally:
            if work.cleanup is not None:
                with suppress(Exception):
                    client.run(work.cleanup, work.token, on_error="ignore")
    return ran


@contextmanager
def tasks_on(cluster: Cluster) -> Iterator[Callable[[Callable[[Any, Any], Any], Sequence[Any], Any], list[Any]]]:
    """A task map on ``cluster`` (connected now, closed after): ``run(fn, tasks, shared)`` calls
    ``fn(task, shared)`` for every task on the workers (``shared`` sent to each worker once) and returns
    the results in the tasks' order. A lost worker or scheduler is exit 3; a task's own error is raised
    as it is."""
    from distributed.client import FutureCancelledError

    with connect(cluster) as client:

        def run(fn: Callable[[Any, Any], Any], tasks: Sequence[Any], shared: Any) -> list[Any]:
            if not tasks:
                return []
            common = client.scatter(shared, broadcast=True, hash=False)
            # the tasks' data go to the workers as data, not inside the task graph (a graph of tens of MB, the
            # comparison units of 20,000 queries, is slow to build and send and makes Dask warn)
            sent = client.scatter(list(tasks), hash=False)
            futures = client.map(fn, sent, [common] * len(tasks), pure=False)
            try:
                return list(client.gather(futures))
            except BaseException as exc:
                client.cancel(futures)
                if isinstance(exc, FutureCancelledError | OSError) or type(exc).__name__ == "KilledWorker":
                    raise ClusterError(
                        f"the comparison lost its Dask workers or scheduler ({type(exc).__name__}: {exc}): "
                        "compare again (rag-eval compare RUN_DIR)",
                        address=cluster.scheduler,
                    ) from exc
                raise

        yield run
