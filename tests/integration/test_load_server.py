"""Latency under load against a real Milvus 2.3.5 server, with small bounds (levels of 1 and 2 clients,
1 s per config and level in 2 rounds): a run with a [load] table, the CLI into a finished run, the
curve in the report, and gates on a p99."""

from __future__ import annotations

import json
import subprocess
import sys
import uuid
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from rag_eval import jobs
from rag_eval.compare.comparison import Comparison
from rag_eval.compare.gates import GateSet, load_gates, parse_check
from rag_eval.experiment import Experiment, Overrides, load_experiment, with_overrides
from rag_eval.experiment.load_table import LoadSettings
from rag_eval.search.milvus import MilvusStore
from tests.conftest import ROOT, SHIPPED
from tests.milvus_target import target

pytestmark = [pytest.mark.milvus_server, pytest.mark.slow]

DEFAULT = SHIPPED / "experiments" / "default.toml"



def compared(out: Path, gates: Path) -> Comparison:
    """``rag-eval compare OUT --gates GATES`` as the job runs it."""
    return jobs.compare_runs(out, jobs.Judging(gates=load_gates(gates)))

def two_configs(server_uri: str, collection: str, limit: int) -> Experiment:
    """The default experiment's baseline (legacy-merge) and D1-D5 (evidence) only: fewer comparisons to wait for."""
    flags = Overrides(milvus_uri=server_uri, collection=collection, query_limit=limit)
    exp = with_overrides(load_experiment(DEFAULT), flags)
    return replace(exp, configs=tuple(c for c in exp.configs if c.name in ("legacy-merge", "evidence")))


@pytest.fixture(scope="module")
def shipped_collection(server_uri: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The shipped knowledge base in one server collection, built once for both tests: each replays it and
    measures load on it, neither writes to it (a run reuses a collection whose manifest matches)."""
    name = f"t_load_server_{uuid.uuid4().hex[:8]}"
    exp = two_configs(server_uri, name, 20)
    try:
        jobs.ingest(replace(exp, cache_dir=tmp_path_factory.mktemp("load-cache")))
        yield name
    finally:
        with MilvusStore(target(server_uri, name)) as store:
            store.drop()


def gates_file(tmp_path: Path, *checks: str) -> Path:
    path = tmp_path / f"gates-{len(list(tmp_path.glob('gates-*')))}.toml"
    path.write_text("[gates]\nchecks = [\n" + "".join(f'    "{c}",\n' for c in checks) + "]\n")
    return path


def test_a_run_with_a_load_table_measures_gates_and_draws_the_curve(
    server_uri: str, shipped_collection: str, tmp_path: Path
) -> None:
    exp = two_configs(server_uri, shipped_collection, 40)
    # three rounds: with two, the t interval's lower end (t = 12.7 at one degree of freedom) dropped under any
    # threshold on a loaded machine, and the check below that must fire was underpowered
    settings = LoadSettings(concurrency=(1, 2), duration_s=1.0, rounds=3, configs=("legacy-merge", "evidence"))
    exp = replace(exp, cache_dir=tmp_path / "cache", load=settings)
    gates = GateSet(source="g.toml", checks=(parse_check("fail load:e2e:p99@2 <= 10s for evidence", path="g.toml"),))
    out = tmp_path / "run"
    result = jobs.run_experiment(exp, out, judged=jobs.Judging(gates=gates))
    assert result.exit_code == 0

    doc = json.loads((out / "load.json").read_text())
    manifest = json.loads((out / "manifest.json").read_text())
    assert doc["run"]["started"] == manifest["started"] and doc["milvus"]["backend"] == "server"
    assert doc["milvus"]["server_version"] and doc["machine"]["cpus"] and doc["machine_load"]["loadavg_start"]
    assert doc["settings"]["concurrency"] == [1, 2] and doc["settings"]["start_method"] in ("forkserver", "spawn")
    got = {(r["config"], r["concurrency"]) for r in doc["results"]}
    assert got == {(c, n) for c in ("legacy-merge", "evidence") for n in (1, 2)}
    for r in doc["results"]:
        e2e, search = r["latency_us"]["e2e"], r["latency_us"]["search"]
        assert r["searches"] > 0 and r["qps"] > 0 and len(r["rounds"]) == 3
        assert 0 < e2e["p50"] <= e2e["p95"] <= e2e["p99"] <= e2e["max"] and search["p50"] <= e2e["p50"]
        assert 0 < r["client_cpu"]["per_process_mean"] <= 1.05 and 0.5 < r["loop_efficiency"] <= 1.01
    requests = pq.read_table(out / "load_requests.parquet").to_pandas()
    assert len(requests) == sum(r["searches"] for r in doc["results"])
    assert set(requests.groupby("concurrency")["process"].nunique()) == {1, 2}  # N processes really ran
    assert set(requests["query_index"]) <= set(range(40))
    html = (out / "report.html").read_text()
    assert "Latency under load" in html and 'id="load"' in html
    assert "load.json" in json.loads((out / "run.complete.json").read_text())["files"]
    assert "| evidence | 2 |" in (out / "load.md").read_text()

    # a p99 no lookup can meet fires (the whole interval is above it); a level never measured is an error
    assert compared(out, gates_file(tmp_path, "fail load:e2e:p99@2 <= 1us for evidence")).exit_code == 1
    assert compared(out, gates_file(tmp_path, "fail load:e2e:p99@4 <= 10s for evidence")).exit_code == 2
    relative = compared(out, gates_file(tmp_path, "fail load:e2e:p99@2 growth <= 1000% for evidence"))
    outcome = next(c["gates"][0]["outcome"] for c in relative.document["comparisons"] if c["candidate"] == "evidence")
    assert outcome in ("pass", "underpowered") and relative.exit_code == 0  # three rounds cannot convict


def test_rag_eval_load_into_a_finished_run_directory(server_uri: str, shipped_collection: str, tmp_path: Path) -> None:
    exp = two_configs(server_uri, shipped_collection, 20)
    out = tmp_path / "run"
    jobs.run_experiment(replace(exp, cache_dir=tmp_path / "cache"), out)
    assert not (out / "load.json").exists()
    gates = gates_file(tmp_path, "fail load:e2e:p99@1 <= 10s for evidence", "fail load:qps@2 >= 1 for evidence")
    assert compared(out, gates).exit_code == 2  # nothing measured yet: an error, not a pass

    command = [
        sys.executable, "-m", "rag_eval.cli", "load", str(DEFAULT), "-q", "--milvus-uri", server_uri,
        "--collection", shipped_collection, "--limit", "20", "--concurrency", "2,1", "--duration", "1", "--rounds", "2",
        "--configs", "evidence", "--out", str(out),
    ]  # fmt: skip
    proc = subprocess.run(command, capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert "QPS" in proc.stdout and "rag-eval compare" in proc.stdout
    doc = json.loads((out / "load.json").read_text())
    assert doc["run"]["started"] == json.loads((out / "manifest.json").read_text())["started"]
    assert [(r["config"], r["concurrency"]) for r in doc["results"]] == [("evidence", 1), ("evidence", 2)]
    assert "Latency under load" in (out / "report.html").read_text()
    assert compared(out, gates).exit_code == 0

    # a later run into the directory makes the measurement stale: the gate says so instead of passing
    jobs.run_experiment(replace(exp, cache_dir=tmp_path / "cache"), out)
    stale = compared(out, gates)
    messages = [g["message"] for c in stale.document["comparisons"] for g in c["gates"]]
    assert stale.exit_code == 2 and messages and all("another run" in m for m in messages)
    assert "Latency under load" not in (out / "report.html").read_text()
