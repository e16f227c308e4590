"""The harness end to end on the shipped knowledge base and embedded Milvus Lite.

Standard measures are checked against pytrec_eval on the exported TREC files; an interrupted
run (a crash, and Ctrl-C on the real command) resumed gives the same per-query table.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pandas as pd
import pyarrow.parquet as pq
import pytest

from rag_eval import jobs
from rag_eval.experiment import Experiment, Overrides, load_experiment, with_overrides
from rag_eval.replay.batches import Replayer
from rag_eval.rundir.rows import LATENCY_COLUMNS
from tests.conftest import ROOT, SHIPPED
from tests.integration.replay_only import replay_only
from tests.unit.frames import per_query_frame

pytestmark = pytest.mark.milvus_lite
pytrec_eval = pytest.importorskip("pytrec_eval")

DEFAULT = SHIPPED / "experiments" / "default.toml"


def experiment(tmp: Path, **changes: object) -> Experiment:
    exp = with_overrides(load_experiment(DEFAULT), Overrides(milvus_uri=str(tmp / "milvus.db")))
    return replace(exp, cache_dir=tmp / "cache", **changes)  # type: ignore[arg-type]


@pytest.fixture(scope="module")
def default_run(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Experiment, jobs.RunResult]]:
    tmp = tmp_path_factory.mktemp("default-run")
    exp = experiment(tmp)
    yield exp, jobs.run_experiment(exp, tmp / "run")


def read_trec_run(path: Path) -> dict[str, dict[str, float]]:
    run: dict[str, dict[str, float]] = {}
    for line in path.read_text().splitlines():
        qid, _, docno, _rank, score, _ = line.split()
        run.setdefault(qid, {})[docno] = float(score)
    return run


def read_trec_qrels(path: Path) -> dict[str, dict[str, int]]:
    qrels: dict[str, dict[str, int]] = {}
    for line in path.read_text().splitlines():
        qid, _, docno, rel = line.split()
        qrels.setdefault(qid, {})[docno] = int(rel)
    return qrels


def check_against_pytrec_eval(out: Path, split: str, exp: Experiment) -> int:
    """Every standard measure of every config, per query and on average, equals pytrec_eval."""
    table = pq.read_table(out / "per_query.parquet").to_pandas()
    caps = {c["name"]: c["cap_aware"] for c in jobs.config_rows(exp)}
    frame = per_query_frame(table, exp.cutoffs, caps)
    summary = json.loads((out / "summary.json").read_text())
    ks = ",".join(str(k) for k in exp.cutoffs)
    names = {"P": "P_{k}", "R": "recall_{k}", "nDCG": "ndcg_cut_{k}", "Success": "success_{k}"}
    checked = 0
    for level, suffix in (("chunk", ""), ("doc", ".docs")):
        qrels = read_trec_qrels(out / "qrels" / f"{split}.{'chunks' if level == 'chunk' else 'docs'}.trec")
        evaluator = pytrec_eval.RelevanceEvaluator(
            qrels, {f"P.{ks}", f"recall.{ks}", f"ndcg_cut.{ks}", f"success.{ks}", "recip_rank"}
        )
        for spec in exp.configs:
            reference = evaluator.evaluate(read_trec_run(out / "runs" / f"{spec.name}{suffix}.trec"))
            mine = frame[(frame["config"] == spec.name) & frame[f"{level}:RR"].notna()].set_index("query_id")
            assert set(reference) <= set(mine.index)
            for measure, template in names.items():
                for k in exp.cutoffs:
                    ours = mine[f"{level}:{measure}@{k}"]
                    theirs = pd.Series({q: reference.get(q, {}).get(template.format(k=k), 0.0) for q in mine.index})
                    pd.testing.assert_series_equal(ours, theirs, check_names=False, atol=1e-9, rtol=0)
                    assert summary["configs"][spec.name][level][f"{measure}@{k}"] == pytest.approx(theirs.mean())
                    checked += 1
            rr = pd.Series({q: reference.get(q, {}).get("recip_rank", 0.0) for q in mine.index})
            pd.testing.assert_series_equal(mine[f"{level}:RR"], rr, check_names=False, atol=1e-9, rtol=0)
    return checked


def test_standard_measures_equal_pytrec_eval(default_run: tuple[Experiment, jobs.RunResult]) -> None:
    exp, result = default_run
    assert check_against_pytrec_eval(result.out, exp.split, exp) == 2 * len(exp.configs) * 4 * len(exp.cutoffs)


def test_run_directory_carries_provenance(default_run: tuple[Experiment, jobs.RunResult]) -> None:
    exp, result = default_run
    out = result.out
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["dataset"]["checksum"] and manifest["milvus"]["backend"] == "lite"
    assert {c["name"] for c in manifest["configs"]} == {c.name for c in exp.configs}
    assert manifest["versions"]["pymilvus"] and manifest["machine"]["cpus"]
    meta = pq.read_schema(out / "per_query.parquet").metadata
    provenance = json.loads(meta[b"rag_eval.provenance"])
    assert provenance["dataset_checksum"] == manifest["dataset"]["checksum"]
    assert not (out / ".parts").exists()
    table = pq.read_table(out / "per_query.parquet").to_pandas()
    assert len(table) == len(exp.configs) * manifest["dataset"]["queries"]
    assert not table.duplicated(["query_id", "config"]).any()


def test_legacy_against_evidence_on_production_rows(default_run: tuple[Experiment, jobs.RunResult]) -> None:
    _, result = default_run
    configs = result.summary["configs"]
    merge, first, evidence = configs["legacy-merge"], configs["legacy-first"], configs["evidence"]
    # D2: re-ingested copies reach Milvus's raw hits, never the evidence payload
    assert evidence["raw_duplicate_rate"] > 0 and evidence["duplicate_rate"] == 0
    assert merge["duplicate_rate"] > 0  # merged document blocks carry both copies
    # D3 / D4 by design; legacy-merge delivers more than two chunks of one document
    assert evidence["cap_compliance"] == 1.0 and evidence["return_n_compliance"] == 1.0
    assert merge["cap_compliance"] < 1.0 and merge["n_cap_violations"] > 0
    assert merge["cap_checked"] == evidence["cap_checked"] == 2
    assert merge["cap_checked_source"] == "the evidence configs' cap"
    # rows without doc_id are buckets of their own: by true document the evidence payload can exceed the cap
    assert evidence["cap_compliance_true"] < evidence["cap_compliance"]
    assert evidence["n_true_cap_violations"] > 0
    # legacy-first delivers one chunk per source: within any cap, and the fewest same-document chunks
    assert first["cap_compliance"] == first["cap_compliance_true"] == 1.0
    assert first["same_doc_multi_chunk_recall"] < evidence["same_doc_multi_chunk_recall"]
    assert first["stage_losses"]["document_dedup"] > 0
    # the finding the harness must show: merging a source's chunks delivers more of them than D1-D5
    assert merge["same_doc_multi_chunk_recall"] > evidence["same_doc_multi_chunk_recall"]
    assert evidence["same_doc_pairs"] == merge["same_doc_pairs"] > 0
    assert set(evidence["stage_losses"]) <= {"not_retrieved", "dedup", "cap", "return_n"} | {
        s for s in evidence["stage_losses"] if s.startswith("projector_")
    }
    # D1's vector: fallback lets re-ingested copies of legacy rows through D2; the what-if closes that
    assert evidence["content_duplicates"]["by_cause"]["re-ingested copy"] > 0
    assert evidence["content_duplicates"]["by_key_kind"].get("vector", 0) > 0
    whatif = configs["whatif-content-dedup"]
    assert whatif["content_duplicate_rate"] == 0 < evidence["content_duplicate_rate"]
    table = pq.read_table(result.out / "per_query.parquet").to_pandas()
    ev = table[table["config"] == "evidence"]
    assert all("#chunk-" in k or k.startswith("vector:") for keys in ev["returned_keys"] for k in keys)
    for name in ("legacy-merge", "legacy-first"):
        lg = table[table["config"] == name]
        assert all("/" in k for keys in lg["returned_keys"] for k in keys)  # document_id = source path


def test_latency_figures_say_how_and_on_which_backend_they_were_measured(
    default_run: tuple[Experiment, jobs.RunResult],
) -> None:
    _, result = default_run
    latency = result.summary["latency"]
    assert latency["backend"].startswith("Milvus Lite") and latency["search"]["mode"] == "sample"
    assert latency["search"]["timed_queries"] == latency["search"]["queries"] == 264  # fewer than the sample
    assert latency["search"]["timing_seconds"] > 0 and "one query per call" in latency["search"]["method"]
    search = latency["search"]  # the timing pass's cost, and its share of the replay it is part of
    assert 0 < search["timing_seconds"] < search["replay_seconds"]
    assert search["timing_share_of_replay"] == pytest.approx(search["timing_seconds"] / search["replay_seconds"],
                                                             abs=1e-3)  # of the seconds before rounding
    # this process's CPU in the replay: some, bounded by its threads at work at once (Lite's searches among them)
    assert 0 < search["replay_cpu_seconds"] < 4 * search["replay_seconds"]
    assert search["replay_cpu_share"] == pytest.approx(search["replay_cpu_seconds"] / search["replay_seconds"],
                                                       abs=1e-3)  # fmt: skip
    evidence = result.summary["configs"]["evidence"]
    timing = evidence["search_latency"]
    assert timing["timed_search"] == "dense, no filter, retrieve-k 20"
    assert timing["shared_with"] == ["whatif-content-dedup"]
    assert timing["timed_queries"] == 264
    assert timing["p95_ci_low_us"] <= evidence["latency_us"]["search"]["p95"] <= timing["p95_ci_high_us"]
    report = (result.out / "report.md").read_text()
    assert "264 of 264 queries timed (every query) on Milvus Lite" in report
    assert "(shared with whatif-content-dedup)" in report and "search p95, 95% interval" in report


def test_second_ingest_reuses_the_collection(tmp_path: Path) -> None:
    exp = experiment(tmp_path)
    first = jobs.ingest(exp)
    second = jobs.ingest(exp)
    assert not first.reused and second.reused and second.embedded == 0
    assert second.collection == first.collection
    changed = jobs.ingest(with_overrides(exp, Overrides(profile="clean")))
    assert not changed.reused and changed.collection != first.collection


def _without_latency(path: Path) -> pd.DataFrame:
    return pq.read_table(path).to_pandas().drop(columns=list(LATENCY_COLUMNS))


def test_resume_after_a_crash_gives_the_same_rows(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    exp = experiment(tmp_path, batch_size=32, query_limit=150)
    whole = replay_only(exp, tmp_path / "whole")  # the rows a run without a crash replays

    original = Replayer.lookups
    calls = {"n": 0}

    def crashing(self: Replayer, batch: object, *timing: object) -> object:
        calls["n"] += 1
        if calls["n"] == 3:
            raise RuntimeError("simulated crash")
        return original(self, batch, *timing)  # type: ignore[arg-type]

    monkeypatch.setattr(Replayer, "lookups", crashing)
    with pytest.raises(RuntimeError, match="simulated crash"):
        jobs.run_experiment(exp, tmp_path / "resumed")
    assert not (tmp_path / "resumed" / "per_query.parquet").exists()
    assert len(list((tmp_path / "resumed" / ".parts").glob("batch-*.arrow"))) == 2
    monkeypatch.setattr(Replayer, "lookups", original)
    resumed = jobs.run_experiment(exp, tmp_path / "resumed", jobs.Execution(resume=True))
    assert resumed.resumed_batches == 2
    pd.testing.assert_frame_equal(
        whole.rows.drop(columns=list(LATENCY_COLUMNS)), _without_latency(resumed.out / "per_query.parquet")
    )


_WITH_CTRL_C = (
    "import runpy, signal, sys; signal.signal(signal.SIGINT, signal.default_int_handler); "
    "sys.argv = ['rag-eval', *sys.argv[1:]]; runpy.run_module('rag_eval.cli', run_name='__main__')"
)


def test_ctrl_c_then_resume_with_the_command(tmp_path: Path) -> None:
    out = tmp_path / "run"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    base = [
        sys.executable,
        "-m",
        "rag_eval.cli",
        "run",
        str(DEFAULT),
        "--quiet",
        "--milvus-uri",
        str(tmp_path / "milvus.db"),
        "--out",
        str(out),
    ]
    # a process started in the background of a shell without job control (a CI runner's `cmd &`) starts
    # with SIGINT ignored, its children too, and Python then leaves Ctrl-C ignored: the child here takes
    # Python's own handler first, as a process started from a terminal has it
    interruptible = [sys.executable, "-c", _WITH_CTRL_C, *base[3:]]
    proc = subprocess.Popen(interruptible, cwd=tmp_path, env=env, stderr=subprocess.PIPE, text=True)
    parts = out / ".parts"
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and len(list(parts.glob("batch-*.arrow"))) < 2:
        if proc.poll() is not None:
            break
        time.sleep(0.02)
    if proc.poll() is not None:
        pytest.skip("the run finished before it could be interrupted")
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    assert "--resume" in err
    assert not (out / "per_query.parquet").exists()
    resume = [a for a in base if a != "--quiet"] + ["--resume"]
    done = subprocess.run(resume, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert "resuming" in done.stderr
    table = pq.read_table(out / "per_query.parquet").to_pandas()
    assert not table.duplicated(["query_id", "config"]).any()
    assert table["query_id"].nunique() == 264


def test_resume_refuses_a_different_experiment(tmp_path: Path) -> None:
    from rag_eval.core.errors import ConfigError
    from rag_eval.rundir.directory import RunStore

    RunStore(tmp_path / "run").begin({"experiment": "a", "configs": {"x": "1"}}, resume=False)
    with pytest.raises(ConfigError, match=r'experiment \("a" -> "b"\); configs'):
        RunStore(tmp_path / "run").begin({"experiment": "b", "configs": {"x": "2"}}, resume=True)
