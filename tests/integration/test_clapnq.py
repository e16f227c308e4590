"""ClapNQ (../shared/datasets/clapnq, read in place) end to end on Milvus Lite.

Needs the embed extra for the first embedding of the corpus (about a minute on two cores);
vectors are cached under reports/cache/embeddings, so later runs embed nothing.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import replace

import pytest

from rag_eval import jobs
from rag_eval.harness.experiment import Experiment, load_experiment, with_overrides
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
    exp = with_overrides(exp, dataset=str(base / "clapnq"), milvus_uri=str(tmp / "milvus.db"))
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
