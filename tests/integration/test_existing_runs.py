"""Whole runs over a collection built elsewhere ([collection]): the same measures as an ordinary run when the
collection holds the same chunks in another schema, the example's LangChain collection, refusals of bad input
(exit 2, one line, nothing written), read-only, label drift after a re-ingest, and the Dask replay."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow.parquet as pq
import pytest

from rag_eval.cli import main
from rag_eval.harness.experiment import load_experiment, with_overrides
from rag_eval.harness.rows import LATENCY_COLUMNS
from rag_eval.harness.steps import prepare
from tests.conftest import ROOT, SHIPPED

CONFIGS = """
[[configs]]
name = "legacy-merge"
properties = "{configs}/legacy.properties"

[[configs]]
name = "evidence"
properties = "{configs}/evidence.properties"
"""
FIELDS = ('{ id = "id", vector = "embedding", text = "body", doc_id = "meta.doc", chunk_index = "meta.seq", '
          'source = "meta.src", title = "meta.ttl", category = "meta.cat" }')  # fmt: skip


def ordinary_toml(tmp: Path, uri: str, profile: str) -> Path:
    text = f"""
[experiment]
name = "ordinary"
baseline = "legacy-merge"
[dataset]
path = "{SHIPPED}"
[chunker]
spec = "sentences:size=3,overlap=0"
[milvus]
uri = "{uri}"
index = {{ type = "FLAT", metric = "COSINE", params = {{}}, search = {{}} }}
[ingest]
profile = "{profile}"
[embedder]
cache_dir = "{tmp / 'cache'}"
""" + CONFIGS.format(configs=SHIPPED / "experiments" / "configs")
    path = tmp / "ordinary.toml"
    path.write_text(text)
    return path


def existing_toml(tmp: Path, uri: str, name: str, fields: str = FIELDS, extra: str = "") -> Path:
    text = f"""
[experiment]
name = "existing"
baseline = "legacy-merge"
[dataset]
path = "{SHIPPED}"
[milvus]
uri = "{uri}"
[collection]
name = "{name}"
fields = {fields}
{extra}
[embedder]
cache_dir = "{tmp / 'cache'}"
""" + CONFIGS.format(configs=SHIPPED / "experiments" / "configs")
    path = tmp / f"existing-{name}.toml"
    path.write_text(text)
    return path


def same_chunks_other_schema(ordinary: Path, uri: str, name: str) -> None:
    """The ordinary run's rows, vector ids and vectors, written by hand in another schema: a VARCHAR key, the
    text as ``body``, the identity in a JSON ``meta`` (absent where the row has none)."""
    from pymilvus import DataType, MilvusClient

    exp = load_experiment(ordinary)
    prep = prepare(exp)
    vectors = prep.resolver.resolve([r.chunk.content for r in prep.rows])
    client = MilvusClient(uri)
    schema = MilvusClient.create_schema(auto_id=False, enable_dynamic_field=False)
    schema.add_field("id", DataType.INT64, is_primary=True)
    schema.add_field("body", DataType.VARCHAR, max_length=8192)
    schema.add_field("embedding", DataType.FLOAT_VECTOR, dim=int(vectors.shape[1]))
    schema.add_field("meta", DataType.JSON)
    index = client.prepare_index_params()
    index.add_index("embedding", index_type="FLAT", metric_type="COSINE")
    client.create_collection(name, schema=schema, index_params=index, consistency_level="Strong")
    rows = []
    for r, v in zip(prep.rows, vectors, strict=True):
        meta: dict[str, Any] = {"src": r.chunk.source, "ttl": r.chunk.title, "cat": r.chunk.category}
        if r.doc_id is not None:
            meta["doc"] = r.doc_id
        if r.chunk_index is not None:
            meta["seq"] = r.chunk_index
        rows.append({"id": r.vector_id, "body": r.chunk.content, "embedding": v.tolist(), "meta": meta})
    for start in range(0, len(rows), 500):
        client.insert(name, rows[start : start + 500])
    client.flush(name)
    client.close()


def run(toml: Path, out: Path, *extra: str) -> int:
    return main(["run", str(toml), "--out", str(out), "--quiet", *extra])


MEASURED = [c for c in (
    "member_keys", "member_chunks", "member_doc_ids", "member_content_sha", "member_block", "returned_keys",
    "returned_doc_ids", "returned_ranks", "returned_content_sha", "returned_chars", "hit_keys", "hit_chunks",
    "hit_content_sha", "relevant_chunks", "relevant_grades", "relevant_docs", "delivered_relevant", "lost_chunks",
    "lost_stages", "n_hits", "n_dedup", "n_cap", "n_truncated", "n_blocks", "guard_references", "guard_violations",
    "payload_chars", "judged",
)]  # fmt: skip


def rows_of(out: Path) -> pd.DataFrame:
    table = pq.read_table(out / "per_query.parquet").to_pandas()
    return table.sort_values(["query_id", "config"]).reset_index(drop=True)


def summary_measures(out: Path) -> dict[str, Any]:
    configs = json.loads((out / "summary.json").read_text())["configs"]
    return {n: {k: v for k, v in c.items() if k not in ("latency_us", "qps_serial", "search_latency")}
            for n, c in configs.items()}  # fmt: skip


@pytest.mark.milvus_lite
@pytest.mark.parametrize("profile", ["clean", "production"])
def test_the_same_chunks_in_another_schema_measure_as_the_ordinary_run(tmp_path: Path, profile: str) -> None:
    """A foreign collection built from the shipped data set with our own chunker (same rows, vector ids and
    vectors; another schema, identity in JSON): every measured column of every row, and every summary
    measure, equal the ordinary run's; with the production profile too (legacy rows without a chunk index,
    rows without a doc id, re-ingested copies), whose rows without a doc id include some whose text two
    runbooks share (placed by the rule, and on this data set placed right)."""
    uri = str(tmp_path / "milvus.db")
    ordinary = ordinary_toml(tmp_path, uri, profile)
    assert run(ordinary, tmp_path / "a") == 0
    same_chunks_other_schema(ordinary, uri, "theirs")
    assert run(existing_toml(tmp_path, uri, "theirs"), tmp_path / "b") == 0
    a, b = rows_of(tmp_path / "a"), rows_of(tmp_path / "b")
    resolution = json.loads((tmp_path / "b" / "summary.json").read_text())["resolution"]
    assert resolution["located"]["unresolved"] == 0 and resolution["evidence_spans_uncovered"] == 0
    assert (resolution["rows_placed_by_guess"] > 0) == (profile == "production")
    pd.testing.assert_frame_equal(a[["query_id", "config", *MEASURED]], b[["query_id", "config", *MEASURED]])
    assert summary_measures(tmp_path / "a") == summary_measures(tmp_path / "b")
    assert set(LATENCY_COLUMNS) <= set(b.columns)
