"""The jobs behind the CLI: ingest, embed, run (replay, metrics, comparison, report), compare, nightly.

Each job composes the layers below it; ``cli.py`` only parses arguments and maps
errors to exit codes.
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

from rag_eval.compare.catalog import catalog
from rag_eval.compare.comparison import Comparison, compare
from rag_eval.compare.gates import GateSet, experiment_gates, load_gates
from rag_eval.compare.history import (
    DEFAULT_ACCEPTED,
    DEFAULT_HISTORY,
    accept,
    accepted_dir,
    accepted_info,
    append_history,
)
from rag_eval.compare.rundir import IDENTITY, ComparedRun
from rag_eval.core.config import PipelineKind
from rag_eval.core.errors import RunDirectoryError, RunStoreError
from rag_eval.datasets.beir import load_beir
from rag_eval.datasets.chunking import parse_chunker
from rag_eval.datasets.labels import chunk_dataset
from rag_eval.embed.embedders import EmbedderSpec, VectorResolver
from rag_eval.embed.store import EmbeddingCache, VectorFile
from rag_eval.files import json_safe, write_json, write_parquet, write_text
from rag_eval.harness import provenance
from rag_eval.harness.distributed import Cluster
from rag_eval.harness.experiment import Experiment
from rag_eval.harness.ingest import IngestResult, ensure_collection
from rag_eval.harness.load import LoadResult, load_step, refuse_lite
from rag_eval.harness.load_file import LOAD_FILE, REQUESTS_FILE, SUMMARY_FILE
from rag_eval.harness.load_settings import LoadSettings
from rag_eval.harness.replay import timing_groups
from rag_eval.harness.replay_step import Replayed, replay
from rag_eval.harness.rows import SCHEMA
from rag_eval.harness.steps import (
    Prepared,
    ingest_collection,
    normalized_queries,
    prepare,
    vector_files,
)
from rag_eval.harness.steps import Progress as Progress  # the CLI's progress bars
from rag_eval.harness.store import (
    RunStore,
    is_finished,
)
from rag_eval.harness.texts import TEXT_COLUMNS, write_texts
from rag_eval.harness.timing import label_search_timing, latency_note
from rag_eval.harness.whatif import WHAT_IF_NOTES
from rag_eval.metrics.measures import SUMMARY_COLUMNS, chunk_ranking, doc_ranking, summarize
from rag_eval.reports.html import render_html
from rag_eval.reports.junit import render_junit
from rag_eval.reports.load import render_load_markdown
from rag_eval.reports.markdown import render_markdown
from rag_eval.reports.summary import render_summary

# -- ingest -----------------------------------------------------------------------------------


def ingest(exp: Experiment, *, force: bool = False, progress: Progress | None = None) -> IngestResult:
    prog = progress or Progress(quiet=True)
    prep = prepare(exp)
    return ensure_collection(
        exp, prep.dataset, prep.corpus, prep.rows, prep.resolver, progress=prog.factory, force=force
    )


def embed_dataset(
    dataset_path: str | Path,
    *,
    chunker: str,
    split: str,
    model: str,
    normalize: bool,
    cache_dir: Path,
    progress: Progress | None = None,
) -> tuple[Path, Path, int, list[Path]]:
    """Write the data set's precomputed vectors (chunks of ``chunker``, and the queries); a file whose
    content would not change is left as it is. Returns both paths, the texts embedded, the files written."""
    prog = progress or Progress(quiet=True)
    root = Path(dataset_path)
    dataset = load_beir(root, split)
    corpus = chunk_dataset(dataset, parse_chunker(chunker))
    spec = EmbedderSpec(model=model, normalize=normalize)
    chunk_file, query_file = vector_files(root / "vectors", chunker)
    # the files already there are a source too: texts that did not change keep their vectors, byte for byte
    stored = [VectorFile.read(p) for p in (chunk_file, query_file) if p.is_file()]
    resolver = VectorResolver(
        spec.model_id,
        cache=EmbeddingCache(cache_dir, spec.model_id),
        precomputed=[f for f in stored if f.model_id == spec.model_id],
        factory=spec.build,
    )
    chunk_texts = [c.content for c in corpus.chunks]
    query_texts = normalized_queries(dataset)
    written: list[Path] = []
    for path, texts, kind in ((chunk_file, chunk_texts, "chunks"), (query_file, query_texts, "queries")):
        vectors = resolver.resolve(texts, progress=prog.factory(f"embedding {kind}", len(resolver.missing(texts))))
        meta = {"model_id": spec.model_id, "kind": kind, "dataset_checksum": dataset.checksum}
        if kind == "chunks":
            meta["chunker"] = chunker
        if not _unchanged(path, texts, vectors, meta):
            VectorFile.write(path, texts, vectors.astype(np.float32), meta)
            written.append(path)
    return chunk_file, query_file, resolver.embedded, written


def _unchanged(path: Path, texts: Sequence[str], vectors: np.ndarray, meta: dict[str, str]) -> bool:
    """True when ``path`` already holds exactly these vectors for these texts with this metadata."""
    if not path.is_file():
        return False
    from rag_eval.embed.store import text_sha256, texts_checksum

    old = VectorFile.read(path)
    if any(old.metadata.get(k) != v for k, v in meta.items()) or old.metadata.get("texts_sha256") != texts_checksum(
        texts
    ):
        return False
    return all(
        (v := old.vectors.get(text_sha256(t))) is not None and np.array_equal(v, row.astype(np.float32))
        for t, row in zip(texts, vectors, strict=True)
    )


# -- run: prepare -> ingest -> replay -> summarise -> compare -> write ----------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class RunResult:
    out: Path
    summary: dict[str, Any]
    report: Path
    resumed_batches: int
    comparison: Comparison | None = None
    exit_code: int = 0  # the gates' (0 pass or warn, 1 a fail gate fired, 2 a fail gate not evaluable)


def config_rows(exp: Experiment) -> list[dict[str, Any]]:
    out = []
    for spec in exp.configs:
        c = spec.config
        legacy = c.pipeline.is_legacy
        cap, cap_source = exp.checked_cap(spec)
        out.append(
            {
                "name": spec.name,
                "baseline": spec.name == exp.baseline,
                "mode": spec.mode.value,
                "pipeline": c.pipeline.value,
                "models": pipeline_note(spec),
                "what_if": spec.what_if,
                "retrieve_k": c.retrieve_k,
                "return_n": c.return_n,
                "cap": cap,
                "cap_source": cap_source,
                "cap_aware": None if legacy else c.max_chunks_per_document,
                "hash": spec.config_hash(),
                "origin": spec.origin,
                "rag": c.as_properties(),
            }
        )
    return out


PIPELINE_NOTES = {
    PipelineKind.EVIDENCE: "D1-D5: chunk-scoped evidence keys, dedup by key, per-document cap, retrieve-k/return-n",
    PipelineKind.LEGACY_MERGE: "legacy that merges every retrieved chunk of a source into one block (no cap)",
    PipelineKind.LEGACY_FIRST: "legacy that keeps a source's top-scored chunk and drops its other chunks as duplicates",
}


def pipeline_note(spec: Any) -> str:
    """One line saying which behaviour a config models."""
    if spec.what_if is not None:
        return WHAT_IF_NOTES[spec.what_if]
    return PIPELINE_NOTES[spec.config.pipeline]


def run_experiment(
    exp: Experiment,
    out: str | Path,
    *,
    resume: bool = False,
    progress: Progress | None = None,
    gates: GateSet | None = None,
    against: str | Path | None = None,
    against_self: bool = False,
    intersection: bool = False,
    notes: Sequence[str] = (),
    cluster: Cluster | None = None,
) -> RunResult:
    """Replay ``exp`` into ``out`` and gate it: prepare, ingest, replay, summarise, compare, write.

    Compared within the run (every config against the baseline) unless ``against`` names an earlier
    run directory (``against_self``: the run against itself, as a first night does). The gates are
    ``gates``, else the experiment's, else the shipped default; they are checked before anything runs.
    ``cluster``: replay the query batches on Dask workers (the rows are the same as a serial run's).
    """
    prog = progress or Progress(quiet=True)
    clock = provenance.Clock.start()
    gate_set = gates if gates is not None else experiment_gates(exp.gates, source=exp.source)
    gate_set.validate(catalog(exp.cutoffs))
    if exp.load is not None:
        refuse_lite(exp.target)  # before anything is written
    earlier = ComparedRun.from_dir(against) if against is not None else None
    store = RunStore(out)
    store.check_target()
    if resume:
        store.check_resumable()
    with store.locked():  # held until the last file is published; a second run into `out` is refused
        prep = prepare(exp)
        if earlier is not None and not intersection:
            _check_pairable(exp, prep, earlier)
        collection = ingest_collection(exp, prep, prog)
        replayed = replay(exp, prep, collection, store, resume=resume, progress=prog, cluster=cluster)
        if exp.load is not None:
            started = {"started": clock.started.isoformat(), "fingerprint": exp.fingerprint()}
            replayed = replace(replayed, load=measure_load(exp, prep, collection, exp.load, run=started, progress=prog))
        run = summarise(exp, prep, replayed, clock)
        comparison = compare(run, run if against_self else earlier, gate_set, intersection=intersection, notes=notes)
        report = write(exp, prep, replayed, run, comparison)
    return RunResult(
        out=replayed.store.dir,
        summary=dict(run.summary),
        report=report,
        resumed_batches=replayed.resumed_batches,
        comparison=comparison,
        exit_code=comparison.exit_code,
    )


def _check_pairable(exp: Experiment, prep: Prepared, earlier: ComparedRun) -> None:
    """Refuse, before anything runs, to pair with a run over other data."""
    mine = {
        "data set checksum": prep.dataset.checksum,
        "split": prep.dataset.split,
        "chunker": exp.chunker_spec,
        "labels": (prep.labels.level, exp.min_overlap_chars),
    }
    theirs = earlier.data_identity()
    diff = [f"{k}: {mine[k]} vs {theirs[k]}" for k in mine if mine[k] != theirs[k]]
    if diff:
        raise RunDirectoryError(
            f"this run would not pair with it: {'; '.join(diff)}; accept a run over the current data "
            "(rag-eval accept) or give --intersection",
            path=earlier.label,
        )


def summarise(exp: Experiment, prep: Prepared, replayed: Replayed, clock: provenance.Clock) -> ComparedRun:
    """Metrics per config and the manifest, from the parts one batch at a time: the run as a comparison
    reads it (which reads the parts again, for the per-query values it pairs on)."""
    configs = config_rows(exp)
    parts = replayed.store.iter_parts
    summary_configs, _ = summarize(parts(SUMMARY_COLUMNS), configs=configs, cutoffs=exp.cutoffs)
    pa.default_memory_pool().release_unused()  # the parts' decoded buffers: the process keeps them otherwise
    manifest = provenance.manifest(
        exp=exp,
        dataset=prep.dataset,
        corpus=prep.corpus,
        labels=prep.labels,
        ingest=replayed.ingest,
        backend=replayed.backend,
        configs=configs,
        clock=clock,
        resumed_batches=replayed.resumed_batches,
    )
    summary = json_safe(
        {
            "provenance": provenance.short(manifest),
            "experiment": exp.name,
            "baseline": exp.baseline,
            "label_level": prep.labels.level,
            "label_note": (
                "chunk relevance from span overlap"
                if prep.labels.level == "span"
                else "no span qrels: every chunk of a relevant document counts as relevant (document-level fallback)"
            ),
            "queries": replayed.queries,
            "judged_queries": summary_configs[exp.baseline]["judged_queries"],
            "cutoffs": list(exp.cutoffs),
            "backend": replayed.backend.kind,
            "latency": latency_note(
                exp.timing,
                backend=f"Milvus {'Lite' if replayed.backend.kind == 'lite' else 'server'} "
                f"{replayed.backend.server_version}",
                warmup=exp.warmup,
                queries=replayed.queries,
                timing_seconds=replayed.timing_seconds,
            ),
            "configs": label_search_timing(summary_configs, timing_groups(exp.configs)),
            "execution": replayed.execution,
        }
    )
    load = replayed.load.document if replayed.load is not None else None
    table = pa.concat_tables([SCHEMA.empty_table().select(list(IDENTITY)), *parts(IDENTITY)]).to_pandas()
    return ComparedRun(
        dir=replayed.store.dir, table=table, summary=summary, manifest=json_safe(manifest), rows=parts, load_doc=load
    )


def write(exp: Experiment, prep: Prepared, replayed: Replayed, run: ComparedRun, comparison: Comparison) -> Path:
    """Every artifact of the run, staged, then published as a set (the completion marker last).
    Returns the report's path. A failure while staging leaves the previous run's files as they were."""
    store = replayed.store
    staging = store.stage()
    try:
        store.write_per_query(store.iter_parts(), run.summary["provenance"])
        names = [c.name for c in exp.configs]
        store.write_trec_runs(_rankings(store.iter_parts(("query_id", "config", "member_chunks"))), names)
        store.write_trec_qrels(f"{exp.split}.chunks", prep.labels.relevance)
        store.write_trec_qrels(f"{exp.split}.docs", prep.dataset.relevant_docs())
        write_texts(staging, store.iter_parts(TEXT_COLUMNS), prep.corpus, prep.dataset)
        pa.default_memory_pool().release_unused()
        store.write_json("summary.json", run.summary)
        if replayed.load is not None:
            write_load_files(staging, replayed.load)
        write_text(staging / "report.md", render_markdown(dict(run.summary), dict(run.manifest)))
        write_comparison(staging, comparison)
        store.write_json("manifest.json", run.manifest)
        render_html(staging, shown_dir=store.dir)
    except OSError as exc:
        store.discard_staging()
        raise RunStoreError(f"cannot write the run's files: {exc.strerror or exc}", path=str(store.dir)) from exc
    except BaseException:
        store.discard_staging()
        raise
    store.publish()
    store.finish()
    return store.dir / "report.md"


def _rankings(parts: Iterator[pa.Table]) -> Iterator[tuple[str, str, list[str], list[str]]]:
    """(config, query id, delivered chunks, delivered documents) of every row, part by part."""
    for part in parts:
        for row in part.to_pylist():
            yield row["config"], row["query_id"], chunk_ranking(row), doc_ranking(row)


# -- load: latency under concurrent load -----------------------------------------------------------


def measure_load(
    exp: Experiment,
    prep: Prepared,
    ingested: IngestResult,
    settings: LoadSettings,
    *,
    run: Mapping[str, Any] | None,
    progress: Progress,
) -> LoadResult:
    """The configs' lookups from N client processes at once, for each N (see rag_eval.harness.load)."""
    queries = [q.text for q in prep.dataset.queries.values()][: exp.query_limit]
    n_configs = len(settings.configs) or len(exp.configs)
    progress.phase("load", len(settings.concurrency) * settings.rounds * n_configs)
    return load_step(
        exp, queries=queries, resolver=prep.resolver, target=ingested.target, settings=settings, run=run,
        tick=lambda n: progress.tick("load", n), log=progress.log,
    )  # fmt: skip


def write_load_files(directory: Path, result: LoadResult) -> list[Path]:
    """``load_requests.parquet``, ``load.md``, then ``load.json`` (what readers look for) last."""
    files = [directory / REQUESTS_FILE, directory / SUMMARY_FILE, directory / LOAD_FILE]
    (directory / LOAD_FILE).unlink(missing_ok=True)  # until the new one is in, no stale figures are read
    try:
        write_parquet(files[0], result.requests)
        write_text(files[1], render_load_markdown(json_safe(result.document)))
        write_json(files[2], result.document)
    except OSError as exc:
        for path in files:
            path.unlink(missing_ok=True)
        raise RunStoreError(f"cannot write the load measurement: {exc.strerror or exc}", path=str(directory)) from exc
    return files


def load(exp: Experiment, out: str | Path, *, settings: LoadSettings, progress: Progress | None = None) -> LoadResult:
    """``rag-eval load``: measure, then write ``load.json`` (and the per-lookup table, ``load.md``) into
    ``out``. When ``out`` is a finished run directory, the measurement belongs to that run: its HTML
    report is rendered again with the curve, and ``rag-eval compare`` applies the load gates."""
    prog = progress or Progress(quiet=True)
    refuse_lite(exp.target)
    store = RunStore(out)
    store.check_target()
    with store.locked():
        run = _run_of(store.dir)
        prep = prepare(exp)
        collection = ingest_collection(exp, prep, prog)
        result = measure_load(exp, prep, collection, settings, run=run, progress=prog)
        write_load_files(store.dir, result)
        if run is not None:
            render_html(store.dir)
    return result


def _run_of(directory: Path) -> dict[str, Any] | None:
    """The start and fingerprint of the finished run in ``directory``, or None when there is none."""
    if not (is_finished(directory) and (directory / "manifest.json").is_file()):
        return None
    try:
        manifest = json.loads((directory / "manifest.json").read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise RunDirectoryError(f"cannot read the run's manifest: {exc}", path=str(directory)) from exc
    return {"started": manifest.get("started"), "fingerprint": manifest.get("fingerprint")}


def write_comparison(directory: str | Path, comparison: Comparison) -> list[Path]:
    """``compare.json``, ``junit.xml`` and ``summary.md`` into ``directory``, each atomically."""
    out = Path(directory)
    try:
        write_json(out / "compare.json", comparison.document)
        write_text(out / "junit.xml", render_junit(comparison.document))
        write_text(out / "summary.md", render_summary(comparison.document))
    except OSError as exc:
        raise RunStoreError(f"cannot write the comparison: {exc.strerror}", path=str(out)) from exc
    return [out / "compare.json", out / "junit.xml", out / "summary.md"]


def compare_runs(
    run_dir: str | Path,
    *,
    against: str | Path | None = None,
    gates: str | Path | None = None,
    out: str | Path | None = None,
    intersection: bool = False,
) -> Comparison:
    """``rag-eval compare``: compare run directories (never Milvus) and write the outputs."""
    gate_set = load_gates(gates) if gates is not None else None
    run = ComparedRun.from_dir(run_dir)
    earlier = ComparedRun.from_dir(against) if against is not None else None
    if gate_set is None:
        exp = run.manifest.get("experiment", {})
        gate_set = experiment_gates(exp.get("gates"), source=exp.get("source"))
    notes = []
    info = accepted_info(against) if against is not None else None
    if info is not None:
        notes.append(f"against the baseline accepted at {info.get('accepted_at')} from {info.get('source')}")
    comparison = compare(run, earlier, gate_set, intersection=intersection, notes=notes)
    write_comparison(Path(out) if out is not None else Path(run_dir), comparison)
    return comparison


@dataclass(frozen=True, slots=True, kw_only=True)
class NightResult:
    dir: Path
    accepted: Path
    first: bool
    run: RunResult

    @property
    def exit_code(self) -> int:
        return self.run.exit_code


def night_dir(root: str | Path, when: dt.datetime | None = None) -> Path:
    """``ROOT/<UTC date>``; a second night on the same date gets ``<date>.2``, then ``.3``..."""
    date = (when or dt.datetime.now(dt.UTC)).strftime("%Y-%m-%d")
    base = Path(root) / date
    k = 1
    path = base
    while path.exists():
        k += 1
        path = base.with_name(f"{date}.{k}")
    return path


def nightly(
    exp: Experiment,
    *,
    root: str | Path = Path("reports/nightly"),
    accepted_root: str | Path = DEFAULT_ACCEPTED,
    history: str | Path = DEFAULT_HISTORY,
    gates: GateSet | None = None,
    progress: Progress | None = None,
    when: dt.datetime | None = None,
    cluster: Cluster | None = None,
) -> NightResult:
    """One night: run ``exp`` into ``ROOT/<UTC date>/``, pair it with the accepted baseline (the first
    night accepts itself and says so), apply the gates, append to the history."""
    out = night_dir(root, when)
    accepted = accepted_dir(accepted_root, exp.name)
    first = not (accepted / "per_query.parquet").is_file()
    notes = (
        [f"no accepted baseline in {accepted}: this first night is accepted and compared with itself"]
        if first
        else [f"against the accepted baseline {accepted} ({(accepted_info(accepted) or {}).get('source', '?')})"]
    )
    result = run_experiment(
        exp, out, progress=progress, gates=gates, against=None if first else accepted, against_self=first,
        notes=notes, cluster=cluster,
    )  # fmt: skip
    if first:
        accept(out, root=accepted_root)
    append_history(ComparedRun.from_dir(out), exit_code=result.exit_code, path=history)
    return NightResult(dir=out, accepted=accepted, first=first, run=result)


def describe(exp: Experiment, out: Path) -> str:
    """The settings a run uses, defaults included, in one line for the start of the run."""
    configs = ", ".join(f"{c.name} ({c.config.pipeline.value})" for c in exp.configs)
    return (
        f"{exp.name}: data set {exp.dataset_path} (split {exp.split}), chunker {exp.chunker_spec}, "
        f"embedder {exp.embedder_model}, ingest profile {exp.profile.name}, Milvus {exp.target.redacted_uri} "
        f"(index {exp.index.index_type}/{exp.index.metric}), configs {configs}, baseline {exp.baseline}, "
        f"queries {exp.query_limit or 'all'}, batches of {exp.batch_size}; run directory {out}"
    )
