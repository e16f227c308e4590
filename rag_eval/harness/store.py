"""The run store: one directory per run, every file written atomically.

::

    DIR/manifest.json              provenance: git commit, config hashes, data set checksum,
                                   Milvus version and index, pymilvus, Python, machine, times
    DIR/per_query.parquet          one row per (query, config): the source of truth
    DIR/summary.json               metrics per config
    DIR/runs/<config>.trec         TREC run of delivered chunks (docno = chunk evidence key)
    DIR/runs/<config>.docs.trec    TREC run of delivered documents
    DIR/qrels/<split>.chunks.trec  chunk-level qrels from span overlap
    DIR/qrels/<split>.docs.trec    document-level qrels
    DIR/.parts/                    finished query batches of an unfinished run (for --resume)

A run writes each finished batch of queries to ``.parts`` (atomically); ``--resume``
skips the batches found there, so no query is run or counted twice; the final files
are assembled from the parts, then ``.parts`` is removed. The parts are read one batch
at a time (:meth:`RunStore.iter_parts`) and ``per_query.parquet`` is written from them
as they are read, so a run's memory does not grow with its number of queries.
"""

from __future__ import annotations

import json
import math
import os
import shutil
import tempfile
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from rag_eval.core.errors import ConfigError, ConfigProblem, RunStoreError
from rag_eval.embed.store import write_atomic as atomic_write_parquet
from rag_eval.harness.rows import SCHEMA, rows_to_table

STATE_FILE = "state.json"
PARTS = ".parts"
ROW_GROUP_ROWS = 16_384  # rows per row group of per_query.parquet (parts are much smaller)


def json_safe(obj: Any) -> Any:
    """``obj`` with NaN and infinities as None (JSON has neither) and numpy scalars as Python's.

    >>> json_safe({"a": float("nan"), "b": [1.5, float("inf")]})
    {'a': None, 'b': [1.5, None]}
    """
    if isinstance(obj, float):
        return None if math.isnan(obj) or math.isinf(obj) else obj
    if isinstance(obj, dict):
        return {str(k): json_safe(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [json_safe(v) for v in obj]
    if hasattr(obj, "item") and hasattr(obj, "dtype"):  # a numpy scalar
        return json_safe(obj.item())
    return obj


def atomic_write_bytes(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def atomic_write_text(path: Path, text: str) -> None:
    atomic_write_bytes(path, text.encode("utf-8"))


def atomic_write_json(path: Path, obj: Any) -> None:
    """JSON written atomically; NaN and infinities become null (never the invalid ``NaN`` token)."""
    text = json.dumps(json_safe(obj), indent=2, sort_keys=False, ensure_ascii=False, allow_nan=False)
    atomic_write_text(path, text + "\n")


class RunStore:
    def __init__(self, directory: str | Path) -> None:
        self.dir = Path(directory)
        self.parts_dir = self.dir / PARTS

    # -- lifecycle ---------------------------------------------------------------------------

    def begin(self, fingerprint: str, *, resume: bool) -> set[int]:
        """Prepare the directory; returns the batch numbers already finished (resume only)."""
        try:
            self.dir.mkdir(parents=True, exist_ok=True)
            state_path = self.parts_dir / STATE_FILE
            if resume:
                if not state_path.is_file():
                    raise ConfigError(
                        [ConfigProblem("--resume", f"no unfinished run in {self.dir} (nothing to resume)")]
                    )
                state = json.loads(state_path.read_text())
                if state.get("fingerprint") != fingerprint:
                    raise ConfigError(
                        [
                            ConfigProblem(
                                "--resume",
                                f"{self.dir} holds an unfinished run of a different experiment "
                                f"({state.get('fingerprint')} != {fingerprint}): use another --out or drop --resume",
                            )
                        ]
                    )
                return self.finished_batches()
            if self.parts_dir.exists():
                shutil.rmtree(self.parts_dir)
            self.parts_dir.mkdir(parents=True)
            atomic_write_json(state_path, {"fingerprint": fingerprint})
            return set()
        except OSError as exc:
            raise RunStoreError(f"cannot prepare the run directory: {exc.strerror}", path=str(self.dir)) from exc

    def finished_batches(self) -> set[int]:
        return {int(p.stem.split("-")[1]) for p in self.parts_dir.glob("batch-*.parquet")}

    def write_batch(self, number: int, rows: list[dict[str, Any]]) -> None:
        try:
            atomic_write_parquet(self.parts_dir / f"batch-{number:05d}.parquet", rows_to_table(rows))
        except OSError as exc:
            raise RunStoreError(f"cannot write a batch: {exc.strerror}", path=str(self.parts_dir)) from exc

    def read_parts(self) -> pa.Table:
        """Every part in one table (small runs and tests: a large run reads them one at a time)."""
        self.check_parts()
        parts = list(self.iter_parts())
        return pa.concat_tables(parts) if parts else SCHEMA.empty_table()

    def iter_parts(self, columns: Sequence[str] | None = None) -> Iterator[pa.Table]:
        """The finished batches' rows in batch order, one part at a time (only ``columns`` when given)."""
        schema = SCHEMA if columns is None else pa.schema([SCHEMA.field(c) for c in columns])
        for f in sorted(self.parts_dir.glob("batch-*.parquet")):
            yield pq.read_table(f, schema=schema, columns=list(columns) if columns is not None else None)

    def check_parts(self) -> None:
        """Refuse parts in which a (query, config) pair appears twice (read by query index, not text)."""
        keys = []
        number: dict[str, int] = {}  # config name -> a number of its own
        for part in self.iter_parts(["query_index", "config"]):
            config = part.column("config").combine_chunks().dictionary_encode()
            code = np.array([number.setdefault(n, len(number)) for n in config.dictionary.to_pylist()], dtype=np.int64)
            index = part.column("query_index").to_numpy().astype(np.int64)
            keys.append(index * 65_536 + code[config.indices.to_numpy()] if len(code) else index)
        flat = np.concatenate(keys) if keys else np.zeros(0, dtype=np.int64)
        if len(np.unique(flat)) != len(flat):
            raise RunStoreError(
                "a (query, config) pair appears twice in the parts: start the run again", path=str(self.parts_dir)
            )

    # -- final artifacts ---------------------------------------------------------------------

    def write_per_query(self, table: pa.Table | Iterable[pa.Table], provenance: Mapping[str, Any]) -> Path:
        """``per_query.parquet`` from a table or from its parts in order (streamed: row groups of
        :data:`ROW_GROUP_ROWS` rows, written as the parts are read), with the run's provenance."""
        meta = dict(SCHEMA.metadata or {})
        meta[b"rag_eval.provenance"] = json.dumps(provenance, sort_keys=True).encode()
        schema = SCHEMA.with_metadata(meta)
        parts = [table] if isinstance(table, pa.Table) else table
        path = self.dir / "per_query.parquet"
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
        os.close(fd)
        try:
            with pq.ParquetWriter(tmp, schema, compression="zstd") as writer:
                pending: list[pa.Table] = []
                rows = 0
                for part in parts:
                    pending.append(part.cast(schema))
                    rows += part.num_rows
                    if rows >= ROW_GROUP_ROWS:
                        writer.write_table(pa.concat_tables(pending), row_group_size=ROW_GROUP_ROWS)
                        pending, rows = [], 0
                if pending:
                    writer.write_table(pa.concat_tables(pending), row_group_size=ROW_GROUP_ROWS)
            os.chmod(tmp, 0o644)
            os.replace(tmp, path)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
        return path

    def write_trec_runs(
        self, rankings: Iterable[tuple[str, str, list[str], list[str]]], names: Sequence[str]
    ) -> list[Path]:
        """``runs/<config>.trec`` and ``runs/<config>.docs.trec`` of every config in ``names``, from
        (config, query id, chunk ranking, document ranking) in query order, written line by line."""
        runs = self.dir / "runs"
        runs.mkdir(parents=True, exist_ok=True)
        targets = {(n, kind): runs / f"{n}{'' if kind == 0 else '.docs'}.trec" for n in names for kind in (0, 1)}
        tmps: dict[tuple[str, int], Path] = {}
        try:
            with ExitStack() as stack:
                files = {}
                for key, target in targets.items():
                    fd, temp_name = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=runs)
                    tmps[key] = Path(temp_name)
                    files[key] = stack.enter_context(os.fdopen(fd, "w", encoding="utf-8"))
                for name, qid, chunks, docs in rankings:
                    for kind, items in ((0, chunks), (1, docs)):
                        fh = files[(name, kind)]
                        for rank, item in enumerate(items, start=1):
                            fh.write(f"{qid} Q0 {item} {rank} {len(items) - rank + 1} {name}\n")
                for fh in files.values():
                    fh.flush()
                    os.fsync(fh.fileno())
            for key, written in tmps.items():
                os.chmod(written, 0o644)
                os.replace(written, targets[key])
        except BaseException:
            for written in tmps.values():
                written.unlink(missing_ok=True)
            raise
        return list(targets.values())

    def write_trec_run(self, name: str, ranking: Mapping[str, list[str]], tag: str) -> Path:
        """``ranking``: query -> delivered items best first; scores are strictly decreasing."""
        lines = []
        for qid in ranking:
            items = ranking[qid]
            for rank, item in enumerate(items, start=1):
                lines.append(f"{qid} Q0 {item} {rank} {len(items) - rank + 1} {tag}")
        path = self.dir / "runs" / f"{name}.trec"
        atomic_write_text(path, "\n".join(lines) + ("\n" if lines else ""))
        return path

    def write_trec_qrels(self, name: str, qrels: Mapping[str, Mapping[str, int]]) -> Path:
        lines = [f"{qid} 0 {item} {grade}" for qid in qrels for item, grade in sorted(qrels[qid].items())]
        path = self.dir / "qrels" / f"{name}.trec"
        atomic_write_text(path, "\n".join(lines) + ("\n" if lines else ""))
        return path

    def write_json(self, name: str, obj: Any) -> Path:
        path = self.dir / name
        atomic_write_json(path, obj)
        return path

    def finish(self) -> None:
        shutil.rmtree(self.parts_dir, ignore_errors=True)

    def remove_stale_runs(self, keep: Iterable[str]) -> None:
        """Remove run files of configs that are no longer part of the experiment."""
        runs = self.dir / "runs"
        if not runs.is_dir():
            return
        keep_files = {f"{name}{suffix}.trec" for name in keep for suffix in ("", ".docs")}
        for f in runs.glob("*.trec"):
            if f.name not in keep_files:
                f.unlink()
