"""Comparing run directories: pairing, the compare.json shape, JUnit, summary.md, exit codes, history."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from junitparser import Error, Failure, JUnitXml, Skipped

from rag_eval import jobs
from rag_eval.cli import main
from rag_eval.compare.comparison import SCHEMA_KEYS, compare
from rag_eval.compare.gates import gates_from_table, load_gates
from rag_eval.compare.history import accept, accepted_dir, append_history, read_history, trend
from rag_eval.compare.runs import ComparedRun
from rag_eval.core.errors import RunDirectoryError
from rag_eval.files import json_safe
from rag_eval.reports.artifacts import comparison_files
from rag_eval.rundir.publish import write_set
from tests.conftest import ROOT
from tests.unit.runs import config, make_run, pair_rows, row

GATES = load_gates("nightly")
METRIC_KEYS = {
    "metric", "label", "group", "higher_is_better", "n", "baseline", "candidate", "delta", "ratio", "ci_low",
    "ci_high", "p_value", "p_holm", "significant", "improved", "degraded", "unchanged",
}  # fmt: skip
GATE_KEYS = {"id", "spec", "metric", "severity", "outcome", "message", "value", "threshold", "mde"}


def two_configs(tmp_path: Path | None = None, *, lose: int = 12, n: int = 60, **kw: Any) -> ComparedRun:
    rows = pair_rows(n, "base") + pair_rows(n, "cand", lose=lose)
    return make_run(rows, [config("base"), config("cand")], baseline="base", directory=tmp_path, **kw)


def test_compare_json_shape_and_values() -> None:
    run = two_configs()
    result = compare(run, None, GATES)
    doc = json.loads(json.dumps(json_safe(result.document), allow_nan=False))  # as compare.json is written
    assert set(SCHEMA_KEYS) <= set(doc)
    assert doc["schema_version"] == 1 and doc["alpha"] == 0.05 and doc["against"] is None
    # the run compared, by its start (a report reads the comparison only beside that run)
    assert doc["run"] == {"dir": "(this run)", "experiment": "synthetic", "started": "2026-01-01T00:00:00+00:00",
                          "fingerprint": None}  # fmt: skip
    assert doc["queries_compared"] == 60 and doc["left_out"] == {"only_in_run": [], "only_in_against": []}
    (comparison,) = doc["comparisons"]
    assert (comparison["baseline"], comparison["candidate"], comparison["baseline_source"]) == ("base", "cand", "run")
    metrics = {m["metric"]: m for m in comparison["metrics"]}
    assert all(set(m) >= METRIC_KEYS for m in metrics.values())
    assert {m["group"] for m in metrics.values()} == {"mission", "chunk", "doc", "payload", "latency"}
    recall = metrics["same_doc_multi_chunk_recall"]
    assert recall["n"] == 60 and recall["baseline"] == 1.0 and recall["candidate"] == pytest.approx(1 - 12 / 120)
    assert recall["delta"] == pytest.approx(-0.1) and recall["ci_low"] <= -0.1 <= recall["ci_high"]
    assert recall["degraded"] == [f"q{i}" for i in range(12)] and recall["improved"] == []
    assert recall["unchanged"] == 48 and recall["significant"] and recall["p_holm"] >= recall["p_value"]
    assert metrics["latency:postprocess:p95"]["ratio"] == 1.0  # every synthetic latency is the same
    assert all(set(g) >= GATE_KEYS for g in comparison["gates"])
    gates = {g["id"]: g for g in comparison["gates"]}
    assert gates["same_doc_multi_chunk_recall drop <= 0.02"]["outcome"] == "fail"
    assert gates["same_doc_multi_chunk_recall drop <= 0.02"]["value"] == pytest.approx(0.1)
    assert doc["exit_code"] == result.exit_code == 1


def test_summary_values_are_reproduced_from_per_query_rows() -> None:
    run = two_configs(lose=7)
    doc = compare(run, None, GATES).document
    summary = run.summary["configs"]
    frame = pd.DataFrame(summary).T
    for m in doc["comparisons"][0]["metrics"]:
        name = m["metric"]
        if name in frame.columns or name.split(":")[0] in ("chunk", "doc"):
            level, _, measure = name.partition(":")
            expected = summary["cand"][level][measure] if level in ("chunk", "doc") else summary["cand"][name]
            assert m["candidate"] == pytest.approx(expected), name


def test_self_compare_passes_every_gate_with_p_one() -> None:
    run = two_configs()
    result = compare(run, run, GATES)
    assert result.exit_code == 0
    for comparison in result.document["comparisons"]:
        assert comparison["baseline"] == comparison["candidate"]
        assert all(m["p_value"] in (1.0, None) and m["delta"] == 0 for m in comparison["metrics"])
        assert {g["outcome"] for g in comparison["gates"]} == {"pass"}


def test_runs_over_other_data_or_queries_need_intersection(tmp_path: Path) -> None:
    run = two_configs(tmp_path / "a")
    other = make_run(
        pair_rows(50, "base", offset=10) + pair_rows(50, "cand", offset=10),
        [config("base"), config("cand")], baseline="base", directory=tmp_path / "b", checksum="beef",
        index={"index_type": "HNSW"},
    )  # fmt: skip
    with pytest.raises(RunDirectoryError) as err:
        compare(run, other, GATES)
    assert "data set checksum: c0ffee vs beef" in str(err.value) and "query sets: 10 only in" in str(err.value)
    assert "--intersection" in str(err.value)
    doc = compare(run, other, GATES, intersection=True).document
    assert doc["queries_compared"] == 50
    assert doc["left_out"] == {"only_in_run": [f"q{i}" for i in range(10)], "only_in_against": []}
    assert any("index" in n for n in doc["notes"]) and any("intersection" in n for n in doc["notes"])
    assert {c["baseline_source"] for c in doc["comparisons"]} == {"against"}


def test_against_pairs_same_names_else_the_baseline() -> None:
    run = make_run(
        pair_rows(20, "base") + pair_rows(20, "new"), [config("base"), config("new")], baseline="base"
    )
    other = make_run(pair_rows(20, "old"), [config("old")], baseline="old")
    pairs = [(c["baseline"], c["candidate"]) for c in compare(run, other, GATES).document["comparisons"]]
    assert pairs == [("old", "base"), ("old", "new")]


def test_absolute_gates_apply_to_selected_configs_on_all_their_queries() -> None:
    rows = pair_rows(30, "legacy") + [
        row(f"q{i}", "cap5", delivered=[f"d{i}#chunk-0", f"d{i}#chunk-1", f"d{i}#chunk-2"],
            relevant=[f"d{i}#chunk-0", f"d{i}#chunk-1"])
        for i in range(30)
    ]  # fmt: skip
    run = make_run(rows, [config("legacy", pipeline="legacy"), config("cap5", cap=5)], baseline="legacy")
    result = compare(run, None, GATES)
    gates = {g["id"]: g for _, g in result.gates}
    assert gates["max_chunks_per_document <= 2 for pipeline=evidence"]["outcome"] == "fail"
    assert gates["max_chunks_per_document <= 2 for pipeline=evidence"]["value"] == 3
    assert gates["cap_compliance == 1 for pipeline=evidence"]["outcome"] == "pass"  # 3 <= its own cap of 5
    assert result.exit_code == 1
    both_legacy = [config("legacy", pipeline="legacy"), config("cap5", pipeline="legacy", cap=5)]
    legacy_only = compare(make_run(rows, both_legacy, baseline="legacy"), None, GATES)
    assert legacy_only.gates and all("pipeline=evidence" not in g["id"] for _, g in legacy_only.gates)


def test_undefined_metric_on_a_fail_gate_is_an_error_not_a_pass() -> None:
    rows = [row(f"q{i}", c, delivered=[]) for c in ("base", "cand") for i in range(5)]
    run = make_run(rows, [config("base"), config("cand")], baseline="base")
    gates = gates_from_table({"checks": ["evidence_guard_1to1 == 1"]}, path="g.toml", text="")
    result = compare(run, None, gates)
    assert [g["outcome"] for _, g in result.gates] == ["error"] and result.exit_code == 2


def test_junit_loads_in_a_standard_parser(tmp_path: Path) -> None:
    rows = pair_rows(60, "base") + pair_rows(60, "cand", lose=12) + pair_rows(60, "same")
    run = make_run(rows, [config("base"), config("cand"), config("same")], baseline="base", directory=tmp_path)
    gates = gates_from_table(
        {"checks": ["same_doc_multi_chunk_recall drop <= 0.02", "warn chunk:nDCG@5 drop <= 0.001",
                    "evidence_guard_1to1 == 1"]}, path="g.toml", text="",
    )  # fmt: skip
    write_set(tmp_path, comparison_files(compare(run, None, gates).document), what="the comparison")
    xml = JUnitXml.fromfile(str(tmp_path / "junit.xml"))
    suites = {s.name: s for s in xml}
    assert set(suites) == {"cand", "same"}
    cases = {c.name: c for c in suites["cand"]}
    assert set(cases) == {"same_doc_multi_chunk_recall drop <= 0.02", "chunk:nDCG@5 drop <= 0.001",
                          "evidence_guard_1to1 == 1"}  # fmt: skip
    failure = cases["same_doc_multi_chunk_recall drop <= 0.02"].result
    assert len(failure) == 1 and isinstance(failure[0], Failure)
    assert "same_doc_multi_chunk_recall drop 0.1" in failure[0].message
    assert isinstance(cases["chunk:nDCG@5 drop <= 0.001"].result[0], Skipped)
    assert cases["evidence_guard_1to1 == 1"].result == []
    assert suites["cand"].failures == 1 and suites["same"].failures == 0
    props = {p.name: p.value for p in suites["cand"].properties()}
    assert props["baseline"] == "base" and props["same_doc_multi_chunk_recall"].startswith("0.9 (baseline 1")
    assert not any(isinstance(r, Error) for s in xml for c in s for r in c.result)
    summary = (tmp_path / "summary.md").read_text()
    assert summary.startswith("## rag-eval gates: synthetic: FAIL")
    # the value with the precision of its measure
    assert "| cand (vs base) | `same_doc_multi_chunk_recall drop <= 0.02` (fail) | 0.900 | -0.1 |" in summary
    doc = json.loads((tmp_path / "compare.json").read_text())
    assert doc["exit_code"] == 1 and "NaN" not in (tmp_path / "compare.json").read_text()


def test_cli_compare_exit_codes(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    two_configs(tmp_path / "bad", lose=20)
    two_configs(tmp_path / "good", lose=0)
    out = tmp_path / "out"
    assert main(["compare", str(tmp_path / "bad"), "--gates", "nightly", "--out", str(out)]) == 1
    # and the lock it held while writing them (left in place, as in a run directory)
    assert {p.name for p in out.iterdir()} == {"compare.json", "junit.xml", "summary.md", ".lock"}
    assert main(["compare", str(tmp_path / "good"), "--gates", "nightly"]) == 0
    assert (tmp_path / "good" / "junit.xml").is_file()
    assert main(["compare", str(tmp_path / "bad"), "--against", str(tmp_path / "good"), "--gates", "nightly"]) == 1
    assert main(["compare", str(tmp_path / "good"), "--against", str(tmp_path / "bad"), "--gates", "nightly"]) == 0
    capsys.readouterr()
    assert main(["compare", str(tmp_path / "missing")]) == 2
    assert "not a run directory" in capsys.readouterr().err
    make_run(pair_rows(30, "base") + pair_rows(30, "cand"), [config("base"), config("cand")], baseline="base",
             directory=tmp_path / "fewer")  # fmt: skip
    assert main(["compare", str(tmp_path / "good"), "--against", str(tmp_path / "fewer"), "--gates", "nightly"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "query sets: 30 only in" in err
    assert main(["compare", str(tmp_path / "good"), "--against", str(tmp_path / "fewer"), "--gates", "nightly",
                 "--intersection", "--out", str(tmp_path / "x")]) == 0  # fmt: skip
    assert json.loads((tmp_path / "x" / "compare.json").read_text())["queries_compared"] == 30


def test_a_crash_never_exits_1(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    two_configs(tmp_path / "run")

    def broken(*args: object, **kwargs: object) -> None:
        raise ZeroDivisionError("a bug")

    monkeypatch.setattr(jobs, "compare_runs", broken)
    assert main(["compare", str(tmp_path / "run")]) == 70
    err = capsys.readouterr().err
    assert "Traceback" in err and "ZeroDivisionError" in err and "internal error" in err


def test_a_gates_file_whose_alpha_needs_too_many_resamples_is_bad_input_and_writes_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    two_configs(tmp_path / "run")
    gates = tmp_path / "tiny-alpha.toml"
    gates.write_text('[gates]\nalpha = 1e-9\nchecks = ["warn chunk:nDCG@5 drop <= 0.02"]\n', encoding="utf-8")
    out = tmp_path / "cmp"
    assert main(["compare", str(tmp_path / "run"), "--gates", str(gates), "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert "more than the 1,000,000 a comparison draws: raise alpha" in err and str(gates) in err
    assert not out.exists()


def test_gates_of_the_run_are_used_when_none_is_given(tmp_path: Path) -> None:
    two_configs(tmp_path / "run", gates={"checks": ["warn same_doc_multi_chunk_recall drop <= 0.02"]})
    comparison = jobs.compare_runs(tmp_path / "run")
    assert [(g["severity"], g["outcome"]) for _, g in comparison.gates] == [("warn", "warn")]
    assert comparison.exit_code == 0 and comparison.document["gates_file"] == "(experiment)"


def test_history_appends_and_reads_a_trend(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "history.parquet"
    first = two_configs(tmp_path / "n1", lose=0)
    second = two_configs(tmp_path / "n2", lose=6)
    append_history(first, exit_code=0, path=path)
    append_history(second, exit_code=1, path=path)
    history = read_history(path)
    assert len(history) == 4 and set(history["config"]) == {"base", "cand"}
    assert {"git_commit", "dataset_checksum", "config_hash", "milvus_backend", "index", "date"} <= set(history)
    assert "chunk:nDCG@5" in history and "latency:postprocess:p95" in history
    t = trend(history, config="cand", metrics=["same_doc_multi_chunk_recall"])
    assert list(t["same_doc_multi_chunk_recall"]) == [1.0, pytest.approx(0.95)] and list(t["exit_code"]) == [0, 1]
    assert len(trend(history, last=1)) == 2
    assert main(["history", "--history", str(path), "--metric", "same_doc_multi_chunk_recall", "--last", "2"]) == 0
    out = capsys.readouterr().out
    assert "same_doc_multi_chunk_recall" in out and "0.95" in out
    assert main(["history", "--history", str(tmp_path / "none.parquet")]) == 0
    assert "no history" in capsys.readouterr().out
    (tmp_path / "bad.parquet").write_text("not parquet")
    assert main(["history", "--history", str(tmp_path / "bad.parquet")]) == 2


def test_accept_keeps_a_copy_and_replaces_the_previous_one(tmp_path: Path) -> None:
    first = two_configs(tmp_path / "n1", lose=0)
    assert main(["accept", str(tmp_path / "n1"), "--accepted-dir", str(tmp_path / "acc")]) == 0
    target = accepted_dir(tmp_path / "acc", first.experiment)
    assert ComparedRun.from_dir(target).query_ids == first.query_ids
    info = json.loads((target / "accepted.json").read_text())
    assert info["source"] == str((tmp_path / "n1").resolve()) and info["dataset_checksum"] == "c0ffee"
    two_configs(tmp_path / "n2", lose=3)
    accept(tmp_path / "n2", root=tmp_path / "acc")
    assert json.loads((target / "accepted.json").read_text())["source"].endswith("n2")
    assert not list((tmp_path / "acc").glob(".*"))  # no staging or old copy left behind
    for name in ("per_query.parquet", "summary.json", "manifest.json"):
        (tmp_path / "n2" / name).unlink()
    assert math.isclose(ComparedRun.from_dir(target).summary["configs"]["cand"]["same_doc_multi_chunk_recall"], 0.975)


def test_no_gates_named_is_strict_and_a_rollout_says_why_it_only_warns(tmp_path: Path) -> None:
    """A significant drop beyond the threshold fails the run when no gates are named (the shipped
    default); the rollout gates warn on it, exit 0, and the summary says why."""
    strict = jobs.compare_runs(two_configs(tmp_path / "strict").dir or "")
    recall = {g["id"]: g for _, g in strict.gates}["same_doc_multi_chunk_recall drop <= 0.02"]
    assert strict.document["gates_file"].endswith("default.toml")
    assert (recall["severity"], recall["outcome"], strict.exit_code) == ("fail", "fail", 1)
    assert main(["compare", str(tmp_path / "strict")]) == 1
    rollout = jobs.compare_runs(two_configs(tmp_path / "rollout", gates={"file": "rollout"}).dir or "")
    recall = {g["id"]: g for _, g in rollout.gates}["same_doc_multi_chunk_recall drop <= 0.02"]
    assert (recall["outcome"], rollout.exit_code) == ("warn", 0)
    summary = (tmp_path / "rollout" / "summary.md").read_text()
    assert "These gates: a rollout comparison" in summary and "known finding" in summary


def test_the_default_holds_each_configs_own_cap_and_a_budget_is_opted_into() -> None:
    """A cap-3 config delivering three chunks of a document keeps D3 (its own cap): the default gates
    pass it; a product-wide ``max_chunks_per_document <= 2`` budget fails it only where an experiment names it."""
    three = [f"d{{}}#chunk-{k}" for k in range(3)]
    rows = pair_rows(30, "cap2") + [
        row(f"q{i}", "cap3", delivered=[c.format(i) for c in three], relevant=[f"d{i}#chunk-0", f"d{i}#chunk-1"])
        for i in range(30)
    ]  # fmt: skip
    run = make_run(rows, [config("cap2"), config("cap3", cap=3)], baseline="cap2")
    default = compare(run, None, load_gates("default"))
    gates = {g["id"]: g for _, g in default.gates}
    assert gates["cap_compliance == 1 for pipeline=evidence"]["outcome"] == "pass"
    assert not any(g.startswith("max_chunks_per_document") for g in gates) and default.exit_code == 0
    budget = "fail max_chunks_per_document <= 2 for pipeline=evidence"
    opted = compare(run, None, gates_from_table({"checks": [budget]}, path="-", text=""))
    assert [(c, g["outcome"]) for c, g in opted.gates] == [("cap3", "fail")] and opted.exit_code == 1


def test_a_comparison_against_another_run_says_what_it_paired_and_keeps_the_runs_own_verdict(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = two_configs(tmp_path / "latest")
    make_run(pair_rows(60, "base") + pair_rows(60, "old"), [config("base"), config("old")], baseline="old",
             directory=tmp_path / "accepted night")  # fmt: skip
    jobs.compare_runs(tmp_path / "latest")  # the run's own verdict
    own = {name: (tmp_path / "latest" / name).read_bytes() for name in ("compare.json", "junit.xml", "summary.md")}
    main(["compare", str(tmp_path / "latest"), "--against", str(tmp_path / "accepted night")])
    assert {name: (tmp_path / "latest" / name).read_bytes() for name in own} == own  # never overwritten
    doc = json.loads((tmp_path / "latest" / "compare-vs-accepted_night.json").read_text())
    assert (tmp_path / "latest" / "junit-vs-accepted_night.xml").is_file()
    summary = (tmp_path / "latest" / "summary-vs-accepted_night.md").read_text()
    other = str(tmp_path / "accepted night")
    expected = [f"paired base with {other}'s base (the same name)",
                f"paired cand with {other}'s old (no cand there: its baseline)"]  # fmt: skip
    assert [n for n in doc["notes"] if n.startswith("paired ")] == expected
    assert all(n in summary for n in expected)
    assert "compare-vs-accepted_night.json" in capsys.readouterr().out
    assert run.dir is not None


def test_each_configs_verdict_in_words_comes_first(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """summary.md and the console open each comparison with one line a reviewer decides from (its gates
    counted by what they found, the regressions named), then the detail: one clause per gated measure, worded
    from the registry's labels and units and the numbers' one verdict; the console's tables fit 100 columns."""
    two_configs(tmp_path / "run")
    main(["compare", str(tmp_path / "run")])
    printed = capsys.readouterr().out
    doc = json.loads((tmp_path / "run" / "compare.json").read_text())
    recall = next(m for m in doc["comparisons"][0]["metrics"] if m["metric"] == "same_doc_multi_chunk_recall")
    low, high = sorted((abs(recall["ci_low"]), abs(recall["ci_high"])))
    clause = f"same-document multi-chunk recall worse by 0.100 [{low:.3f}, {high:.3f}], significant"
    lines = printed.splitlines()
    headline = next(line for line in lines if line.startswith("cand vs base: "))
    assert headline.startswith("cand vs base: 2 regressions (same-document multi-chunk recall -0.100, ")
    assert "5 checks hold" in headline  # the default gates: four of D1-D5 and the post-search CPU budget
    detail = lines[lines.index(headline) + 1]
    assert clause in detail and "cap compliance (stored doc ids) 100.0% (holds)" in detail
    assert printed.index(headline) < printed.index("gates (")  # before the gate table
    assert "Relative gates decide by the threshold rule: fail means the change is shown to be beyond" in printed
    tables = [line for line in lines if line.lstrip().startswith(("─", "━")) or "│" in line]
    assert tables and max(len(line) for line in tables) <= 100
    summary = (tmp_path / "run" / "summary.md").read_text().splitlines()
    first = next(line for line in summary[1:] if line.strip())
    assert first.startswith("- **cand vs base: 2 regressions") and clause in first


def test_runs_that_share_no_query_are_bad_input_not_a_new_baseline(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from rag_eval import cli
    from tests.unit.runs import config, make_run, pair_rows

    configs = [config("base"), config("cand")]
    make_run(pair_rows(10, "base") + pair_rows(10, "cand"), configs, baseline="base", directory=tmp_path / "a")
    make_run(pair_rows(10, "base", offset=100) + pair_rows(10, "cand", offset=100), configs, baseline="base",
             directory=tmp_path / "b")  # fmt: skip
    for extra in (["--intersection"], []):
        code = cli.main(["compare", str(tmp_path / "a"), "--against", str(tmp_path / "b"), "-q", *extra])
        err = capsys.readouterr().err.strip().splitlines()
        assert code == 2 and len(err) == 1 and "no shared queries" in err[0], (extra, err)
    assert not (tmp_path / "a" / "compare-vs-b.json").exists()


def test_an_out_that_is_a_link_to_nothing_is_bad_input(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from rag_eval import cli
    from tests.unit.runs import config, make_run, pair_rows

    make_run(pair_rows(10, "base") + pair_rows(10, "cand"), [config("base"), config("cand")], baseline="base",
             directory=tmp_path / "run")  # fmt: skip
    link = tmp_path / "out"
    link.symlink_to(tmp_path / "gone")
    assert cli.main(["compare", str(tmp_path / "run"), "--out", str(link), "-q"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "symbolic link" in err[0] and "--out" in err[0]
    assert link.is_symlink() and not (tmp_path / "gone").exists()


def test_a_run_that_failed_its_gates_is_accepted_only_with_force(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = two_configs(tmp_path / "failed")
    failed = jobs.compare_runs(run.dir or "")  # the strict default gates: the recall drop fails
    assert failed.exit_code == 1
    accepted = tmp_path / "acc"
    assert main(["accept", str(run.dir), "--accepted-dir", str(accepted)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "failed its gates (cand: fail same_doc_multi_chunk_recall drop <= 0.02" in err[0], err
    assert "--force" in err[0] and not accepted.exists()
    assert main(["accept", str(run.dir), "--accepted-dir", str(accepted), "--force"]) == 0
    assert ComparedRun.from_dir(accepted_dir(accepted, run.experiment)).query_ids == run.query_ids


@pytest.mark.parametrize("kind", ["not parquet", "a directory", "another table"])
def test_a_nightly_with_a_history_it_cannot_append_to_runs_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], kind: str
) -> None:
    history = tmp_path / "history.parquet"
    if kind == "not parquet":
        history.write_bytes(b"PAR1 not really")
    elif kind == "a directory":
        history.mkdir()
    else:
        import pyarrow as pa
        import pyarrow.parquet as pq

        pq.write_table(pa.table({"night": ["2026-12-01"]}), history)
    before = history.read_bytes() if history.is_file() else None
    experiment = ROOT / "datasets" / "incident-kb" / "experiments" / "nightly.toml"
    code = main(["nightly", str(experiment), "--root", str(tmp_path / "nights"), "--history", str(history),
                 "--accepted-dir", str(tmp_path / "acc"), "--milvus-uri", str(tmp_path / "kb.db"), "-q"])  # fmt: skip
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1 and str(history) in err[0], err
    assert not (tmp_path / "nights").exists() and not (tmp_path / "acc").exists() and not (tmp_path / "kb.db").exists()
    assert (history.read_bytes() if history.is_file() else None) == before
