"""Replay: every labelled query through the production pipeline, under every config.

Per batch of queries: transform each query, time each config's own search for the queries the timing plan
picks (:mod:`rag_eval.experiment.latency`; identical requests share one measurement: :func:`timing_groups`),
retrieve ONCE per search signature at the largest retrieve-k any config of it needs, run each config's
post-process, packing and projection on its first retrieve-k of those shared hits, and write the batch's rows
to the run store. Configs that differ only after retrieval never query Milvus again. The steps and what the
latency columns hold: docs/harness.md, "Replay".
"""

from __future__ import annotations

import gc
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from collections.abc import Set as AbstractSet
from contextlib import contextmanager
from dataclasses import dataclass, replace

from rag_eval.core.lookup import LookupRecord, Pipeline
from rag_eval.core.ports import BatchKnowledgeSearchPort, KnowledgeSearchPort
from rag_eval.core.transform import KnowledgeQueryTransformer, QueryHints
from rag_eval.core.types import KnowledgeSearchHit, KnowledgeSearchRequest, SearchMode
from rag_eval.experiment import ConfigSpec
from rag_eval.experiment.latency import TimingPlan
from rag_eval.rundir.directory import RunStore
from rag_eval.rundir.rows import RowLookup, RowTiming, Truth, build_rows

Tick = Callable[[str, int], None]
# (config, query index, query id, record, search µs, post-process + projection thread CPU µs)
Lookups = list[tuple[str, int, str, LookupRecord, float, float]]


@dataclass(frozen=True, slots=True)
class Signature:
    """What makes two configs' searches differ before retrieve-k."""

    mode: SearchMode
    category_filter: str | None
    group_size: int  # only meaningful for GROUPED

    @classmethod
    def of(cls, spec: ConfigSpec) -> Signature:
        c = spec.config
        group = c.max_chunks_per_document if spec.mode is SearchMode.GROUPED else 1
        return cls(spec.mode, c.category_filter, group)

    def request(self, query: str, top_k: int, category: str | None = None) -> KnowledgeSearchRequest:
        """The search of ``query``; ``category``: a request's own category filter (a query log's), in place of
        the config's."""
        chosen = category if category is not None else self.category_filter
        return KnowledgeSearchRequest(
            query=query, top_k=top_k, category_filter=chosen, mode=self.mode, group_size=self.group_size
        )

    def label(self) -> str:
        parts = [self.mode.value, "no filter" if self.category_filter is None else f"category {self.category_filter!r}"]
        if self.mode is SearchMode.GROUPED:
            parts.append(f"group size {self.group_size}")
        return ", ".join(parts)


# a batch's search timings: the positions (in the batch) of its timed queries, and each distinct search's
# microseconds for those queries, in that order
BatchTiming = tuple[list[int], dict[tuple[Signature, int], list[float]]]


YOUNG_COLLECTION = 50_000  # allocations between two collections of the youngest generation in a replay


@contextmanager
def replay_gc() -> Iterator[None]:
    """The cyclic garbage collector during a replay: kept off what exists before it (data set, labels, ground
    truth: alive until it ends; a full collection walks every object, and with a data set in memory one took
    60 ms of a 260 ms replay; left alone when something else froze objects already), and collecting the
    youngest generation every :data:`YOUNG_COLLECTION` allocations instead of 700: a batch's records and rows
    live until its part is written, and at 700 the collector scanned them again and again (10% of a replay's
    time measured, 0.69 of 7.1 s; the replay x0.85-x0.94 at 50,000 in paired runs, docs/performance.md). The
    thresholds as they were are restored once the last replay of the process ends (a worker's batches run on
    several threads at once); a collector switched off (threshold 0) stays off."""
    global _replays, _before
    with _GC_LOCK:
        if not _replays:
            thresholds = gc.get_threshold()
            freeze = not gc.get_freeze_count()  # left alone when something else froze objects already
            _before = (thresholds, freeze)
            if thresholds[0]:
                gc.set_threshold(max(thresholds[0], YOUNG_COLLECTION), *thresholds[1:])
            if freeze:
                gc.freeze()
        _replays += 1
    try:
        yield
    finally:
        with _GC_LOCK:
            _replays -= 1
            if not _replays and _before is not None:
                (saved, froze), _before = _before, None
                if froze:
                    gc.unfreeze()
                gc.set_threshold(*saved)


_GC_LOCK = threading.Lock()
_replays = 0  # replays running in this process (replay_gc entered, not yet left)
_before: tuple[tuple[int, ...], bool] | None = None  # the thresholds, and whether replay_gc froze, before them


def _median(values: Sequence[int]) -> int:
    """The median of an odd number of timings; of an even number, the lower middle one (a timing that was
    measured, never a mean of two)."""
    ordered = sorted(values)
    return ordered[(len(ordered) - 1) // 2]


def batches(n: int, size: int) -> list[range]:
    return [range(i, min(n, i + size)) for i in range(0, n, size)]


def timing_groups(configs: Sequence[ConfigSpec]) -> dict[str, tuple[str, list[str]]]:
    """For each config, the search it times (signature and retrieve-k, as a label) and every config
    that shares that one measurement (itself included, in experiment order)."""
    members: dict[tuple[Signature, int], list[str]] = {}
    for spec in configs:
        members.setdefault((Signature.of(spec), spec.config.retrieve_k), []).append(spec.name)
    out: dict[str, tuple[str, list[str]]] = {}
    for (sig, k), names in members.items():
        for name in names:
            out[name] = (f"{sig.label()}, retrieve-k {k}", names)
    return out


class Replayer:
    def __init__(
        self,
        port: KnowledgeSearchPort,
        configs: Sequence[ConfigSpec],
        truth: Truth,
        *,
        warmup: int = 5,
        timing: TimingPlan | None = None,
        tick: Tick | None = None,
    ) -> None:
        self.port = port
        self.configs = list(configs)
        self.truth = truth
        self.transformer = KnowledgeQueryTransformer()  # the production transform (L0 hints), stateless
        self.warmup = warmup
        self.timing = timing or TimingPlan()
        self.tick = tick or (lambda phase, n: None)
        self.signatures: dict[Signature, list[ConfigSpec]] = {}
        for spec in self.configs:
            self.signatures.setdefault(Signature.of(spec), []).append(spec)
        self._warmed: set[tuple[Signature, int]] = set()
        self._timed: frozenset[int] | None = None  # query indices to time; None: every query
        self.timing_seconds = 0.0  # wall time of the timing searches (warm-up included): the measurement's cost

    def run(
        self,
        queries: Sequence[tuple[str, str]],
        store: RunStore,
        *,
        batch_size: int,
        skip: AbstractSet[int] = frozenset(),
    ) -> int:
        """Replay ``queries`` ((id, text) pairs) in batches; returns the batches run now."""
        self._timed = self.timing.timed(len(queries))
        ran = 0
        with replay_gc():
            for number, idx in enumerate(batches(len(queries), batch_size)):
                if number in skip:
                    self.tick("skipped", len(idx))
                    continue
                store.write_batch(number, self.run_batch([(i, *queries[i]) for i in idx]))
                ran += 1
        return ran

    def run_batch(
        self, batch: Sequence[tuple[int, str, str]], timing: BatchTiming | None = None
    ) -> list[dict[str, object]]:
        """One batch of queries, replayed: its rows, one per query and config (``timing``: its searches
        timed beforehand by :meth:`time_batches`, else timed now)."""
        return self.rows(self.lookups(batch, timing))

    def time_batches(
        self, queries: Sequence[tuple[str, str]], *, batch_size: int, skip: AbstractSet[int] = frozenset()
    ) -> dict[int, BatchTiming]:
        """The timing pass alone, batch by batch as :meth:`run` times them (same warm-up, same order):
        each batch's timings by batch number, for replaying the batches elsewhere afterwards."""
        self._timed = self.timing.timed(len(queries))
        out: dict[int, BatchTiming] = {}
        for number, idx in enumerate(batches(len(queries), batch_size)):
            if number not in skip:
                batch = [(i, *queries[i]) for i in idx]
                out[number] = self._timing(batch, [self.transformer.transform(text) for _, _, text in batch])
        return out

    def _timing(self, batch: Sequence[tuple[int, str, str]], hints: Sequence[QueryHints]) -> BatchTiming:
        timed = [j for j, (index, _, _) in enumerate(batch) if self._timed is None or index in self._timed]
        categories = self.truth.categories
        return timed, self._time_searches([hints[j] for j in timed], [categories.get(batch[j][1]) for j in timed])

    def lookups(self, batch: Sequence[tuple[int, str, str]], timing: BatchTiming | None = None) -> Lookups:
        """Transform, retrieve (one batched search per signature), time the searches the plan picks
        (unless ``timing`` brings them), and post-process every query under every config."""
        clock = time.perf_counter_ns
        hints: list[QueryHints] = []
        transform_ns: list[int] = []
        for _, _, text in batch:
            t0 = clock()
            hints.append(self.transformer.transform(text))
            transform_ns.append(clock() - t0)

        # Every search is answered as if it were the vector's first since the load (a 2.3 server's HNSW
        # query cache is skipped: rag_eval.search.milvus.collection.SKIP_QUERY_CACHE), so the kept hits do
        # not depend on whether the timing pass searched that query before.
        timed, search_us = self._timing(batch, hints) if timing is None else timing

        shared: dict[Signature, list[tuple[KnowledgeSearchHit, ...]]] = {}
        for sig, specs in self.signatures.items():
            width = max(s.config.retrieve_k for s in specs)
            requests = [sig.request(h.normalized_query, width, self.truth.categories.get(qid))
                        for h, (_, qid, _) in zip(hints, batch, strict=True)]  # fmt: skip
            shared[sig] = self._search_many(requests)
            self.tick("retrieve", len(batch))

        pipelines = [
            (sig, spec.name, Pipeline(spec.config, spec.postprocessor()),
             dict(zip(timed, search_us[(sig, spec.config.retrieve_k)], strict=True)))
            for sig, specs in self.signatures.items()
            for spec in specs
        ]  # fmt: skip
        looked: Lookups = []
        nan = float("nan")
        for j, (index, qid, _) in enumerate(batch):
            runs = [(pipeline, shared[sig][j]) for sig, _, pipeline, _ in pipelines]
            processed = self._post_process(runs, hints[j], transform_ns=transform_ns[j], query_index=index)
            for (_, name, _, measured), (record, cpu_us) in zip(pipelines, processed, strict=True):
                looked.append((name, index, qid, record, measured.get(j, nan), cpu_us))
        self.tick("post-process", len(batch) * len(pipelines))
        return looked

    def _post_process(
        self,
        runs: Sequence[tuple[Pipeline, Sequence[KnowledgeSearchHit]]],
        hints: QueryHints,
        *,
        transform_ns: int,
        query_index: int,
    ) -> list[tuple[LookupRecord, float]]:
        """One query's post-process and projection under every config (``runs``: each config's pipeline
        and hits), timed round after round, the configs interleaved in the plan's order for this query
        (rotated each round, after a warm-up round): each config's record with the median of its rounds'
        wall times, and the median thread CPU time (microseconds) of both stages.

        Interleaved, so that a burst of load on a shared machine lands on all configs alike; rotated,
        because whichever config touches a query's hits first pays for cold caches (in experiment order,
        a config timed under three names looked 10% faster under its later names on 87% of queries)."""
        warmup, repeats = self.timing.rounds
        cpu = time.thread_time_ns
        records: list[LookupRecord | None] = [None] * len(runs)
        post: list[list[int]] = [[] for _ in runs]
        projection: list[list[int]] = [[] for _ in runs]
        cpu_ns: list[list[int]] = [[] for _ in runs]
        orders = self.timing.config_orders(len(runs), query_index=query_index, rounds=warmup + repeats)
        for round_, order in enumerate(orders):
            for i in order:
                pipeline, hits = runs[i]
                c0 = cpu()
                record = pipeline.process(hints, hits, transform_ns=transform_ns)
                spent = cpu() - c0
                records[i] = record
                if round_ >= warmup:
                    post[i].append(record.timings.postprocess_ns)
                    projection[i].append(record.timings.projection_ns)
                    cpu_ns[i].append(spent)
        out = []
        for i, last in enumerate(records):
            assert last is not None
            if len(post[i]) > 1:  # the median of the rounds (one round: its own timings already)
                timings = replace(last.timings, postprocess_ns=_median(post[i]), projection_ns=_median(projection[i]))
                last = replace(last, timings=timings)
            out.append((last, _median(cpu_ns[i]) / 1e3))
        return out

    def rows(self, looked: Lookups) -> list[dict[str, object]]:
        """The per-query rows of a batch's lookups, by config (in experiment order), then query."""
        order = {spec.name: i for i, spec in enumerate(self.configs)}
        ordered = sorted(looked, key=lambda lk: (order[lk[0]], lk[1]))
        return build_rows(
            (RowLookup(qid, index, name, record, RowTiming(search_us=us, cpu_us=cpu_us))
             for name, index, qid, record, us, cpu_us in ordered),
            self.truth,
        )  # fmt: skip

    def _search_many(self, requests: list[KnowledgeSearchRequest]) -> list[tuple[KnowledgeSearchHit, ...]]:
        if isinstance(self.port, BatchKnowledgeSearchPort):
            return self.port.search_batch(requests)
        return [self.port.search(r) for r in requests]

    def _time_searches(
        self, hints: Sequence[QueryHints], categories: Sequence[str | None]
    ) -> dict[tuple[Signature, int], list[float]]:
        """Each distinct search of the configs, timed for every query of ``hints``: serially, one
        query per call, microseconds (a warm-up of ``warmup`` searches first, once per search)."""
        out: dict[tuple[Signature, int], list[float]] = {}
        if not hints:
            return {(sig, s.config.retrieve_k): [] for sig, specs in self.signatures.items() for s in specs}
        clock = time.perf_counter_ns
        started = time.perf_counter()
        for sig, specs in self.signatures.items():
            for k in sorted({s.config.retrieve_k for s in specs}):
                if (sig, k) not in self._warmed:
                    for h, category in list(zip(hints, categories, strict=True))[: self.warmup]:
                        self.port.search(sig.request(h.normalized_query, k, category))
                    self._warmed.add((sig, k))
                timings = []
                for h, category in zip(hints, categories, strict=True):
                    request = sig.request(h.normalized_query, k, category)
                    t0 = clock()
                    self.port.search(request)
                    timings.append((clock() - t0) / 1e3)
                out[(sig, k)] = timings
                self.tick("timing", len(hints))
        self.timing_seconds += time.perf_counter() - started
        return out
