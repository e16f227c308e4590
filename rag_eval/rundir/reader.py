"""The run directory read back: the one reader that the comparison, the reports and the load gates use.

A finished run holds ``per_query.parquet`` (the source of truth), ``summary.json`` and ``manifest.json``,
and may hold ``compare.json``, ``load.json``, ``texts.parquet`` and ``spans.parquet``. Every JSON file is
read and its shape checked here; a missing or malformed one is one line naming the file and the field
(``error`` chooses the kind: :class:`RunDirectoryError` for a comparison, :class:`ReportInputError` for a
report, both exit 2).

>>> check_compare({"schema_version": 1}, "compare.json")
Traceback (most recent call last):
...
rag_eval.core.errors.ReportInputError: compare.json: field 'comparisons': missing
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from rag_eval.core.errors import InputError, ReportInputError, RunDirectoryError
from rag_eval.core.parsing import TextError, parse_json
from rag_eval.rundir.directory import MARKER, file_digest, is_finished, recorded_digests
from rag_eval.rundir.rows import SCHEMA

PER_QUERY = "per_query.parquet"
SUMMARY = "summary.json"
MANIFEST = "manifest.json"
COMPARE = "compare.json"
LOAD = "load.json"
LOAD_REQUESTS = "load_requests.parquet"
LOAD_SUMMARY = "load.md"
TEXTS = "texts.parquet"
SPANS = "spans.parquet"
RUN_FILES = (PER_QUERY, SUMMARY, MANIFEST)  # what every finished run holds
LOAD_SCHEMA_VERSION = 1
COMPARE_SCHEMA_VERSION = 1
OUTCOMES = ("pass", "warn", "fail", "underpowered", "error")
BATCH_ROWS = 8192


def _fail(error: type[InputError], message: str, path: str, field: str | None = None) -> InputError:
    if error is ReportInputError:
        return ReportInputError(message, path=path, field=field)
    return RunDirectoryError(f"{field}: {message}" if field else message, path=path)


def read_json(path: Path, *, error: type[InputError] = RunDirectoryError) -> dict[str, Any]:
    """A JSON object from ``path``; missing, unreadable, invalid or not an object is one line naming it."""
    try:
        data = parse_json(path.read_text(encoding="utf-8"))
    except FileNotFoundError as exc:
        raise _fail(error, "not found: is this a run directory?", str(path)) from exc
    except OSError as exc:
        raise _fail(error, f"cannot read: {exc.strerror}", str(path)) from exc
    except (TextError, UnicodeDecodeError) as exc:
        if isinstance(exc, UnicodeDecodeError):
            line = "not UTF-8"
        else:
            line = exc.reason if exc.line is None else f"line {exc.line}: {exc.reason}"
        raise _fail(error, f"not valid JSON ({line})", str(path)) from exc
    if not isinstance(data, dict):
        raise _fail(error, "expected a JSON object", str(path))
    return data


def require(obj: Mapping[str, Any], key: str, kind: type | tuple[type, ...], path: str, where: str = "") -> Any:
    """``obj[key]`` when it is a ``kind`` (a bool is no number), else a :class:`ReportInputError`."""
    field = f"{where}.{key}" if where else key
    if key not in obj:
        raise ReportInputError("missing", path=path, field=field)
    value = obj[key]
    if not isinstance(value, kind) or (isinstance(value, bool) and kind in (int, float, (int, float))):
        raise ReportInputError(f"expected {getattr(kind, '__name__', kind)}, got {value!r}", path=path, field=field)
    return value


def check_compare(data: Mapping[str, Any], path: str) -> dict[str, Any]:
    """The fields of ``compare.json`` a report reads, checked (NaN is written as null)."""
    comparisons = require(data, "comparisons", list, path)
    if data.get("schema_version") != COMPARE_SCHEMA_VERSION:
        raise ReportInputError(f"unsupported schema version {data.get('schema_version')!r}", path=path)
    for i, comp in enumerate(comparisons):
        where = f"comparisons[{i}]"
        if not isinstance(comp, Mapping):
            raise ReportInputError("expected an object", path=path, field=where)
        require(comp, "baseline", str, path, where)
        require(comp, "candidate", str, path, where)
        for j, m in enumerate(require(comp, "metrics", list, path, where)):
            mw = f"{where}.metrics[{j}]"
            if not isinstance(m, Mapping):
                raise ReportInputError("expected an object", path=path, field=mw)
            require(m, "metric", str, path, mw)
            for key in ("baseline", "candidate", "delta", "ci_low", "ci_high"):
                if m.get(key) is not None:
                    require(m, key, (int, float), path, mw)
        for j, g in enumerate(require(comp, "gates", list, path, where)):
            gw = f"{where}.gates[{j}]"
            if not isinstance(g, Mapping):
                raise ReportInputError("expected an object", path=path, field=gw)
            outcome = require(g, "outcome", str, path, gw)
            if outcome not in OUTCOMES:
                raise ReportInputError(f"unknown outcome {outcome!r}", path=path, field=f"{gw}.outcome")
    exit_code = data.get("exit_code")
    if exit_code is not None and (not isinstance(exit_code, int) or isinstance(exit_code, bool)):
        raise ReportInputError(f"expected an integer, got {exit_code!r}", path=path, field="exit_code")
    return dict(data)


def check_load(doc: Any, path: str, *, error: type[InputError] = RunDirectoryError) -> dict[str, Any]:
    """The fields of ``load.json`` the gates and reports read, checked; a malformed file is one line naming
    the field.

    >>> check_load({"schema_version": 1, "results": [{"config": "a"}]}, "load.json")
    Traceback (most recent call last):
    rag_eval.core.errors.RunDirectoryError: load.json: results[0]: missing 'concurrency'
    """
    if not isinstance(doc, Mapping):
        raise _fail(error, "expected a JSON object", path)
    if doc.get("schema_version") != LOAD_SCHEMA_VERSION:
        raise _fail(error, f"unsupported schema version {doc.get('schema_version')!r}", path)
    results = doc.get("results")
    if not isinstance(results, list):
        raise _fail(error, "missing 'results' (a list)", path)
    for i, entry in enumerate(results):
        if not isinstance(entry, Mapping):
            raise _fail(error, f"results[{i}]: expected an object", path)
        for key, kind in (("config", str), ("concurrency", int), ("rounds", list), ("latency_us", Mapping)):
            if key not in entry:
                raise _fail(error, f"results[{i}]: missing {key!r}", path)
            if not isinstance(entry[key], kind) or isinstance(entry[key], bool):
                raise _fail(error, f"results[{i}].{key}: expected {kind.__name__}", path)
    return dict(doc)


def read_load(directory: str | Path, *, error: type[InputError] = RunDirectoryError) -> dict[str, Any] | None:
    """``DIR/load.json`` checked, or None when there is none."""
    path = Path(directory) / LOAD
    if not path.is_file():
        return None
    return check_load(read_json(path, error=error), str(path), error=error)


def run_started(directory: Path) -> dict[str, Any] | None:
    """The start and fingerprint of the finished run in ``directory`` (what a load measurement or a
    comparison written there belongs to), or None when there is none."""
    if not (is_finished(directory) and (directory / MANIFEST).is_file()):
        return None
    manifest = read_json(directory / MANIFEST)
    return {"started": manifest.get("started"), "fingerprint": manifest.get("fingerprint")}


def check_run_dir(path: Path) -> None:
    """Refuse a directory that holds no finished run: its files missing, or not all published (cheap: the
    files' digests are checked where they are read, :meth:`FinishedRun.read`)."""
    missing = [name for name in RUN_FILES if not (path / name).is_file()]
    if missing:
        raise RunDirectoryError(
            f"not a run directory (no {', '.join(missing)}): give a directory written by `rag-eval run`",
            path=str(path),
        )
    if not is_finished(path):
        raise RunDirectoryError(
            f"the run's files were not all published (no {MARKER}: it stopped while writing them): run it again",
            path=str(path),
        )


def check_digests(path: Path) -> None:
    """Refuse a finished run whose rows, summary or manifest changed since it published them."""
    for name, digest in sorted(recorded_digests(path).items()):
        if name in RUN_FILES and (path / name).is_file() and file_digest(path / name) != digest:
            raise RunDirectoryError(
                f"{name} is not the file the run published (changed or cut since: its SHA-256 differs from "
                f"the one {MARKER} records): run again, or restore the file",
                path=str(path / name),
            )


@dataclass(frozen=True, slots=True, kw_only=True)
class FinishedRun:
    """A finished run's documents, and its per-query rows read again a batch at a time.

    >>> FinishedRun.read("/nonexistent")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    rag_eval.core.errors.RunDirectoryError: /nonexistent: not a run directory (no per_query.parquet, ...
    """

    dir: Path
    summary: dict[str, Any]
    manifest: dict[str, Any]
    columns: frozenset[str]  # the columns per_query.parquet holds

    @classmethod
    def read(cls, directory: str | Path) -> FinishedRun:
        path = Path(directory)
        check_run_dir(path)
        check_digests(path)
        summary, manifest = read_json(path / SUMMARY), read_json(path / MANIFEST)
        try:
            columns = frozenset(pq.read_schema(path / PER_QUERY).names)
        except (OSError, pa.ArrowException) as exc:
            raise RunDirectoryError(f"cannot read the run: {exc}", path=str(path)) from exc
        return cls(dir=path, summary=summary, manifest=manifest, columns=columns)

    def table(self, columns: Sequence[str]) -> pa.Table:
        """Those of ``columns`` the rows hold, every row."""
        try:
            return pq.read_table(self.dir / PER_QUERY, columns=[c for c in columns if c in self.columns])
        except (OSError, pa.ArrowException) as exc:
            raise RunDirectoryError(f"cannot read the run: {exc}", path=str(self.dir)) from exc

    def batches(self, columns: Sequence[str]) -> Iterator[pa.Table]:
        """The rows, a batch at a time, only ``columns``; a column of the schema that a run written before it
        existed lacks (an accepted baseline) is read as missing values."""
        absent = [c for c in columns if c not in self.columns and c in SCHEMA.names]
        try:
            reader = pq.ParquetFile(self.dir / PER_QUERY)
            for batch in reader.iter_batches(columns=[c for c in columns if c in self.columns], batch_size=BATCH_ROWS):
                table = pa.Table.from_batches([batch])
                for name in absent:
                    field = SCHEMA.field(name)
                    table = table.append_column(field, pa.nulls(table.num_rows, field.type))
                yield table
        except (OSError, pa.ArrowException) as exc:
            raise RunDirectoryError(f"cannot read the run: {exc}", path=str(self.dir)) from exc


def read_parquet(
    path: Path, columns: Sequence[str] | None = None, query_ids: Sequence[str] | None = None
) -> pd.DataFrame:
    """``path`` as a DataFrame for a report: only those of ``columns`` it has, only the rows of ``query_ids``
    when given (read a batch at a time: only the rows asked for are ever kept)."""
    try:
        present = set(pq.read_schema(path).names)
        wanted = None if columns is None else [c for c in columns if c in present]
        if query_ids is None:
            frame: pd.DataFrame = pq.read_table(path, columns=wanted).to_pandas()
            return frame
        keep = pa.array(list(query_ids), type=pa.string())
        parts = [
            batch.filter(pc.is_in(batch.column("query_id"), value_set=keep))
            for batch in pq.ParquetFile(path).iter_batches(batch_size=4096, columns=wanted)
        ]
        empty = pq.read_schema(path).empty_table()
        table = pa.Table.from_batches(parts) if parts else (empty if wanted is None else empty.select(wanted))
        pa.default_memory_pool().release_unused()
        rows: pd.DataFrame = table.to_pandas()
        return rows
    except FileNotFoundError as exc:
        raise ReportInputError("not found: is this a run directory?", path=str(path)) from exc
    except (OSError, pa.ArrowException) as exc:  # ArrowInvalid (a ValueError) for a file that is not Parquet
        raise ReportInputError(f"cannot read as Parquet: {exc}", path=str(path)) from exc
