"""What a run writes for reading it: texts.parquet, spans.parquet and report.html (Milvus Lite).

The oracles read the data set's files directly (corpus.jsonl, the span qrels), not through the
loaders the run uses.
"""

from __future__ import annotations

import csv
import json
from dataclasses import replace
from pathlib import Path

import pandas as pd
import pytest

from rag_eval import jobs
from rag_eval.experiment import Overrides, load_experiment, with_overrides
from tests.conftest import SHIPPED

pytestmark = pytest.mark.milvus_lite


def test_texts_spans_and_report_of_a_run(tmp_path: Path) -> None:
    exp = with_overrides(
        load_experiment(SHIPPED / "experiments" / "default.toml"), Overrides(milvus_uri=str(tmp_path / "milvus.db")))
    exp = replace(exp, cache_dir=tmp_path / "cache", query_limit=60, drilldown_queries=25)
    result = jobs.run_experiment(exp, tmp_path / "run")
    run = result.out
    pq = pd.read_parquet(run / "per_query.parquet")
    texts = pd.read_parquet(run / "texts.parquet")
    spans = pd.read_parquet(run / "spans.parquet")

    named = {c for col in ("relevant_chunks", "hit_chunks", "member_chunks") for ks in pq[col] for c in ks}
    assert set(texts["chunk"]) == {c for c in named if not c.startswith("unknown:")}
    assert texts["chunk"].is_unique
    docs = {d["_id"]: d["text"] for d in map(json.loads, (SHIPPED / "corpus.jsonl").read_text().splitlines())}
    for t in texts.itertuples():
        assert docs[t.doc_id][t.start : t.end] == t.text
        assert t.chunk == f"{t.doc_id}#chunk-{t.chunk_index}"

    queries = set(pq["query_id"])
    with (SHIPPED / "qrels" / "test.spans.tsv").open() as fh:
        rows = list(csv.DictReader(fh, delimiter="\t"))
    expected = sorted(
        (r["query-id"], r["corpus-id"], int(r["start"]), int(r["end"]), int(r["score"]))
        for r in rows
        if r["query-id"] in queries
    )
    assert len(queries) == 60 and expected
    assert sorted(spans.itertuples(index=False, name=None)) == expected

    html = (run / "report.html").read_text()
    assert exp.name in html and "Showing 25 of 60 queries" in html
    assert json.loads((run / "manifest.json").read_text())["experiment"]["report"] == {"drilldown_queries": 25}
