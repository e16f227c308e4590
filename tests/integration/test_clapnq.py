"""ClapNQ (../shared/datasets/clapnq, read in place) end to end on Milvus Lite.

Needs the embed extra for the first embedding of the corpus (about a minute on two cores);
vectors are cached under reports/cache/embeddings, so later runs embed nothing.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pandas as pd
import pytest

from rag_eval import jobs
from rag_eval.experiment import Experiment, Overrides, load_experiment, with_overrides
from tests.conftest import ROOT
from tests.integration.test_harness_lite import check_against_pytrec_eval

pytestmark = [pytest.mark.milvus_lite, pytest.mark.shared_data, pytest.mark.slow]
pytest.importorskip("pytrec_eval")


@pytest.fixture(scope="module")
def clapnq_run(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Experiment, jobs.RunResult]]:
    from tests.conftest import shared_datasets_dir

    base = shared_datasets_dir()
    if base is None or not (base / "clapnq" / "corpus.jsonl").is_file():
        pytest.skip("shared data set 'clapnq' is not here (set RAG_EVAL_SHARED_DATASETS)")
    pytest.importorskip("sentence_transformers", reason="the embed extra is needed to embed ClapNQ once")
    tmp = tmp_path_factory.mktemp("clapnq")
    exp = load_experiment(ROOT / "tests" / "experiments" / "clapnq.toml")
    exp = with_overrides(exp, Overrides(dataset=str(base / "clapnq"), milvus_uri=str(tmp / "milvus.db")))
    exp = replace(exp, cache_dir=ROOT / "reports" / "cache" / "embeddings")
    yield exp, jobs.run_experiment(exp, tmp / "run")


def test_clapnq_measures_equal_pytrec_eval(clapnq_run: tuple[Experiment, jobs.RunResult]) -> None:
    exp, result = clapnq_run
    assert check_against_pytrec_eval(result.out, "dev", exp) > 0


def test_clapnq_legacy_against_evidence(clapnq_run: tuple[Experiment, jobs.RunResult]) -> None:
    _, result = clapnq_run
    summary = json.loads((result.out / "summary.json").read_text())
    assert summary["label_level"] == "span" and summary["queries"] == 600 and summary["judged_queries"] == 299
    c = summary["configs"]
    assert c["evidence"]["same_doc_pairs"] >= 280  # 287 queries have >= 2 evidence sentences in one passage
    assert c["evidence"]["duplicate_rate"] == 0 < c["legacy-merge"]["duplicate_rate"]
    for legacy in ("legacy-merge", "legacy-first"):
        assert c["evidence"]["evidence_guard_1to1"] == 1.0 and c[legacy]["evidence_guard_1to1"] == 0.0
        assert c[legacy]["cap_checked"] == 2 and c[legacy]["cap_checked_source"] == "experiment.production_cap"
    assert c["evidence"]["cap_compliance"] == 1.0 > c["legacy-merge"]["cap_compliance"]
    assert c["evidence"]["cap_compliance_true"] < 1.0  # doc-less rows are buckets of their own
    assert c["legacy-first"]["same_doc_multi_chunk_recall"] < c["evidence"]["same_doc_multi_chunk_recall"]
    assert c["legacy-merge"]["same_doc_multi_chunk_recall"] > c["evidence"]["same_doc_multi_chunk_recall"]
    # a higher cap keeps more chunks of the one relevant passage
    assert c["evidence-cap3"]["same_doc_multi_chunk_recall"] > c["evidence"]["same_doc_multi_chunk_recall"]
    assert c["evidence"]["stage_losses"]["cap"] > 0


def test_clapnq_gates_evidence_against_legacy(clapnq_run: tuple[Experiment, jobs.RunResult]) -> None:
    """The experiment's rollout gates: D1-D5's invariants hold; legacy (which merges a passage's
    chunks into one block, no cap) delivers more same-document chunks, and the gate says so."""
    _, result = clapnq_run
    assert result.comparison is not None and result.exit_code == 0
    gates = {(c, g["id"]): g for c, g in result.comparison.gates}
    for check in ("cap_compliance == 1", "duplicate_rate == 0", "return_n_compliance == 1", "evidence_guard_1to1 == 1"):
        assert gates[("evidence", f"{check} for pipeline=evidence")]["outcome"] == "pass"
    assert gates[("evidence", "max_chunks_per_document <= 2 for name=evidence")]["outcome"] == "pass"
    recall = gates[("evidence", "same_doc_multi_chunk_recall drop <= 0.02")]
    assert recall["outcome"] == "warn" and recall["value"] > 0.1


def test_clapnq_run_compared_with_itself_passes(clapnq_run: tuple[Experiment, jobs.RunResult]) -> None:
    from rag_eval.compare.comparison import compare
    from rag_eval.compare.gates import experiment_gates
    from rag_eval.compare.runs import ComparedRun

    exp, result = clapnq_run
    run = ComparedRun.from_dir(result.out)
    comparison = compare(run, run, experiment_gates(exp.gates, source=exp.source))
    assert comparison.exit_code == 0
    assert {g["outcome"] for _, g in comparison.gates} == {"pass"}
    assert all(m["p_value"] in (1.0, None) for c in comparison.document["comparisons"] for m in c["metrics"])


@pytest.mark.parametrize(
    "spec",
    ["same_doc_multi_chunk_recall drop <= 0.02", "chunk:nDCG@5 drop <= 0.02", "latency:postprocess:p95 growth <= 20%"],
)
def test_clapnq_aa_simulation_fires_in_at_most_alpha(clapnq_run: tuple[Experiment, jobs.RunResult], spec: str) -> None:
    from rag_eval.compare.runs import ComparedRun
    from tests.integration.test_compare_calibration import aa_fire_rate, at_most_alpha

    _, result = clapnq_run
    simulations = 200 if spec.startswith("latency") else 400  # percentiles cost more to resample
    run = ComparedRun.from_dir(result.out)
    assert at_most_alpha(aa_fire_rate(run, spec, "legacy-merge", "evidence", simulations=simulations), simulations)


def test_clapnq_questions_as_traffic_beside_the_labelled_half(
    clapnq_run: tuple[Experiment, jobs.RunResult], tmp_path: Path
) -> None:
    """ClapNQ's 600 real questions replayed as a query log (labels ignored) beside the labelled set: the
    labelled measures do not move, and what to label next comes from the questions without a label."""
    from rag_eval.jobs.labels import next_to_label
    from rag_eval.traffic.logs import TrafficSpec

    exp, result = clapnq_run
    queries = exp.dataset_path / "queries.jsonl"
    kept = (exp.baseline, "evidence")  # the baseline and D1-D5: what a log's comparison needs, at two configs' cost
    traffic = replace(exp, traffic=TrafficSpec(path=queries, text="text", id="_id"),
                      configs=tuple(c for c in exp.configs if c.name in kept))  # fmt: skip
    logged = jobs.run_experiment(traffic, tmp_path / "traffic")
    skip = {"latency_us", "qps_serial", "search_latency", "traffic"}
    assert set(logged.summary["configs"]) == set(kept)
    for name in kept:
        summary = result.summary["configs"][name]
        assert {k: v for k, v in logged.summary["configs"][name].items() if k not in skip} == {
            k: v for k, v in summary.items() if k not in skip}  # fmt: skip
    texts = [json.loads(line)["text"] for line in queries.read_text().splitlines()]
    assert logged.summary["traffic"]["requests"] == len(texts) == 600
    evidence = logged.summary["configs"]["evidence"]["traffic"]
    assert evidence["cap_compliance"] == 1.0 and evidence["duplicate_rate"] == 0.0
    assert 0.0 < evidence["payload_changed"] <= 1.0
    path, picked, screened = next_to_label(logged.out, tmp_path / "to-label.jsonl", count=20)
    assert picked == 20 and screened.labelled == logged.summary["judged_queries"]
    offered = [json.loads(line) for line in path.read_text().splitlines()]
    rows = pd.read_parquet(logged.out / "per_query.parquet", columns=["query_text", "judged", "origin"])
    judged_texts = set(rows.loc[rows["judged"] & (rows["origin"] == "labelled"), "query_text"])
    assert not {o["query"] for o in offered} & judged_texts  # only questions without a label are offered
