"""What a reader reads of a run: gates in words (the outcome once, the check, its unit), and every figure of
the Measures table with a label in words and the precision it deserves."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from rag_eval.compare.comparison import compare
from rag_eval.compare.gates import gates_from_table
from rag_eval.reports import html as report_html
from rag_eval.reports.display import measure
from rag_eval.reports.gatetext import chip_text, gate_value
from rag_eval.reports.rundata import load_run
from rag_eval.reports.summary import gate_rows
from tests.report_runs import synthetic_run
from tests.unit.runs import config, make_run, pair_rows

CHECKS = [
    "fail cap_compliance == 1",
    "same_doc_multi_chunk_recall drop <= 0.02",  # the candidate loses a tenth of its pairs: fails
    "warn duplicate_rate growth <= 0.05",
    "warn latency:postprocess:p95 growth <= 20%",
    "warn latency:postprocess:p95 <= 2ms",
]
RAW = re.compile(r"[a-z]+_[a-z_]+|latency:|chunk:|\bus\b|\bci\b")  # a field name, a flat key, a bare unit


@pytest.fixture(scope="module")
def document() -> dict[str, Any]:
    rows = pair_rows(60, "base") + pair_rows(60, "cand", lose=12)
    run = make_run(rows, [config("base"), config("cand")], baseline="base")
    return compare(run, None, gates_from_table({"checks": CHECKS}, path="g.toml", text="")).document


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    yield synthetic_run(tmp_path_factory.mktemp("words") / "run", n_queries=30, render=False)


def test_a_chip_says_the_outcome_once_and_the_check_in_words(document: dict[str, Any]) -> None:
    gates = {g["spec"]: g for g in document["comparisons"][0]["gates"]}
    texts = {spec: chip_text(g) for spec, g in gates.items()}
    for spec, text in texts.items():
        outcome = gates[spec]["outcome"]
        assert text.startswith(f"{outcome} – ")
        words = text.removeprefix(f"{outcome} – ")
        assert not re.search(r"\b(pass|warn|fail|underpowered|error)\b", words), text  # the outcome once
        assert not RAW.search(words), text
        assert words.split(" (")[0].count("  ") == 0
    assert texts["fail cap_compliance == 1"].startswith("pass – cap compliance (stored doc ids) is 100% (required)")
    recall = texts["same_doc_multi_chunk_recall drop <= 0.02"]
    assert recall.startswith("fail – same-document multi-chunk recall drops by at most 0.02 (required): it dropped by")
    assert "grows by at most 5 pts (advisory)" in texts["warn duplicate_rate growth <= 0.05"]
    assert "grows by at most 20% (advisory)" in texts["warn latency:postprocess:p95 growth <= 20%"]
    assert "p95 is at most 2.00 ms (advisory)" in texts["warn latency:postprocess:p95 <= 2ms"]


def test_a_gate_value_has_its_unit(document: dict[str, Any]) -> None:
    rows = {r["gate"]: r for r in gate_rows(document)}
    assert re.fullmatch(r"\d+ µs|\d+\.\d\d ms", rows["latency:postprocess:p95 <= 2ms"]["value"])
    assert rows["cap_compliance == 1"]["value"].endswith("%")
    assert gate_value({"metric": "max_chunks_per_document"}, candidate=2.0) == "2"


def test_every_figure_of_the_measures_table_has_a_label_in_words_and_its_precision(run: Path) -> None:
    context = report_html.render_context(load_run(run))
    for _, rows in context["table"]:
        for row in rows:
            m = measure(row.key)
            words = row.label.replace("doc_id", "").replace("chunk_index", "")  # row identities, named as stored
            assert not RAW.search(words), row.label
            for text in (row.baseline, *(c.value for c in row.cells)):
                if m.unit == "count" and text not in ("–",):
                    number = float(text.replace(",", ""))
                    assert "." not in text or not number.is_integer(), (row.label, text)  # counts as integers
                if m.unit == "us" and text != "–":
                    assert text.endswith(("µs", "ms")), (row.label, text)
                if m.unit == "share" and text != "–":
                    assert text.endswith("%"), (row.label, text)
