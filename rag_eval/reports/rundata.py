"""Reading what a run wrote, for the reports: nothing here computes a measure.

A run directory holds ``summary.json``, ``manifest.json``, ``per_query.parquet`` and, from
runs that wrote them, ``texts.parquet`` and ``spans.parquet`` (older runs: the drill-down
then shows chunk keys without their texts). ``compare.json`` (written by ``rag-eval
compare``) is read when present; a nightly history (``history.parquet``: one row per night
and config) when given. A missing or malformed file raises :class:`ReportInputError`
naming the file and the field.

>>> check_compare({"schema_version": 1}, "compare.json")
Traceback (most recent call last):
...
rag_eval.core.errors.ReportInputError: compare.json: field 'comparisons': missing
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from rag_eval.core.errors import ReportInputError, RunDirectoryError
from rag_eval.loadtest.document import belongs_to, read_load_file

COMPARE_FILE = "compare.json"
# what the report reads of every row: a 100,000-query run's rows do not fit in memory whole as pandas objects
OVERVIEW_COLUMNS = (
    "query_id",
    "config",
    "query_index",
    "judged",
    "relevant_chunks",
    "delivered_relevant",
    "transform_us",
    "search_us",
    "postprocess_us",
    "projection_us",
    "e2e_us",
)
TIME_COLUMNS = ("night", "date", "started", "timestamp", "time")


@dataclass(frozen=True, slots=True, kw_only=True)
class ReportData:
    """One run as the harness wrote it, plus the comparison and history the report shows."""

    dir: Path
    summary: dict[str, Any]
    manifest: dict[str, Any]
    per_query: pd.DataFrame  # the columns of OVERVIEW_COLUMNS, every row
    texts: pd.DataFrame | None  # one row per chunk; None for runs written before texts.parquet
    spans: pd.DataFrame | None
    compare: dict[str, Any] | None
    history: pd.DataFrame | None
    load: dict[str, Any] | None = None  # load.json when it belongs to this run (rag-eval load, or a [load] table)
    # every column of the rows of the given queries (the drill-down's): read from per_query.parquet on demand
    rows_of: Callable[[Sequence[str]], pd.DataFrame] | None = None

    @property
    def names(self) -> list[str]:
        return list(self.summary["configs"])

    @property
    def baseline(self) -> str:
        return str(self.summary["baseline"])


def _read_json(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError as exc:
        raise ReportInputError("not found: is this a run directory?", path=str(path)) from exc
    except OSError as exc:
        raise ReportInputError(f"cannot read: {exc.strerror}", path=str(path)) from exc
    except json.JSONDecodeError as exc:
        raise ReportInputError(f"not valid JSON (line {exc.lineno}: {exc.msg})", path=str(path)) from exc
    if not isinstance(data, dict):
        raise ReportInputError("expected a JSON object", path=str(path))
    return data


def _require(obj: Mapping[str, Any], key: str, kind: type | tuple[type, ...], path: str, where: str) -> Any:
    field = f"{where}.{key}" if where else key
    if key not in obj:
        raise ReportInputError("missing", path=path, field=field)
    value = obj[key]
    if not isinstance(value, kind) or (isinstance(value, bool) and kind in (int, float, (int, float))):
        raise ReportInputError(f"expected {getattr(kind, '__name__', kind)}, got {value!r}", path=path, field=field)
    return value


def check_compare(data: Mapping[str, Any], path: str) -> dict[str, Any]:
    """The fields of ``compare.json`` the report reads, checked (NaN is written as null)."""
    comparisons = _require(data, "comparisons", list, path, "")
    if data.get("schema_version") != 1:
        raise ReportInputError(f"unsupported schema version {data.get('schema_version')!r}", path=path)
    for i, comp in enumerate(comparisons):
        where = f"comparisons[{i}]"
        if not isinstance(comp, Mapping):
            raise ReportInputError("expected an object", path=path, field=where)
        _require(comp, "baseline", str, path, where)
        _require(comp, "candidate", str, path, where)
        for j, m in enumerate(_require(comp, "metrics", list, path, where)):
            mw = f"{where}.metrics[{j}]"
            if not isinstance(m, Mapping):
                raise ReportInputError("expected an object", path=path, field=mw)
            _require(m, "metric", str, path, mw)
            for key in ("baseline", "candidate", "delta", "ci_low", "ci_high"):
                if m.get(key) is not None:
                    _require(m, key, (int, float), path, mw)
        for j, g in enumerate(_require(comp, "gates", list, path, where)):
            gw = f"{where}.gates[{j}]"
            if not isinstance(g, Mapping):
                raise ReportInputError("expected an object", path=path, field=gw)
            outcome = _require(g, "outcome", str, path, gw)
            if outcome not in ("pass", "warn", "fail", "underpowered", "error"):
                raise ReportInputError(f"unknown outcome {outcome!r}", path=path, field=f"{gw}.outcome")
    exit_code = data.get("exit_code")
    if exit_code is not None and (not isinstance(exit_code, int) or isinstance(exit_code, bool)):
        raise ReportInputError(f"expected an integer, got {exit_code!r}", path=path, field="exit_code")
    return dict(data)


def _read_parquet(
    path: Path, columns: Sequence[str] | None = None, query_ids: Sequence[str] | None = None
) -> pd.DataFrame:
    """``path`` as a DataFrame: only those of ``columns`` it has, only the rows of ``query_ids`` when given."""
    try:
        present = set(pq.read_schema(path).names)
        wanted = None if columns is None else [c for c in columns if c in present]
        if query_ids is None:
            frame: pd.DataFrame = pq.read_table(path, columns=wanted).to_pandas()
            return frame
        keep = pa.array(list(query_ids), type=pa.string())
        parts = [  # a batch at a time: only the rows asked for are ever kept
            batch.filter(pc.is_in(batch.column("query_id"), value_set=keep))
            for batch in pq.ParquetFile(path).iter_batches(batch_size=4096, columns=wanted)
        ]
        table = pa.Table.from_batches(parts) if parts else pq.read_schema(path).empty_table()
        pa.default_memory_pool().release_unused()
        rows: pd.DataFrame = table.to_pandas()
        return rows
    except FileNotFoundError as exc:
        raise ReportInputError("not found: is this a run directory?", path=str(path)) from exc
    except OSError as exc:  # pyarrow raises OSError (ArrowInvalid) for files that are not Parquet
        raise ReportInputError(f"cannot read as Parquet: {exc}", path=str(path)) from exc


def checked_history(history: str | Path | pd.DataFrame) -> pd.DataFrame:
    """A nightly history: one row per night and config; needs ``config`` and a time column."""
    name = "history" if isinstance(history, pd.DataFrame) else str(history)
    frame = history if isinstance(history, pd.DataFrame) else _read_parquet(Path(history))
    if "config" not in frame.columns:
        raise ReportInputError("missing", path=name, field="config")
    if not any(c in frame.columns for c in TIME_COLUMNS):
        raise ReportInputError(f"no time column (one of {', '.join(TIME_COLUMNS)})", path=name, field="night")
    return frame


def _older(path: Path, than: Path) -> bool:
    """A compare.json older than the rows beside it compared an earlier run in this directory."""
    try:
        return path.stat().st_mtime < than.stat().st_mtime
    except OSError:
        return False


def compared(cmp: Mapping[str, Any], manifest: Mapping[str, Any]) -> bool:
    """False when ``compare.json`` names the run it compared and that is not the run of ``manifest`` (a
    comparison written before the run records its start is taken as it is, by its age)."""
    run = cmp.get("run")
    started = run.get("started") if isinstance(run, Mapping) else None
    return started is None or started == manifest.get("started")


def load_run(
    run_dir: str | Path,
    *,
    compare: str | Path | Mapping[str, Any] | None = None,
    history: str | Path | pd.DataFrame | None = None,
) -> ReportData:
    """Everything a report of ``run_dir`` shows. ``compare`` defaults to ``run_dir/compare.json``
    when that file exists, is not older than the run's rows and names this run as the one it compared (a
    run written again into the same directory makes an earlier comparison stale); a ``rag-eval compare --out``
    directory without run files is read through the run directory its ``compare.json`` names, and refused
    when that directory holds another run by now."""
    base = Path(run_dir)
    cmp: dict[str, Any] | None = None
    if isinstance(compare, Mapping):
        cmp = check_compare(compare, COMPARE_FILE)
    elif compare is not None:
        cmp = check_compare(_read_json(Path(compare)), str(compare))
    elif (base / COMPARE_FILE).is_file() and not _older(base / COMPARE_FILE, base / "per_query.parquet"):
        cmp = check_compare(_read_json(base / COMPARE_FILE), str(base / COMPARE_FILE))
    data_dir = base
    if not (base / "summary.json").is_file() and cmp is not None and isinstance(cmp.get("run"), Mapping):
        data_dir = Path(str(cmp["run"].get("dir", base)))
    summary = _read_json(data_dir / "summary.json")
    for key in ("configs", "baseline"):
        if key not in summary:
            raise ReportInputError("missing", path=str(data_dir / "summary.json"), field=key)
    manifest = _read_json(data_dir / "manifest.json")
    if cmp is not None and not compared(cmp, manifest):
        if compare is not None or data_dir != base:  # asked for, or read through: a report would mix two runs
            raise ReportInputError(
                f"compared the run started {cmp['run'].get('started')}; {data_dir} now holds the run started "
                f"{manifest.get('started')}: compare again",
                path=str(compare if isinstance(compare, str | Path) else base / COMPARE_FILE),
            )
        cmp = None  # an earlier run's comparison: this run is "not compared yet"
    per_query_path = data_dir / "per_query.parquet"
    per_query = _read_parquet(per_query_path, OVERVIEW_COLUMNS)

    def rows_of(query_ids: Sequence[str]) -> pd.DataFrame:
        return _read_parquet(per_query_path, query_ids=query_ids)

    texts = spans = None
    if (data_dir / "texts.parquet").is_file():
        texts = _read_parquet(data_dir / "texts.parquet")
    if (data_dir / "spans.parquet").is_file():
        spans = _read_parquet(data_dir / "spans.parquet")
    try:
        load = read_load_file(data_dir)
    except RunDirectoryError as exc:
        raise ReportInputError(str(exc).split(": ", 1)[-1], path=str(data_dir / "load.json")) from exc
    return ReportData(
        load=load if load is not None and belongs_to(load, manifest) else None,
        dir=data_dir,
        summary=summary,
        manifest=manifest,
        per_query=per_query,
        rows_of=rows_of,
        texts=texts,
        spans=spans,
        compare=cmp,
        history=checked_history(history) if history is not None else None,
    )
