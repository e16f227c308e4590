"""The console table of a run (``rag-eval run`` prints it): its rows, their labels and how values read."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest

from rag_eval.metrics.registry import find
from rag_eval.reports.console import MEASURES, console_measures, summary_table
from rag_eval.reports.display import fmt, measure

BASE: dict[str, Any] = {
    "same_doc_multi_chunk_recall": 0.4444,
    "same_doc_multi_chunk_recall_cap_aware": 0.5,
    "same_doc_pairs": 80,
    "duplicate_rate": 0.0575,
    "content_duplicate_rate": 0.0625,
    "content_duplicate_rate_copies": 0.01,
    "content_duplicate_rate_same_text": 0.0525,
    "raw_duplicate_rate": 0.058,
    "raw_content_duplicate_rate": None,
    "evidence_guard_1to1": 1.0,
    "cap_checked": 2,
    "cap_checked_source": "config",
    "cap_compliance": 0.3875,
    "cap_violations": [{"query_id": "q1", "doc_id": "d", "chunks": 3, "cap": 2}],
    "cap_compliance_true": 0.375,
    "return_n_compliance": 1.0,
    "chunk": {"nDCG@5": 0.488, "R@5": 0.531, "P@5": 0.225, "RR": 0.614, "Success@5": 0.775, "nDCG@10": 0.5},
    "doc": {"nDCG@5": 0.865},
    "payload": {"chars_p50": 1574.4, "chars_p95": 1791.0, "chunks_delivered_mean": 4.85},
    "latency_us": {"search": {"p50": 1920.0, "p95": 640.2}, "postprocess": {"p50": 23.4}},
    "stage_losses": {"not_retrieved": 100, "cap": 3},
}


def _summary(**configs: dict[str, Any]) -> dict[str, Any]:
    return {"cutoffs": [1, 3, 5, 10], "configs": configs}


def test_one_row_per_measure_in_order_with_the_registry_label() -> None:
    other = copy.deepcopy(BASE)
    other["stage_losses"] = {"return_n": 7}
    rows = summary_table(_summary(legacy=BASE, evidence=other))
    names = [*console_measures(5), "lost:cap", "lost:not_retrieved", "lost:return_n"]  # losses by stage name
    assert [label for label, _ in rows] == [find(n).label for n in names]  # type: ignore[union-attr]
    assert all(len(values) == 2 for _, values in rows)
    assert console_measures(5)[: len(MEASURES)] == list(MEASURES)


def test_values_read_as_before_with_the_unit_of_a_timing_beside_it() -> None:
    rows = dict(summary_table(_summary(legacy=BASE)))
    expected = {
        "same-document multi-chunk recall": "0.444",  # a score: three decimals
        "(query, document) pairs with >= 2 relevant chunks": "80",  # a count
        "duplicate rate (evidence key)": "5.8%",  # a share: a percentage with one decimal
        "raw Milvus hits: duplicate rate (content)": "-",  # not measured
        "chunk references 1:1 with an excerpt (EvidenceGuard)": "100.0%",
        "cap checked against": "2",
        "chunk nDCG@5": "0.488",
        "chunk RR": "0.614",
        "document nDCG@5": "0.865",
        "payload characters p50": "1574",  # characters: no decimals, no thousands separator
        "search latency p50": "1.92 ms",  # from a millisecond on, in ms
        "search latency p95": "640 µs",  # below it, in µs
        "postprocess latency p50": "23 µs",
        "relevant chunks lost: cap": "3",
    }
    assert {label: rows[label][0] for label in expected} == expected


def test_the_cutoff_is_five_if_the_run_has_it_else_its_largest() -> None:
    summary = _summary(legacy=BASE)
    assert "chunk nDCG@5" in dict(summary_table(summary))
    summary["cutoffs"] = [1, 10]
    rows = dict(summary_table(summary))
    assert rows["chunk nDCG@10"] == ["0.500"] and rows["chunk P@10"] == ["-"] and "chunk nDCG@5" not in rows
    standard = console_measures(3)[len(MEASURES) :][:5]
    assert standard == ["chunk:nDCG@3", "chunk:R@3", "chunk:P@3", "chunk:RR", "chunk:Success@3"]


@pytest.mark.parametrize(
    ("cap", "source", "shown"), [(None, "config", "none"), (3, "config", "3"), (2, "production", "2 (production)")]
)
def test_the_checked_cap_says_where_it_came_from(cap: int | None, source: str, shown: str) -> None:
    config = {**BASE, "cap_checked": cap, "cap_checked_source": source}
    assert dict(summary_table(_summary(legacy=config)))["cap checked against"] == [shown]


def test_a_loss_stage_one_config_lacks_counts_zero_and_a_summary_without_losses_has_no_loss_rows() -> None:
    other = {k: v for k, v in BASE.items() if k != "stage_losses"}
    rows = dict(summary_table(_summary(legacy=BASE, bare=other)))
    assert rows["relevant chunks lost: not_retrieved"] == ["100", "0"]
    assert not [label for label in dict(summary_table(_summary(bare=other))) if label.startswith("relevant")]


def test_the_console_and_the_reports_format_alike_but_for_blanks_and_separators() -> None:
    chars, share, us = measure("payload:chars_p50"), measure("duplicate_rate"), measure("latency:e2e:p95")
    assert (fmt(chars, 12345.0), fmt(chars, 12345.0, grouping=False)) == ("12,345", "12345")
    assert (fmt(share, None), fmt(share, None, none="-"), fmt(share, float("nan"), none="-")) == ("–", "-", "-")
    assert (fmt(us, 999.4), fmt(us, 1000.0), fmt(us, 25_500.0)) == ("999 µs", "1.00 ms", "25.50 ms")


def test_the_console_says_when_the_labels_moved_after_a_re_ingest(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from rag_eval.reports.console import print_run

    summary = {**_summary(legacy=BASE), "queries": 40, "label_level": "span"}
    drift = {"added": 3, "removed": 1, "queries_changed": 2, "labels_before": 40, "labels_after": 42}
    print_run({**summary, "resolution": {"label_drift": drift}}, experiment="e", baseline="legacy", gates=None,
              out=tmp_path)  # fmt: skip
    moved = [line for line in capsys.readouterr().out.splitlines() if "labels moved" in line]
    assert moved == [
        "labels moved since the previous resolution (a re-ingest): 3 added, 1 removed; 2 queries changed (40 -> 42 "
        "labels)"
    ]
    for quiet in ({}, {"resolution": {"label_drift": None, "from_cache": True}}):
        print_run({**summary, **quiet}, experiment="e", baseline="legacy", gates=None, out=tmp_path)
        assert "labels moved" not in capsys.readouterr().out


def test_the_lead_cutoffs_choose_the_standard_measures_shown() -> None:
    labels = [label for label, _ in summary_table(_summary(legacy=BASE), lead=[10])]
    assert "chunk nDCG@10" in labels and "chunk nDCG@5" not in labels
    both = [label for label, _ in summary_table(_summary(legacy=BASE), lead=[5, 10])]
    assert both.index("chunk nDCG@5") < both.index("chunk nDCG@10") and len(both) == len(set(both))
    default = [label for label, _ in summary_table(_summary(legacy=BASE), lead=[20])]  # not measured: 5
    assert default == [label for label, _ in summary_table(_summary(legacy=BASE))]


def test_the_console_says_when_the_payload_budget_cut_relevant_chunks(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from rag_eval.reports.console import print_run

    cut = {**BASE, "stage_losses": {"not_retrieved": 3, "projector_total_chars": 2, "projector_excerpt_chars": 5}}
    summary = {**_summary(legacy=BASE, evidence=cut), "queries": 40, "label_level": "span"}
    print_run(summary, experiment="e", baseline="legacy", gates=None, out=tmp_path)
    notes = [line for line in capsys.readouterr().out.splitlines() if line.startswith("note: the payload budget")]
    assert len(notes) == 1
    assert "legacy: 0; evidence: 7 (total chars 2, excerpt chars 5)" in notes[0]
    print_run({**_summary(legacy=BASE), "queries": 40, "label_level": "span"}, experiment="e", baseline="legacy",
              gates=None, out=tmp_path)  # fmt: skip
    assert "payload budget" not in capsys.readouterr().out
