"""The replay step of a run: every query under every config into the run store's parts.

The step makes one :class:`~rag_eval.replay.strategies.ReplayPlan` (the queries, configs, truth, batches,
timing and the batches a resumed run already has) and carries it out with the strategy the run's
execution settings pick (:mod:`rag_eval.replay.strategies`): in this process, or as tasks on Dask
workers. Either way the search timings come from this process, serially (:mod:`rag_eval.experiment.latency`),
and the rows a batch gets are the same: only where the batch is replayed differs.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

from rag_eval.cluster.settings import Cluster
from rag_eval.core.errors import CollectionChangedError
from rag_eval.core.transform import KnowledgeQueryTransformer
from rag_eval.existing.preflight import fingerprint_now
from rag_eval.experiment import Experiment
from rag_eval.experiment.latency import ReplayCost
from rag_eval.ingest.collection import IngestResult
from rag_eval.replay import provenance
from rag_eval.replay.prepare import Prepared, Progress
from rag_eval.replay.strategies import ReplayPlan, encoder, strategy_for
from rag_eval.rundir.directory import RunStore
from rag_eval.rundir.rows import Truth
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
    cost: ReplayCost  # this session's: the timing pass, the whole replay, this process's CPU in it
    execution: dict[str, Any] | None = None  # where the replay ran (serial or Dask) and where latency was timed


def preflight(exp: Experiment, port: MilvusSearch) -> None:
    """Every search mode the configs ask for must be really performed by this backend."""
    for spec in exp.configs:
        port.check_mode(spec.mode, config=spec.name)


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
        "embedder": exp.embedder_identity,
        "ingest profile": exp.profile.as_dict(),
        "index": exp.index.to_json(),
        "configs": {c.name: c.config_hash() for c in exp.configs},
        "baseline": exp.baseline,
        "batch size": exp.batch_size,
        "query limit": exp.query_limit,
        "code": git["commit"] or provenance.package_version("rag-eval"),
        **({"collection": prep.existing.fingerprint} if prep.existing is not None else {}),
    }


@dataclass(frozen=True, slots=True, kw_only=True)
class Execution:
    """How a job runs: where it shows its progress, on which cluster (the query batches, then the comparisons,
    on Dask workers: the rows and the comparison are the same as in one process), whether it resumes an
    interrupted run, and whether it may write into a directory of other files (else refused)."""

    progress: Progress | None = None
    cluster: Cluster | None = None
    resume: bool = False
    force_out: bool = False


def replay(exp: Experiment, prep: Prepared, ingested: IngestResult, store: RunStore, how: Execution) -> Replayed:
    """Replay every query under every config into the run store (on ``how.cluster``'s workers when given;
    resuming ``store``'s finished batches when ``how.resume``)."""
    progress, cluster, resume = how.progress or Progress(quiet=True), how.cluster, how.resume
    queries, texts = _queries(exp, prep, progress)
    truth = Truth(chunks=prep.chunk_of(), relevance=prep.labels.relevance, doc_relevance=prep.dataset.relevant_docs(),
                  lost=prep.lost_evidence(), traffic=prep.traffic_counts(),
                  categories=prep.traffic_categories())  # fmt: skip
    with MilvusStore(ingested.target) as ms:
        backend = ms.backend()
    # the cluster is reached before the run directory gets its parts: an unreachable scheduler leaves nothing
    # fixed_rows: the replay refuses a collection that changed under it (check_unchanged), so each row's fields
    # are read once and the batched searches bring ids and scores only
    with (
        strategy_for(cluster) as strategy,
        MilvusSearch(ingested.target, encoder(prep.resolver), fixed_rows=True) as port,
    ):
        preflight(exp, port)  # refuse unsupported modes before anything is written
        done = store.begin(run_identity(exp, prep), resume=resume)
        plan = ReplayPlan(
            queries=tuple(queries), texts=tuple(texts), resolver=prep.resolver, configs=tuple(exp.configs),
            truth=truth, target=ingested.target, batch_size=exp.batch_size, warmup=exp.warmup, timing=exp.timing,
            done=frozenset(done),
        )  # fmt: skip
        started, cpu_started = time.perf_counter(), time.process_time()
        outcome = strategy.run(plan, port, store, progress)
        replay_seconds, replay_cpu_seconds = time.perf_counter() - started, time.process_time() - cpu_started
    store.check_parts()
    check_unchanged(exp, prep, ingested, store)
    return Replayed(
        store=store,
        queries=len(queries),
        ingest=ingested,
        backend=backend,
        resumed_batches=len(done),
        cost=ReplayCost(outcome.timing_seconds, replay_seconds, replay_cpu_seconds),
        execution=outcome.execution,
    )


def check_unchanged(exp: Experiment, prep: Prepared, ingested: IngestResult, store: RunStore) -> None:
    """Refuse a replay whose collection changed while it ran (rows inserted or deleted): a collection built
    elsewhere by its fingerprint (row count, schema, every labelled row: taken again and compared with the one
    its labels were resolved under), rag_eval's own by its row count (Strong consistency) against the
    ingest's. Raised before anything is summarised or published (exit 3); the batches in ``.parts`` measured a
    collection that changed under them, so ``store`` records that they are not to be resumed."""
    target = ingested.target
    if prep.existing is not None:
        before, after = prep.existing.fingerprint, fingerprint_now(exp, prep.dataset, prep.existing)
        what = "its fingerprint (row count, schema, labelled rows)"
    else:
        with MilvusStore(target) as milvus:
            before, after = str(ingested.rows), str(milvus.count())
        what = "its row count"
    if before != after:
        store.abandon(f"collection {ingested.collection!r} changed while it replayed it ({what}: {before} before, "
                      f"{after} after)")  # fmt: skip
        raise CollectionChangedError(
            f"collection {ingested.collection!r} in Milvus at {target.redacted_uri} changed while the run replayed "
            f"it ({what}: {before} before, {after} after): rows were inserted or deleted meanwhile, so its rows "
            "measure no one state of it and nothing is published; run again once nothing writes to it",
            collection=ingested.collection,
            uri=target.redacted_uri,
        )


def _queries(exp: Experiment, prep: Prepared, progress: Progress) -> tuple[list[tuple[str, str]], list[str]]:
    """The queries to replay, (id, text) in order, and their normalised texts, whose vectors are resolved
    now (embedded and cached when missing): every vector is then looked up where it is stored."""
    transformer = KnowledgeQueryTransformer()
    queries = [(q.id, q.text) for q in prep.dataset.queries.values()]
    if exp.query_limit is not None:
        queries = queries[: exp.query_limit]
    queries += prep.traffic_queries()
    texts = [transformer.transform(t).normalized_query for _, t in queries]
    missing = prep.resolver.missing(texts)
    if missing:
        progress.log(embedding_note(len(missing), exp.embedder.provider))
        prep.resolver.resolve(missing, progress=progress.factory("embedding queries", len(missing)))
    return queries, texts


LOCAL_TEXTS_PER_SECOND = 25  # measured: all-MiniLM-L6-v2 on two CPU cores, texts of about 1,000 characters


def embedding_note(texts: int, provider: str) -> str:
    """What the run says before it embeds query texts: how many, and how long a local model takes for them.

    >>> embedding_note(100_000, "sentence-transformers")
    'embedding 100,000 query texts (a local model on a CPU: about 67 min at 25 texts a second)'
    >>> embedding_note(3, "openai")
    'embedding 3 query texts (provider openai, in its batches)'
    """
    if provider == "sentence-transformers":
        minutes = texts / LOCAL_TEXTS_PER_SECOND / 60
        return (f"embedding {texts:,} query texts (a local model on a CPU: about {minutes:.0f} min at "
                f"{LOCAL_TEXTS_PER_SECOND} texts a second)")  # fmt: skip
    return f"embedding {texts:,} query texts (provider {provider}, in its batches)"
