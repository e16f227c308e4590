"""Provenance of a run: code (git commit), versions, machine, Milvus, data set and times.

Written to ``DIR/manifest.json`` (everything) and, shortened, into ``summary.json`` and the
Parquet metadata of ``per_query.parquet``, so that any of them says where its numbers come from.

>>> clock = Clock.start()
>>> sorted(clock.finish())
['finished', 'started', 'wall_seconds']
"""

from __future__ import annotations

import contextlib
import datetime as dt
import hashlib
import os
import platform
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from rag_eval.experiment import Experiment

if TYPE_CHECKING:  # the steps' results it records; they import this module for the run's identity
    from rag_eval.replay.prepare import Prepared
    from rag_eval.replay.step import Replayed


@dataclass(frozen=True, slots=True)
class Clock:
    """When a run started (UTC, and a monotonic clock for its wall time)."""

    started: dt.datetime
    t0: float

    @classmethod
    def start(cls) -> Clock:
        return cls(dt.datetime.now(dt.UTC), time.perf_counter())

    def finish(self) -> dict[str, Any]:
        return {
            "started": self.started.isoformat(),
            "finished": dt.datetime.now(dt.UTC).isoformat(),
            "wall_seconds": round(time.perf_counter() - self.t0, 3),
        }


def git_commit() -> dict[str, Any]:
    """The commit of the code that ran, and whether tracked files differed from it."""
    root = Path(__file__).resolve().parents[2]
    try:
        commit = subprocess.run(
            ["git", "rev-parse", "HEAD"], cwd=root, capture_output=True, text=True, check=True, timeout=5
        ).stdout.strip()
        dirty = bool(
            subprocess.run(
                ["git", "status", "--porcelain", "--untracked-files=no"],
                cwd=root,
                capture_output=True,
                text=True,
                check=True,
                timeout=5,
            ).stdout.strip()
        )
        return {"commit": commit, "dirty": dirty}
    except (OSError, subprocess.SubprocessError):
        return {"commit": None, "dirty": None}


def machine() -> dict[str, Any]:
    mem = None
    with contextlib.suppress(ValueError, OSError, AttributeError):
        mem = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    return {
        "platform": platform.platform(),
        "machine": platform.machine(),
        "processor": platform.processor(),
        "cpus": os.cpu_count(),
        "memory_bytes": mem,
        "hostname_sha": hashlib.sha256(platform.node().encode()).hexdigest()[:12],
    }


def package_version(name: str) -> str | None:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(name)
    except PackageNotFoundError:
        return None


def manifest(
    exp: Experiment, prep: Prepared, replayed: Replayed, *, configs: Sequence[Mapping[str, Any]], clock: Clock
) -> dict[str, Any]:
    """Everything ``manifest.json`` records about a run."""
    dataset, corpus, labels = prep.dataset, prep.corpus, prep.labels
    ingest, backend, resumed_batches = replayed.ingest, replayed.backend, replayed.resumed_batches
    return {
        "rag_eval_version": package_version("rag-eval"),
        "git": git_commit(),
        "experiment": exp.as_dict(),
        "fingerprint": exp.fingerprint(),
        "dataset": {
            "name": dataset.name,
            "path": str(dataset.path),
            "split": dataset.split,
            "checksum": dataset.checksum,
            "documents": len(dataset.documents),
            "queries": len(dataset.queries),
            "chunks": len(corpus.chunks),
            "label_level": labels.level,
        },
        "traffic": prep.traffic.document() if prep.traffic is not None else None,
        "milvus": {
            "uri": ingest.target.redacted_uri,
            "collection": ingest.collection,
            "backend": backend.kind,
            "server_version": backend.server_version,
            "index": exp.index.to_json(),  # as built (a FLAT index: no HNSW parameter); as sent, below
            **({"search": exp.index.search_record()} if prep.existing is None else {}),
            "collection_manifest": ingest.manifest,
            "reused": ingest.reused,
            "ingest_seconds": ingest.seconds,
        },
        "versions": {
            "python": sys.version.split()[0],
            "pymilvus": backend.pymilvus_version,
            "milvus_lite": package_version("milvus-lite"),
            "pandas": pd.__version__,
            "numpy": np.__version__,
        },
        "machine": machine(),
        "configs": list(configs),
        **clock.finish(),
        "resumed_batches": resumed_batches,
    }


def short(manifest: Mapping[str, Any]) -> dict[str, Any]:
    """The provenance carried by ``summary.json`` and the per-query table's metadata."""
    return {
        "git": manifest["git"],
        "fingerprint": manifest["fingerprint"],
        "dataset_checksum": manifest["dataset"]["checksum"],
        "config_hashes": {c["name"]: c["hash"] for c in manifest["configs"]},
        "started": manifest["started"],
    }
