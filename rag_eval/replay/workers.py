"""What a Dask worker does for the replay: replay one batch of queries (:class:`BatchTask`) through the same
:class:`~rag_eval.replay.batches.Replayer` as a serial run, with the search timings the driver took, and write
the batch's part itself (into the run directory's ``.parts``, or under a parts URL). A worker thread keeps its
Milvus client for the replay's later batches; on Milvus Lite (one process per file) it searches its own copy of
the built file, removed when the replay ends. Nothing here imports dask (:mod:`rag_eval.cluster.tasks` does).
"""

from __future__ import annotations

import shutil
import tempfile
import threading
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np

from rag_eval.core.errors import RagEvalError, RunStoreError, SearchUnavailableError
from rag_eval.experiment import ConfigSpec
from rag_eval.files import replaced
from rag_eval.replay.batches import BatchTiming, Replayer, replay_gc
from rag_eval.rundir import parts
from rag_eval.rundir.rows import Truth, rows_to_table
from rag_eval.search.milvus import MilvusSearch, SearchTarget


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
            self.search = MilvusSearch(target, self._encode, fixed_rows=True)
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
        with replay_gc():  # as in a serial replay: the collector leaves the ground truth alone
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
    from fsspec.implementations.local import LocalFileSystem

    table = rows_to_table(rows)
    name = parts.part_name(number)
    fs, root = fsspec.core.url_to_fs(parts_url)
    try:
        if isinstance(fs, LocalFileSystem):
            with replaced(Path(root) / name) as tmp:
                parts.write(table, tmp)
            return
        fs.makedirs(root, exist_ok=True)
        temporary, final = f"{root.rstrip('/')}/.{name}.tmp", f"{root.rstrip('/')}/{name}"
        with fs.open(temporary, "wb") as fh:
            parts.write(table, fh)
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
