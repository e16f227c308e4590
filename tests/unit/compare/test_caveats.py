"""Latency gates on Milvus Lite are advisory; cap-aware recall is said not to compare across caps."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import pytest

from rag_eval.compare.caveats import ADVISORY, advisory, backends, cap_aware_note
from rag_eval.compare.checks import GateResult
from rag_eval.compare.comparison import compare
from rag_eval.compare.gates import gates_from_table, load_gates, shown_source
from rag_eval.compare.runs import ComparedRun
from tests.unit.runs import config, make_run, pair_rows

LATENCY = gates_from_table(
    {"checks": ["fail latency:e2e:p50 growth <= 20%", "fail latency:postsearch_cpu:p95 <= 1ms",
                "fail same_doc_multi_chunk_recall drop <= 0.02"]},
    path="g.toml", text="",
)  # fmt: skip


def slower_run(backend: str, *, cap: int = 2, **extra: Any) -> ComparedRun:
    """60 queries, the candidate as good as the base but twice as slow end to end, over the budget."""
    base, cand = pair_rows(60, "base"), pair_rows(60, "cand", postsearch_cpu_us=1500.0, **extra)
    for i, (b, c) in enumerate(zip(base, cand, strict=True)):  # queries differ in time; the candidate doubles it
        b["e2e_us"] = 1000.0 + 37.0 * (i % 13)
        c["e2e_us"] = 2.0 * b["e2e_us"] + (i % 5)
    rows = base + cand
    run = make_run(rows, [config("base"), config("cand", cap=cap)], baseline="base")
    manifest = {**run.manifest, "milvus": {**run.manifest["milvus"], "backend": backend}}
    return dataclasses.replace(run, manifest=manifest)


def outcomes(run: ComparedRun) -> tuple[int, dict[str, tuple[str, str, str]]]:
    result = compare(run, None, LATENCY)
    (comparison,) = result.document["comparisons"]
    return result.exit_code, {g["id"]: (g["severity"], g["outcome"], g["message"]) for g in comparison["gates"]}


def test_a_slower_candidate_fails_on_a_server() -> None:
    code, gates = outcomes(slower_run("server"))
    assert code == 1
    assert gates["latency:e2e:p50 growth <= 20%"][:2] == ("fail", "fail")
    assert gates["latency:postsearch_cpu:p95 <= 1ms"][:2] == ("fail", "fail")
    assert not any(m.startswith("advisory") for _, _, m in gates.values())


def test_the_same_on_milvus_lite_warns_and_says_why() -> None:
    code, gates = outcomes(slower_run("lite"))
    assert code == 0  # a night on Lite never fails on latency
    for gid in ("latency:e2e:p50 growth <= 20%", "latency:postsearch_cpu:p95 <= 1ms"):
        severity, outcome, message = gates[gid]
        assert (severity, outcome) == ("warn", "warn") and message.startswith(ADVISORY)
    severity, outcome, message = gates["same_doc_multi_chunk_recall drop <= 0.02"]  # quality: as written
    assert severity == "fail" and not message.startswith("advisory")


def test_quality_still_fails_on_milvus_lite() -> None:
    rows = pair_rows(60, "base") + pair_rows(60, "cand", lose=20)
    code, gates = outcomes(make_run(rows, [config("base"), config("cand")], baseline="base"))
    assert code == 1 and gates["same_doc_multi_chunk_recall drop <= 0.02"][1] == "fail"


@pytest.mark.parametrize("outcome", ["pass", "underpowered", "error", "warn", "fail"])
def test_advisory_only_softens(outcome: str) -> None:
    r = GateResult(id="x", spec="x", metric="latency:e2e:p95", severity="fail", outcome=outcome, message="m")  # type: ignore[arg-type]
    soft = advisory(r, backends=("server", "lite"))
    assert soft.severity == "warn" and soft.outcome == ("warn" if outcome == "fail" else outcome)
    assert soft.message == f"{ADVISORY}: m"
    assert advisory(r, backends=("server", "")) is r
    quality = dataclasses.replace(r, metric="chunk:nDCG@5")
    assert advisory(quality, backends=("lite",)) is quality


def test_backends_reads_manifests_and_tolerates_missing_parts() -> None:
    assert backends({"milvus": {"backend": "server"}}, {"milvus": None}, {"milvus": "odd"}) == ("server", "", "")


def test_a_comparison_across_caps_says_cap_aware_recall_does_not_compare() -> None:
    across = compare(slower_run("server", cap=3), None, LATENCY).document["notes"]
    (note,) = [n for n in across if "cap-aware" in n]
    assert "cand (cap 3) against base (cap 2)" in note and "not comparable across caps" in note
    same = compare(slower_run("server"), None, LATENCY).document["notes"]
    assert not any("cap-aware" in n for n in same)


def test_cap_aware_note_groups_by_baseline_and_names_no_cap() -> None:
    note = cap_aware_note([(("legacy", None), ("evidence", 2)), (("legacy", None), ("cap3", 3))])
    assert note is not None and "cap3 (cap 3) and evidence (cap 2) against legacy (no cap)" in note
    assert cap_aware_note([]) is None


def test_compare_json_names_the_gates_file_without_the_machines_path(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    run = slower_run("server")
    assert compare(run, None, load_gates("nightly")).document["gates_file"] == "rag_eval/compare/shipped/nightly.toml"
    (tmp_path / "ci").mkdir()
    (tmp_path / "ci" / "mine.toml").write_text('[gates]\nchecks = ["fail chunk:nDCG@5 drop <= 0.02"]\n')
    monkeypatch.chdir(tmp_path)
    mine = load_gates(tmp_path / "ci" / "mine.toml")
    assert compare(run, None, mine).document["gates_file"] == "ci/mine.toml"
    monkeypatch.chdir(tmp_path / "ci")
    elsewhere = load_gates(tmp_path / "ci" / "mine.toml")
    assert shown_source(elsewhere.source, cwd=tmp_path / "nowhere") == str(tmp_path / "ci" / "mine.toml")
