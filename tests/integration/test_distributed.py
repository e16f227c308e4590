"""The replay on Dask workers (a LocalCluster of 2 processes): the same rows as a serial run, latency aside,
on Milvus Lite (each worker on its own copy of the Lite file) and on a real server; resume; the errors."""

from __future__ import annotations

import json
import math
import os
import shutil
import subprocess
import sys
import warnings
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from distributed import LocalCluster

from rag_eval import cli, jobs
from rag_eval.cluster.settings import Cluster
from rag_eval.cluster.tasks import connect
from rag_eval.core.errors import ClusterError, RunStoreError, SearchUnavailableError
from rag_eval.experiment import Overrides, load_experiment, with_overrides
from rag_eval.replay.strategies import replay_batches
from rag_eval.replay.workers import BatchTask, WorkerJob
from rag_eval.rundir.rows import LATENCY_COLUMNS, Truth
from rag_eval.search.milvus import IndexSpec, SearchTarget
from tests.conftest import ROOT, SHIPPED
from tests.integration.replay_only import Replay, replay_only
from tests.integration.test_run_guarantees import _interrupted_run

DEFAULT = SHIPPED / "experiments" / "default.toml"
ENV = {**os.environ, "PYTHONPATH": str(ROOT)}
LATENCY = list(LATENCY_COLUMNS)


def rows(run: Path | Replay) -> pa.Table:
    """per_query.parquet (or a replay's rows) without its latency columns, in (query, config) order."""
    table = run.table if isinstance(run, Replay) else pq.read_table(run / "per_query.parquet")
    return table.drop_columns(LATENCY).sort_by([("query_index", "ascending"), ("config", "ascending")])


def timed(run: Path | Replay) -> int:
    table = run.table if isinstance(run, Replay) else pq.read_table(run / "per_query.parquet")
    values = table.column("search_us").to_pylist()
    return sum(not math.isnan(v) for v in values)


def small(uri: str, tmp_path: Path, **overrides: object) -> object:
    exp = with_overrides(load_experiment(DEFAULT), Overrides(milvus_uri=uri, query_limit=48, **overrides))  # type: ignore[arg-type]
    return replace(exp, batch_size=16, cache_dir=tmp_path / "cache")  # 3 batches


@pytest.mark.milvus_lite
def test_two_workers_on_lite_give_the_serial_rows_from_the_cli(tmp_path: Path) -> None:
    lite = str(tmp_path / "kb.db")
    serial = replay_only(small(lite, tmp_path), tmp_path / "serial")  # type: ignore[arg-type]
    scratch = tmp_path / "worker-tmp"  # the workers' temporary directory: their Lite copies go there
    scratch.mkdir()
    remote = tmp_path / "remote-parts"
    proc = subprocess.run(
        [sys.executable, "-m", "rag_eval.cli", "run", str(DEFAULT), "-q", "--milvus-uri", lite, "--limit", "48",
         "--out", str(tmp_path / "dask"), "--workers", "2", "--parts", f"file://{remote}"],
        capture_output=True, text=True, cwd=tmp_path, env={**ENV, "TMPDIR": str(scratch)}, timeout=600,
    )  # fmt: skip
    assert proc.returncode in (0, 1), proc.stderr  # the shipped gates may warn or fail; a crash is 70
    # --limit on the CLI keeps the experiment's batches of 64: other parts, the same rows
    assert rows(tmp_path / "dask").equals(rows(serial))
    assert timed(tmp_path / "dask") == timed(serial) == 48 * 5  # every query timed (fewer than the sample)
    summary = json.loads((tmp_path / "dask" / "summary.json").read_text())
    assert "2 local worker processes" in summary["execution"]["replay"]
    assert "serially" in summary["execution"]["search_timing"]
    assert list(scratch.glob("rag-eval-lite-*")) == []  # every worker's Lite copy removed (Dask's scratch stays)
    assert not remote.exists() or list(remote.rglob("*.arrow")) == []  # parts moved into the run directory


@pytest.mark.milvus_server
def test_two_workers_on_the_server_give_the_serial_rows(
    server_uri: str, collection_name: str, drop_after: Callable[[str, str], None], tmp_path: Path
) -> None:
    drop_after(server_uri, collection_name)
    exp = small(server_uri, tmp_path, collection=collection_name)
    serial = replay_only(exp, tmp_path / "serial")  # type: ignore[arg-type]
    # a cluster of its own, reached by its scheduler's address as --scheduler does
    with LocalCluster(n_workers=2, threads_per_worker=1, dashboard_address=":0") as running:
        cluster = Cluster(scheduler=running.scheduler_address)
        dask = replay_only(exp, tmp_path / "dask", jobs.Execution(cluster=cluster))  # type: ignore[arg-type]
    assert rows(dask).equals(rows(serial))
    assert timed(dask) == timed(serial) == 48 * 5
    assert dask.summary["execution"]["replay"].startswith("query batches as Dask tasks on the workers of the Dask")


@pytest.mark.milvus_lite
def test_a_query_log_on_two_workers_gives_the_serial_rows(tmp_path: Path) -> None:
    # the recorded traces beside the labelled queries (a seeded sample of 40 distinct log queries, their
    # counts and categories): replayed on two Dask workers, the same rows, traffic rows included
    exp = with_overrides(load_experiment(SHIPPED / "experiments" / "traffic.toml"),
                         Overrides(milvus_uri=str(tmp_path / "kb.db"), query_limit=24))  # fmt: skip
    exp = replace(exp, batch_size=16, cache_dir=tmp_path / "cache", traffic=replace(exp.traffic, sample=40))
    serial = replay_only(exp, tmp_path / "serial")  # type: ignore[arg-type]
    dask = replay_only(exp, tmp_path / "dask", jobs.Execution(cluster=Cluster(workers=2)))  # type: ignore[arg-type]
    origins = rows(serial).column("origin").to_pylist()
    assert origins.count("traffic") == 40 * len(exp.configs) and origins.count("labelled") == 24 * len(exp.configs)
    assert rows(dask).equals(rows(serial))


@pytest.mark.milvus_lite
def test_resume_on_workers_runs_only_the_missing_batches(tmp_path: Path) -> None:
    dataset = tmp_path / "kb"
    shutil.copytree(SHIPPED, dataset, ignore=shutil.ignore_patterns("src", "experiments"))
    out = _interrupted_run(tmp_path, dataset, "m.db")  # 2 of 5 batches written, then a crash
    evidence = SHIPPED / "experiments" / "configs" / "evidence.properties"
    common = ["--dataset", str(dataset), "--config", f"e={evidence}", "--milvus-uri", "m.db", "-q"]
    resumed = subprocess.run(
        [sys.executable, "-m", "rag_eval.cli", "run", *common, "--out", str(out), "--resume", "--workers", "2"],
        capture_output=True, text=True, cwd=tmp_path, env=ENV, timeout=600,
    )  # fmt: skip
    assert resumed.returncode == 0, resumed.stderr
    assert json.loads((out / "manifest.json").read_text())["resumed_batches"] == 2
    again = subprocess.run(
        [sys.executable, "-m", "rag_eval.cli", "run", *common, "--out", str(tmp_path / "serial")],
        capture_output=True, text=True, cwd=tmp_path, env=ENV, timeout=600,
    )  # fmt: skip
    assert again.returncode == 0, again.stderr
    assert rows(out).equals(rows(tmp_path / "serial")) and rows(out).num_rows == 264


@pytest.mark.milvus_lite
def test_batches_the_workers_wrote_out_of_reach_are_an_error_not_a_smaller_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from rag_eval.replay import strategies

    # as if remote workers had written into a .parts of their own machine's: nothing arrives here
    monkeypatch.setattr(strategies, "replay_batches", lambda *args, **kwargs: 3)
    with pytest.raises(RunStoreError, match=r"3 query batches the workers finished are not in") as caught:
        on_two = jobs.Execution(cluster=Cluster(workers=2))
        jobs.run_experiment(small(str(tmp_path / "kb.db"), tmp_path), tmp_path / "run", on_two)  # type: ignore[arg-type]
    assert caught.value.exit_code == 3
    assert not (tmp_path / "run" / "per_query.parquet").exists()


def test_a_worker_that_cannot_reach_milvus_is_an_infrastructure_error(tmp_path: Path) -> None:
    exp = load_experiment(DEFAULT)
    job = WorkerJob(
        token="t", target=SearchTarget(uri="http://127.0.0.1:9", collection="nowhere", index=IndexSpec.flat(),
                                       token_env="NO_TOKEN", timeout=1.0),
        configs=tuple(exp.configs), truth=Truth(chunks={}, relevance={}, doc_relevance={}), warmup=0,
        parts_url=str(tmp_path),
    )  # fmt: skip
    task = BatchTask(number=0, batch=[(0, "q0", "replica lag")], texts=["replica lag"],
                     vectors=np.zeros((1, 384), dtype=np.float32), timing=([], {}))  # fmt: skip
    with pytest.raises(SearchUnavailableError) as caught:  # raised in the worker process, with its attributes
        replay_batches(Cluster(workers=1), job, [task])
    assert caught.value.exit_code == 3 and caught.value.uri and "127.0.0.1:9" in caught.value.uri
    assert list(tmp_path.iterdir()) == []


def test_a_cluster_picks_the_dask_strategy_on_a_client_with_its_workers() -> None:
    from rag_eval.replay.strategies import DaskReplay, strategy_for

    with strategy_for(Cluster(workers=1)) as strategy:
        assert isinstance(strategy, DaskReplay) and strategy.cluster == Cluster(workers=1)
        assert sum(strategy.client.nthreads().values()) == 1  # one process, one thread: one batch at a time
    assert strategy.client.status == "closed"  # the LocalCluster goes with the replay


def test_a_scheduler_that_cannot_be_reached_is_an_infrastructure_error() -> None:
    unreachable = Cluster(scheduler="tcp://127.0.0.1:9", connect_timeout=1.0)
    refused = pytest.raises(ClusterError, match=r"cannot reach the Dask scheduler at tcp://127\.0\.0\.1:9")
    with refused as caught, connect(unreachable):
        pass
    assert caught.value.exit_code == 3


@pytest.mark.milvus_lite
def test_a_run_whose_scheduler_cannot_be_reached_leaves_no_run_directory(tmp_path: Path) -> None:
    unreachable = Cluster(scheduler="tcp://127.0.0.1:9", connect_timeout=1.0)
    with pytest.raises(ClusterError) as caught:
        on_none = jobs.Execution(cluster=unreachable)
        jobs.run_experiment(small(str(tmp_path / "kb.db"), tmp_path), tmp_path / "run", on_none)  # type: ignore[arg-type]
    assert caught.value.exit_code == 3 and not (tmp_path / "run").exists()


@pytest.mark.parametrize(
    ("flags", "expected"),
    [
        (["--workers", "0"], "--workers"),
        (["--workers", "-3"], "--workers"),
        (["--workers", "two"], "--workers"),
        (["--workers", "2.5"], "--workers"),
        (["--workers", "1000000"], "--workers"),
        (["--scheduler", "not an address"], "--scheduler"),
        (["--scheduler", "tcp://host:99999"], "--scheduler"),
        (["--scheduler", "udp://host:8786"], "--scheduler"),
        (["--workers", "2", "--scheduler", "tcp://host:8786"], "not both"),
        (["--parts", "/tmp/x"], "--parts"),
        (["--workers", "2", "--parts", "nosuchprotocol://bucket/x"], "--parts"),
    ],
)
def test_bad_cluster_flags_exit_2_with_one_line_before_anything_runs(
    flags: list[str], expected: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code = cli.main(["run", str(DEFAULT), "-q", "--milvus-uri", str(tmp_path / "m.db"), "--out",
                     str(tmp_path / "run"), *flags])  # fmt: skip
    err = capsys.readouterr().err
    assert code == 2, err
    assert expected in err and err.count("\n") == 1 and "Traceback" not in err
    assert list(tmp_path.iterdir()) == []


@pytest.mark.milvus_lite
def test_the_comparison_on_two_workers_is_the_one_made_in_one_process(tmp_path: Path) -> None:
    run = jobs.run_experiment(small(str(tmp_path / "kb.db"), tmp_path), tmp_path / "run")  # type: ignore[arg-type]
    here = json.loads((run.out / "compare.json").read_text())
    proc = subprocess.run(
        [sys.executable, "-m", "rag_eval.cli", "compare", str(run.out), "-q", "--workers", "2",
         "--out", str(tmp_path / "there")],
        capture_output=True, text=True, cwd=tmp_path, env=ENV, timeout=600,
    )  # fmt: skip
    assert proc.returncode == run.exit_code, proc.stderr
    there = json.loads((tmp_path / "there" / "compare.json").read_text())
    assert len(there["comparisons"]) == 4  # the default experiment's four candidates, a task each
    assert there == here


def _dies(task: object, shared: object) -> object:
    os._exit(9)  # the worker process is gone, as when a machine of the cluster is lost


def _size(task: bytes, shared: int) -> int:
    return len(task) + shared


def test_large_comparison_tasks_travel_as_data_not_in_the_task_graph() -> None:
    """Tasks of 24 MB in all (the units of a comparison of tens of thousands of queries are that large): sent
    to the workers as data, so Dask neither builds a graph that large nor warns of one; results in order."""
    from rag_eval.cluster.tasks import tasks_on

    tasks = [bytes([i]) * 6_000_000 for i in range(4)]
    with warnings.catch_warnings(record=True) as caught, tasks_on(Cluster(workers=1)) as run:
        warnings.simplefilter("always")
        assert run(_size, tasks, 1) == [6_000_001] * 4
    assert not [w for w in caught if "large graph" in str(w.message)], [str(w.message) for w in caught]


def test_a_comparison_that_loses_its_workers_is_infrastructure_not_a_verdict() -> None:
    from rag_eval.cluster.tasks import tasks_on

    with tasks_on(Cluster(workers=1)) as run, pytest.raises(ClusterError, match="lost its Dask workers") as caught:
        run(_dies, [1], None)
    assert caught.value.exit_code == 3


def test_a_flag_only_a_replay_has_is_refused_for_a_comparison(tmp_path: Path) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "rag_eval.cli", "compare", str(tmp_path), "--workers", "2", "--parts", "/x"],
        capture_output=True, text=True, cwd=tmp_path, env=ENV, timeout=120,
    )  # fmt: skip
    assert proc.returncode == 2 and "--parts" in proc.stderr
