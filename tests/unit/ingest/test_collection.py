"""The rows an ingest writes under a profile (legacy rows, rows without doc id, re-ingested copies: a
deterministic share each), what a collection is built from, and its name."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from types import SimpleNamespace

from rag_eval.core.types import SearchMode
from rag_eval.datasets.beir import Dataset, Document, Query
from rag_eval.datasets.chunking import parse_chunker
from rag_eval.datasets.labels import chunk_dataset
from rag_eval.experiment import PROFILES, IngestProfile, load_experiment
from rag_eval.ingest.collection import (
    MANIFEST_VERSION,
    IngestSource,
    collection_manifest,
    collection_name,
    manifest_hash,
    needs_full_text,
    plan_rows,
)
from tests.conftest import SHIPPED

EXP = load_experiment(SHIPPED / "experiments" / "default.toml")


def dataset(n_docs: int, sentences: int = 4) -> Dataset:
    docs = {f"d{i}": Document(id=f"d{i}", title="", text=" ".join(f"S{j} of {i}." for j in range(sentences)))
            for i in range(n_docs)}  # fmt: skip
    queries = {"q": Query(id="q", text="?")}
    return Dataset(name="Tiny KB-2", path=Path("x"), split="test", documents=docs, queries=queries, qrels=(),
                   spans=None, checksum="sum")  # fmt: skip


SMALL = chunk_dataset(dataset(2), parse_chunker("sentences:size=2,overlap=0"))  # 2 documents x 2 chunks
LARGE = chunk_dataset(dataset(1000), parse_chunker("sentences:size=2,overlap=0"))  # 2000 chunks


def test_a_clean_profile_writes_each_chunk_once_as_it_is_ids_in_corpus_order() -> None:
    rows = plan_rows(SMALL, PROFILES["clean"])
    assert [(r.vector_id, r.chunk.key, r.doc_id, r.chunk_index, r.kind, r.copy_of) for r in rows] == [
        (1, "d0#chunk-0", "d0", 0, "clean", None), (2, "d0#chunk-1", "d0", 1, "clean", None),
        (3, "d1#chunk-0", "d1", 0, "clean", None), (4, "d1#chunk-1", "d1", 1, "clean", None),
    ]  # fmt: skip


def test_shares_of_one_take_every_row() -> None:
    legacy = plan_rows(SMALL, IngestProfile(legacy_share=1.0))
    assert {(r.kind, r.chunk_index) for r in legacy} == {("legacy", None)} and [r.doc_id for r in legacy] == [
        "d0", "d0", "d1", "d1"]  # fmt: skip
    missing = plan_rows(SMALL, IngestProfile(missing_doc_share=1.0))
    assert {(r.kind, r.doc_id) for r in missing} == {("missing_doc", None)}
    assert [r.chunk_index for r in missing] == [0, 1, 0, 1]
    copied = plan_rows(SMALL, IngestProfile(duplicate_share=1.0))
    assert [(r.vector_id, r.kind, r.copy_of) for r in copied] == [
        (1, "clean", None), (2, "clean", None), (3, "clean", None), (4, "clean", None),
        (5, "duplicate", 1), (6, "duplicate", 2), (7, "duplicate", 3), (8, "duplicate", 4),
    ]  # fmt: skip
    assert [r.chunk.key for r in copied[4:]] == [r.chunk.key for r in copied[:4]]
    both = plan_rows(SMALL, IngestProfile(legacy_share=1.0, duplicate_share=1.0))
    assert [(r.kind, r.chunk_index) for r in both[4:]] == [("duplicate", None)] * 4  # a copy is written as its row


def test_the_production_profile_takes_its_shares_deterministically() -> None:
    profile = PROFILES["production"]  # 10% legacy, 5% without doc id, 10% copied, seed 7
    rows = plan_rows(LARGE, profile)
    assert plan_rows(LARGE, profile) == rows
    kinds = [r.kind for r in rows]
    n = len(LARGE.chunks)
    # a share p of 2000 independent draws: within 4 standard deviations, sqrt(2000 p (1 - p))
    assert abs(kinds.count("legacy") - 200) <= 4 * (n * 0.1 * 0.9) ** 0.5
    assert abs(kinds.count("missing_doc") - 100) <= 4 * (n * 0.05 * 0.95) ** 0.5
    assert abs(kinds.count("duplicate") - 200) <= 4 * (n * 0.1 * 0.9) ** 0.5
    assert [r.vector_id for r in rows] == list(range(1, len(rows) + 1))
    assert all(rows[r.copy_of - 1].chunk == r.chunk for r in rows if r.copy_of is not None)
    other = plan_rows(LARGE, replace(profile, seed=8))
    assert [r.kind for r in other] != kinds  # the seed chooses the rows


def test_what_a_collection_is_built_from_and_its_name() -> None:
    ds = dataset(2)
    files = [SimpleNamespace(path=Path(name), checksum=sha) for name, sha in (("q.npz", "b"), ("c.npz", "a"))]
    resolver = SimpleNamespace(model_id="model-x", dim=384, precomputed=files)  # what the manifest reads of it
    source = IngestSource(dataset=ds, corpus=SMALL, rows=tuple(range(6)))  # type: ignore[arg-type]
    manifest = collection_manifest(EXP, source, resolver)  # type: ignore[arg-type]
    assert manifest == {
        "manifest_version": MANIFEST_VERSION, "dataset": "Tiny KB-2", "dataset_checksum": "sum",
        "chunker": "sentences:size=2,overlap=0", "chunks": 4, "embedder": "model-x", "index": EXP.index.to_json(),
        "profile": EXP.profile.as_dict(), "rows": 6, "full_text": False, "dim": 384,
        "vector_files": [["c.npz", "a"], ["q.npz", "b"]],
    }  # fmt: skip
    key = manifest_hash(manifest)
    assert len(key) == 10 and manifest_hash(dict(reversed(list(manifest.items())))) == key
    assert manifest_hash({**manifest, "rows": 7}) != key
    assert collection_name(replace(EXP, collection=None), manifest) == f"tiny_kb_2_{key}"
    assert collection_name(replace(EXP, collection="mine"), manifest) == "mine"


def test_hybrid_search_needs_the_full_text_field() -> None:
    assert not needs_full_text(EXP)
    hybrid = replace(EXP, configs=(*EXP.configs, replace(EXP.configs[0], name="h", mode=SearchMode.HYBRID)))
    assert needs_full_text(hybrid)
