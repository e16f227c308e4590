"""A query log replayed beside the labelled queries (Milvus Lite): the labelled measures do not move, the log's
queries are measured apart and compared label-free, their texts stay out of the reports when asked, and the
labelling file picks from them.

The oracles read the log and the data set's files directly, not through the readers the run uses.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections import Counter
from dataclasses import replace
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from rag_eval import jobs
from rag_eval.experiment import Experiment, Overrides, load_experiment, with_overrides
from rag_eval.experiment.latency import LatencyMode, TimingPlan
from rag_eval.jobs.labels import next_to_label
from rag_eval.traffic.logs import TrafficSpec
from tests.conftest import SHIPPED

pytestmark = pytest.mark.milvus_lite

CONFIGS = ("legacy-merge", "legacy-first", "evidence")
TIMING_KEYS = {"latency_us", "qps_serial", "search_latency", "traffic"}


def _log(path: Path) -> list[dict[str, Any]]:
    """A query log as a service writes it: repeated requests, blank and non-text queries, made-up texts no
    labelled query has (so a report can be searched for them)."""
    queries = [json.loads(line)["text"] for line in (SHIPPED / "queries.jsonl").read_text().splitlines()][:30]
    records: list[dict[str, Any]] = []
    for i, text in enumerate(queries):
        asked = f"{text} (seen on host prod-db-{i:03d})"
        records += [{"request_id": f"r{i}-{n}", "query": asked} for n in range(1 + i % 4)]
    records += [{"request_id": "blank", "query": "   "}, {"request_id": "number", "query": 42}]
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return records


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    root = tmp_path_factory.mktemp("traffic")
    base = with_overrides(
        load_experiment(SHIPPED / "experiments" / "default.toml"), Overrides(milvus_uri=str(root / "milvus.db"))
    )
    base = replace(base, cache_dir=root / "cache", query_limit=40, timing=TimingPlan(mode=LatencyMode.OFF),
                   configs=tuple(c for c in base.configs if c.name in CONFIGS))  # fmt: skip
    records = _log(root / "log.jsonl")
    traffic = replace(base, traffic=TrafficSpec(path=root / "log.jsonl", id="request_id", show_text=False))
    plain = jobs.run_experiment(base, root / "plain")
    logged = jobs.run_experiment(traffic, root / "logged")
    return {"root": root, "plain": plain, "logged": logged, "records": records, "exp": traffic}


def _labelled(summary: dict[str, Any]) -> dict[str, Any]:
    return {name: {k: v for k, v in s.items() if k not in TIMING_KEYS} for name, s in summary["configs"].items()}


def test_a_log_beside_the_labelled_queries_leaves_their_measures_as_they_were(runs: dict[str, Any]) -> None:
    plain, logged = runs["plain"].summary, runs["logged"].summary
    assert logged["queries"] == plain["queries"] == 40
    assert _labelled(logged) == _labelled(plain)
    plain_cmp, logged_cmp = _metrics(runs["plain"]), _metrics(runs["logged"])
    shared = {k for k in plain_cmp if not k[1].startswith(("latency:", "qps"))}
    assert shared and {k: logged_cmp[k] for k in shared} == {k: plain_cmp[k] for k in shared}


def _metrics(result: Any) -> dict[tuple[str, str], tuple[Any, ...]]:
    """Each comparison's metrics: (candidate, metric) -> (n, baseline, candidate, delta). The interval and
    p-value are drawn with as many resamples as the comparison's family needs (a log's measures join it)."""
    return {
        (c["candidate"], m["metric"]): (m["n"], m["baseline"], m["candidate"], m["delta"])
        for c in result.comparison.document["comparisons"]
        for m in c["metrics"]
    }


def test_the_log_is_replayed_once_per_distinct_query_with_its_count(runs: dict[str, Any]) -> None:
    counts = Counter(r["query"] for r in runs["records"] if isinstance(r["query"], str) and r["query"].strip())
    rows = pd.read_parquet(runs["logged"].out / "per_query.parquet")
    traffic = rows[rows["origin"] == "traffic"]
    assert set(rows.loc[rows["origin"] == "labelled", "query_id"]) == set(
        pd.read_parquet(runs["plain"].out / "per_query.parquet")["query_id"]
    )
    for name in CONFIGS:
        mine = traffic[traffic["config"] == name]
        assert dict(zip(mine["query_text"], mine["occurrences"], strict=True)) == dict(counts)
    doc = runs["logged"].summary["traffic"]
    assert (doc["queries"], doc["requests"], doc["skipped"]["blank"], doc["skipped"]["not text"]) == (
        len(counts), sum(counts.values()), 1, 1)  # fmt: skip


def test_payloads_are_compared_with_the_baselines_on_the_same_query(runs: dict[str, Any]) -> None:
    rows = pd.read_parquet(runs["logged"].out / "per_query.parquet")
    traffic = rows[rows["origin"] == "traffic"]
    keys = {(r.config, r.query_id): list(r.member_keys) for r in traffic.itertuples()}
    queries = sorted({q for _, q in keys})
    summary = runs["logged"].summary["configs"]
    for name in CONFIGS:
        changed = [keys[(name, q)] != keys[("legacy-merge", q)] for q in queries]
        top = [keys[(name, q)][:1] != keys[("legacy-merge", q)][:1] for q in queries]
        assert summary[name]["traffic"]["payload_changed"] == pytest.approx(sum(changed) / len(queries))
        assert summary[name]["traffic"]["top_changed"] == pytest.approx(sum(top) / len(queries))
    assert summary["legacy-merge"]["traffic"]["rbo"] == 1.0
    assert sum(summary["evidence"]["traffic"]["rbo_bins"]) == len(queries)
    names = {name for _, name in _metrics(runs["logged"])}
    assert {"traffic:payload_changed", "traffic:rbo", "traffic:duplicate_rate"} <= names
    assert not any(name.startswith("traffic:") for _, name in _metrics(runs["plain"]))


def test_query_texts_stay_out_of_the_reports_when_asked(runs: dict[str, Any]) -> None:
    out = runs["logged"].out
    asked = {r["query"] for r in runs["records"] if isinstance(r["query"], str) and "prod-db-" in r["query"]}
    for name in ("report.html", "report.md", "summary.json", "compare.json", "summary.md"):
        text = (out / name).read_text()
        assert not [q for q in asked if q in text or json.dumps(q)[1:-1] in text], name
    assert "Production traffic, no labels" in (out / "report.html").read_text()
    assert "query #" in (out / "report.html").read_text()
    kept = set(pd.read_parquet(out / "per_query.parquet", columns=["query_text"])["query_text"])
    assert asked <= kept  # the run directory keeps what the replay needs


def test_the_labelling_file_offers_the_most_contested_log_queries(runs: dict[str, Any]) -> None:
    out = runs["root"] / "to-label.jsonl"
    path, picked, screened = next_to_label(runs["logged"].out, out, count=5)
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    assert len(lines) == picked == 5
    assert len(screened.eligible) + screened.labelled + screened.duplicates + screened.agreed == 30
    docs = {d["_id"]: d["text"] for d in map(json.loads, (SHIPPED / "corpus.jsonl").read_text().splitlines())}
    assert all(line["query_id"].startswith("traffic:") and line["disagreement"] > 0 for line in lines)
    for line in lines:
        for chunk in line["chunks"]:
            assert chunk["grade"] is None and chunk["delivered_by"]
            if chunk["doc_id"] is not None:
                assert docs[chunk["doc_id"]][chunk["start"] : chunk["end"]] == chunk["text"]
    with pytest.raises(Exception, match="exists"):
        next_to_label(runs["logged"].out, out, count=5)  # a person's marks are never overwritten


@pytest.mark.parametrize(
    ("content", "words"),
    [
        ('{"query": "fine"}\n{"query": "broken\n', "bad.jsonl:2:"),
        ('{"q": "no such field"}\n', "query"),
    ],
)
def test_a_malformed_log_is_refused_before_anything_runs(
    runs: dict[str, Any], tmp_path: Path, content: str, words: str
) -> None:
    log = tmp_path / "bad.jsonl"
    log.write_text(content)
    exp: Experiment = runs["exp"]
    toml = (SHIPPED / "experiments" / "traffic.toml").read_text()
    toml = toml.replace('path = "../traffic/lookup-traces.otlp.jsonl"', f'path = "{log}"')
    toml = toml.replace('uri = "../../../reports/milvus/incident-kb.db"', f'uri = "{exp.milvus_uri}"')
    experiment = tmp_path / "exp.toml"
    toml = toml.replace('path = ".."', f'path = "{SHIPPED}"').replace('"configs/', f'"{SHIPPED}/experiments/configs/')
    experiment.write_text(toml)
    done = subprocess.run(
        [sys.executable, "-m", "rag_eval.cli", "run", str(experiment), "--out", str(tmp_path / "run")],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert done.returncode == 2, done.stderr
    assert str(log) in done.stderr and words in done.stderr
    assert not (tmp_path / "run" / "per_query.parquet").exists()


def test_a_requests_category_filter_is_replayed_as_its_filter(runs: dict[str, Any]) -> None:
    root: Path = runs["root"]
    log = root / "categories.jsonl"
    asked = "the replica is far behind and the lock waits keep growing"
    log.write_text("".join(json.dumps(r) + "\n" for r in (
        {"query": asked, "category": "replication"},
        {"query": asked, "category": "locking"},
        {"query": asked, "category": "locking"},
        {"query": asked},
    )))  # fmt: skip
    exp = replace(runs["exp"], query_limit=5, traffic=TrafficSpec(path=log, category="category"))
    result = jobs.run_experiment(exp, root / "categories")
    rows = pd.read_parquet(result.out / "per_query.parquet")
    traffic = rows[(rows["origin"] == "traffic") & (rows["config"] == "evidence")]
    docs = {d["_id"]: d.get("metadata", {}).get("category")
            for d in map(json.loads, (SHIPPED / "corpus.jsonl").read_text().splitlines())}  # fmt: skip
    by_count = {int(r.occurrences): {docs[d] for d in r.member_doc_ids if d} for r in traffic.itertuples()}
    assert len(traffic) == 3  # one text under two filters and none: three requests
    assert by_count[2] == {"locking"}  # asked twice under "locking": only locking runbooks
    filtered = [row for row in traffic.itertuples() if int(row.occurrences) == 1]
    categories = sorted(tuple(sorted({docs[d] for d in r.member_doc_ids if d})) for r in filtered)
    assert ("replication",) in categories  # the request filtered on replication
    locking = next(list(r.member_keys) for r in traffic.itertuples() if int(r.occurrences) == 2)
    assert all(list(r.member_keys) != locking for r in filtered)  # each filter its own search


def test_against_another_run_payloads_are_compared_with_that_runs_payloads(runs: dict[str, Any]) -> None:
    """A nightly against the accepted night: each config's payloads against the same config's payloads there."""
    from rag_eval.core.config import RagConfig
    from rag_eval.jobs.compare import Judging, compare_runs

    exp: Experiment = runs["exp"]
    narrower = replace(exp.configs[2].config, return_n=3)
    assert isinstance(narrower, RagConfig) and exp.configs[2].name == "evidence"
    changed = replace(exp, configs=(*exp.configs[:2], replace(exp.configs[2], config=narrower)))
    tonight = jobs.run_experiment(changed, runs["root"] / "tonight")
    comparison = compare_runs(tonight.out, Judging(against=runs["logged"].out), out=runs["root"] / "vs")
    rows = {
        name: pd.read_parquet(path / "per_query.parquet").query("origin == 'traffic'")
        for name, path in (("then", runs["logged"].out), ("now", tonight.out))
    }

    def keys(which: str, config: str) -> dict[str, list[str]]:
        mine = rows[which][rows[which]["config"] == config]
        return {q: list(k) for q, k in zip(mine["query_id"], mine["member_keys"], strict=True)}

    found = {(c["candidate"], m["metric"]): m for c in comparison.document["comparisons"] for m in c["metrics"]}
    for config in CONFIGS:
        then, now = keys("then", config), keys("now", config)
        expected = sum(then[q] != now[q] for q in then) / len(then)
        assert found[(config, "traffic:payload_changed")]["candidate"] == pytest.approx(expected)
        assert found[(config, "traffic:payload_changed")]["baseline"] == 0.0
    assert found[("legacy-merge", "traffic:payload_changed")]["candidate"] == 0.0  # the same config, the same rows
    assert found[("evidence", "traffic:payload_changed")]["candidate"] > 0.5  # return-n 5 -> 3: most payloads
