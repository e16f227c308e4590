"""Field maps of collections built elsewhere: where each hit value is read from, and the filters that reach it."""

from __future__ import annotations

import pytest

from rag_eval.search.milvus.fields import FieldMap, FieldMapError, FieldRef, as_index, as_text, parse_field_map

LANGCHAIN_JSON = {"pk": "INT64", "text": "VARCHAR", "vector": "FLOAT_VECTOR", "metadata": "JSON"}
LLAMA = {"id": "VARCHAR", "doc_id": "VARCHAR", "text": "VARCHAR", "embedding": "FLOAT_VECTOR"}


def test_a_scalar_a_json_key_a_dynamic_key_and_a_key_inside_a_json_text() -> None:
    scalar = FieldRef.parse("doc_id", schema=LLAMA, dynamic=True)
    json_key = FieldRef.parse("metadata.source", schema=LANGCHAIN_JSON, dynamic=False)
    dynamic = FieldRef.parse("source", schema=LLAMA, dynamic=True)
    node = FieldRef.parse("_node_content.start_char_idx", schema=LLAMA, dynamic=True)
    assert [r.expr for r in (scalar, json_key, dynamic, node)] == [
        "doc_id", 'metadata["source"]', "source", '$meta["_node_content"]["start_char_idx"]'
    ]
    assert [r.output for r in (scalar, json_key, dynamic, node)] == ["doc_id", "metadata", "source", "_node_content"]
    row = {"doc_id": "lag", "metadata": {"source": "kb/lag.md"}, "source": "kb/x.md",
           "_node_content": '{"start_char_idx": 15, "metadata": {"a": 1}}'}  # fmt: skip
    assert [r.read(row) for r in (scalar, json_key, dynamic, node)] == ["lag", "kb/lag.md", "kb/x.md", 15]


def test_reading_through_something_that_is_not_an_object_is_missing() -> None:
    ref = FieldRef.parse("metadata.a.b", schema=LANGCHAIN_JSON, dynamic=False)
    assert ref.read({"metadata": {"a": 3}}) is None
    assert ref.read({"metadata": "not json {"}) is None
    assert ref.read({}) is None


@pytest.mark.parametrize(
    ("spec", "schema", "dynamic", "message"),
    [
        ("nope", LANGCHAIN_JSON, False, "has no field 'nope'"),
        ("pk.x", LANGCHAIN_JSON, False, r"is INT64: a path \(x\) reads only into JSON"),
        ("metadata..x", LANGCHAIN_JSON, False, "not a field name or a dotted path"),
        ("", LANGCHAIN_JSON, False, "not a field name"),
    ],
)
def test_a_field_that_is_not_there_is_named(spec: str, schema: dict[str, str], dynamic: bool, message: str) -> None:
    with pytest.raises(FieldMapError, match=message) as got:
        FieldRef.parse(spec, schema=schema, dynamic=dynamic, key="doc_id")
    assert got.value.key == "doc_id"


def test_the_map_of_langchains_json_schema() -> None:
    fm = parse_field_map({"id": "pk", "vector": "vector", "text": "text", "doc_id": "metadata.doc_id",
                          "source": "metadata.source"}, schema=LANGCHAIN_JSON, dynamic=False)  # fmt: skip
    assert fm.output_fields() == ["pk", "text", "metadata"]
    assert fm.as_table() == {"id": "pk", "vector": "vector", "text": "text", "doc_id": "metadata.doc_id",
                             "source": "metadata.source"}  # fmt: skip
    assert fm.doc_filter(["a", 'b"'], field_is_scalar=False) == (
        'metadata["doc_id"] == "a" or metadata["doc_id"] == "b\\""'
    )
    assert fm.missing_doc_filter(field_is_scalar=False) == (
        '(not exists metadata["doc_id"]) or (metadata["doc_id"] == "")'
    )


def test_a_scalar_doc_id_is_filtered_with_in() -> None:
    fm = FieldMap(id="id", vector="embedding", text=FieldRef(field="text"), doc_id=FieldRef(field="doc_id"))
    assert fm.doc_filter(["x", "y"], field_is_scalar=True) == 'doc_id in ["x", "y"]'
    assert fm.missing_doc_filter(field_is_scalar=True) == 'doc_id == ""'


@pytest.mark.parametrize(
    ("table", "key", "message"),
    [
        ({"vector": "vector", "text": "text"}, "id", "required"),
        ({"id": "pk", "vector": "vector"}, "text", "required"),
        ({"id": "text", "vector": "vector", "text": "text"}, "id", None),
        ({"id": "pk", "vector": "metadata", "text": "text"}, "vector", "is JSON, not FLOAT_VECTOR"),
        ({"id": "pk", "vector": "vectors", "text": "text"}, "vector", "no field 'vectors'"),
        ({"id": "pk", "vector": "vector", "text": "text", "colour": "x"}, "colour", "unknown key"),
        ({"id": "pk", "vector": "vector", "text": "vector"}, "text", "is FLOAT_VECTOR"),
    ],
)
def test_a_map_that_does_not_fit_names_its_key(table: dict[str, str], key: str, message: str | None) -> None:
    if message is None:  # a VARCHAR primary key is a key too (LlamaIndex's and Haystack's)
        assert parse_field_map(table, schema=LANGCHAIN_JSON | {"text": "VARCHAR"}, dynamic=False).id == "text"
        return
    with pytest.raises(FieldMapError, match=message) as got:
        parse_field_map(table, schema=LANGCHAIN_JSON, dynamic=False)
    assert got.value.key == key


def test_stored_identity_values() -> None:
    assert [as_text(v) for v in (None, "", "  ", "lag", 7, {"a": 1}, [1])] == [None, None, None, "lag", "7", None, None]
    got = [as_index(v) for v in (None, 3, -1, 2.0, 2.5, "4", " 5 ", "x", True)]
    assert got == [None, 3, None, 2, None, 4, 5, None, None]
