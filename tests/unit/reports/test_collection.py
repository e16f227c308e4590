"""What inspect shows of a collection built elsewhere, and the resolution report in words."""

from __future__ import annotations

from rag_eval.reports.existing import inspect_lines, resolution_rows
from rag_eval.search.milvus.existing import CollectionInfo, FieldInfo, IndexInfo
from rag_eval.search.milvus.suggest import suggest

INFO = CollectionInfo(
    name="kb",
    fields=(
        FieldInfo(name="pk", type="INT64", primary=True, auto_id=True),
        FieldInfo(name="text", type="VARCHAR", params={"max_length": 65535}),
        FieldInfo(name="vector", type="FLOAT_VECTOR", params={"dim": 384}),
        FieldInfo(name="metadata", type="JSON"),
    ),
    dynamic=False,
    indexes=(IndexInfo(field_name="vector", index_type="AUTOINDEX", metric="L2"),),
    rows=1200,
    load_state="Loaded",
    partitions=("_default",),
)
SAMPLES = [{"pk": 1, "text": "x" * 300, "metadata": {"doc_id": "lag", "source": "kb/lag.md"}}]


def test_inspect_shows_schema_index_rows_samples_and_a_table_to_paste() -> None:
    lines = inspect_lines(INFO, shown_uri="kb.db", backend="Milvus Lite", samples=SAMPLES,
                          suggestion=suggest(INFO, SAMPLES), load_default=True)  # fmt: skip
    text = "\n".join(lines)
    assert lines[0] == "collection kb at kb.db (Milvus Lite)"
    assert "looks like: langchain-milvus" in text and "rows: 1,200; load state: Loaded; partitions: _default" in text
    assert "pk        INT64  (primary key (auto id))" in text
    assert "vector    FLOAT_VECTOR  (dim 384; index AUTOINDEX, metric L2)" in text
    assert "… (300 characters)" in text  # a long sample value is cut and says how long it was
    assert 'fields = { id = "pk", vector = "vector", text = "text", doc_id = "metadata.doc_id"' in text


def test_an_unloaded_collection_is_described_without_rows() -> None:
    lines = inspect_lines(INFO, shown_uri="http://db:19530", backend="Milvus server", samples=None, suggestion=None,
                          load_default=False)  # fmt: skip
    assert lines[-1].startswith("  not loaded: sample rows and a suggested table need it loaded")
    assert not any("suggested" in line and "table (" in line for line in lines)


def test_the_resolution_report_in_words() -> None:
    report = {
        "collection": "kb", "fingerprint": "f", "rows": 1000, "unresolved_share": 0.012, "max_unresolved": 0.05,
        "located": {"offsets": 0, "exact": 900, "normalised": 60, "fuzzy": 28, "unresolved": 12},
        "labelled_documents": 40, "labelled_documents_found": 38,
        "labelled_documents_missing": [f"d{i}" for i in range(12)], "evidence_spans": 600,
        "evidence_spans_uncovered": 7, "rows_copying_another": 30, "rows_in_another_document": 4,
        "rows_placed_by_guess": 2, "rows_with_offsets_that_disagree": 0,
        "label_drift": {"added": 5, "removed": 3, "queries_changed": 4, "labels_before": 100, "labels_after": 102},
    }  # fmt: skip
    rows = dict(resolution_rows(report))
    assert rows["rows located fuzzily"] == "28" and rows["rows not located (share; allowed)"] == "1.2%; 5.0%"
    assert rows["labelled documents found in the collection"] == "38 of 40"
    assert rows["labelled documents missing"].endswith("d9 and 2 more")
    assert rows["evidence spans no row covers (relevant, never retrievable)"] == "7 of 600"
    assert rows["labels moved since the previous resolution (a re-ingest)"] == (
        "5 added, 3 removed; 4 queries changed (100 -> 102 labels)"
    )
