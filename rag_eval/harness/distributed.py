"""The replay's query batches, and a run's comparisons, as tasks on Dask distributed: N local worker
processes, or a cluster.

Each batch of queries becomes one task (:class:`BatchTask`), with the search timings the driver (the
``rag-eval run`` process) took for it beforehand (:class:`~rag_eval.harness.strategies.DaskReplay`). A
worker opens its own Milvus client on the experiment's URI (kept for the worker thread's later batches),
replays the batch through the same :class:`~rag_eval.harness.replay.Replayer` as a serial run, with the
driver's timings, and writes the batch's part itself: into the run directory's ``.parts`` (a path the
workers reach), or under a parts URL (``--parts``), from where the run store takes it into ``.parts``.

Milvus Lite: a Lite file can be opened by one process at a time, so each worker thread replays on its
own copy of the built file (copied once, after the driver has closed it; removed when the replay ends).

A comparison (a candidate config against its baseline) is one task (:func:`tasks_on`): its metrics share
its flip matrices, and its streams are seeded by the seed and its configs' names, so the document is the
one a comparison in the driver writes.

Only this module imports dask (the flags are read by :mod:`rag_eval.harness.execution`, without it).
Scheduling, retries after a lost worker and data transfer are Dask's; the driver keeps at most a few
tasks per worker thread in flight, so the query vectors travel a few batches at a time.
"""

from __future__ import annotations

import logging
import shutil
import tempfile
import threading
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager, nullcontext, suppress
from dataclasses import dataclass, replace
from itertools import islice
from pathlib import Path
from typing import Any

import numpy as np

from rag_eval.core.errors import ClusterError, RagEvalError, RunStoreError, SearchUnavailableError
from rag_eval.files import write_parquet
from rag_eval.harness.execution import Cluster
from rag_eval.harness.experiment import ConfigSpec
from rag_eval.harness.parts import COMPRESSION, part_name
from rag_eval.harness.replay import BatchTiming, Replayer, long_lived_frozen
from rag_eval.harness.rows import Truth, rows_to_table
from rag_eval.search.milvus import MilvusSearch, SearchTarget

IN_FLIGHT = 2  # tasks per worker thread submitted ahead: the next batch is there when one finishes


@dataclass(frozen=True, slots=True, kw_only=True)
class WorkerJob:
    """What every task of one replay shares (sent to each worker once)."""

    token: str  # this replay: a worker's Milvus clients and Lite copies are kept under it
    target: SearchTarget  # where the replay searches, its collection named
    configs: tuple[ConfigSpec, ...]
    truth: Truth
    warmup: int
    parts_url: str  # a local directory, or an fsspec URL (this replay's own sub-directory)


@dataclass(frozen=True, slots=True, kw_only=True)
class BatchTask:
    """One batch of queries: (index, id, text) each, the vectors of their normalized texts, their timings."""

    number: int
    batch: list[tuple[int, str, str]]
    texts: list[str]
    vectors: np.ndarray
    timing: BatchTiming


# -- the driver -----------------------------------------------------------------------------------


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


def replay_batches(
    cluster: Cluster,
    job: WorkerJob,
    tasks: Iterable[BatchTask],
    *,
    done: Callable[[int, int], None] = lambda number, queries: None,
    client: Any = None,
) -> int:
    """Run every task on ``cluster`` (through ``client`` when already connected to it); each worker writes
    its batch's part under ``job.parts_url``. ``done(number, queries)`` after each batch, before the next
    is submitted (where the part is taken in from a parts URL): an error it raises ends the replay as a
    batch's does. Returns the batches run. The first failing batch's error is raised (the project's own
    errors as they are)."""
    from distributed import as_completed
    from distributed.client import FutureCancelledError

    ran = 0
    with connect(cluster) if client is None else nullcontext(client) as client:
        shared = client.scatter(job, broadcast=True, hash=False)
        threads = max(1, sum(client.nthreads().values()))
        pending = iter(tasks)

        def submit(task: BatchTask) -> Any:
            return client.submit(
                run_batch, shared, task, key=f"rag-eval-batch-{job.token}-{task.number:05d}", pure=False
            )

        running = as_completed([submit(t) for t in islice(pending, IN_FLIGHT * threads)], loop=client.loop)
        try:
            for future in running:
                number, queries = future.result()
                done(number, queries)
                ran += 1
                following = next(pending, None)
                if following is not None:
                    running.add(submit(following))
        except BaseException as exc:
            client.cancel(list(running.futures))
            if isinstance(exc, FutureCancelledError | OSError) and not isinstance(exc, RunStoreError):
                raise ClusterError(
                    f"the replay lost its Dask workers or scheduler ({type(exc).__name__}: {exc}): run again "
                    "with --resume to finish the batches not yet written",
                    address=cluster.scheduler,
                ) from exc
            if type(exc).__name__ == "KilledWorker":
                raise ClusterError(
                    f"a Dask worker died replaying a batch ({exc}): run again with --resume (the batches "
                    "already written are kept)",
                    address=cluster.scheduler,
                ) from exc
            raise
        finally:
            with suppress(Exception):
                client.run(release, job.token, on_error="ignore")
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
            futures = client.map(fn, list(tasks), [common] * len(tasks), pure=False)
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


# -- the worker -------------------------------------------------------------------------------------

_PORTS: dict[tuple[str, int], _WorkerPort] = {}  # (replay token, thread): this worker's open clients
_PORTS_LOCK = threading.Lock()


class _WorkerPort:
    """A worker thread's Milvus client for one replay (on its own copy of a Lite file)."""

    def __init__(self, job: WorkerJob) -> None:
        self.vectors: dict[str, np.ndarray] = {}
        self.copy_dir: str | None = None
        target = job.target
        if not target.is_server:
            self.copy_dir = tempfile.mkdtemp(prefix="rag-eval-lite-")
            target = replace(target, uri=_copy_lite(target.uri, Path(self.copy_dir)))
        try:
            self.search = MilvusSearch(target, self._encode)
        except BaseException:
            self._remove_copy()
            raise

    def _encode(self, texts: Sequence[str]) -> list[list[float]]:
        return [self.vectors[t].tolist() for t in texts]

    def close(self) -> None:
        try:
            self.search.close()
        finally:
            self._remove_copy()

    def _remove_copy(self) -> None:
        if self.copy_dir is not None:
            shutil.rmtree(self.copy_dir, ignore_errors=True)


def _copy_lite(uri: str, into: Path) -> str:
    source = Path(uri).expanduser().absolute()
    if not source.exists():
        raise SearchUnavailableError(
            f"the Milvus Lite file {source} is not on this worker's machine: replay on local workers "
            "(--workers), or use a Milvus server the cluster reaches",
            uri=str(source),
        )
    target = into / source.name
    try:
        if source.is_dir():  # Lite 3.2 keeps a directory
            shutil.copytree(source, target, ignore=shutil.ignore_patterns("*.lock", "LOCK"))
        else:
            shutil.copy2(source, target)
    except OSError as exc:
        raise SearchUnavailableError(
            f"cannot copy the Milvus Lite file {source} for a worker: {exc}", uri=str(source)
        ) from exc
    return str(target)


def _port(job: WorkerJob) -> _WorkerPort:
    key = (job.token, threading.get_ident())
    with _PORTS_LOCK:
        port = _PORTS.get(key)
    if port is None:
        port = _WorkerPort(job)
        with _PORTS_LOCK:
            _PORTS[key] = port
    return port


def run_batch(job: WorkerJob, task: BatchTask) -> tuple[int, int]:
    """On a worker: replay one batch as a serial run does, write its part. Returns (number, queries)."""
    try:
        port = _port(job)
        port.vectors = dict(zip(task.texts, task.vectors, strict=True))
        replayer = Replayer(port.search, job.configs, job.truth, warmup=job.warmup)
        with long_lived_frozen():  # as in a serial replay: the collector leaves the ground truth alone
            write_part(job.parts_url, task.number, replayer.run_batch(task.batch, task.timing))
        port.vectors = {}
    except RagEvalError as exc:
        # to the driver as the project's error alone: its cause is pymilvus's or gRPC's, which need not
        # pickle (the driver would get a bare Exception) and can even loop
        exc.__cause__ = exc.__context__ = None
        exc.__suppress_context__ = True
        raise
    except Exception as exc:
        cut_cycles(exc)
        raise
    return task.number, len(task.batch)


def cut_cycles(exc: BaseException) -> None:
    """Cut an exception's chain of causes where it loops back on itself. Dask follows ``__cause__`` to
    send a task's error to the driver, forever when the chain loops (a pymilvus connection error's does).

    >>> a, b = ValueError("a"), KeyError("b")
    >>> a.__cause__, b.__cause__ = b, a
    >>> cut_cycles(a); a.__cause__ is b, b.__cause__ is None
    (True, True)
    """
    seen = {id(exc)}
    current: BaseException | None = exc
    while current is not None:
        following = current.__cause__ if current.__cause__ is not None else current.__context__
        if following is not None and id(following) in seen:
            current.__cause__ = current.__context__ = None
            return
        if following is not None:
            seen.add(id(following))
        current = following


def write_part(parts_url: str, number: int, rows: list[dict[str, object]]) -> None:
    """A batch's rows as a part, written whole or not at all (a local path or an fsspec URL)."""
    import fsspec
    import pyarrow.parquet as pq
    from fsspec.implementations.local import LocalFileSystem

    table = rows_to_table(rows)
    name = part_name(number)
    fs, root = fsspec.core.url_to_fs(parts_url)
    try:
        if isinstance(fs, LocalFileSystem):
            write_parquet(Path(root) / name, table, compression=COMPRESSION, statistics=False)
            return
        fs.makedirs(root, exist_ok=True)
        temporary, final = f"{root.rstrip('/')}/.{name}.tmp", f"{root.rstrip('/')}/{name}"
        with fs.open(temporary, "wb") as fh:
            pq.write_table(table, fh, compression=COMPRESSION, write_statistics=False)
        fs.mv(temporary, final)
    except OSError as exc:
        raise RunStoreError(f"cannot write a batch: {exc}", path=parts_url) from exc


def release(token: str) -> int:
    """On a worker: close this replay's Milvus clients and remove its Lite copies. Returns how many."""
    with _PORTS_LOCK:
        mine = [key for key in _PORTS if key[0] == token]
        ports = [_PORTS.pop(key) for key in mine]
    for port in ports:
        port.close()
    return len(ports)
