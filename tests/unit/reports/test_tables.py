"""The report's verdict lines, metric table and config diff: from summary.json alone (differences, no test),
or from compare.json (its deltas, intervals, significance and gates), in reading order, every measure shown."""

from __future__ import annotations

from typing import Any

import pytest

from rag_eval.compare.comparison import compare
from rag_eval.compare.gates import gates_from_table
from rag_eval.reports.display import GROUP_TITLES, measure
from rag_eval.reports.tables import HEADLINE_MEASURES, config_diff, metric_table, verdict
from tests.unit.runs import config, make_run, pair_rows


@pytest.fixture(scope="module")
def compared() -> tuple[dict[str, Any], dict[str, Any]]:
    """(summary, compare.json) of a run whose candidate loses a fifth of its same-document pairs."""
    rows = pair_rows(60, "base") + pair_rows(60, "cand", lose=12)
    run = make_run(rows, [config("base"), config("cand")], baseline="base")
    gates = gates_from_table(
        {"checks": ["same_doc_multi_chunk_recall drop <= 0.02", "warn duplicate_rate <= 0.5"]}, path="g", text=""
    )
    return dict(run.summary), compare(run, None, gates).document


def test_without_a_comparison_the_verdict_is_the_summary_difference() -> None:
    summary = {
        "baseline": "a",
        "configs": {
            "a": {"duplicate_rate": 0.05, "cap_compliance": 0.5, "same_doc_multi_chunk_recall": 0.4},
            "b": {"duplicate_rate": 0.0, "cap_compliance": 1.0, "same_doc_multi_chunk_recall": 0.5},
            "c": {"duplicate_rate": 0.05},
        },
    }
    lines = verdict(summary, None)
    assert [(v.candidate, v.baseline, v.baseline_source, v.gates) for v in lines] == [
        ("b", "a", "run", ()), ("c", "a", "run", ())
    ]  # fmt: skip
    items = {i.label: i for i in lines[0].items}
    assert items["same-document multi-chunk recall"].text == "+0.100"
    assert items["duplicate rate (evidence key)"].text == "−5.0 pts (0.0%)"
    assert items["cap compliance (stored doc ids)"].text == "100.0% (+50.0 pts)"
    # no test without compare.json: nothing is marked significant, nothing is toned
    assert all(i.tone == "" and i.title == "" and "*" not in i.text for i in lines[0].items)
    assert [i.label for i in lines[1].items] == ["duplicate rate (evidence key)"]  # only what c has


def test_with_a_comparison_the_verdict_carries_its_test_and_its_gates(
    compared: tuple[dict[str, Any], dict[str, Any]],
) -> None:
    summary, document = compared
    (line,) = verdict(summary, document)
    assert (line.candidate, line.baseline) == ("cand", "base")
    recall = next(i for i in line.items if i.label == "same-document multi-chunk recall")
    assert recall.text.startswith("−0.100 [") and recall.text.endswith("*") and recall.tone == "bad"
    assert recall.title.startswith("n=60, p (corrected)=")
    assert [g["outcome"] for g in line.gates] == ["fail", "pass"]  # the worst first
    assert {i.label for i in line.items} <= {measure(k).label for k in HEADLINE_MEASURES}


def test_the_metric_table_holds_every_measure_in_reading_order(
    compared: tuple[dict[str, Any], dict[str, Any]],
) -> None:
    summary, document = compared
    groups = metric_table(summary, document)
    titles = [title for title, _ in groups]
    assert titles == [t for t in GROUP_TITLES.values() if t in titles]  # the registry's group order
    rows = {r.key: r for _, group in groups for r in group}
    compared_names = {m["metric"] for m in document["comparisons"][0]["metrics"]}
    assert compared_names <= set(rows) | {n for n in compared_names if n.startswith("lost:")}
    recall = rows["same_doc_multi_chunk_recall"]
    assert recall.baseline == "1.000" and len(recall.cells) == 1
    cell = recall.cells[0]
    assert (cell.value, cell.mark, cell.gate, cell.tone) == ("0.900", "*", "fail", "bad")
    assert cell.delta == "−0.100" and cell.ci.startswith("[−") and "n = 60" in cell.mark_title
    assert rows["duplicate_rate"].cells[0].gate == "pass"


def test_the_metric_table_without_a_comparison_shows_differences_only(
    compared: tuple[dict[str, Any], dict[str, Any]],
) -> None:
    summary, _ = compared
    rows = {r.key: r for _, group in metric_table(summary, None) for r in group}
    cell = rows["same_doc_multi_chunk_recall"].cells[0]
    assert (cell.value, cell.delta, cell.ci, cell.mark, cell.gate) == ("0.900", "−0.100", "", "", "")
    assert not any(key.startswith("lost:") for key in rows)  # losses have a table of their own


def test_the_config_diff_names_what_differs_and_what_every_config_shares() -> None:
    names, differ, same = config_diff(
        [
            {"name": "legacy", "pipeline": "legacy", "mode": "dense", "rag": {"rag.pipeline": "legacy",
             "rag.top-k": 5, "rag.max-chunks-per-document": 2}},
            {"name": "evidence", "pipeline": "evidence", "mode": "dense", "rag": {"rag.pipeline": "evidence",
             "rag.max-chunks-per-document": 2, "rag.retrieve-k": 20}},
        ]
    )  # fmt: skip
    assert names == ["legacy", "evidence"]
    assert differ == [
        ("rag.pipeline", ["legacy", "evidence"]),  # the pipeline first, then the rest by name
        ("rag.max-chunks-per-document", ["2 (not applied by legacy)", "2"]),
        ("rag.retrieve-k", ["(unset)", "20"]),
        ("rag.top-k", ["5", "(unset)"]),
    ]
    assert same == {"mode": "dense"}
    assert config_diff([]) == ([], [], {})
