"""The replay plan and the two ways to carry it out.

The replay step (:mod:`rag_eval.replay.step`) builds one :class:`ReplayPlan` (what to replay) and
picks one strategy from the run's execution settings (:func:`strategy_for`):

- :class:`SerialReplay`: every batch in this process, its searches timed as it is replayed;
- :class:`DaskReplay`: the searches timed in this process first, serially, before any worker searches (no
  load of the replay's own beside a timed search), then each batch a task on Dask workers
  (:mod:`rag_eval.cluster.tasks`) with those timings.

Either way every batch not yet done gets the same rows, in the run store's ``.parts``; only where it is
replayed differs, and the ``execution`` note of ``summary.json`` that says so comes from the strategy.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np

from rag_eval.cluster.settings import Cluster
from rag_eval.cluster.tasks import Stream, connect, stream
from rag_eval.core.errors import RunStoreError
from rag_eval.core.ports import KnowledgeSearchPort
from rag_eval.embed.embedders import VectorResolver
from rag_eval.experiment import ConfigSpec
from rag_eval.experiment.latency import TimingPlan
from rag_eval.replay.batches import BatchTiming, Replayer, batches
from rag_eval.replay.prepare import Progress
from rag_eval.replay.workers import BatchTask, WorkerJob, release, run_batch
from rag_eval.rundir.directory import RunStore
from rag_eval.rundir.rows import Truth
from rag_eval.search.milvus import SearchTarget

SERIAL = {"replay": "serial, in the run's own process", "search_timing": "in the same pass, batch by batch"}


@dataclass(frozen=True, slots=True, kw_only=True)
class ReplayPlan:
    """What a replay replays, decided before any batch runs: the queries in order (a query's index is its
    position), under which configs, against which ground truth and collection, in which batches, timed how,
    and which batches an earlier, interrupted run already finished.

    >>> from rag_eval.search.milvus import IndexSpec
    >>> plan = ReplayPlan(
    ...     queries=(("q0", "a"), ("q1", "b"), ("q2", "c")), texts=("a", "b", "c"), resolver=VectorResolver("m"),
    ...     configs=(), truth=Truth(chunks={}, relevance={}, doc_relevance={}),
    ...     target=SearchTarget(uri="kb.db", collection="kb", index=IndexSpec.flat()), batch_size=2,
    ...     done=frozenset({0}),
    ... )
    >>> plan.batches, plan.todo
    ([range(0, 2), range(2, 3)], [1])
    """

    queries: tuple[tuple[str, str], ...]  # (id, text)
    texts: tuple[str, ...]  # each query's normalised text: the key of its vector
    resolver: VectorResolver  # every text's vector, each one resolved before the plan was made
    configs: tuple[ConfigSpec, ...]
    truth: Truth
    target: SearchTarget  # where the replay searches, its collection named
    batch_size: int
    warmup: int = 5  # searches before each timed search, not recorded
    timing: TimingPlan = field(default_factory=TimingPlan)  # which queries get their search timed
    done: frozenset[int] = frozenset()  # batches already in the run store (a resumed run's)

    @property
    def batches(self) -> list[range]:
        """Every batch of query indices, by batch number."""
        return batches(len(self.queries), self.batch_size)

    @property
    def todo(self) -> list[int]:
        """The numbers of the batches still to replay."""
        return [number for number in range(len(self.batches)) if number not in self.done]

    def vector(self, text: str) -> np.ndarray:
        return query_vector(self.resolver, text)


def query_vector(resolver: VectorResolver, text: str) -> np.ndarray:
    """A query text's vector, resolved before the replay began."""
    vector = resolver.lookup(text)
    assert vector is not None  # every text was resolved before the replay began
    return vector


def encoder(resolver: VectorResolver) -> Callable[[Sequence[str]], list[list[float]]]:
    """The search port's encoder: the resolved vectors of a batch's texts."""

    def encode(batch: Sequence[str]) -> list[list[float]]:
        # a batch's vectors become lists only now: all of them as lists would be 1.2 GB at 100,000 queries
        return [query_vector(resolver, t).tolist() for t in batch]

    return encode


@dataclass(frozen=True, slots=True, kw_only=True)
class ReplayOutcome:
    """What a strategy leaves besides the parts: the cost of this session's search timing pass, and where
    the replay ran and how its latency was measured (``summary.json``'s ``execution``)."""

    timing_seconds: float
    execution: dict[str, str]


class ReplayStrategy(Protocol):
    """One way to carry out a :class:`ReplayPlan`."""

    def run(self, plan: ReplayPlan, port: KnowledgeSearchPort, store: RunStore, progress: Progress) -> ReplayOutcome:
        """Every batch of ``plan`` not done into ``store``'s parts. ``port`` is this process's open search
        client (the caller closes it; a strategy may close it sooner, once this process searches no more)."""
        ...


@contextmanager
def strategy_for(cluster: Cluster | None) -> Iterator[ReplayStrategy]:
    """The strategy of the run's execution settings: serial without a cluster, else Dask on ``cluster``,
    reached now (an unreachable scheduler is refused before the run directory gets its parts)."""
    if cluster is None:
        yield SerialReplay()
        return
    with connect(cluster) as client:
        yield DaskReplay(cluster=cluster, client=client)


@dataclass(frozen=True, slots=True, kw_only=True)
class SerialReplay:
    """Every batch in this process, in order, each one's searches timed as it is replayed."""

    def run(self, plan: ReplayPlan, port: KnowledgeSearchPort, store: RunStore, progress: Progress) -> ReplayOutcome:
        replayer = _replayer(plan, port, progress)
        replayer.run(plan.queries, store, batch_size=plan.batch_size, skip=plan.done)
        return ReplayOutcome(timing_seconds=replayer.timing_seconds, execution=dict(SERIAL))


@dataclass(frozen=True, slots=True, kw_only=True)
class DaskReplay:
    """The searches timed here first, then every batch a task on ``cluster``'s workers (through ``client``,
    connected by :func:`strategy_for`); parts written under a parts URL are taken into ``.parts``."""

    cluster: Cluster
    client: Any  # a distributed.Client on the cluster

    def execution(self) -> dict[str, str]:
        return {
            "replay": f"query batches as Dask tasks on {self.cluster.label()}",
            "search_timing": "in the run's own process, serially, before any worker searches (no concurrent load "
            "from the replay); the workers reuse these timings",
            "postprocess_timing": "in the workers, each batch in one thread, beside the other workers' batches",
        }

    def run(self, plan: ReplayPlan, port: KnowledgeSearchPort, store: RunStore, progress: Progress) -> ReplayOutcome:
        replayer = _replayer(plan, port, progress)
        # timed here, serially, before any worker searches: no load of the replay's own on the backend
        timings = replayer.time_batches(plan.queries, batch_size=plan.batch_size, skip=plan.done)
        port.close()  # this process searches no more: a Lite file is free to be copied for the workers
        elsewhere = self.cluster.parts_url is not None
        url = store.parts_url(self.cluster.parts_url)
        job = WorkerJob(
            token=uuid.uuid4().hex, target=plan.target, configs=plan.configs, truth=plan.truth,
            warmup=plan.warmup, parts_url=url,
        )  # fmt: skip
        progress.log(f"replaying {len(plan.todo)} query batches on {self.cluster.label()}")
        searches = len(replayer.signatures)

        def finished(number: int, queries: int) -> None:
            if elsewhere:
                store.take_part(url, number)
            progress.tick("retrieve", queries * searches)
            progress.tick("post-process", queries * len(plan.configs))

        replay_batches(self.cluster, job, _tasks(plan, timings), done=finished, client=self.client)
        if elsewhere:
            store.drop_parts_url(url)
        absent = sorted(set(timings) - store.finished_batches())
        if absent:  # workers on other machines wrote into a .parts of their own: never a run with fewer queries
            raise RunStoreError(
                f"{len(absent)} query batches the workers finished are not in {store.parts_dir} (batch "
                f"{absent[0]} first): give --parts a directory or URL that both the workers and this process reach",
                path=str(store.parts_dir),
            )
        return ReplayOutcome(timing_seconds=replayer.timing_seconds, execution=self.execution())


def _replayer(plan: ReplayPlan, port: KnowledgeSearchPort, progress: Progress) -> Replayer:
    """The plan's replayer on ``port``, its progress phases announced."""
    replayer = Replayer(
        port, plan.configs, plan.truth, warmup=plan.warmup, timing=plan.timing, tick=progress.tick,
    )  # fmt: skip
    n_timed = sum(len({s.config.retrieve_k for s in specs}) for specs in replayer.signatures.values())
    all_batches = plan.batches
    todo = [all_batches[number] for number in plan.todo]
    timed = plan.timing.timed(len(plan.queries))
    progress.phase("retrieve", sum(len(b) for b in todo) * len(replayer.signatures))
    progress.phase("timing", sum(1 for b in todo for i in b if i in timed) * n_timed)
    progress.phase("post-process", sum(len(b) for b in todo) * len(plan.configs))
    if plan.done:
        progress.log(f"resuming: {len(plan.done)} of {len(all_batches)} query batches already finished")
    return replayer


def _tasks(plan: ReplayPlan, timings: dict[int, BatchTiming]) -> Iterator[BatchTask]:
    """The batches still to run, made as they are submitted (their vectors travel a few at a time)."""
    for number, idx in enumerate(plan.batches):
        if number in timings:
            texts = [plan.texts[i] for i in idx]
            yield BatchTask(
                number=number,
                batch=[(i, *plan.queries[i]) for i in idx],
                texts=texts,
                vectors=np.stack([plan.vector(t) for t in texts]),
                timing=timings[number],
            )


def replay_batches(
    cluster: Cluster,
    job: WorkerJob,
    tasks: Iterable[BatchTask],
    *,
    done: Callable[[int, int], None] = lambda number, queries: None,
    client: Any = None,
) -> int:
    """Run every batch on ``cluster`` (through ``client`` when already connected to it); each worker writes
    its batch's part under ``job.parts_url``. ``done(number, queries)`` after each batch, before the next is
    submitted (where the part is taken in from a parts URL). Returns the batches run."""
    work = Stream(
        fn=run_batch, shared=job, prefix=f"rag-eval-batch-{job.token}", key=lambda task: f"{task.number:05d}",
        what="the replay", lost="run again with --resume to finish the batches not yet written (the others are kept)",
        cleanup=release, token=job.token,
    )  # fmt: skip
    return stream(cluster, work, tasks, done=lambda result: done(*result), client=client)
