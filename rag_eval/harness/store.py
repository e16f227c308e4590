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
are assembled from the parts, then ``.parts`` is removed.
"""

from __future__ import annotations

import json
import math
import os
import shutil
import tempfile
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from rag_eval.core.errors import ConfigError, ConfigProblem, RunStoreError
from rag_eval.embed.store import write_atomic as atomic_write_parquet
from rag_eval.harness.rows import SCHEMA, rows_to_table

STATE_FILE = "state.json"
PARTS = ".parts"


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
        files = sorted(self.parts_dir.glob("batch-*.parquet"))
        if not files:
            return SCHEMA.empty_table()
        table = pa.concat_tables([pq.read_table(f, schema=SCHEMA) for f in files])
        keys = list(zip(table.column("query_id").to_pylist(), table.column("config").to_pylist(), strict=True))
        if len(keys) != len(set(keys)):
            raise RunStoreError(
                "a (query, config) pair appears twice in the parts: start the run again", path=str(self.parts_dir)
            )
        return table

    # -- final artifacts ---------------------------------------------------------------------

    def write_per_query(self, table: pa.Table, provenance: Mapping[str, Any]) -> Path:
        meta = dict(table.schema.metadata or {})
        meta[b"rag_eval.provenance"] = json.dumps(provenance, sort_keys=True).encode()
        path = self.dir / "per_query.parquet"
        atomic_write_parquet(path, table.replace_schema_metadata(meta))
        return path

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
