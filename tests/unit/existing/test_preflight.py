"""The preflight of a collection built elsewhere, as far as it runs without Milvus: a missing Lite file
refused before it is opened (opening would create it), the field map read against a described schema
(the vector field's index and dimension, the partitions), a mapping no sampled row has, the share of
rows that could not be located, the fingerprint a resolution is kept under, the cache, label drift."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from rag_eval.core.errors import ConfigError
from rag_eval.datasets.beir import Dataset, Document, Qrel, Query, SpanQrel
from rag_eval.datasets.placement import StoredRow
from rag_eval.existing import preflight
from rag_eval.existing.preflight import ResolutionCache, field_map, fingerprint, label_drift, open_existing
from rag_eval.existing.resolution import resolve
from rag_eval.experiment import CollectionSpec, load_experiment
from rag_eval.search.milvus.existing import CollectionInfo, FieldInfo, IndexInfo
from tests.conftest import SHIPPED

EXISTING = SHIPPED / "experiments" / "existing.toml"
TEXT = "Check the lag. Restart it. Rotate the logs. Keep 30 days."
FIELDS = {"id": "pk", "vector": "vector", "text": "text", "doc_id": "doc_id"}


def info(*, dim: int = 4, indexed: bool = True, rows: int = 3, partitions: tuple[str, ...] = ("_default",),
         text_type: str = "VARCHAR") -> CollectionInfo:  # fmt: skip
    return CollectionInfo(
        name="kb", dynamic=False, rows=rows, load_state="Loaded", partitions=partitions,
        fields=(FieldInfo(name="pk", type="VARCHAR", primary=True), FieldInfo(name="vector", type="FLOAT_VECTOR",
                params={"dim": dim}), FieldInfo(name="text", type=text_type), FieldInfo(name="doc_id", type="VARCHAR")),
        indexes=(IndexInfo(field_name="vector", index_type="HNSW", metric="COSINE"),) if indexed else (),
    )  # fmt: skip


def spec(**more: Any) -> CollectionSpec:
    return CollectionSpec(name="kb", fields=FIELDS, **more)


def problem(call: Any, *args: Any, **kwargs: Any) -> str:
    with pytest.raises(ConfigError) as err:
        call(*args, **kwargs)
    assert err.value.exit_code == 2
    return str(err.value)


def dataset() -> Dataset:
    spans = (SpanQrel("q", "d", 15, 26, 1),)  # "Restart it."
    return Dataset(
        name="x", path=Path("x"), split="test", documents={"d": Document(id="d", title="T", text=TEXT)},
        queries={"q": Query(id="q", text="?")}, qrels=(Qrel("q", "d", 1),), spans=spans, checksum="sum",
    )  # fmt: skip


def test_a_missing_lite_file_is_refused_before_it_is_opened(tmp_path: Path) -> None:
    exp = replace(load_experiment(EXISTING), milvus_uri=str(tmp_path / "none.db"))
    message = problem(open_existing, exp, load=True)
    assert "milvus.uri" in message
    assert f"{tmp_path / 'none.db'} holds no Milvus Lite database: it is read, never created" in message
    assert not (tmp_path / "none.db").exists()


def test_the_field_map_is_read_against_the_schema() -> None:
    fields = field_map(spec(), info(), query_dim=4)
    assert (fields.vector, fields.refs()["text"].spec) == ("vector", "text")


@pytest.mark.parametrize(
    ("described", "partitions", "key", "message"),
    [
        (info(indexed=False), (), "collection.fields.vector", "field 'vector' has no index: the collection cannot be "
         "searched"),
        (info(dim=8), (), "collection.fields.vector", "field 'vector' holds 8-d vectors but the query vectors are "
         "4-d: give the [embedder] the collection was embedded with"),
        (info(partitions=("_default", "p1")), ("p1", "p2"), "collection.partitions",
         "no partition 'p2' (partitions: _default, p1)"),
    ],
)  # fmt: skip
def test_a_field_map_that_does_not_fit_the_collection_names_its_key(
    described: CollectionInfo, partitions: tuple[str, ...], key: str, message: str
) -> None:
    text = problem(field_map, spec(partitions=partitions), described, query_dim=4)
    assert message in text and key in text


def test_a_field_the_schema_lacks_names_its_key() -> None:
    text = problem(field_map, CollectionSpec(name="kb", fields={**FIELDS, "text": "body"}), info(), query_dim=4)
    assert "collection.fields.text" in text


def test_a_mapped_value_no_sampled_row_has_is_a_mapping_mistake() -> None:
    fields = field_map(spec(), info(), query_dim=4)
    rows = [{"pk": "1", "vector": [0.0] * 4, "text": "a", "doc_id": None}, {"pk": "2", "text": "b", "doc_id": None}]
    text = problem(preflight._check_values, fields, rows)
    assert "collection.fields.doc_id" in text
    assert "'doc_id' has no value in any of the 2 rows looked at: check the field name and path" in text
    preflight._check_values(fields, [])  # an empty collection: nothing to look at
    preflight._check_values(fields, [*rows, {"pk": "3", "text": "c", "doc_id": "d"}])  # one row has it


def test_a_resolution_whose_rows_are_not_located_is_refused() -> None:
    unplaced = [StoredRow(pk="1", doc_id="d", text="Nothing alike at all, not from this corpus."),
                StoredRow(pk="2", doc_id="d", text="Also unrelated words entirely, zebra quartz.")]  # fmt: skip
    text = problem(preflight._check, spec(), resolve(dataset(), unplaced))
    assert "collection.fields.text" in text
    assert "none of the 2 rows read could be located in the source documents: check fields.text and the data set" in (
        text
    )
    half = [StoredRow(pk="1", doc_id="d", text="Check the lag. Restart it."), unplaced[0]]
    text = problem(preflight._check, spec(max_unresolved=0.4), resolve(dataset(), half))
    assert "collection.max_unresolved" in text
    assert "1 of 2 rows (50.0%) could not be located in the source documents, over the 40.0% allowed" in text
    assert preflight._check(spec(max_unresolved=0.5), resolve(dataset(), half)) is None  # at the limit: accepted


def test_the_fingerprint_is_of_the_rows_in_any_order_and_changes_with_any_of_them() -> None:
    rows = [StoredRow(pk="1", doc_id="d", text="a", chunk_index=0, start=0, end=1),
            StoredRow(pk="2", doc_id=None, text="b")]  # fmt: skip
    key = fingerprint(info(), rows)
    assert len(key) == 16 and int(key, 16) >= 0
    assert fingerprint(info(), rows[::-1]) == key
    changed = [
        [replace(rows[0], text="A"), rows[1]], [replace(rows[0], doc_id="e"), rows[1]],
        [replace(rows[0], chunk_index=1), rows[1]], [replace(rows[0], start=1), rows[1]],
        [replace(rows[0], end=2), rows[1]], [replace(rows[0], pk="3"), rows[1]], rows[:1],
    ]  # fmt: skip
    assert len({key, *(fingerprint(info(), r) for r in changed)}) == 1 + len(changed)
    assert fingerprint(info(rows=4), rows) != key  # the row count
    assert fingerprint(info(text_type="JSON"), rows) != key  # the schema
    assert fingerprint(info(dim=8), rows) != key  # a field's parameters


def test_the_cache_reads_back_the_latest_resolution_of_its_version(tmp_path: Path) -> None:
    exp = load_experiment(EXISTING)
    cache = ResolutionCache(tmp_path, exp, dataset())
    assert cache.dir.parent == tmp_path and cache.dir.name.startswith("kb_chunks-") and len(cache.dir.name) == 22
    assert cache.latest() is None
    resolution = resolve(dataset(), [StoredRow(pk="1", doc_id="d", text="Check the lag. Restart it.")])
    cache.write("f1", resolution, {"q": [["d", 0, 26, 1]]})
    found = cache.latest()
    assert found is not None and (found["version"], found["fingerprint"]) == (1, "f1")
    assert found["labels"] == {"q": [["d", 0, 26, 1]]}
    assert found["locations"] == [["1", "d", "d", 0, 26, "exact", 100.0, False, False]]
    (cache.dir / "f1.json").write_text(json.dumps({**found, "version": 2}), encoding="utf-8")
    assert cache.latest() is None  # another version: not read
    (cache.dir / "latest.json").write_text("{", encoding="utf-8")
    assert cache.latest() is None  # a damaged pointer: nothing kept
    (cache.dir / "latest.json").write_text('{"fingerprint": "gone"}', encoding="utf-8")
    assert cache.latest() is None


def test_the_cache_is_one_per_collection_data_and_labelling() -> None:
    exp = load_experiment(EXISTING)
    base = ResolutionCache(Path("c"), exp, dataset()).dir
    assert ResolutionCache(Path("c"), exp, dataset()).dir == base
    assert ResolutionCache(Path("c"), exp, replace(dataset(), checksum="other")).dir != base
    assert ResolutionCache(Path("c"), replace(exp, min_overlap_chars=5), dataset()).dir != base
    assert exp.existing is not None
    renamed = replace(exp, existing=replace(exp.existing, name="kb chunks/v2"))
    assert ResolutionCache(Path("c"), renamed, dataset()).dir.name.startswith("kb-chunks-v2-")


def test_label_drift_counts_labels_added_and_removed_and_the_queries_changed() -> None:
    before = {"q": [["d", 0, 10, 1]], "r": [["d", 20, 30, 2]], "s": [["e", 0, 5, 1]]}
    assert label_drift(before, before) == {
        "labels_before": 3, "labels_after": 3, "added": 0, "removed": 0, "queries_changed": 0,
    }  # fmt: skip
    after = {"q": [["d", 0, 10, 1]], "r": [["d", 20, 30, 1]], "t": [["e", 0, 5, 1], ["e", 6, 9, 1]]}
    # r's grade changed (one removed, one added), s gone (one removed), t new (two added)
    assert label_drift(before, after) == {
        "labels_before": 3, "labels_after": 4, "added": 3, "removed": 2, "queries_changed": 3,
    }  # fmt: skip
    reordered = {"q": [["d", 5, 9, 1], ["d", 0, 4, 1]]}
    assert label_drift({"q": [["d", 0, 4, 1], ["d", 5, 9, 1]]}, reordered)["queries_changed"] == 0
    assert label_drift({}, {}) == {"labels_before": 0, "labels_after": 0, "added": 0, "removed": 0,
                                   "queries_changed": 0}  # fmt: skip
