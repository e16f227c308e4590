"""Reading what a run wrote, for the reports: nothing here computes a measure.

A run directory holds ``summary.json``, ``manifest.json``, ``per_query.parquet`` and, from
runs that wrote them, ``texts.parquet`` and ``spans.parquet`` (older runs: the drill-down
then shows chunk keys without their texts). ``compare.json`` (written by ``rag-eval
compare``) is read when present; a nightly history (``history.parquet``: one row per night
and config) when given. A missing or malformed file raises :class:`ReportInputError`
naming the file and the field.

The files are read by the run directory's one reader (:mod:`rag_eval.rundir.reader`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from rag_eval.core.errors import ReportInputError
from rag_eval.loadtest.document import belongs_to
from rag_eval.rundir.reader import (
    COMPARE,
    MANIFEST,
    PER_QUERY,
    SPANS,
    SUMMARY,
    TEXTS,
    check_compare,
    read_json,
    read_load,
    read_parquet,
)
from rag_eval.rundir.rows import TRAFFIC

COMPARE_FILE = COMPARE
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


def read_json_report(path: Path) -> dict[str, Any]:
    return read_json(path, error=ReportInputError)


def checked_history(history: str | Path | pd.DataFrame) -> pd.DataFrame:
    """A nightly history: one row per night and config; needs ``config`` and a time column."""
    name = "history" if isinstance(history, pd.DataFrame) else str(history)
    frame = history if isinstance(history, pd.DataFrame) else read_parquet(Path(history))
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
        cmp = check_compare(read_json_report(Path(compare)), str(compare))
    elif (base / COMPARE_FILE).is_file() and not _older(base / COMPARE_FILE, base / PER_QUERY):
        cmp = check_compare(read_json_report(base / COMPARE_FILE), str(base / COMPARE_FILE))
    data_dir = base
    if not (base / SUMMARY).is_file() and cmp is not None and isinstance(cmp.get("run"), Mapping):
        data_dir = Path(str(cmp["run"].get("dir", base)))
    summary = read_json_report(data_dir / SUMMARY)
    for key in ("configs", "baseline"):
        if key not in summary:
            raise ReportInputError("missing", path=str(data_dir / SUMMARY), field=key)
    manifest = read_json_report(data_dir / MANIFEST)
    if cmp is not None and not compared(cmp, manifest):
        if compare is not None or data_dir != base:  # asked for, or read through: a report would mix two runs
            raise ReportInputError(
                f"compared the run started {cmp['run'].get('started')}; {data_dir} now holds the run started "
                f"{manifest.get('started')}: compare again",
                path=str(compare if isinstance(compare, str | Path) else base / COMPARE_FILE),
            )
        cmp = None  # an earlier run's comparison: this run is "not compared yet"
    per_query_path = data_dir / PER_QUERY
    per_query = read_parquet(per_query_path, (*OVERVIEW_COLUMNS, "origin"))
    if "origin" in per_query.columns:  # a query log's rows have a section of their own (reports/traffic.py)
        per_query = per_query[per_query["origin"] != TRAFFIC].drop(columns="origin").reset_index(drop=True)

    def rows_of(query_ids: Sequence[str]) -> pd.DataFrame:
        return read_parquet(per_query_path, query_ids=query_ids)

    texts = spans = None
    if (data_dir / TEXTS).is_file():
        texts = read_parquet(data_dir / TEXTS)
    if (data_dir / SPANS).is_file():
        spans = read_parquet(data_dir / SPANS)
    load = read_load(data_dir, error=ReportInputError)
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
