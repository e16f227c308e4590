"""The measure registry: one entry per measure, and the one place every consumer reads a measure's facts from.

The summary, the comparison catalog, the console table, the Markdown report and the HTML report are
each checked against it: every measure they hold has an entry, and the label they show is the entry's.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from rag_eval import jobs
from rag_eval.compare.catalog import catalog, metric
from rag_eval.metrics.measures import declared_values, latency_stats, summary_frame
from rag_eval.metrics.registry import (
    FIXED,
    LATENCY_PERCENTILES,
    LATENCY_STAGES,
    LATENCY_STATISTICS,
    MISSION,
    READING_ORDER,
    Compared,
    Measure,
    declared,
    find,
    measure_names,
    standard,
)
from rag_eval.reports.console import console_measures, summary_table
from rag_eval.reports.display import flatten_config, measure
from rag_eval.reports.html import render_context
from rag_eval.reports.markdown import IDENTITY_MEASURES, render_markdown
from rag_eval.reports.rundata import load_run
from rag_eval.rundir.rows import LATENCY_COLUMNS
from tests.report_runs import synthetic_run

CUTOFFS = (1, 3, 5, 10)
COMPARED_ONLY = {"max_chunks_per_document"}  # a comparison's invariant: the summary has no value for it


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """A run directory made by the real pipeline, compared within itself (compare.json beside it)."""
    out = synthetic_run(tmp_path_factory.mktemp("registry") / "run", n_queries=30, render=False)
    jobs.compare_runs(out)
    yield out


def _summary(run: Path) -> dict[str, Any]:
    summary: dict[str, Any] = json.loads((run / "summary.json").read_text())
    return summary


# -- one entry per measure -------------------------------------------------------------------------


def test_every_summary_measure_has_exactly_one_entry(run: Path) -> None:
    summary = _summary(run)
    names = [m.name for m in declared(summary["cutoffs"])]
    assert len(names) == len(set(names))  # no measure declared twice
    assert all(find(name) == m for name, m in zip(names, declared(summary["cutoffs"]), strict=True))
    flat = {name for cfg in summary["configs"].values() for name in flatten_config(cfg)}
    assert flat and {name for name in flat if find(name) is None} == set()
    # summary_frame (the history's columns) names the numeric measures as the reports do
    frame = summary_frame(summary["configs"])
    numeric = {c for c in frame.columns if pd.api.types.is_numeric_dtype(frame[c])}
    assert flat <= set(frame.columns) and numeric <= flat
    # and every declared measure is in the summary, but for the comparison's invariant
    assert set(names) - flat == COMPARED_ONLY
    assert {c.removesuffix("_us") for c in LATENCY_COLUMNS} == set(LATENCY_STAGES)


def test_every_catalog_metric_is_its_registry_entry() -> None:
    metrics = catalog(CUTOFFS)
    assert len(metrics) == 62 and len({m.name for m in metrics}) == 62
    for m in metrics:
        entry = find(m.name)
        assert entry is not None and entry.compared is not None, m.name
        assert metric(entry) == m
        assert (m.label, m.group, m.higher_is_better) == (entry.label, entry.group, entry.higher_is_better)
    compared = [m.name for m in declared(CUTOFFS) if m.compared is not None]
    assert [m.name for m in metrics] == compared
    with pytest.raises(ValueError, match="queries is not compared"):
        metric(find("queries"))  # type: ignore[arg-type]


def test_labels_are_unique_and_in_words() -> None:
    entries = declared(CUTOFFS)
    labels = [m.label for m in entries]
    assert len(labels) == len(set(labels))
    families = [find(n) for n in ("lost:cap", "lost:return_n", "content_duplicates:cause:re-ingested copy")]
    family_labels = {m.label for m in families if m is not None}
    assert len(family_labels) == 3 and not family_labels & set(labels)
    assert [m.label for m in (*FIXED, *entries) if "_" in m.label] == []  # words, not names


# -- the families ----------------------------------------------------------------------------------


def test_standard_measures_are_scores_compared_as_means_of_their_column() -> None:
    assert measure_names([1, 5]) == ["P@1", "P@5", "R@1", "R@5", "nDCG@1", "nDCG@5", "Success@1", "Success@5", "RR"]
    for level, words in (("chunk", "chunk"), ("doc", "document")):
        entries = standard(level, [5])
        assert [m.name for m in entries] == [f"{level}:{n}" for n in measure_names([5])]
        for m in entries:
            assert m.label == f"{words} {m.name.partition(':')[2]}"
            assert (m.group, m.higher_is_better, m.unit, m.digits) == (level, True, "score", 3)
            assert m.compared == Compared(kind="mean", column=m.name)
            assert find(m.name) == m
    assert find("chunk:nDCG@20") == standard("chunk", [20])[2]
    assert find("doc:RR") == standard("doc", [])[0]
    for unknown in ("chunk:MAP@5", "chunk:MAP", "chunk:P@x", "chunk:P", "doc:", "ndcg:P@5", "RR"):
        assert find(unknown) is None, unknown
    assert sorted(READING_ORDER) == sorted([*("P", "R", "nDCG", "Success"), "RR"])


def test_open_families_resolve_to_counts() -> None:
    lost = find("lost:projector_total_chars")
    assert lost == Measure(
        name="lost:projector_total_chars", label="relevant chunks lost: projector_total_chars", group="counts",
        higher_is_better=False, unit="count", digits=0,
    )  # fmt: skip
    breakdown = find("content_duplicates:row_identity:no doc_id")
    assert breakdown == Measure(
        name="content_duplicates:row_identity:no doc_id", label="content duplicates by row identity: no doc_id",
        group="mission", higher_is_better=False, unit="count", digits=0,
    )  # fmt: skip
    assert find("content_duplicates:key_kind:rank").label == "content duplicates by key kind: rank"  # type: ignore[union-attr]
    assert find("content_duplicates:cause:a:b").label == "content duplicates by cause: a:b"  # type: ignore[union-attr]
    assert find("lost:a:b").label == "relevant chunks lost: a:b"  # type: ignore[union-attr]
    for unknown in ("lost:", "content_duplicates:cause:", "content_duplicates:legacy:rows", "content_duplicates:x"):
        assert find(unknown) is None, unknown


def test_latency_entries_cover_every_stage_and_statistic() -> None:
    assert tuple(latency_stats([1.0, 2.0])) == LATENCY_STATISTICS
    assert LATENCY_STAGES == ("transform", "search", "postprocess", "projection", "e2e", "postsearch_cpu")
    for stage in LATENCY_STAGES:
        for stat in LATENCY_STATISTICS:
            m = find(f"latency:{stage}:{stat}")
            assert m is not None and (m.group, m.unit, m.higher_is_better) == ("latency", "us", False)
            compared = stat in {f"p{q}" for q in LATENCY_PERCENTILES}
            assert (m.compared is not None) == compared
            if m.compared is not None:
                assert (m.compared.kind, m.compared.column) == ("latency", f"{stage}_us")
                assert m.compared.percentile == int(stat[1:])


# -- the summary computes a declared mean or rate --------------------------------------------------


def _entry(name: str, compared: Compared | None) -> Measure:
    return Measure(
        name=name, label=name, group="mission", higher_is_better=None, unit="share", digits=1, compared=compared
    )


def test_a_declared_mean_or_rate_of_per_query_columns_needs_no_summary_code() -> None:
    frame = pd.DataFrame({"ok": [1.0, 1.0, 0.0, math.nan], "n": [1, 0, 3, 0], "of": [2, 0, 2, 4]})
    entries = [
        _entry("pairs", Compared(kind="mean", per="pair", column="ok")),  # pairs are not per-query rows
        _entry("none", None),
        _entry("mean", Compared(kind="mean", column="ok")),
        _entry("rate", Compared(kind="rate", numerator="n", denominator="of")),
        _entry("max", Compared(kind="max", column="ok", numerator="n", denominator="of")),
        _entry("no column", Compared(kind="mean", column="missing")),
        _entry("no denominator", Compared(kind="rate", numerator="n", denominator="missing")),
        _entry("no numerator", Compared(kind="rate", numerator="missing", denominator="of")),
    ]
    values = declared_values(frame, entries, {})
    assert values == {"mean": pytest.approx(2 / 3), "rate": 0.5}
    assert all(type(v) is float for v in values.values())
    assert declared_values(frame, entries, {"rate": 0.1, "mean": 0.2}) == {}  # the summary's own value stays
    empty = declared_values(frame.iloc[:0], entries, {})
    assert math.isnan(empty["mean"]) and math.isnan(empty["rate"])
    # every mission measure of the registry is computed by summarize itself today
    summary = {m.name: 0.0 for m in MISSION}
    assert declared_values(frame.assign(cap_ok=1.0, dup_keys=1, members=2), MISSION, summary) == {}


def test_a_new_measure_is_its_per_query_column_and_one_entry(monkeypatch: pytest.MonkeyPatch) -> None:
    """A mission entry on an existing per-query column: the summary holds it, the catalog compares it."""
    from rag_eval.compare.comparison import compare
    from rag_eval.compare.gates import gates_from_table
    from rag_eval.metrics import measures, registry
    from tests.unit.runs import config, make_run, pair_rows, row

    entry = Measure(
        name="judged_share", label="judged queries (share)", group="mission", higher_is_better=None, unit="share",
        digits=1, compared=Compared(kind="mean", column="judged"),
    )  # fmt: skip
    monkeypatch.setattr(registry, "MISSION", (*registry.MISSION, entry))
    monkeypatch.setattr(measures, "MISSION", registry.MISSION)
    unjudged = [row(f"q{i}", "cand", delivered=[f"z{i}#chunk-0"]) for i in (6, 7)]  # no relevant chunk
    rows = pair_rows(6, "base") + pair_rows(6, "cand") + unjudged
    run = make_run(rows, [config("base"), config("cand")], baseline="base")
    assert run.summary["configs"]["base"]["judged_share"] == 1.0
    assert run.summary["configs"]["cand"]["judged_share"] == pytest.approx(6 / 8)
    document = compare(run, None, gates_from_table({"checks": []}, path="-", text="")).document
    entries = {m["metric"]: m for m in document["comparisons"][0]["metrics"]}
    assert entries["judged_share"]["label"] == "judged queries (share)"
    assert entries["judged_share"]["baseline"] == 1.0  # the six queries both configs answered


# -- the label a reader sees is the registry's -----------------------------------------------------


def test_the_console_labels_are_the_registry_labels(run: Path) -> None:
    summary = _summary(run)
    rows = summary_table(summary)
    losses = sorted({s for cfg in summary["configs"].values() for s in cfg["stage_losses"]})
    names = [*console_measures(5), *(f"lost:{s}" for s in losses)]
    assert [label for label, _ in rows] == [find(n).label for n in names]  # type: ignore[union-attr]


def test_the_markdown_labels_are_the_registry_labels(run: Path) -> None:
    summary = _summary(run)
    manifest = json.loads((run / "manifest.json").read_text())
    manifest["versions"]["pymilvus"] = "2.4"
    summary["latency"] = {"search": {"mode": "off"}, "postprocess": {"method": "timed per query"}}
    for cfg in summary["configs"].values():  # what the run adds to the summary's measures
        cfg["search_latency"].update(timed_search="own", shared_with=[])
    text = render_markdown(summary, manifest)
    section = text[text.index("## Evidence identity") : text.index("## Where relevant chunks were lost")]
    labels = [line.split("|")[1].strip() for line in section.splitlines() if line.startswith("| ")][1:]
    assert labels == [find(n).label for n in IDENTITY_MEASURES]  # type: ignore[union-attr]
    latency = text[text.index("## Latency") : text.index("## Provenance")]
    for name in ("search_latency:p95_ci_low_us", "search_latency:p95_ci_high_us", "qps_serial"):
        assert f"| {find(name).label} |" in latency  # type: ignore[union-attr]
    stages = re.findall(r"^\| ([\w\\]+) \| p50 \|", latency, flags=re.M)
    assert tuple(s.replace("\\_", "_") for s in stages) == LATENCY_STAGES  # markdown escapes an underscore


def test_the_html_labels_are_the_registry_labels(run: Path) -> None:
    for compare in (None, json.loads((run / "compare.json").read_text())):
        context = render_context(load_run(run, compare=compare) if compare else load_run(run))
        rows = [row for _, group in context["table"] for row in group]
        assert rows and all(row.label == measure(row.key).label for row in rows)
        assert all(find(row.key) is not None for row in rows)  # nothing the report had to guess
        items = [item for line in context["verdict"] for item in line.items]
        assert items and {item.label for item in items} <= {m.label for m in declared(CUTOFFS)}
    compared = json.loads((run / "compare.json").read_text())["comparisons"][0]["metrics"]
    assert all(m["label"] == find(m["metric"]).label for m in compared)  # type: ignore[union-attr]


def test_a_traffic_measure_is_compared_exactly_when_its_labelled_one_is() -> None:
    from rag_eval.metrics.registry import find, on_traffic

    assert on_traffic(find("n_cap_violations")).compared is None  # a count: shown, never compared
    assert on_traffic(find("duplicate_rate")).compared is not None
