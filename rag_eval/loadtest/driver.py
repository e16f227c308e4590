"""Latency under concurrent load: the configs' lookups replayed by N client processes at once.

Processes, not threads (the Python client is GIL-bound, so threads would measure the client, not Milvus):
for each level N a pool of exactly N processes, each with its own Milvus client, runs the production lookup
in a closed loop (:mod:`rag_eval.loadtest.worker`). A level runs rounds of windows with the configs taking
turns, so every config meets the same machine and the spread between rounds is what a gate reads as noise
(:mod:`rag_eval.compare.loadtest_gates`); the client's own limits are recorded, not assumed. Milvus Lite is
refused. How it measures: docs/performance.md, "Latency under load".
"""

from __future__ import annotations

import multiprocessing
import os
import platform
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Future, ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass
from typing import Any

import numpy as np
import psutil
import pyarrow as pa

from rag_eval.core.errors import (
    ConfigError,
    ConfigProblem,
    LoadClientError,
    UnsupportedFeatureError,
)
from rag_eval.core.transform import KnowledgeQueryTransformer
from rag_eval.experiment import ConfigSpec, Experiment
from rag_eval.experiment.load_table import LoadSettings
from rag_eval.ingest.collection import IngestResult
from rag_eval.loadtest import endpoint, worker
from rag_eval.loadtest.endpoint import EndpointSetup
from rag_eval.loadtest.worker import OK, OUTCOMES, WindowResult, WorkerSetup
from rag_eval.replay import provenance
from rag_eval.replay.prepare import Prepared, Progress
from rag_eval.rundir.reader import LOAD_SCHEMA_VERSION
from rag_eval.search.milvus import MilvusStore, SearchTarget

STAGES = ("search", "e2e")
PERCENTILES = (50, 95, 99)
OFFSET_STRIDE = 7919  # a prime: each round starts its processes at other queries than the round before

LoadTick = Callable[[int], None]  # called with the number of lookups just recorded
Setup = WorkerSetup | EndpointSetup  # the configs' own lookups on a Milvus server, or a served endpoint

REQUEST_SCHEMA = pa.schema(
    [
        ("config", pa.string()),
        ("concurrency", pa.int16()),
        ("round", pa.int16()),
        ("process", pa.int16()),
        ("query_index", pa.int32()),
        ("started_us", pa.float64()),  # from the window's start
        ("search_us", pa.float64()),
        ("e2e_us", pa.float64()),
        ("postprocess_us", pa.float64()),  # post-process + pack + assemble + projection
        ("outcome", pa.string()),  # ok, error or timeout (only a served endpoint's requests fail and go on)
    ]
)


def refuse_lite(target: SearchTarget) -> None:
    """Load is measured against a Milvus server only (see the module docstring)."""
    if not target.is_server:
        uri = target.redacted_uri  # a Lite path, as given
        raise UnsupportedFeatureError(
            f"load needs a Milvus server (http://host:port), not Milvus Lite ({uri}): Lite runs inside one "
            "process and a second process cannot open its file, so there is no concurrent load to measure; "
            "give --milvus-uri http://127.0.0.1:19530 (or the experiment's server)",
            feature="load",
            uri=uri,
        )


def start_method() -> str:
    return "forkserver" if "forkserver" in multiprocessing.get_all_start_methods() else "spawn"


@dataclass(frozen=True, slots=True, kw_only=True)
class Window:
    """One window of one config at one level: every process's share."""

    config: str
    concurrency: int
    round: int
    parts: tuple[WindowResult, ...]
    machine_busy: float | None  # share of all CPUs busy during the window (psutil), None when unknown

    @property
    def searches(self) -> int:
        """Lookups answered (a served endpoint's failed requests are counted apart: :meth:`failed`)."""
        return sum(len(p.e2e_ns) if p.outcome is None else int(np.count_nonzero(p.outcome == OK)) for p in self.parts)

    def failed(self, outcome: int) -> int:
        """Requests that ended with ``outcome`` (ERROR or TIMEOUT)."""
        return sum(int(np.count_nonzero(p.outcome == outcome)) for p in self.parts if p.outcome is not None)

    @property
    def wall_s(self) -> float:
        return max((p.wall_ns for p in self.parts), default=0) / 1e9

    def values_us(self, stage: str) -> np.ndarray:
        """The answered lookups' latencies of ``stage`` (none when the stage was not seen: a served endpoint's
        search)."""
        key = "search_ns" if stage == "search" else "e2e_ns"
        out = [_answered(getattr(p, key), p.outcome) for p in self.parts if getattr(p, key) is not None]
        return np.concatenate(out) / 1e3 if out else np.zeros(0)


def _answered(values: np.ndarray, outcome: np.ndarray | None) -> np.ndarray:
    return values if outcome is None else values[outcome == OK]


@dataclass(frozen=True, slots=True, kw_only=True)
class LoadResult:
    """What a load measurement leaves: ``load.json``'s document and the per-lookup table."""

    document: dict[str, Any]
    requests: pa.Table


def measure_windows(
    setup: Setup,
    settings: LoadSettings,
    *,
    tick: LoadTick | None = None,
    log: Callable[[str], None] | None = None,
) -> tuple[list[Window], list[dict[str, Any]]]:
    """Every window of every level, in the order they ran, and the machine's load before each level
    (load average, and the CPU busy share over the second before it starts). Raises the project's
    errors (a worker's input or infrastructure failure keeps its exit code; a client process that
    died is exit 3)."""
    if isinstance(setup, WorkerSetup):
        refuse_lite(setup.target)
        client: Any = worker
        preload = ["rag_eval.loadtest.worker", "rag_eval.search.milvus", "pymilvus"]
    else:
        client, preload = endpoint, ["rag_eval.loadtest.endpoint", "mcp"]
    step = tick or (lambda n: None)
    say = log or (lambda text: None)
    method = start_method()
    ctx = multiprocessing.get_context(method)
    if method == "forkserver":  # each process then forks from one that imported the client once
        ctx.set_forkserver_preload(preload)
    names = config_names(setup)
    windows: list[Window] = []
    levels: list[dict[str, Any]] = []
    for n in settings.concurrency:
        say(f"load: {n} client process{'es' if n > 1 else ''} ({', '.join(names)})")
        levels.append({"concurrency": n, "loadavg_before": loadavg(), "cpu_busy_before": _busy_over(1.0)})
        barrier = ctx.Barrier(n)
        caps = _split(settings.window_cap(), n)
        with ProcessPoolExecutor(max_workers=n, mp_context=ctx, initializer=client.init_worker,
                                 initargs=(setup, barrier)) as pool:  # fmt: skip
            _collect(setup, [pool.submit(client.ready, i) for i in range(n)])
            for r in range(settings.rounds):
                for name in _rotate(names, r):
                    before = psutil.cpu_times()
                    futures = [
                        pool.submit(client.run_window, name, i, _offset(i, r, n, len(setup.queries)),
                                    settings.window_s, caps[i])
                        for i in range(n)
                    ]  # fmt: skip
                    parts = _collect(setup, futures)
                    busy = _busy(before, psutil.cpu_times())
                    windows.append(Window(config=name, concurrency=n, round=r, parts=parts, machine_busy=busy))
                    step(1)
    return windows, levels


def _split(cap: int | None, n: int) -> list[int | None]:
    """A window's lookup cap spread over its n processes (None: no cap)."""
    if cap is None:
        return [None] * n
    return [cap // n + (1 if i < cap % n else 0) for i in range(n)]


def config_names(setup: Setup) -> list[str]:
    """The names the results go under: the configs, or the one config a served endpoint is meant to run."""
    return [s.name for s in setup.configs] if isinstance(setup, WorkerSetup) else [setup.config]


def _rotate(names: Sequence[str], r: int) -> list[str]:
    k = r % len(names)
    return [*names[k:], *names[:k]]


def _offset(slot: int, r: int, n: int, queries: int) -> int:
    return (slot * queries // n + r * OFFSET_STRIDE) % queries


def _busy(before: Any, after: Any) -> float | None:
    total = sum(after) - sum(before)
    idle = (after.idle - before.idle) + (getattr(after, "iowait", 0.0) - getattr(before, "iowait", 0.0))
    return None if total <= 0 else max(0.0, min(1.0, 1.0 - idle / total))


def _busy_over(seconds: float) -> float | None:
    """The share of all CPUs busy over the next ``seconds`` (what others run on the machine)."""
    try:
        return round(float(psutil.cpu_percent(interval=seconds)) / 100.0, 4)
    except (OSError, AttributeError):
        return None


def _collect(setup: Setup, futures: Sequence[Future[WindowResult]]) -> tuple[WindowResult, ...]:
    """Every process's result, or the first real failure as the project's own error."""
    shown = setup.target.redacted_uri if isinstance(setup, WorkerSetup) else setup.shown
    try:
        parts = tuple(f.result() for f in futures)
    except BrokenProcessPool as exc:
        raise LoadClientError(
            f"a client process of the load measurement died (killed or out of memory?): {exc}", uri=shown
        ) from exc
    failed = [p for p in parts if not p.ok]
    if not failed:
        return parts
    first = next((p for p in failed if not p.aborted), failed[0])
    if first.error is not None:
        raise first.error  # the project's own error, as the process raised it
    if first.aborted:
        raise LoadClientError(
            "client processes did not all reach the start: another client process of this level failed or did not "
            "arrive",
            uri=shown,
        )
    raise RuntimeError(f"a client process of the load measurement failed:\n{first.bug}")


# -- summaries ----------------------------------------------------------------------------------


def stats_us(values: np.ndarray) -> dict[str, float | None]:
    """p50, p95, p99 (``numpy.percentile``, linear), mean and max of latencies in microseconds.

    >>> stats_us(np.array([1.0, 2.0, 3.0, 4.0]))["p50"]
    2.5
    """
    if values.size == 0:
        empty: dict[str, float | None] = {f"p{q}": None for q in PERCENTILES}
        return empty | {"mean": None, "max": None}
    out: dict[str, float | None] = {f"p{q}": float(np.percentile(values, q)) for q in PERCENTILES}
    return out | {"mean": float(values.mean()), "max": float(values.max())}


def summarise_level(windows: Sequence[Window], *, cpus: int) -> dict[str, Any]:
    """One (config, level) entry of ``load.json`` from its windows (one per round)."""
    first = windows[0]
    n = first.concurrency
    searches = sum(w.searches for w in windows)
    wall = sum(w.wall_s for w in windows)
    values = {s: np.concatenate([w.values_us(s) for w in windows]) for s in STAGES}
    cpu = [(p.cpu_s, p.wall_ns / 1e9) for w in windows for p in w.parts]
    per_process = [c / t for c, t in cpu if t > 0]
    busy = [w.machine_busy for w in windows if w.machine_busy is not None]
    mean_e2e_s = float(values["e2e"].mean()) / 1e6 if values["e2e"].size else 0.0
    qps = searches / wall if wall > 0 else None
    closed_loop = n / mean_e2e_s if mean_e2e_s > 0 else None
    return {
        "config": first.config,
        "concurrency": n,
        "searches": searches,
        **_failures(windows),
        "wall_s": wall,
        "qps": qps,
        "latency_us": {s: stats_us(values[s]) for s in STAGES},
        "closed_loop_qps": closed_loop,  # n / mean e2e latency (Little's law)
        "loop_efficiency": qps / closed_loop if qps and closed_loop else None,
        "client_cpu": {
            "per_process_mean": float(np.mean(per_process)) if per_process else None,
            "per_process_max": float(np.max(per_process)) if per_process else None,
            "machine_share": sum(c for c, _ in cpu) / (wall * cpus) if wall > 0 and cpus else None,
        },
        "machine_cpu_busy": float(np.mean(busy)) if busy else None,
        "rounds": [
            {
                "round": w.round,
                "searches": w.searches,
                **_failures([w]),
                "wall_s": w.wall_s,
                "qps": w.searches / w.wall_s if w.wall_s > 0 else None,
                "latency_us": {s: {f"p{q}": stats_us(w.values_us(s))[f"p{q}"] for q in PERCENTILES} for s in STAGES},
            }
            for w in windows
        ],
    }


def _failures(windows: Sequence[Window]) -> dict[str, int]:
    """Requests that failed and were counted (a served endpoint's), by outcome: ``errors``, ``timeouts``."""
    return {f"{OUTCOMES[k]}s": sum(w.failed(k) for w in windows) for k in range(1, len(OUTCOMES))}


def requests_table(windows: Sequence[Window]) -> pa.Table:
    """One row per lookup (config, level, round, process, query, start, search, end to end, post-process)."""
    columns: dict[str, list[np.ndarray]] = {name: [] for name in REQUEST_SCHEMA.names}
    for w in windows:
        for p in w.parts:
            k = len(p.e2e_ns)
            columns["config"].append(np.full(k, w.config, dtype=object))
            columns["concurrency"].append(np.full(k, w.concurrency, dtype=np.int16))
            columns["round"].append(np.full(k, w.round, dtype=np.int16))
            columns["process"].append(np.full(k, p.slot, dtype=np.int16))
            columns["query_index"].append(p.query_index)
            columns["started_us"].append(p.started_ns / 1e3)
            unseen = np.full(k, np.nan)  # a stage inside a served endpoint: missing (null), not 0
            columns["search_us"].append(p.search_ns / 1e3 if p.search_ns is not None else unseen)
            columns["e2e_us"].append(p.e2e_ns / 1e3)
            columns["postprocess_us"].append(p.post_ns / 1e3 if p.post_ns is not None else unseen)
            codes = p.outcome if p.outcome is not None else np.zeros(k, dtype=np.int8)
            columns["outcome"].append(np.asarray(OUTCOMES, dtype=object)[codes])
    arrays = [
        pa.array(np.concatenate(columns[f.name]) if columns[f.name] else [], type=f.type, from_pandas=True)
        for f in REQUEST_SCHEMA
    ]
    return pa.Table.from_arrays(arrays, schema=REQUEST_SCHEMA)


def build_result(
    windows: Sequence[Window],
    *,
    settings: LoadSettings,
    setup: Setup,
    identity: Mapping[str, Any],
    clock: provenance.Clock,
    machine_load: Mapping[str, Any],
) -> LoadResult:
    """``load.json``'s document (settings, backend, machine, its load, one entry per config and level)
    and the per-lookup table. ``identity``: experiment, run, Milvus and config facts from the caller."""
    cpus = os.cpu_count() or 1
    groups: dict[tuple[str, int], list[Window]] = {}
    for w in windows:
        groups.setdefault((w.config, w.concurrency), []).append(w)
    results = [summarise_level(ws, cpus=cpus) for ws in groups.values()]
    served = isinstance(setup, EndpointSetup)
    notes = []
    over = [n for n in settings.concurrency if n > cpus]
    if over:
        notes.append(
            f"{over} client processes are more than this machine's {cpus} CPUs: those levels measure the client "
            f"machine as much as {'the endpoint' if served else 'Milvus'} (see client_cpu and machine_cpu_busy)"
        )
    failed = {k: sum(int(r[k]) for r in results) for k in ("errors", "timeouts")}
    if any(failed.values()):
        notes.append(
            f"{failed['errors']:,} requests were answered with an error and {failed['timeouts']:,} timed out: they "
            "are counted (errors, timeouts) and left out of the latencies and QPS"
        )
    document = {
        "schema_version": LOAD_SCHEMA_VERSION,
        **dict(identity),
        "stages": ["e2e"] if served else list(STAGES),  # what the figures can hold (see loadtest.document)
        "settings": {
            **settings.as_dict(),
            "configs": config_names(setup),
            "queries": len(setup.queries),
            "start_method": start_method(),
            "clients": (
                "one process per client, each with its own connection to the endpoint; closed loop"
                if served
                else "one process per client, each with its own Milvus client; closed loop"
            ),
        },
        "machine": provenance.machine(),
        "machine_load": dict(machine_load),
        "versions": {"python": platform.python_version(), "psutil": psutil.__version__},
        "git": provenance.git_commit(),
        **clock.finish(),
        "results": results,
        "notes": notes,
    }
    return LoadResult(document=document, requests=requests_table(windows))


def loadavg() -> list[float] | None:
    try:
        return [round(v, 2) for v in psutil.getloadavg()]
    except (OSError, AttributeError):
        return None


# -- the measurement as a step ------------------------------------------------------------------


def chosen_configs(exp: Experiment, settings: LoadSettings) -> tuple[ConfigSpec, ...]:
    """The configs to load, in the experiment's order (all of them unless ``settings.configs`` names some)."""
    wanted = set(settings.configs)
    return tuple(c for c in exp.configs if not wanted or c.name in wanted)


def measure_load(
    exp: Experiment,
    prep: Prepared,
    ingested: IngestResult,
    settings: LoadSettings,
    *,
    run: Mapping[str, Any] | None,
    progress: Progress,
) -> LoadResult:
    """Measure ``exp``'s configs under load on the collection ``ingested`` and return what ``load.json``
    says. The queries are the prepared data set's raw texts (``query_limit`` applied); their vectors come from
    the prepared resolver as the replay's do. ``run`` names the run the measurement belongs to (``{"started",
    "fingerprint"}`` of its manifest), None for a measurement on its own. The levels count on ``progress``."""
    target = ingested.target
    queries = [q.text for q in prep.dataset.queries.values()][: exp.query_limit]
    progress.phase("load", len(settings.concurrency) * settings.rounds * len(chosen_configs(exp, settings)))
    refuse_lite(target)
    if not queries:
        raise ConfigError([ConfigProblem("queries", "no queries to replay under load")], path=exp.source)
    transformer = KnowledgeQueryTransformer()
    normalized = [transformer.transform(q).normalized_query for q in queries]
    vectors = np.asarray(prep.resolver.resolve(normalized), dtype=np.float32)
    specs = chosen_configs(exp, settings)
    with MilvusStore(target) as store:
        backend = store.backend()
    setup = WorkerSetup(
        target=target, configs=specs, queries=tuple(queries), normalized=tuple(normalized), vectors=vectors,
        warmup=settings.warmup,
    )  # fmt: skip
    described = {
        "target": {"kind": "milvus", "uri": target.redacted_uri},
        "milvus": {
            "uri": target.redacted_uri,
            "collection": target.collection,
            "backend": backend.kind,
            "server_version": backend.server_version,
            "pymilvus": backend.pymilvus_version,
            "index": exp.index.to_json(),
        },
        "configs": [
            {
                "name": s.name,
                "hash": s.config_hash(),
                "mode": s.mode.value,
                "pipeline": s.config.pipeline.value,
                "retrieve_k": s.config.retrieve_k,
                "return_n": s.config.return_n,
                "what_if": s.what_if,
            }
            for s in specs
        ],
    }
    return measured_result(exp, setup, settings, run=run, progress=progress, described=described)


def measured_result(
    exp: Experiment, setup: Setup, settings: LoadSettings, *, run: Mapping[str, Any] | None, progress: Progress,
    described: Mapping[str, Any],
) -> LoadResult:  # fmt: skip
    """Every level measured on ``setup``, timed and with the machine's load around it, as ``load.json``
    says it: the experiment and ``run`` (None for a measurement on its own) beside ``described`` (the
    caller's target, Milvus and config facts)."""
    clock = provenance.Clock.start()
    start_load = loadavg()
    windows, levels = measure_windows(setup, settings, tick=lambda n: progress.tick("load", n), log=progress.log)
    identity = {
        "experiment": exp.name,
        "source": exp.source,
        "run": dict(run) if run is not None else {"started": None, "fingerprint": None},
        **described,
    }
    machine_load = {"loadavg_start": start_load, "loadavg_end": loadavg(), "levels": levels}
    return build_result(
        windows, settings=settings, setup=setup, identity=identity, clock=clock, machine_load=machine_load
    )
