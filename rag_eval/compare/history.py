"""The nightly history and the accepted baseline.

``reports/history.parquet`` holds one row per (night, config): every summary metric (as
:func:`rag_eval.metrics.measures.summary_frame` names them) and the provenance that says what
produced it (date, git commit, data set checksum, config hash, Milvus backend and version, index),
and the night's gates exit code. New metrics become new columns; older rows read as missing there.

The accepted baseline of an experiment (``reports/accepted/<experiment>/``) is a copy of a run's
``per_query.parquet``, ``summary.json`` and ``manifest.json`` (and report), so that later nights
can pair against its queries whatever happens to the run directory it came from.

>>> accepted_dir("reports/accepted", "incident-kb/legacy vs evidence").name
'incident-kb_legacy_vs_evidence'
"""

from __future__ import annotations

import datetime as dt
import difflib
import json
import os
import re
import shutil
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from rag_eval.compare.runs import ComparedRun
from rag_eval.core.errors import ConfigError, ConfigProblem, ReportInputError, RunDirectoryError, RunStoreError, quoted
from rag_eval.files import held, write_json, write_parquet
from rag_eval.metrics.measures import summary_frame
from rag_eval.rundir.directory import MARKER, recorded_digests
from rag_eval.rundir.folders import ACCEPTED, HISTORY
from rag_eval.rundir.reader import COMPARE, LOAD, PER_QUERY, RUN_FILES, check_compare, read_json

ACCEPTED_FILE = "accepted.json"
PROVENANCE_COLUMNS = (
    "date", "experiment", "config", "run_dir", "exit_code", "git_commit", "git_dirty", "dataset", "split",
    "dataset_checksum", "config_hash", "milvus_backend", "milvus_version", "index",
)  # fmt: skip
DEFAULT_TREND = (
    "same_doc_multi_chunk_recall", "chunk:nDCG@5", "duplicate_rate", "cap_compliance", "latency:postprocess:p95",
)  # fmt: skip


def history_rows(run: ComparedRun, *, exit_code: int | None) -> pd.DataFrame:
    """One row per config of ``run``: provenance columns, then every summary metric."""
    frame = summary_frame(run.summary["configs"])
    m = run.manifest
    hashes = {c["name"]: c.get("hash") for c in run.configs}
    index = m.get("milvus", {}).get("index")
    prov = pd.DataFrame(
        {
            "date": m.get("started"),
            "experiment": run.experiment,
            "config": list(frame.index),
            "run_dir": str(run.dir.resolve()) if run.dir else "",
            "exit_code": exit_code,
            "git_commit": m.get("git", {}).get("commit"),
            "git_dirty": m.get("git", {}).get("dirty"),
            "dataset": m.get("dataset", {}).get("name"),
            "split": m.get("dataset", {}).get("split"),
            "dataset_checksum": m.get("dataset", {}).get("checksum"),
            "config_hash": [hashes.get(name) for name in frame.index],
            "milvus_backend": m.get("milvus", {}).get("backend"),
            "milvus_version": m.get("milvus", {}).get("server_version"),
            "index": json.dumps(index, sort_keys=True) if index is not None else None,
        }
    )
    metrics = frame.reset_index(drop=True).apply(pd.to_numeric, errors="coerce")
    rows: pd.DataFrame = pd.concat([prov, metrics], axis=1)
    return rows


def read_history(path: str | Path = HISTORY) -> pd.DataFrame:
    p = Path(path)
    if not p.exists():
        return pd.DataFrame(columns=list(PROVENANCE_COLUMNS))
    if not p.is_file():  # a directory, a pipe, a device: never "no history"
        raise RunDirectoryError("is not a file: give the history's Parquet file (or a new path)", path=str(p))
    try:
        frame: pd.DataFrame = pq.read_table(p).to_pandas()
        return frame
    except (OSError, pa.ArrowException) as exc:
        raise RunDirectoryError(f"cannot read the history (not a Parquet table?): {exc}", path=str(p)) from exc


def check_history(path: str | Path) -> None:
    """Refuse, before a night runs, a history it could not append to: not a file, or not a history table
    (exit 2 naming it). A missing one is fine: the first night starts it."""
    p = Path(path)
    frame = read_history(p)  # not a file: refused there
    missing = [c for c in ("config",) if not frame.empty and c not in frame.columns]
    if missing:
        raise RunDirectoryError(f"is not a nightly history (no {missing[0]!r} column)", path=str(p))


def append_history(run: ComparedRun, *, exit_code: int | None, path: str | Path = HISTORY) -> pd.DataFrame:
    """Append ``run``'s rows to the history file; returns the new rows. The new file is written beside the old
    one and renamed over it, so a process killed at any moment (``kill -9``) leaves the history readable,
    with the night in it or not; appends wait for each other (:func:`held`), so two at once both land, and
    the temporary file a killed append left is removed by the next."""
    rows = history_rows(run, exit_code=exit_code)
    p = Path(path)
    try:
        with held(p.parent):
            for stale in p.parent.glob(f".{p.name}.*.tmp"):  # a killed append's; none is being written now
                stale.unlink(missing_ok=True)
            old = read_history(p)
            both = rows if old.empty else pd.concat([old, rows], ignore_index=True)
            write_parquet(p, pa.Table.from_pandas(both, preserve_index=False))
    except OSError as exc:
        raise RunStoreError(f"cannot write the history: {exc.strerror}", path=str(path)) from exc
    return rows


def trend(
    history: pd.DataFrame,
    *,
    metrics: Sequence[str] | None = None,
    last: int | None = None,
    config: str | None = None,
    experiment: str | None = None,
) -> pd.DataFrame:
    """The history's last ``last`` rows of each config (oldest first) with the given metric columns (None: those
    of :data:`DEFAULT_TREND` it holds). A metric, config or experiment asked for that the history does not
    hold is refused (naming the flag, suggesting the known ones), unless the history is still empty."""
    if not history.empty:
        metric_columns = [c for c in history.columns if c not in PROVENANCE_COLUMNS]
        for metric in metrics or ():
            _known("--metric", metric, metric_columns, what="metric column")
        if config is not None:
            _known("--config", config, sorted(history["config"].astype(str).unique()), what="config")
        if experiment is not None and "experiment" in history.columns:
            _known("--experiment", experiment, sorted(history["experiment"].astype(str).unique()), what="experiment")
    frame = history
    if experiment is not None:
        frame = frame[frame["experiment"] == experiment]
    if config is not None:
        frame = frame[frame["config"] == config]
    frame = frame.sort_values(["date", "config"], kind="stable")
    if last is not None:
        frame = frame.groupby("config", sort=False).tail(last)
    present = [m for m in (metrics or DEFAULT_TREND) if m in frame.columns]
    keep = ["date", "experiment", "config", "git_commit", "dataset_checksum", "exit_code", *present]
    return frame[[c for c in keep if c in frame.columns]].reset_index(drop=True)


def _known(flag: str, name: str, known: Sequence[str], *, what: str) -> None:
    """Refuse ``name`` unless it is one of ``known``: the closest known name suggested, else the first few."""
    if name in known:
        return
    close = difflib.get_close_matches(name, list(known), n=1)
    if close:
        hint = f"did you mean {close[0]!r}?"
    else:
        first = ", ".join(list(known)[:8])
        hint = f"known: {first}" + (f" and {len(known) - 8} more" if len(known) > 8 else "")
    raise ConfigError([ConfigProblem(flag, f"the history has no {what} {quoted(name)} ({hint})")])


# -- the accepted baseline --------------------------------------------------------------------


def accepted_dir(root: str | Path, experiment: str) -> Path:
    """Where the accepted baseline of ``experiment`` is kept (its name made a safe folder name)."""
    slug = re.sub(r"[^A-Za-z0-9._-]+", "_", experiment).strip("._") or "experiment"
    return Path(root) / slug


def accept(run_dir: str | Path, *, root: str | Path = ACCEPTED, force: bool = False) -> Path:
    """Copy a run (per-query table, summary, manifest, report) to its experiment's accepted folder,
    replacing the previous baseline in one rename. Returns the folder. A run whose own verdict failed a gate
    is refused, naming the gates, unless ``force``: accepting it would make the regression the baseline."""
    run = ComparedRun.from_dir(run_dir)
    target = accepted_dir(root, run.experiment)
    if not force:
        _refuse_failed(Path(run_dir))
    source = Path(run_dir).resolve()
    if target.resolve() == source:
        return target
    with held(target.parent):  # two accepts at once take turns: the later one stays
        if not force:
            _refuse_other_experiment(run, target)
        _replace_accepted(run, source, target)
    return target


def _replace_accepted(run: ComparedRun, source: Path, target: Path) -> None:
    """The accepted baseline ``target`` replaced by a copy of the run at ``source``, in one rename."""
    target.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{target.name}.", dir=target.parent))
    try:
        copied = []
        for name in (*RUN_FILES, "report.md", COMPARE, LOAD):  # load.json: load gates against it
            if (source / name).is_file():
                shutil.copy2(source / name, staging / name)
                copied.append(name)
        digests = {k: v for k, v in recorded_digests(source).items() if k in copied}  # the files copied as they are
        write_json(staging / MARKER, {"files": copied, "copied_from": str(source), "sha256": digests})
        write_json(
            staging / ACCEPTED_FILE,
            {
                "source": str(source),
                "accepted_at": dt.datetime.now(dt.UTC).isoformat(),
                "experiment": run.experiment,
                "dataset_checksum": run.manifest.get("dataset", {}).get("checksum"),
                "git_commit": run.manifest.get("git", {}).get("commit"),
                "index": run.manifest.get("milvus", {}).get("index"),
            },
        )
        old = None
        if target.exists():
            old = target.with_name(f".{target.name}.old")
            shutil.rmtree(old, ignore_errors=True)
            os.replace(target, old)
        os.replace(staging, target)
        if old is not None:
            shutil.rmtree(old, ignore_errors=True)
    except OSError as exc:
        shutil.rmtree(staging, ignore_errors=True)
        raise RunStoreError(f"cannot write the accepted baseline: {exc.strerror}", path=str(target)) from exc


def _refuse_failed(run_dir: Path) -> None:
    """Refuse a run whose ``compare.json`` (its own verdict) exited 1: a fail gate fired."""
    if not (run_dir / COMPARE).is_file():
        return
    document = check_compare(read_json(run_dir / COMPARE, error=ReportInputError), str(run_dir / COMPARE))
    if document.get("exit_code") != 1:
        return
    failed = [f"{c['candidate']}: {g.get('spec') or g.get('id')}" for c in document["comparisons"]
              for g in c["gates"] if g.get("outcome") == "fail"]  # fmt: skip
    shown = "; ".join(failed[:3]) + (f" and {len(failed) - 3} more" if len(failed) > 3 else "")
    raise RunDirectoryError(
        f"failed its gates ({shown}): accepting it would make the regression the baseline; fix it, or give "
        "--force to accept it anyway",
        path=str(run_dir),
    )


def _refuse_other_experiment(run: ComparedRun, target: Path) -> None:
    """Refuse to replace the accepted baseline of another experiment whose name makes the same folder name
    (``kb-nightly`` and ``kb-nightly_``; ``KB`` and ``kb`` on a case-insensitive disk): its nights would pair
    with this run."""
    info = accepted_info(target)
    theirs = info.get("experiment") if info is not None else None
    if theirs is not None and theirs != run.experiment:
        raise RunDirectoryError(
            f"holds the accepted baseline of another experiment, {quoted(str(theirs))}, not {quoted(run.experiment)} "
            "(their names make the same folder name): rename one of the experiments, or give --force to replace it",
            path=str(target),
        )


def accepted_info(directory: str | Path) -> Mapping[str, Any] | None:
    """What ``accepted.json`` says of an accepted baseline (its source run, when it was accepted), or None."""
    path = Path(directory) / ACCEPTED_FILE
    if not path.is_file():
        return None
    try:
        return read_json(path)
    except RunDirectoryError:
        return None


def is_accepted(directory: str | Path) -> bool:
    """True when ``directory`` holds an accepted baseline (its per-query table)."""
    return (Path(directory) / PER_QUERY).is_file()


def against_notes(against: str | Path | None) -> list[str]:
    """The note a comparison against an accepted baseline carries: when and from which run it was accepted."""
    info = accepted_info(against) if against is not None else None
    if info is None:
        return []
    return [f"against the baseline accepted at {info.get('accepted_at')} from {info.get('source')}"]


def night_notes(accepted: Path, *, first: bool) -> list[str]:
    """The note of a night: the accepted baseline it pairs with, or that this first night is accepted."""
    if first:
        return [f"no accepted baseline in {accepted}: this first night is accepted and compared with itself"]
    return [f"against the accepted baseline {accepted} ({(accepted_info(accepted) or {}).get('source', '?')})"]
