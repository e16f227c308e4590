"""The replay's query batches as tasks on Dask distributed: N local worker processes, or a cluster.

The driver (the ``rag-eval run`` process) prepares, ingests and times the searches the timing plan picks,
serially, before any worker starts; then each batch of queries becomes one task. A worker opens its own
Milvus client on the experiment's URI (kept for the worker thread's later batches), replays the batch
through the same :class:`~rag_eval.harness.replay.Replayer` as a serial run, with the driver's search
timings, and writes the batch's part itself: into the run directory's ``.parts`` (a path the workers
reach), or under an fsspec URL (``--parts``), from where the driver moves each finished part into
``.parts``. The driver then assembles the run from ``.parts`` exactly as after a serial replay, and
``--resume`` skips the parts found there.

Milvus Lite: a Lite file can be opened by one process at a time, so each worker thread replays on its
own copy of the built file (copied once, after the driver has closed it; removed when the replay ends).

Only this module imports dask. Scheduling, retries after a lost worker and data transfer are Dask's; the
driver keeps at most a few tasks per worker thread in flight, so the query vectors travel a few batches
at a time.

>>> parse_workers("4"), parse_scheduler("tcp://10.0.0.5:8786"), parse_scheduler("scheduler.local:8786")
(4, 'tcp://10.0.0.5:8786', 'tcp://scheduler.local:8786')
>>> for bad in ("0", "-2", "1.5", "many", "100000"):
...     try:
...         parse_workers(bad)
...     except ConfigError as exc:
...         print(exc.problems[0])
expected a whole number of worker processes from 1 to 256, got '0' @ --workers
expected a whole number of worker processes from 1 to 256, got '-2' @ --workers
expected a whole number of worker processes from 1 to 256, got '1.5' @ --workers
expected a whole number of worker processes from 1 to 256, got 'many' @ --workers
expected a whole number of worker processes from 1 to 256, got '100000' @ --workers
"""

from __future__ import annotations

import logging
import os
import shutil
import tempfile
import threading
import uuid
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager, nullcontext, suppress
from dataclasses import dataclass, replace
from itertools import islice
from pathlib import Path
from typing import Any

import numpy as np

from rag_eval.core.errors import (
    ClusterError,
    ConfigError,
    ConfigProblem,
    RagEvalError,
    RunStoreError,
    SearchUnavailableError,
)
from rag_eval.files import write_parquet
from rag_eval.harness.experiment import ConfigSpec
from rag_eval.harness.replay import BatchTiming, Replayer, long_lived_frozen
from rag_eval.harness.rows import Truth, rows_to_table
from rag_eval.search.milvus import MilvusSearch, SearchTarget

MAX_WORKERS = 256  # local worker processes; a larger cluster is a scheduler's (--scheduler)
CONNECT_TIMEOUT = 10.0  # seconds to reach a scheduler, and for a scheduler's first worker
IN_FLIGHT = 2  # tasks per worker thread submitted ahead: the next batch is there when one finishes


def parse_workers(text: str | int) -> int:
    """``--workers``: a whole number of local worker processes, 1 to :data:`MAX_WORKERS`."""
    value = str(text).strip()
    if not value.isdigit() or not 1 <= int(value) <= MAX_WORKERS:
        raise ConfigError(
            [
                ConfigProblem(
                    "--workers", f"expected a whole number of worker processes from 1 to {MAX_WORKERS}, got {text!r}"
                )
            ]
        )
    return int(value)


def parse_scheduler(text: str) -> str:
    """``--scheduler``: a Dask scheduler address, ``[tcp|tls]://host:port`` (``host:port`` means tcp)."""
    from distributed.comm.addressing import parse_address, parse_host_port

    value = text.strip()
    address = value if "://" in value else f"tcp://{value}"
    problem = f"expected a Dask scheduler address such as tcp://host:8786, got {text!r}"
    try:
        scheme, location = parse_address(address, strict=True)
        host, port = parse_host_port(location)
    except (ValueError, TypeError):
        raise ConfigError([ConfigProblem("--scheduler", problem)]) from None
    if scheme not in ("tcp", "tls") or not host or not isinstance(port, int) or not 0 < port < 65536:
        raise ConfigError([ConfigProblem("--scheduler", problem)])
    return address


def check_parts_url(url: str) -> str:
    """``--parts``: a local directory or an fsspec URL the workers and the driver both reach."""
    import fsspec

    try:
        fsspec.core.url_to_fs(url)
    except (ValueError, ImportError) as exc:
        raise ConfigError([ConfigProblem("--parts", f"not a usable path or fsspec URL {url!r}: {exc}")]) from None
    return url


@dataclass(frozen=True, slots=True, kw_only=True)
class Cluster:
    """Where a replay's batches run: ``workers`` local processes, or the workers of ``scheduler``.

    >>> Cluster(workers=2).label(), Cluster(scheduler="tcp://h:8786").label()
    ('2 local worker processes (Dask LocalCluster)', 'the workers of the Dask scheduler at tcp://h:8786')
    """

    workers: int | None = None
    scheduler: str | None = None
    parts_url: str | None = None  # where workers write parts; None: the run directory's .parts
    connect_timeout: float = CONNECT_TIMEOUT

    def label(self) -> str:
        if self.scheduler is not None:
            return f"the workers of the Dask scheduler at {self.scheduler}"
        n = self.workers or 1
        return f"{n} local worker process{'es' if n != 1 else ''} (Dask LocalCluster)"


@dataclass(frozen=True, slots=True, kw_only=True)
class WorkerJob:
    """What every task of one replay shares (sent to each worker once)."""

    token: str  # this replay: a worker's Milvus clients and Lite copies are kept under it
    target: SearchTarget  # where the replay searches, its collection named
    configs: tuple[ConfigSpec, ...]
    truth: Truth
    warmup: int
    prime: bool
    parts_url: str  # a local directory, or an fsspec URL (this replay's own sub-directory)


@dataclass(frozen=True, slots=True, kw_only=True)
class BatchTask:
    """One batch of queries: (index, id, text) each, the vectors of their normalized texts, their timings."""

    number: int
    batch: list[tuple[int, str, str]]
    texts: list[str]
    vectors: np.ndarray
    timing: BatchTiming


def part_name(number: int) -> str:
    return f"batch-{number:05d}.parquet"  # as RunStore names the parts it reads


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
    parts_dir: Path,
    done: Callable[[int, int], None] = lambda number, queries: None,
    client: Any = None,
) -> int:
    """Run every task on ``cluster`` (through ``client`` when already connected to it); each finished part
    ends up in ``parts_dir`` (moved there from ``job.parts_url`` when that is elsewhere). ``done(number,
    queries)`` after each batch. Returns the batches run. The first failing batch's error is raised (the
    project's own errors as they are)."""
    from distributed import as_completed
    from distributed.client import FutureCancelledError

    remote = Path(job.parts_url) != parts_dir
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
                if remote:
                    fetch_part(job.parts_url, number, parts_dir)
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
    if remote:
        remove_session(job.parts_url)
    return ran


def fetch_part(parts_url: str, number: int, parts_dir: Path) -> None:
    """Move a finished part from ``parts_url`` into ``parts_dir`` (atomically: a resume reads only whole parts)."""
    import fsspec

    fs, root = fsspec.core.url_to_fs(parts_url)
    name = part_name(number)
    fd, tmp = tempfile.mkstemp(prefix=f".{name}.", suffix=".tmp", dir=parts_dir)
    os.close(fd)
    try:
        fs.get_file(f"{root.rstrip('/')}/{name}", tmp)
        os.replace(tmp, parts_dir / name)
        fs.rm_file(f"{root.rstrip('/')}/{name}")
    except OSError as exc:
        Path(tmp).unlink(missing_ok=True)
        raise RunStoreError(f"cannot move a finished batch in from {parts_url}: {exc}", path=str(parts_dir)) from exc


def remove_session(parts_url: str) -> None:
    """Remove this replay's own directory under the parts URL (never anything else)."""
    import fsspec

    fs, root = fsspec.core.url_to_fs(parts_url)
    try:
        if fs.exists(root):
            fs.rm(root, recursive=True)
    except OSError:
        pass  # empty by now: a leftover directory holds nothing anyone reads


def session_url(base: str | None, parts_dir: Path) -> str:
    """Where this replay's workers write: ``parts_dir``, or a new directory of its own under ``base``."""
    if base is None:
        return str(parts_dir)
    return f"{base.rstrip('/')}/rag-eval-{uuid.uuid4().hex[:12]}"


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
        replayer = Replayer(port.search, job.configs, job.truth, warmup=job.warmup, prime=job.prime)
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
            write_parquet(Path(root) / name, table)
            return
        fs.makedirs(root, exist_ok=True)
        temporary, final = f"{root.rstrip('/')}/.{name}.tmp", f"{root.rstrip('/')}/{name}"
        with fs.open(temporary, "wb") as fh:
            pq.write_table(table, fh, compression="zstd")
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
