"""junit.xml: a testsuite per compared config, a testcase per gate, the outcome as JUnit spells it, and the
numbers behind each verdict as properties; counts add up and odd text stays well-formed XML."""

from __future__ import annotations

import math
import xml.etree.ElementTree as ET
from typing import Any

import pytest

from rag_eval.compare.comparison import compare
from rag_eval.compare.gates import gates_from_table
from rag_eval.reports.junit import GATE_PROPERTIES, render_junit
from tests.unit.runs import config, make_run, pair_rows


def _gate(gid: str, outcome: str, *, severity: str = "fail", message: str = "m", **values: Any) -> dict[str, Any]:
    return {"id": gid, "metric": "x", "outcome": outcome, "severity": severity, "message": message, **values}


def _doc(*gates: dict[str, Any], candidate: str = "b") -> dict[str, Any]:
    metric = {"metric": "x", "baseline": 1.0, "candidate": 0.5, "delta": -0.5, "ci_low": math.nan, "n": 10}
    comparison = {"baseline": "a", "candidate": candidate, "baseline_source": "run", "metrics": [metric]}
    return {"run": {"experiment": "exp"}, "comparisons": [{**comparison, "gates": list(gates)}]}


def _parse(doc: dict[str, Any]) -> ET.Element:
    text = render_junit(doc)
    assert text.startswith('<?xml version="1.0" encoding="UTF-8"?>\n') and text.endswith("\n")
    return ET.fromstring(text.split("\n", 1)[1])


def test_each_outcome_is_the_junit_state_ci_systems_show() -> None:
    root = _parse(
        _doc(
            _gate("fails", "fail"), _gate("not evaluable", "error"), _gate("warns", "warn", severity="warn"),
            _gate("too few", "underpowered", severity="warn"), _gate("holds", "pass"),
        )
    )  # fmt: skip
    cases = {c.get("name"): c for c in root.iter("testcase")}
    assert [child.tag for child in cases["fails"] if child.tag != "properties"] == ["failure", "system-out"]
    assert cases["fails"].find("failure").get("type") == "GateFailed"  # type: ignore[union-attr]
    assert cases["not evaluable"].find("error").get("type") == "GateNotEvaluated"  # type: ignore[union-attr]
    assert cases["warns"].find("skipped").get("message") == "warn: m"  # type: ignore[union-attr]
    assert cases["too few"].find("skipped").get("message") == "underpowered: m"  # type: ignore[union-attr]
    assert {child.tag for child in cases["holds"]} == {"properties", "system-out"}
    suite = root.find("testsuite")
    assert suite is not None
    counts = {k: suite.get(k) for k in ("tests", "failures", "errors", "skipped")}
    assert counts == {"tests": "5", "failures": "1", "errors": "1", "skipped": "2"}
    assert {k: root.get(k) for k in counts} == counts  # one suite: the totals are its counts
    assert root.get("name") == "rag-eval gates: exp"
    assert {c.get("classname") for c in cases.values()} == {"rag_eval.gates.exp.b"}


def test_the_numbers_behind_a_verdict_are_properties() -> None:
    root = _parse(_doc(_gate("g", "fail", value=0.5, threshold=1.0, mde=None, p_value=math.inf, spec="x == 1")))
    case = next(root.iter("testcase"))
    props = {p.get("name"): p.get("value") for p in case.iter("property")}
    assert [name for name in props if not name.startswith("metric.")] == list(GATE_PROPERTIES)
    assert (props["value"], props["threshold"], props["mde"], props["p_value"]) == ("0.5", "1.0", "", "")
    assert (props["metric.baseline"], props["metric.delta"], props["metric.ci_low"]) == ("1.0", "-0.5", "")
    suite_props = {p.get("name"): p.get("value") for p in root.find("testsuite/properties")}  # type: ignore[union-attr]
    assert suite_props["baseline"] == "a" and suite_props["baseline_source"] == "run"
    assert suite_props["x"] == "0.5 (baseline 1, delta -0.5, 95% CI [n/a, n/a], p_holm n/a, n 10)"


def test_totals_add_up_over_the_suites_of_a_real_comparison() -> None:
    rows = pair_rows(40, "base") + pair_rows(40, "cand", lose=10) + pair_rows(40, "same")
    run = make_run(rows, [config("base"), config("cand"), config("same")], baseline="base")
    checks = ["same_doc_multi_chunk_recall drop <= 0.02", "warn chunk:nDCG@5 drop <= 0.001", "evidence_guard_1to1 == 1"]
    doc = compare(run, None, gates_from_table({"checks": checks}, path="g.toml", text="")).document
    root = _parse(doc)
    suites = root.findall("testsuite")
    assert [s.get("name") for s in suites] == ["cand", "same"]
    for key in ("tests", "failures", "errors", "skipped"):
        assert int(root.get(key, "-1")) == sum(int(s.get(key, "0")) for s in suites)
    assert root.get("tests") == "6" and root.get("failures") == "1"


@pytest.mark.parametrize("text", ['<b>&"quote"\'</b>', "]]>", "line\nbreak"])
def test_odd_text_in_names_and_messages_stays_well_formed(text: str) -> None:
    root = _parse(_doc(_gate(text, "fail", message=text), candidate=text))
    case = next(root.iter("testcase"))
    assert case.get("name") == text and case.find("failure").text == text  # type: ignore[union-attr]
    assert root.find("testsuite").get("name") == text  # type: ignore[union-attr]
