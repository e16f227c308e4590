"""Publishing what a run produced: the run store writes the files it is handed, then publishes them as a set.

The harness writes the run's own data (``per_query.parquet``, the TREC runs and qrels, ``texts.parquet`` and
``spans.parquet``); everything rendered above it (``summary.json``, ``report.md``, ``compare.json``,
``junit.xml``, ``summary.md``, the load files, ``manifest.json``) is handed in as :data:`Artifact` values
in the order they are written, and ``report.html`` by a callback that renders into the staging directory
once the rest is there. Nothing is visible in the run directory until :meth:`RunStore.publish` moves the
whole set in; a failure while staging leaves the previous run's files as they were.

>>> import tempfile
>>> directory = Path(tempfile.mkdtemp())
>>> [p.name for p in write_set(directory, [TextFile("a.md", "# a"), JsonFile("a.json", {"x": 1})], what="a")]
['a.md', 'a.json']
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from contextlib import suppress
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import pyarrow as pa

from rag_eval.core.errors import RunStoreError
from rag_eval.datasets.beir import Dataset
from rag_eval.datasets.labels import ChunkedCorpus, ChunkQrels
from rag_eval.files import write_json, write_parquet, write_text
from rag_eval.rundir.directory import RunStore
from rag_eval.rundir.texts import TEXT_COLUMNS, write_texts

Scored = list[tuple[str, float]]  # (chunk or document, its search score) in delivered order
Ranking = tuple[str, str, Scored, Scored]  # (config, query id, delivered chunks, delivered documents)
# what the rankings are read from
RANKING_COLUMNS = ("query_id", "config", "member_chunks", "member_block", "returned_scores", "hit_chunks",
                   "hit_scores")  # fmt: skip


@dataclass(frozen=True, slots=True)
class TextFile:
    """A rendered text (Markdown, XML), written as UTF-8."""

    name: str  # relative to the directory it is written into
    text: str


@dataclass(frozen=True, slots=True)
class JsonFile:
    """A JSON document, indented; NaN and infinities become null."""

    name: str
    document: Any


@dataclass(frozen=True, slots=True)
class ParquetFile:
    """An Arrow table, as zstd-compressed Parquet."""

    name: str
    table: pa.Table


class Prepared(Protocol):
    """The run's data as the prepare step left it: what the run directory's qrels and texts are written from."""

    @property
    def dataset(self) -> Dataset: ...

    @property
    def corpus(self) -> ChunkedCorpus: ...

    @property
    def labels(self) -> ChunkQrels: ...


Artifact = TextFile | JsonFile | ParquetFile
Render = Callable[[Path], object]  # renders more files into the directory it is given (the staging one)


def write_artifact(directory: Path, artifact: Artifact) -> Path:
    """``artifact`` into ``directory``, atomically; returns its path."""
    path = directory / artifact.name
    if isinstance(artifact, TextFile):
        write_text(path, artifact.text)
    elif isinstance(artifact, JsonFile):
        write_json(path, artifact.document)
    else:
        write_parquet(path, artifact.table)
    return path


def write_set(directory: Path, artifacts: Sequence[Artifact], *, what: str, together: bool = False) -> list[Path]:
    """Each of ``artifacts`` into ``directory``, atomically and in order. ``together``: the set is read as
    one through its last file (``load.json``): that file goes first, so no reader takes the old one for the
    new set, and a failure removes every file of the set. ``what`` names the set in the error."""
    paths = [directory / a.name for a in artifacts]
    if together and paths:
        paths[-1].unlink(missing_ok=True)
    try:
        for artifact in artifacts:
            write_artifact(directory, artifact)
    except OSError as exc:
        if together:
            for path in paths:
                with suppress(OSError):  # a directory in the way: the error to report is the write's
                    path.unlink(missing_ok=True)
        raise RunStoreError(f"cannot write {what}: {exc.strerror or exc}", path=str(directory)) from exc
    return paths


@dataclass(frozen=True, slots=True, kw_only=True)
class RunFiles:
    """What a run publishes besides its rows: the configs its TREC runs name and the rankings they are read
    from, the provenance the rows carry, the documents (``artifacts``), and what ``render`` renders there."""

    names: Sequence[str]
    provenance: Any
    rankings: Iterable[Ranking]
    artifacts: Sequence[Artifact]
    render: Render


def publish_run(store: RunStore, prep: Prepared, files: RunFiles) -> None:
    """Stage the run's data (its rows with the provenance, the TREC runs of the configs named from the
    rankings, the qrels, the texts), then ``files``' artifacts in order, then whatever its ``render`` renders
    there; publish the set, the completion marker last, and drop the finished batches."""
    names, provenance, rankings, artifacts, render = (
        files.names, files.provenance, files.rankings, files.artifacts, files.render
    )
    staging = store.stage()
    try:
        store.write_per_query(store.iter_parts(), provenance)
        store.write_trec_runs(rankings, names)
        store.write_trec_qrels(f"{prep.dataset.split}.chunks", prep.labels.relevance)
        store.write_trec_qrels(f"{prep.dataset.split}.docs", prep.dataset.relevant_docs())
        write_texts(staging, store.iter_parts(TEXT_COLUMNS), prep.corpus, prep.dataset)
        pa.default_memory_pool().release_unused()
        for artifact in artifacts:
            write_artifact(staging, artifact)
        render(staging)
    except OSError as exc:
        store.discard_staging()
        raise RunStoreError(f"cannot write the run's files: {exc.strerror or exc}", path=str(store.dir)) from exc
    except BaseException:
        store.discard_staging()
        raise
    store.publish()
    store.finish()
