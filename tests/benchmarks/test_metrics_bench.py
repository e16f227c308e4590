"""The measures of a run, column-wise, beside pytrec_eval on the same rows (`make bench` times them).

100,000 per-query rows of 20 delivered chunks each (:func:`tests.benchmarks.synthetic.per_query_table`):
``summarize`` computes every measure of the summary (standard measures at chunk and document level,
duplicates, caps, same-document recall, losses, latency); pytrec_eval computes the chunk-level standard
measures only, from dictionaries built beforehand (not timed); ``standard_measures`` computes those same
measures (P, R, nDCG, Success at 1, 3, 5, 10 and RR, chunk level) from the same rows. The ratios are
taken from paired rounds of the three (:func:`test_metrics_paired_rounds`).
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable

import pyarrow as pa
import pytest

from rag_eval.metrics.measures import summarize
from rag_eval.metrics.perquery import standard_measures
from tests.benchmarks import synthetic
from tests.benchmarks.conftest import Results, timed

CUTOFFS = (1, 3, 5, 10)
CONFIGS = [{"name": "evidence", "cap": 2, "cap_aware": 2, "return_n": 20}]


@pytest.fixture(scope="module")
def per_query(pytestconfig: pytest.Config) -> pa.Table:
    return synthetic.per_query_table(100_000 if timed(pytestconfig) else 2_000)


def test_metrics_summarize(benchmark, results: Results, per_query: pa.Table) -> None:  # type: ignore[no-untyped-def]
    summary, frame = benchmark.pedantic(
        summarize, args=(per_query,), kwargs={"configs": CONFIGS, "cutoffs": CUTOFFS}, rounds=3, iterations=1
    )
    results.record("metrics[summarize]", benchmark)
    assert summary["evidence"]["queries"] == per_query.num_rows == len(frame)


def test_metrics_standard_measures(benchmark, results: Results, per_query: pa.Table) -> None:  # type: ignore[no-untyped-def]
    frame = benchmark.pedantic(standard_measures, args=(per_query, CUTOFFS), rounds=3, iterations=1)
    results.record("metrics[standard]", benchmark)
    assert len(frame) == per_query.num_rows and "chunk:nDCG@10" in frame.columns


def _pytrec_eval(per_query: pa.Table) -> Callable[[], dict[str, dict[str, float]]]:
    """pytrec_eval's chunk-level standard measures of the rows, from dictionaries built here (not timed)."""
    pytrec_eval = pytest.importorskip("pytrec_eval")
    columns = per_query.select(["query_id", "relevant_chunks", "relevant_grades", "member_chunks"]).to_pydict()
    qrels = {
        q: dict(zip(chunks, grades, strict=True))
        for q, chunks, grades in zip(
            columns["query_id"], columns["relevant_chunks"], columns["relevant_grades"], strict=True
        )
    }
    run = {}
    for q, members in zip(columns["query_id"], columns["member_chunks"], strict=True):
        ranking = list(dict.fromkeys(members))
        run[q] = {chunk: float(len(ranking) - i) for i, chunk in enumerate(ranking)}
    ks = ",".join(str(k) for k in CUTOFFS)
    measures = {f"P.{ks}", f"recall.{ks}", f"ndcg_cut.{ks}", f"success.{ks}", "recip_rank"}

    def evaluate() -> dict[str, dict[str, float]]:
        return pytrec_eval.RelevanceEvaluator(qrels, measures).evaluate(run)  # type: ignore[no-any-return]

    return evaluate


def test_metrics_pytrec_eval(benchmark, results: Results, per_query: pa.Table) -> None:  # type: ignore[no-untyped-def]
    scores = benchmark.pedantic(_pytrec_eval(per_query), rounds=3, iterations=1)
    results.record("metrics[pytrec_eval]", benchmark)
    assert len(scores) == per_query.num_rows


def test_metrics_paired_rounds(benchmark, results: Results, per_query: pa.Table, pytestconfig: pytest.Config) -> None:  # type: ignore[no-untyped-def]
    """The ratios to pytrec_eval from paired rounds: ``summarize``, ``standard_measures`` and pytrec_eval one
    after the other, five times, so that a change of the machine's load during the session (other work on
    the cores) moves the three alike; the medians of wall time and of this process's CPU time (all threads).
    (pytest-benchmark times the five rounds as one, so that ``--benchmark-only`` runs it.)"""
    evaluate = _pytrec_eval(per_query)
    calls: dict[str, Callable[[], object]] = {
        "summarize": lambda: summarize(per_query, configs=CONFIGS, cutoffs=CUTOFFS),
        "standard": lambda: standard_measures(per_query, CUTOFFS),
        "pytrec_eval": evaluate,
    }
    walls: dict[str, list[float]] = {name: [] for name in calls}
    cpus: dict[str, list[float]] = {name: [] for name in calls}

    def paired() -> None:
        for _ in range(5 if timed(pytestconfig) else 1):
            for name, call in calls.items():
                wall, cpu = time.perf_counter(), time.process_time()
                call()
                walls[name].append(time.perf_counter() - wall)
                cpus[name].append(time.process_time() - cpu)

    benchmark.pedantic(paired, rounds=1, iterations=1)
    for name in calls:
        results.medians[f"paired[{name}]"] = statistics.median(walls[name])
        results.medians[f"paired-cpu[{name}]"] = statistics.median(cpus[name])
    assert all(len(v) for v in walls.values())
