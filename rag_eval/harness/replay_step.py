"""The replay step of a run: every query under every config into the run store's parts, in this
process or as tasks on Dask workers (:mod:`rag_eval.harness.distributed`).

Either way the search timings come from this process, serially (:mod:`rag_eval.harness.timing`), and
the rows a batch gets are the same: only where the batch is replayed differs.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator, Sequence
from contextlib import ExitStack
from dataclasses import dataclass
from typing import Any

import numpy as np

from rag_eval.core.errors import RunStoreError, UnsupportedFeatureError
from rag_eval.core.transform import KnowledgeQueryTransformer
from rag_eval.core.types import SearchMode
from rag_eval.embed.embedders import VectorResolver
from rag_eval.harness import provenance
from rag_eval.harness.distributed import BatchTask, Cluster, WorkerJob, connect, replay_batches, session_url
from rag_eval.harness.experiment import Experiment
from rag_eval.harness.ingest import IngestResult
from rag_eval.harness.load import LoadResult
from rag_eval.harness.replay import BatchTiming, Replayer, batches
from rag_eval.harness.rows import Truth
from rag_eval.harness.steps import Prepared, Progress
from rag_eval.harness.store import RunStore
from rag_eval.search.milvus import BackendInfo, MilvusSearch, MilvusStore


@dataclass(frozen=True, slots=True, kw_only=True)
class Replayed:
    """What the replay step leaves: the run store with its parts (the per-query rows, read one batch at a
    time by the later steps, never all at once), the Milvus facts."""

    store: RunStore
    queries: int
    ingest: IngestResult
    backend: BackendInfo
    resumed_batches: int
    load: LoadResult | None = None  # the experiment's [load] measurement, when it has one
    timing_seconds: float = 0.0  # the search timing pass, this session: the latency measurement's own cost
    execution: dict[str, Any] | None = None  # where the replay ran (serial or Dask) and where latency was timed


def preflight(exp: Experiment, port: MilvusSearch) -> None:
    """Every search mode the configs ask for must be really performed by this backend."""
    modes = {spec.mode for spec in exp.configs}
    if not modes & {SearchMode.GROUPED, SearchMode.HYBRID}:
        return
    features = port.features()
    uri = port.target.redacted_uri
    for spec in exp.configs:
        if spec.mode is SearchMode.GROUPED and not features.grouping:
            raise UnsupportedFeatureError(
                f"config {spec.name!r} uses mode 'grouped' but Milvus at {uri} ignores grouping search: "
                "use mode 'dense' (the client-side cap) or Milvus Lite / a server >= 2.4",
                feature="grouping",
                uri=uri,
            )
        if spec.mode is SearchMode.HYBRID and not features.hybrid:
            raise UnsupportedFeatureError(
                f"config {spec.name!r} uses mode 'hybrid' but Milvus at {uri} has no BM25 full-text search: "
                "use mode 'dense' or Milvus Lite / a server >= 2.5",
                feature="hybrid",
                uri=uri,
            )


def run_identity(exp: Experiment, prep: Prepared) -> dict[str, Any]:
    """What a resumed run must share with the run it continues: the data (checksum, split, chunker,
    labels), how rows were written and searched, the configs, the batching and the code. Not the
    Milvus URI as spelled (``./lite.db`` and ``lite.db``, a server back on another port, credentials)."""
    git = provenance.git_commit()
    return {
        "experiment": exp.name,
        "data set checksum": prep.dataset.checksum,
        "split": exp.split,
        "chunker": exp.chunker_spec,
        "labels": [prep.labels.level, exp.min_overlap_chars],
        "embedder": [exp.embedder_model, exp.embedder_normalize],
        "ingest profile": exp.profile.as_dict(),
        "index": exp.index.to_json(),
        "configs": {c.name: c.config_hash() for c in exp.configs},
        "baseline": exp.baseline,
        "batch size": exp.batch_size,
        "query limit": exp.query_limit,
        "code": git["commit"] or provenance.package_version("rag-eval"),
    }


def replay(
    exp: Experiment,
    prep: Prepared,
    ingested: IngestResult,
    store: RunStore,
    *,
    resume: bool,
    progress: Progress,
    cluster: Cluster | None = None,
) -> Replayed:
    """Replay every query under every config into the run store (on ``cluster``'s workers when given)."""
    transformer = KnowledgeQueryTransformer()
    queries = [(q.id, q.text) for q in prep.dataset.queries.values()]
    if exp.query_limit is not None:
        queries = queries[: exp.query_limit]
    texts = [transformer.transform(t).normalized_query for _, t in queries]
    missing = prep.resolver.missing(texts)
    if missing:  # embedded (and cached) now; every vector is then looked up where it is stored
        prep.resolver.resolve(missing, progress=progress.factory("embedding queries", len(missing)))

    def encoder(batch: Sequence[str]) -> list[list[float]]:
        # a batch's vectors become lists only now: all of them as lists would be 1.2 GB at 100,000 queries
        return [_vector(prep.resolver, t).tolist() for t in batch]

    truth = Truth(
        rows={r.vector_id: r for r in prep.rows},
        relevance=prep.labels.relevance,
        doc_relevance=prep.dataset.relevant_docs(),
    )
    with MilvusStore(ingested.target) as ms:
        backend = ms.backend()
    with ExitStack() as cluster_client:
        # the cluster is reached before the run directory gets its parts: an unreachable scheduler leaves nothing
        client = cluster_client.enter_context(connect(cluster)) if cluster is not None else None
        result = _replay(exp, prep, ingested, store, resume=resume, progress=progress, cluster=cluster,
                         client=client, queries=queries, texts=texts, encoder=encoder, truth=truth,
                         backend=backend)  # fmt: skip
    return result


def _replay(
    exp: Experiment,
    prep: Prepared,
    ingested: IngestResult,
    store: RunStore,
    *,
    resume: bool,
    progress: Progress,
    cluster: Cluster | None,
    client: Any,
    queries: list[tuple[str, str]],
    texts: list[str],
    encoder: Callable[[Sequence[str]], list[list[float]]],
    truth: Truth,
    backend: BackendInfo,
) -> Replayed:
    with MilvusSearch(ingested.target, encoder) as port:
        preflight(exp, port)  # refuse unsupported modes before anything is written
        done = store.begin(run_identity(exp, prep), resume=resume)
        all_batches = batches(len(queries), exp.batch_size)
        replayer = Replayer(
            port,
            exp.configs,
            truth,
            transformer=KnowledgeQueryTransformer(),
            warmup=exp.warmup,
            timing=exp.timing,
            prime=backend.kind == "server",
            tick=progress.tick,
        )
        n_timed = sum(len({s.config.retrieve_k for s in specs}) for specs in replayer.signatures.values())
        todo_batches = [b for i, b in enumerate(all_batches) if i not in done]
        timed = exp.timing.timed(len(queries))
        progress.phase("retrieve", sum(len(b) for b in todo_batches) * len(replayer.signatures))
        progress.phase("timing", sum(1 for b in todo_batches for i in b if i in timed) * n_timed)
        progress.phase("post-process", sum(len(b) for b in todo_batches) * len(exp.configs))
        if done:
            progress.log(f"resuming: {len(done)} of {len(all_batches)} query batches already finished")
        if cluster is None:
            replayer.run(queries, store, batch_size=exp.batch_size, skip=done)
        else:  # timed here, serially, before any worker searches: no load of the replay's own on the backend
            timings = replayer.time_batches(queries, batch_size=exp.batch_size, skip=done)
    if cluster is not None:  # this process's client is closed: a Lite file is free to be copied
        job = WorkerJob(
            token=uuid.uuid4().hex,
            target=ingested.target,
            configs=tuple(exp.configs),
            truth=truth,
            warmup=exp.warmup,
            prime=backend.kind == "server",
            parts_url=session_url(cluster.parts_url, store.parts_dir),
        )
        progress.log(f"replaying {len(todo_batches)} query batches on {cluster.label()}")

        def finished(number: int, n: int) -> None:
            progress.tick("retrieve", n * len(replayer.signatures))
            progress.tick("post-process", n * len(exp.configs))

        tasks = _tasks(queries, texts, prep.resolver, exp.batch_size, timings)
        replay_batches(cluster, job, tasks, parts_dir=store.parts_dir, done=finished, client=client)
        absent = sorted(set(timings) - store.finished_batches())
        if absent:  # workers on other machines wrote into a .parts of their own: never a run with fewer queries
            raise RunStoreError(
                f"{len(absent)} query batches the workers finished are not in {store.parts_dir} (batch "
                f"{absent[0]} first): give --parts a directory or URL that both the workers and this process reach",
                path=str(store.parts_dir),
            )
    store.check_parts()
    return Replayed(
        store=store,
        queries=len(queries),
        ingest=ingested,
        backend=backend,
        resumed_batches=len(done),
        timing_seconds=replayer.timing_seconds,
        execution=execution(cluster),
    )


def _tasks(
    queries: Sequence[tuple[str, str]],
    texts: Sequence[str],
    resolver: VectorResolver,
    batch_size: int,
    timings: dict[int, BatchTiming],
) -> Iterator[BatchTask]:
    """The batches still to run, made as they are submitted (their vectors travel a few at a time)."""
    for number, idx in enumerate(batches(len(queries), batch_size)):
        if number in timings:
            batch_texts = [texts[i] for i in idx]
            yield BatchTask(
                number=number,
                batch=[(i, *queries[i]) for i in idx],
                texts=batch_texts,
                vectors=np.stack([_vector(resolver, t) for t in batch_texts]),
                timing=timings[number],
            )


def execution(cluster: Cluster | None) -> dict[str, Any]:
    """Where the replay ran and how its latency was measured, for ``summary.json`` and the report."""
    if cluster is None:
        return {"replay": "serial, in the run's own process", "search_timing": "in the same pass, batch by batch"}
    return {
        "replay": f"query batches as Dask tasks on {cluster.label()}",
        "search_timing": "in the run's own process, serially, before any worker searches (no concurrent load "
        "from the replay); the workers reuse these timings",
        "postprocess_timing": "in the workers, each batch in one thread, beside the other workers' batches",
    }


def _vector(resolver: VectorResolver, text: str) -> np.ndarray:
    vector = resolver.lookup(text)
    assert vector is not None  # every text was resolved before the replay began
    return vector
