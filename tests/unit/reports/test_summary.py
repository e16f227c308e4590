"""summary.md, the gate table a CI job shows: a row per gate of a real comparison, the headline of its exit
code, what was paired with what, and the gates that did not pass spelled out."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from rag_eval.compare.comparison import compare
from rag_eval.compare.gates import gates_from_table
from rag_eval.reports.summary import EXIT_HEADLINE, VERDICT, gate_rows, render_summary
from tests.unit.runs import config, make_run, pair_rows

CHECKS = [
    "same_doc_multi_chunk_recall drop <= 0.02",  # the candidate loses a tenth of its pairs: fails
    "warn chunk:nDCG@5 drop <= 0.5",  # passes
    "warn latency:postprocess:p95 growth <= 20%",  # equal latencies: underpowered or passes, a ratio
]
IDS = [check.removeprefix("warn ") for check in CHECKS]  # a gate is named by its check, its severity apart


@pytest.fixture(scope="module")
def document() -> dict[str, Any]:
    rows = pair_rows(60, "base") + pair_rows(60, "cand", lose=12)
    run = make_run(rows, [config("base"), config("cand")], baseline="base")
    gates = gates_from_table({"checks": CHECKS}, path="g.toml", text="")
    return compare(run, None, gates, notes=["a note for the reader"]).document


def test_a_row_per_gate_with_its_verdict_and_what_it_compared(document: dict[str, Any]) -> None:
    rows = gate_rows(document)
    assert [r["gate"] for r in rows] == IDS
    assert {(r["config"], r["baseline"]) for r in rows} == {("cand", "base")}
    by_gate = {r["gate"]: r for r in rows}
    recall = by_gate[IDS[0]]
    assert (recall["severity"], recall["outcome"], recall["verdict"]) == ("fail", "fail", "FAIL")
    assert recall["delta"] == "-0.1" and recall["interval"].startswith("[") and "drop 0.1" in recall["message"]
    assert (by_gate[IDS[1]]["severity"], by_gate[IDS[1]]["verdict"]) == ("warn", "pass")
    assert all(r["verdict"] == VERDICT[r["outcome"]] for r in rows)
    # a relative gate reads as a percentage change of the ratio, its interval too
    latency = by_gate[IDS[2]]
    assert latency["delta"] == "+0.0%" and latency["interval"].count("%") == 2


def test_the_headline_and_the_table(document: dict[str, Any]) -> None:
    text = render_summary(document)
    lines = text.splitlines()
    assert lines[0] == f"## rag-eval gates: {document['run']['experiment']}: {EXIT_HEADLINE[1]}"
    assert "Every config of `" in text and "against the run's baseline, paired by query id" in text
    assert f"on {document['queries_compared']} queries." in text
    assert "Exit code 1." in text and "- a note for the reader" in text
    table = [line for line in lines if line.startswith("| cand (vs base)")]
    assert len(table) == len(CHECKS)
    assert table[0].startswith(f"| cand (vs base) | `{IDS[0]}` (fail) |") and table[0].endswith("| FAIL |")
    assert table[1].startswith(f"| cand (vs base) | `{IDS[1]}` (warn) |") and table[1].endswith("| pass |")
    # the gates that did not pass are spelled out under the table, the ones that passed are not
    assert f"- **FAIL** cand, `{IDS[0]}`: " in text
    assert f"`{IDS[1]}`: " not in text


@pytest.mark.parametrize("code", [0, 1, 2])
def test_every_exit_code_has_its_headline(document: dict[str, Any], code: int) -> None:
    doc = {**document, "exit_code": code}
    assert render_summary(doc).splitlines()[0].endswith(f": {EXIT_HEADLINE[code]}")
    assert render_summary({**document, "exit_code": 5}).splitlines()[0].endswith(": exit 5")


def test_against_another_run_names_it_and_what_was_left_out(document: dict[str, Any]) -> None:
    doc = copy.deepcopy(document)
    doc["against"] = {"dir": "/runs/accepted", "experiment": "nightly"}
    doc["left_out"] = {"only_in_run": ["q1", "q2"], "only_in_against": ["q9"]}
    text = render_summary(doc)
    assert "against `/runs/accepted` (nightly), paired by query id" in text
    assert "(left out: 2 only in the run, 1 only in the baseline run)." in text


def test_a_comparison_without_gates_says_so() -> None:
    run = make_run(pair_rows(10, "base") + pair_rows(10, "cand"), [config("base"), config("cand")], baseline="base")
    doc = compare(run, None, gates_from_table({"checks": []}, path="none.toml", text="")).document
    assert gate_rows(doc) == []
    assert "| – | no gate applies | | | | |" in render_summary(doc)


def test_a_pipe_or_a_line_break_in_a_name_stays_in_its_cell(document: dict[str, Any]) -> None:
    doc = copy.deepcopy(document)
    for comparison in doc["comparisons"]:
        comparison["candidate"] = "a|b\nc"
    row = next(line for line in render_summary(doc).splitlines() if line.startswith("| a"))
    assert row.startswith("| a\\|b c (vs base) |") and row.count(" | ") == 5
