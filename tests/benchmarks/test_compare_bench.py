"""The comparison's cost (pytest-benchmark; `make bench`): every metric of every config against the baseline.

Timed: 264 queries x 5 configs (the default experiment's shape: four comparisons, 244 tested numbers, 19,519
randomisation resamples each), and two configs at 1,000 and 4,000 queries (the growth with the number of
queries); ``make test`` runs each once on 40 queries of two configs. The runs are synthetic per-query tables
(:func:`tests.benchmarks.compare_scale.synthetic_run`) with every column the comparison reads.
"""

from __future__ import annotations

import pytest

from rag_eval.compare.comparison import compare
from rag_eval.compare.gates import load_gates
from tests.benchmarks.compare_scale import synthetic_run
from tests.benchmarks.conftest import Results, timed


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
