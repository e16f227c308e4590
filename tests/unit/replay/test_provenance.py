"""A run's provenance: its clock, the commit of the code (none outside a git checkout), the machine,
package versions (none for a package not installed), the manifest and its short form."""

from __future__ import annotations

import datetime as dt
import hashlib
import os
import platform
import subprocess
from pathlib import Path
from types import SimpleNamespace
from typing import Any, cast

import numpy as np
import pandas as pd
import pytest

from rag_eval.experiment import load_experiment
from rag_eval.replay import provenance
from rag_eval.replay.provenance import Clock, git_commit, machine, manifest, package_version, short
from tests.conftest import SHIPPED

CODE = Path(provenance.__file__).resolve().parents[2]


def test_a_clock_reports_its_start_and_the_wall_time_since(monkeypatch: pytest.MonkeyPatch) -> None:
    clock = Clock(started=dt.datetime(2026, 1, 2, 3, 4, 5, tzinfo=dt.UTC), t0=100.0)
    monkeypatch.setattr(provenance.time, "perf_counter", lambda: 102.34567)
    before = dt.datetime.now(dt.UTC)
    done = clock.finish()
    assert sorted(done) == ["finished", "started", "wall_seconds"]
    assert done["started"] == "2026-01-02T03:04:05+00:00"
    assert done["wall_seconds"] == 2.346  # rounded to the millisecond
    finished = dt.datetime.fromisoformat(done["finished"])
    assert finished.tzinfo == dt.UTC and before <= finished <= dt.datetime.now(dt.UTC)


def test_a_clock_started_now_is_utc_and_has_run_no_time_yet() -> None:
    clock = Clock.start()
    assert clock.started.tzinfo == dt.UTC
    assert 0 <= clock.finish()["wall_seconds"] < 60


def test_the_commit_of_the_code_in_its_checkout() -> None:
    head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=CODE, capture_output=True, text=True)
    if head.returncode != 0:
        pytest.skip("the code is not in a git checkout")
    status = subprocess.run(
        ["git", "status", "--porcelain", "--untracked-files=no"], cwd=CODE, capture_output=True, text=True
    )
    assert git_commit() == {"commit": head.stdout.strip(), "dirty": bool(status.stdout.strip())}


def test_no_commit_outside_a_git_checkout(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GIT_DIR", str(tmp_path / "not-a-repository"))  # git then finds no repository
    assert git_commit() == {"commit": None, "dirty": None}


def test_no_commit_without_git(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))  # no git to run
    assert git_commit() == {"commit": None, "dirty": None}


def test_a_git_that_hangs_is_no_commit(monkeypatch: pytest.MonkeyPatch) -> None:
    def hangs(*args: Any, **kwargs: Any) -> None:
        raise subprocess.TimeoutExpired(cmd="git", timeout=5)

    monkeypatch.setattr(provenance.subprocess, "run", hangs)
    assert git_commit() == {"commit": None, "dirty": None}


def test_a_tracked_file_changed_makes_the_commit_dirty(monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[tuple[str, ...]] = []

    def fake(argv: list[str], **kwargs: Any) -> SimpleNamespace:
        seen.append((*argv, str(kwargs["cwd"])))
        return SimpleNamespace(stdout="abc123\n" if argv[1] == "rev-parse" else " M rag_eval/cli.py\n")

    monkeypatch.setattr(provenance.subprocess, "run", fake)
    assert git_commit() == {"commit": "abc123", "dirty": True}
    assert seen == [
        ("git", "rev-parse", "HEAD", str(CODE)),
        ("git", "status", "--porcelain", "--untracked-files=no", str(CODE)),
    ]


def test_the_machine_its_memory_and_its_hostname_only_hashed(monkeypatch: pytest.MonkeyPatch) -> None:
    found = machine()
    assert sorted(found) == ["cpus", "hostname_sha", "machine", "memory_bytes", "platform", "processor"]
    assert found["cpus"] == os.cpu_count() and found["machine"] == platform.machine()
    assert found["hostname_sha"] == hashlib.sha256(platform.node().encode()).hexdigest()[:12]
    if hasattr(os, "sysconf"):
        assert found["memory_bytes"] == os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")

    def unknown(name: str) -> int:
        raise ValueError(name)

    monkeypatch.setattr(provenance.os, "sysconf", unknown, raising=False)
    assert machine()["memory_bytes"] is None


def test_the_version_of_a_package_or_none_when_it_is_not_installed() -> None:
    assert package_version("pandas") == pd.__version__
    assert package_version("numpy") == np.__version__
    assert package_version("no-such-package-of-rag-eval") is None


MANIFEST = {
    "git": {"commit": "c" * 40, "dirty": False},
    "fingerprint": "fp",
    "dataset": {"checksum": "sum", "name": "x"},
    "configs": [{"name": "a", "hash": "ha", "cap": 2}, {"name": "b", "hash": "hb"}],
    "started": "2026-01-01T00:00:00+00:00",
    "machine": {"cpus": 2},
}


def test_the_short_provenance_of_a_manifest() -> None:
    assert short(MANIFEST) == {
        "git": {"commit": "c" * 40, "dirty": False},
        "fingerprint": "fp",
        "dataset_checksum": "sum",
        "config_hashes": {"a": "ha", "b": "hb"},
        "started": "2026-01-01T00:00:00+00:00",
    }
    with pytest.raises(KeyError):
        short({k: v for k, v in MANIFEST.items() if k != "fingerprint"})


def test_the_manifest_records_the_data_the_collection_and_the_versions() -> None:
    exp = load_experiment(SHIPPED / "experiments" / "default.toml")
    prep = SimpleNamespace(
        dataset=SimpleNamespace(
            name="kb", path=Path("/data/kb"), split="test", checksum="sum", documents={"d": 1, "e": 2}, queries={"q": 1}
        ),
        corpus=SimpleNamespace(chunks=(1, 2, 3)),
        labels=SimpleNamespace(level="span"),
        traffic=None,
        existing=None,  # a collection of ours: the search parameters as sent are recorded
    )
    replayed = SimpleNamespace(
        ingest=SimpleNamespace(
            target=SimpleNamespace(redacted_uri="http://***@h:19530"), collection="c1", manifest={"m": 1},
            reused=True, seconds=1.5,
        ),
        backend=SimpleNamespace(kind="server", server_version="2.5.0", pymilvus_version="2.5.1"),
        resumed_batches=[3],
    )  # fmt: skip
    clock = Clock(started=dt.datetime(2026, 1, 1, tzinfo=dt.UTC), t0=0.0)
    got = manifest(exp, cast(Any, prep), cast(Any, replayed), configs=[{"name": "a", "hash": "h"}], clock=clock)
    assert got["dataset"] == {
        "name": "kb", "path": "/data/kb", "split": "test", "checksum": "sum", "documents": 2, "queries": 1,
        "chunks": 3, "label_level": "span",
    }  # fmt: skip
    assert got["milvus"] == {
        "uri": "http://***@h:19530", "collection": "c1", "backend": "server", "server_version": "2.5.0",
        "index": exp.index.to_json(), "search": {"params": {"ef": 64}, "ef": "at least the search limit"},
        "collection_manifest": {"m": 1}, "reused": True, "ingest_seconds": 1.5,
    }  # fmt: skip
    assert got["versions"]["pymilvus"] == "2.5.1" and got["versions"]["pandas"] == pd.__version__
    assert got["configs"] == [{"name": "a", "hash": "h"}]
    assert got["started"] == "2026-01-01T00:00:00+00:00" and got["resumed_batches"] == [3]
    assert got["fingerprint"] == exp.fingerprint() and got["experiment"] == exp.as_dict()
    assert short(got)["config_hashes"] == {"a": "h"}
