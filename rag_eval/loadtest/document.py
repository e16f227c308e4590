"""``load.json``: what a load measurement wrote, read back for the gates and the reports.

::

    {"schema_version": 1, "experiment": str, "source": str | null,
     "run": {"started": str | null, "fingerprint": str | null},   # the run it belongs to (null: none)
     "milvus": {"uri", "collection", "backend", "server_version", "index"},
     "configs": [{"name", "hash", "mode", "pipeline", "retrieve_k", "return_n"}],
     "settings": {"concurrency": [int], "duration_s", "max_searches", "rounds", "window_s", "warmup",
                  "configs": [str], "queries", "start_method", "clients"},
     "machine": {...}, "machine_load": {"loadavg_start", "loadavg_end", "levels": [{"concurrency",
                 "loadavg_before", "cpu_busy_before"}]},
     "versions", "git", "started", "finished", "wall_seconds",
     "results": [{"config", "concurrency", "searches", "wall_s", "qps",
                  "latency_us": {"search" | "e2e": {"p50", "p95", "p99", "mean", "max"}},
                  "closed_loop_qps", "loop_efficiency",
                  "client_cpu": {"per_process_mean", "per_process_max", "machine_share"},
                  "machine_cpu_busy",
                  "rounds": [{"round", "searches", "wall_s", "qps",
                              "latency_us": {"search" | "e2e": {"p50", "p95", "p99"}}}]}],
     "notes": [str]}

A ``load.json`` beside a run belongs to it only when its ``run.started`` is the run's own start (a
later run into the same directory makes it stale: the gates then say so, the report leaves it out).

>>> check_load({"schema_version": 1, "results": [{"config": "a"}]}, "load.json")
Traceback (most recent call last):
rag_eval.core.errors.RunDirectoryError: load.json: results[0]: missing 'concurrency'
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from rag_eval.core.errors import RunDirectoryError
from rag_eval.rundir.directory import is_finished

LOAD_FILE = "load.json"
REQUESTS_FILE = "load_requests.parquet"
SUMMARY_FILE = "load.md"
LOAD_SCHEMA_VERSION = 1


def check_load(doc: Any, path: str) -> dict[str, Any]:
    """The fields the gates and reports read, checked; a malformed file is one line naming the field."""
    if not isinstance(doc, Mapping):
        raise RunDirectoryError("expected a JSON object", path=path)
    if doc.get("schema_version") != LOAD_SCHEMA_VERSION:
        raise RunDirectoryError(f"unsupported schema version {doc.get('schema_version')!r}", path=path)
    results = doc.get("results")
    if not isinstance(results, list):
        raise RunDirectoryError("missing 'results' (a list)", path=path)
    for i, entry in enumerate(results):
        if not isinstance(entry, Mapping):
            raise RunDirectoryError(f"results[{i}]: expected an object", path=path)
        for key, kind in (("config", str), ("concurrency", int), ("rounds", list), ("latency_us", Mapping)):
            if key not in entry:
                raise RunDirectoryError(f"results[{i}]: missing {key!r}", path=path)
            if not isinstance(entry[key], kind) or isinstance(entry[key], bool):
                raise RunDirectoryError(f"results[{i}].{key}: expected {kind.__name__}", path=path)
    return dict(doc)


def read_load_file(directory: str | Path) -> dict[str, Any] | None:
    """``DIR/load.json`` checked, or None when there is none."""
    path = Path(directory) / LOAD_FILE
    if not path.is_file():
        return None
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise RunDirectoryError(f"cannot read: {exc.strerror}", path=str(path)) from exc
    except json.JSONDecodeError as exc:
        raise RunDirectoryError(f"not valid JSON (line {exc.lineno}: {exc.msg})", path=str(path)) from exc
    return check_load(doc, str(path))


def run_in(directory: Path) -> dict[str, Any] | None:
    """The start and fingerprint of the finished run in ``directory`` (what a load measurement written there
    belongs to), or None when there is none."""
    if not (is_finished(directory) and (directory / "manifest.json").is_file()):
        return None
    try:
        manifest = json.loads((directory / "manifest.json").read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise RunDirectoryError(f"cannot read the run's manifest: {exc}", path=str(directory)) from exc
    return {"started": manifest.get("started"), "fingerprint": manifest.get("fingerprint")}


def belongs_to(doc: Mapping[str, Any], manifest: Mapping[str, Any]) -> bool:
    """True when the load measurement was made for the run of ``manifest`` (same start)."""
    run = doc.get("run") or {}
    return bool(run.get("started")) and run.get("started") == manifest.get("started")


def stale_reason(doc: Mapping[str, Any], manifest: Mapping[str, Any]) -> str:
    run = doc.get("run") or {}
    if not run.get("started"):
        return "load.json was measured on its own, not for this run"
    return (
        f"load.json belongs to another run in this directory (started {run.get('started')}; this run started "
        f"{manifest.get('started')})"
    )


def entry(doc: Mapping[str, Any], config: str, concurrency: int) -> Mapping[str, Any] | None:
    """The result of ``config`` at ``concurrency`` clients, or None."""
    return next(
        (e for e in doc.get("results", ()) if e.get("config") == config and e.get("concurrency") == concurrency),
        None,
    )


def config_hash(doc: Mapping[str, Any], config: str) -> str | None:
    return next((str(c.get("hash")) for c in doc.get("configs", ()) if c.get("name") == config), None)
