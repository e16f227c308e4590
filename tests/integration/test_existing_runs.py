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
from rag_eval.experiment import load_experiment
from rag_eval.replay.prepare import prepare
from rag_eval.rundir.rows import LATENCY_COLUMNS
from tests.conftest import ROOT, SHIPPED
from tests.integration.replay_only import replay_only

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
    assert run(ordinary, tmp_path / "a", "--gates", "rollout") == 0  # legacy against D1-D5: the rollout's gates
    same_chunks_other_schema(ordinary, uri, "theirs")
    assert run(existing_toml(tmp_path, uri, "theirs"), tmp_path / "b", "--gates", "rollout") == 0
    a, b = rows_of(tmp_path / "a"), rows_of(tmp_path / "b")
    resolution = json.loads((tmp_path / "b" / "summary.json").read_text())["resolution"]
    assert resolution["located"]["unresolved"] == 0 and resolution["evidence_spans_uncovered"] == 0
    assert (resolution["rows_placed_by_guess"] > 0) == (profile == "production")
    pd.testing.assert_frame_equal(a[["query_id", "config", *MEASURED]], b[["query_id", "config", *MEASURED]])
    assert summary_measures(tmp_path / "a") == summary_measures(tmp_path / "b")
    assert set(LATENCY_COLUMNS) <= set(b.columns)


def small_collection(uri: str, name: str, *, dim: int = 384, doc: Callable[[str], str | None] = lambda d: d,
                     text: Callable[[str], str] = lambda t: t, chunker: str = "sentences:size=3,overlap=0") -> None:
    """The shipped runbooks chunked by ``chunker`` into a collection of the hand-made schema, vectors of
    ``dim`` dimensions made from each text's hash (these runs are refused before any search)."""
    import hashlib

    from pymilvus import DataType, MilvusClient

    from rag_eval.datasets.beir import load_beir
    from rag_eval.datasets.chunking import parse_chunker
    from rag_eval.datasets.labels import chunk_dataset

    corpus = chunk_dataset(load_beir(SHIPPED, "test"), parse_chunker(chunker))
    client = MilvusClient(uri)
    schema = MilvusClient.create_schema(auto_id=False, enable_dynamic_field=False)
    schema.add_field("id", DataType.INT64, is_primary=True)
    schema.add_field("body", DataType.VARCHAR, max_length=8192)
    schema.add_field("embedding", DataType.FLOAT_VECTOR, dim=dim)
    schema.add_field("meta", DataType.JSON)
    index = client.prepare_index_params()
    index.add_index("embedding", index_type="FLAT", metric_type="COSINE")
    client.create_collection(name, schema=schema, index_params=index, consistency_level="Strong")
    rows = []
    for n, c in enumerate(corpus.chunks):
        digest = hashlib.sha256(c.content.encode()).digest()
        vec = [(digest[i % 32] + 1) / 256 for i in range(dim)]
        meta = {"src": c.source, "ttl": c.title, "cat": c.category, "seq": c.chunk_index,
                **({"doc": d} if (d := doc(c.doc_id)) else {})}
        rows.append({"id": n + 1, "body": text(c.content), "embedding": vec, "meta": meta})
    client.insert(name, rows)
    client.flush(name)
    client.close()


REFUSALS: dict[str, tuple[dict[str, Any], str, str]] = {
    # case: (how the collection is built, the experiment's fields table / extra, the key named)
    "missing collection": ({}, "", "collection.name"),
    "no such field": ({}, 'fields = { id = "id", vector = "embedding", text = "body", doc_id = "doc" }',
                      "collection.fields.doc_id"),
    "a JSON path into nothing": (
        {}, 'fields = { id = "id", vector = "embedding", text = "body", doc_id = "meta.nope" }',
        "collection.fields.doc_id",
    ),
    "wrong dimension": ({"dim": 8}, "", "collection.fields.vector"),
    "no row of any labelled document": ({"doc": lambda d: f"other-{d}"}, "", "collection.name"),
    "a fifth of the rows not the data set's": ({"text": lambda t: t[::-1] if len(t) % 5 == 0 else t}, "",
                                               "collection.max_unresolved"),
    "no row the data set's": ({"text": lambda t: t[::-1]}, "", "collection.fields.text"),
}  # fmt: skip


@pytest.mark.milvus_lite
@pytest.mark.parametrize("case", sorted(REFUSALS))
def test_bad_input_is_exit_2_one_line_and_nothing_written(
    case: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    build, fields, key = REFUSALS[case]
    uri = str(tmp_path / "theirs.db")
    small_collection(uri, "theirs", **build)
    name = "absent" if case == "missing collection" else "theirs"
    toml = existing_toml(tmp_path, uri, name, **({"fields": fields.split("=", 1)[1].strip()} if fields else {}))
    capsys.readouterr()
    assert run(toml, tmp_path / "out") == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and err.endswith(f"@ {key}"), err
    assert not (tmp_path / "out").exists()


@pytest.mark.milvus_lite
def test_a_missing_lite_file_is_refused_not_created(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    uri = tmp_path / "nowhere.db"
    assert run(existing_toml(tmp_path, str(uri), "theirs"), tmp_path / "out") == 2
    assert capsys.readouterr().err.strip().endswith("@ milvus.uri")
    assert not uri.exists() and not (tmp_path / "out").exists()


def _state(uri: str) -> dict[str, Any]:
    from pymilvus import MilvusClient

    client = MilvusClient(uri)
    try:
        # collections other tests create and drop on the shared server meanwhile (a run never names one so)
        others = [c for c in client.list_collections() if c.startswith(("t_", "bench_", "hostile_"))]
        out: dict[str, Any] = {"collections": sorted(set(client.list_collections()) - set(others))}
        for name in out["collections"]:
            desc = client.describe_collection(name)
            out[name] = (
                [(f["name"], str(f["type"]), dict(f.get("params") or {})) for f in desc["fields"]],
                client.get_collection_stats(name)["row_count"],
                [(i["index_type"], i["metric_type"], i["field_name"])
                 for i in (client.describe_index(name, x) for x in client.list_indexes(name))],
                client.list_partitions(name),
            )  # fmt: skip
        return out
    finally:
        client.close()


def example_collection(uri: str, name: str) -> None:
    import subprocess
    import sys

    pytest.importorskip("langchain_milvus")
    build = ROOT / "examples" / "existing-collection" / "build_langchain.py"
    done = subprocess.run([sys.executable, str(build), "--uri", uri, "--collection", name], capture_output=True,
                          text=True, timeout=300)  # fmt: skip
    assert done.returncode == 0, done.stderr


def example_toml(tmp: Path, uri: str, name: str) -> Path:
    text = (SHIPPED / "experiments" / "existing.toml").read_text()
    text = text.replace('uri = "../../../reports/milvus/incident-kb-langchain.db"', f'uri = "{uri}"')
    text = text.replace('name = "kb_chunks"', f'name = "{name}"').replace('path = ".."', f'path = "{SHIPPED}"')
    text = text.replace('properties = "configs/', f'properties = "{SHIPPED}/experiments/configs/')
    text += f'\n[embedder]\ncache_dir = "{tmp / "cache"}"\n'
    path = tmp / "example.toml"
    path.write_text(text)
    return path


@pytest.fixture
def example_on(milvus_uri: str, collection_name: str, tmp_path: Path,
               drop_after: Callable[[str, str], None]) -> tuple[str, str]:  # fmt: skip
    drop_after(milvus_uri, collection_name)
    example_collection(milvus_uri, collection_name)
    return milvus_uri, collection_name


def test_the_example_runs_read_only_on_lite_and_the_server(example_on: tuple[str, str], tmp_path: Path) -> None:
    """The LangChain-built example, replayed on both Milvus kinds: exit 0 (its gates warn), every labelled
    document found, the collection and every other one exactly as before."""
    uri, name = example_on
    before = _state(uri)
    toml = example_toml(tmp_path, uri, name)
    extra = ["--milvus-uri", uri] if uri.startswith("http") else []
    if uri.startswith("http"):  # a server's collection is not loaded by a run unless the experiment says so
        toml.write_text(toml.read_text().replace('[collection]\nname', '[collection]\nload = true\nname'))
    assert run(toml, tmp_path / "run", *extra) == 0
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    res = summary["resolution"]
    assert res["labelled_documents_missing"] == [] and res["located"]["unresolved"] == 0
    assert res["located"]["exact"] == res["rows"]
    assert summary["collection"]["name"] == name and summary["collection"]["fingerprint"] == res["fingerprint"]
    after = _state(uri)
    assert after == before
    document = json.loads((tmp_path / "run" / "resolution.json").read_text())
    assert len(document["locations"]) == res["rows"] and {r["how"] for r in document["locations"]} == {"exact"}
    assert "## The collection and its labels" in (tmp_path / "run" / "report.md").read_text()
    assert 'id="collection"' in (tmp_path / "run" / "report.html").read_text()
    lost = rows_of(tmp_path / "run")
    assert lost["relevant_chunks"].map(len).sum() > 0


@pytest.mark.milvus_lite
def test_a_re_ingest_re_resolves_and_says_how_many_labels_moved(tmp_path: Path) -> None:
    """The same collection name rebuilt with another chunker: the second run's fingerprint differs, its labels
    are resolved again and the report counts the labels that moved; compare says the collections differ."""
    from pymilvus import MilvusClient

    uri = str(tmp_path / "theirs.db")
    small_collection(uri, "theirs", dim=384)
    toml = existing_toml(tmp_path, uri, "theirs", extra="max_unresolved = 0.0")
    # hashed vectors, searched meaninglessly, which these labels do not depend on: the fit check, which refuses
    # exactly such vectors, is told to measure anyway
    toml.write_text(toml.read_text().replace("[embedder]\n", "[embedder]\nfit_min = 0\n"))
    assert run(toml, tmp_path / "first") == 0
    again = run(toml, tmp_path / "again")
    assert again == 0
    first = json.loads((tmp_path / "first" / "summary.json").read_text())["resolution"]
    same = json.loads((tmp_path / "again" / "summary.json").read_text())["resolution"]
    assert same["from_cache"] and same["fingerprint"] == first["fingerprint"] and same["label_drift"] is None
    client = MilvusClient(uri)
    client.drop_collection("theirs")
    client.close()
    small_collection(uri, "theirs", dim=384, chunker="chars:size=400,overlap=80")
    assert run(toml, tmp_path / "second") == 0
    second = json.loads((tmp_path / "second" / "summary.json").read_text())["resolution"]
    assert second["fingerprint"] != first["fingerprint"] and not second["from_cache"]
    drift = second["label_drift"]
    assert drift["added"] > 0 and drift["removed"] > 0 and drift["queries_changed"] > 0
    assert main(["compare", str(tmp_path / "second"), "--against", str(tmp_path / "first"), "--out",
                 str(tmp_path / "cmp")]) in (0, 1)  # fmt: skip
    notes = json.loads((tmp_path / "cmp" / "compare.json").read_text())["notes"]
    assert any("collection" in n and first["fingerprint"] in n for n in notes), notes


@pytest.mark.milvus_lite
@pytest.mark.slow
def test_on_dask_workers_the_rows_are_the_serial_runs(tmp_path: Path) -> None:
    """The example collection replayed by two local workers (each on a copy of the Lite file): the same rows
    as the serial run, latency aside."""
    uri = str(tmp_path / "theirs.db")
    example_collection(uri, "kb_chunks")
    toml = example_toml(tmp_path, uri, "kb_chunks")
    serial = replay_only(load_experiment(toml), tmp_path / "serial").rows  # the serial replay's rows
    assert run(toml, tmp_path / "dask", "--workers", "2") == 0
    a = serial.sort_values(["query_id", "config"]).reset_index(drop=True)
    b = rows_of(tmp_path / "dask")
    pd.testing.assert_frame_equal(a[["query_id", "config", *MEASURED]], b[["query_id", "config", *MEASURED]])
