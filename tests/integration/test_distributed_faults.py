"""Faults in the middle of a replay on Dask workers: a worker killed while it replays (its batches run again
on a worker of the cluster, nothing lost or counted twice) and a parts URL that stops taking writes (exit 3
naming it, the run unpublished, and a resume finishes it whole)."""

from __future__ import annotations

import json
import os
import signal
import threading
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import psutil
import pyarrow.parquet as pq
import pytest

from rag_eval import jobs
from rag_eval.cluster.settings import Cluster
from rag_eval.core.errors import RagEvalError
from tests.integration.test_distributed import small

pytestmark = pytest.mark.milvus_lite
QUERIES = 48  # as small() limits them; in batches of 4: 12 tasks, so the fault lands while most are still to run


def in_background(run: Callable[[], Any]) -> tuple[threading.Thread, dict[str, Any]]:
    """``run`` on a thread of its own: what it returned or raised, in the dict, once the thread ends."""
    outcome: dict[str, Any] = {}

    def target() -> None:
        try:
            outcome["result"] = run()
        except BaseException as exc:  # handed to the test, which asserts what it is
            outcome["error"] = exc

    thread = threading.Thread(target=target, daemon=True)
    thread.start()
    return thread, outcome


def wait_for(condition: Callable[[], bool], thread: threading.Thread, timeout: float = 300) -> None:
    deadline = time.monotonic() + timeout
    while not condition() and thread.is_alive() and time.monotonic() < deadline:
        time.sleep(0.02)


def parts_in(directory: Path) -> int:
    return len(list(directory.glob("batch-*.arrow")))


def assert_whole(out: Path, configs: int) -> None:
    table = pq.read_table(out / "per_query.parquet", columns=["query_index", "query_id", "config"]).to_pandas()
    assert len(table) == QUERIES * configs and not table.duplicated(["query_id", "config"]).any()
    assert sorted(set(table["query_index"])) == list(range(QUERIES))


def worker_processes() -> list[psutil.Process]:
    """This process's Dask worker processes (a LocalCluster's nannies spawn them; where setproctitle is installed,
    as mutmut brings it, Dask renames them ``dask worker [address]``)."""
    found = []
    for process in psutil.Process().children(recursive=True):
        try:
            command = " ".join(process.cmdline())
            if "spawn_main" in command or command.startswith("dask worker"):
                found.append(process)
        except psutil.Error:  # gone meanwhile
            continue
    return found


def test_a_worker_killed_mid_run_has_its_batches_run_again(tmp_path: Path) -> None:
    exp = replace(small(str(tmp_path / "kb.db"), tmp_path), batch_size=4)  # type: ignore[type-var]
    out = tmp_path / "run"
    thread, outcome = in_background(lambda: jobs.run_experiment(exp, out, jobs.Execution(cluster=Cluster(workers=2))))
    wait_for(lambda: parts_in(out / ".parts") >= 1 and len(worker_processes()) == 2, thread)
    assert thread.is_alive() and parts_in(out / ".parts") < QUERIES // 4, "the replay ended before the kill"
    victim = worker_processes()[0]
    os.kill(victim.pid, signal.SIGKILL)  # with its batch in flight: IN_FLIGHT tasks per worker
    victim.wait(timeout=30)
    thread.join(timeout=600)
    assert "error" not in outcome, outcome.get("error")
    assert outcome["result"].exit_code in (0, 1)  # the shipped gates may fail; the run itself is whole
    assert_whole(out, len(exp.configs))
    assert not (out / ".parts").exists()


def test_a_parts_url_that_stops_taking_writes_is_exit_3_and_a_resume_finishes_the_run(tmp_path: Path) -> None:
    exp = replace(small(str(tmp_path / "kb.db"), tmp_path), batch_size=4)  # type: ignore[type-var]
    out, shared = tmp_path / "run", tmp_path / "shared"
    url = f"file://{shared}"
    thread, outcome = in_background(
        lambda: jobs.run_experiment(exp, out, jobs.Execution(cluster=Cluster(workers=2, parts_url=url)))
    )
    wait_for(lambda: parts_in(out / ".parts") >= 1, thread)
    assert thread.is_alive(), "the replay ended before the parts URL went away"
    # the shared directory goes away and a file takes its place: as root, permissions would not stop a write
    shared.rename(tmp_path / "shared-gone")
    shared.write_text("not a directory")
    thread.join(timeout=600)
    error = outcome.get("error")
    assert isinstance(error, RagEvalError) and error.exit_code == 3, error
    assert str(shared) in str(error) and "\n" not in str(error)
    assert not (out / "per_query.parquet").exists() and (out / ".parts" / "state.json").is_file()
    kept = parts_in(out / ".parts")
    assert 1 <= kept < QUERIES // 4
    shared.unlink()  # the URL takes writes again
    resumed = jobs.run_experiment(exp, out, jobs.Execution(resume=True, cluster=Cluster(workers=2, parts_url=url)))
    assert resumed.resumed_batches == kept
    assert json.loads((out / "manifest.json").read_text())["resumed_batches"] == kept
    assert_whole(out, len(exp.configs))
