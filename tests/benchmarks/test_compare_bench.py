"""The comparison's cost (pytest-benchmark; `make bench`): every metric of every config against the baseline.

Timed: the ``rag-eval compare`` command on the default experiment's own run (made once per session on
Milvus Lite: 264 queries, 5 configs, four comparisons), wall time of the command as a user runs it; synthetic
runs of 264 queries x 5 configs (a worst case: every latency test at the resampling floor, so each is drawn
again with four times the resamples), and of two configs at 1,000 and 4,000 queries (the growth with the
number of queries); five configs at 4,000 queries in this process and as tasks on two Dask worker processes.
``make test`` runs each once on 40 queries of two configs. The synthetic runs are per-query tables
(:func:`tests.benchmarks.compare_scale.synthetic_run`) with every column the comparison reads.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from rag_eval.compare.comparison import compare
from rag_eval.compare.gates import load_gates
from tests.benchmarks.compare_scale import synthetic_run
from tests.benchmarks.conftest import Results, timed
from tests.conftest import ROOT, SHIPPED


@pytest.mark.slow
@pytest.mark.parametrize(("queries", "configs"), [(264, 5), (1000, 2), (4000, 2)])
def test_compare(benchmark, results: Results, pytestconfig: pytest.Config, queries: int, configs: int) -> None:  # type: ignore[no-untyped-def]
    name = f"compare[{queries}x{configs}]"
    if not timed(pytestconfig):
        queries, configs = 40, 2
    run = synthetic_run(queries, configs)
    gates = load_gates("rollout")
    comparison = benchmark.pedantic(compare, args=(run, None, gates), rounds=3, iterations=1)
    results.record(name, benchmark)
    document = comparison.document
    assert len(document["comparisons"]) == configs - 1
    latency = [m for c in document["comparisons"] for m in c["metrics"] if m["kind"] == "latency"]
    assert latency and all(m["p_value"] is not None for m in latency)


@pytest.fixture(scope="module")
def default_run(tmp_path_factory: pytest.TempPathFactory, pytestconfig: pytest.Config) -> Path:
    """The default experiment's run on Milvus Lite (all 264 queries when timed, 40 otherwise)."""
    from rag_eval import jobs
    from rag_eval.experiment import Overrides, load_experiment, with_overrides

    tmp = tmp_path_factory.mktemp("bench-compare-default")
    exp = load_experiment(SHIPPED / "experiments" / "default.toml")
    exp = with_overrides(exp, Overrides(milvus_uri=str(tmp / "kb.db"), query_limit=None if timed(pytestconfig) else 40))
    return jobs.run_experiment(exp, tmp / "run").out


@pytest.mark.slow
def test_compare_command_on_the_default_experiment(benchmark, results: Results, default_run: Path) -> None:  # type: ignore[no-untyped-def]
    out = default_run.parent / "compared"
    command = [sys.executable, "-m", "rag_eval.cli", "compare", str(default_run), "--out", str(out), "-q"]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}

    def run() -> int:
        return subprocess.run(command, capture_output=True, env=env, timeout=600, check=False).returncode

    code = benchmark.pedantic(run, rounds=3, iterations=1)
    results.record("compare_command[default]", benchmark)
    assert code in (0, 1) and (out / "compare.json").is_file()


@pytest.fixture(scope="module")
def two_workers() -> Iterator[object]:
    from rag_eval.cluster.settings import Cluster
    from rag_eval.cluster.tasks import tasks_on

    with tasks_on(Cluster(workers=2)) as run:  # started before the clock, as a running cluster is
        yield run


@pytest.mark.slow
@pytest.mark.parametrize("where", ["process", "dask2"])
def test_compare_five_configs_on_workers(  # type: ignore[no-untyped-def]
    benchmark, results: Results, pytestconfig: pytest.Config, two_workers: object, where: str
) -> None:
    run = synthetic_run(4000 if timed(pytestconfig) else 40, 5)
    gates = load_gates("rollout")
    kwargs = {"tasks": two_workers} if where == "dask2" else {}
    comparison = benchmark.pedantic(compare, args=(run, None, gates), kwargs=kwargs, rounds=3, iterations=1)
    results.record(f"compare[4000x5-{where}]", benchmark)
    assert len(comparison.document["comparisons"]) == 4
