"""A suggested ``[collection]`` table for a collection built elsewhere, read off its schema and a few rows.

Pure Python: it reads a :class:`~rag_eval.search.milvus.existing.CollectionInfo` and sample rows, and
recognises the default schemas of the integration libraries teams build their collections with
(langchain-milvus, llama-index-vector-stores-milvus, milvus-haystack) and rag_eval's own. Each schema:
docs/existing-collection.md, "Look first".
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from rag_eval.core.parsing import parse_json
from rag_eval.search.milvus.existing import CollectionInfo
from rag_eval.search.milvus.schema import SearchTarget

# names a value is usually stored under, most telling first
_NAMES: dict[str, tuple[str, ...]] = {
    "doc_id": ("doc_id", "document_id", "ref_doc_id", "docId", "source_id", "file_id", "source", "file_path",
               "file_name", "url"),
    "chunk_index": ("chunk_index", "chunkIndex", "chunk_no", "chunk_number", "seq", "position"),
    "title": ("title", "heading", "header", "file_name"),
    "source": ("source", "url", "file_path", "path", "file_name"),
    "category": ("category", "type", "section", "tag"),
    "start": ("char_start", "start_char_idx", "start_index", "start"),
    "end": ("char_end", "end_char_idx", "end_index", "end"),
}  # fmt: skip
_TEXT_NAMES = ("text", "content", "page_content", "chunk", "document", "body")
_VECTOR_NAMES = ("vector", "embedding", "embeddings", "dense", "dense_vector")
_NODE = "_node_content"  # LlamaIndex's JSON text of the whole node


@dataclass(frozen=True, slots=True, kw_only=True)
class Suggestion:
    fields: dict[str, str]  # the [collection] fields table
    looks_like: str  # which ingest's schema it resembles
    notes: tuple[str, ...]  # what a reader should check

    def toml(self, name: str, *, load: bool) -> str:
        """The ``[collection]`` table to paste into an experiment."""
        pairs = ", ".join(f"{k} = {json.dumps(v)}" for k, v in self.fields.items())
        flag = "true" if load else "false"
        return f"[collection]\nname = {json.dumps(name)}\nload = {flag}\nfields = {{ {pairs} }}\n"


def _keys(samples: Sequence[Mapping[str, Any]], info: CollectionInfo) -> dict[str, str]:
    """Every place a value could be read from, by its spec: scalar fields, keys of JSON fields and of JSON
    texts (LlamaIndex's node), dynamic keys; each with the kind of value seen there."""
    schema = info.schema()
    places: dict[str, str] = {n: t for n, t in schema.items() if not t.endswith("VECTOR")}
    for row in samples:
        for key, value in row.items():
            if key in schema and schema[key] == "JSON" and isinstance(value, Mapping):
                places.update({f"{key}.{k}": _kind(v) for k, v in value.items()})
            elif key not in schema and key != "$meta":
                places.setdefault(key, _kind(value))
                if key == _NODE and isinstance(value, str):
                    try:
                        node = parse_json(value)
                    except ValueError:
                        continue
                    if isinstance(node, Mapping):
                        places.update({f"{key}.{k}": _kind(v) for k, v in node.items() if not isinstance(v, Mapping)})
    return places


def _kind(value: Any) -> str:
    if isinstance(value, bool):
        return "BOOL"
    if isinstance(value, int):
        return "INT64"
    if isinstance(value, str):
        return "VARCHAR"
    return "OTHER"


def _looks_like(info: CollectionInfo) -> str:
    names = set(info.schema())
    if {"vector_id", "content", "chunk_index"} <= names:
        return "rag_eval"
    if {"id", "doc_id", "text", "embedding"} <= names and info.dynamic:
        return "llama-index-vector-stores-milvus"
    pk = next((f for f in info.fields if f.primary), None)
    if pk is not None and pk.name == "pk" and pk.auto_id and {"text", "vector"} <= names:
        return "langchain-milvus"
    if pk is not None and pk.name == "id" and pk.type == "VARCHAR" and {"text", "vector"} <= names and info.dynamic:
        return "milvus-haystack"
    return "an ingest of its own"


def suggest(info: CollectionInfo, samples: Sequence[Mapping[str, Any]]) -> Suggestion:
    """The fields table that maps ``info``'s schema (and what ``samples`` show of JSON and dynamic keys)."""
    notes: list[str] = []
    pk = next((f.name for f in info.fields if f.primary), "")
    vectors = [f.name for f in info.vector_fields()]
    vector = next((v for v in _VECTOR_NAMES if v in vectors), vectors[0] if vectors else "")
    if len(vectors) > 1:
        notes.append(f"several vector fields ({', '.join(vectors)}): check fields.vector is the one searched")
    places = _keys(samples, info)
    text = next((n for n in _TEXT_NAMES if places.get(n) == "VARCHAR"), None)
    if text is None:
        text = _longest_text(samples, [n for n, t in places.items() if t == "VARCHAR" and "." not in n])
        notes.append(f"no usual text field: {text!r} holds the longest texts in the sample")
    fields = {"id": pk, "vector": vector, "text": text or ""}
    taken = set(fields.values())
    for key, names in _NAMES.items():
        found = _first(places, names, integer=key in ("chunk_index", "start", "end"), taken=taken)
        if found is not None:
            fields[key] = found
    if "doc_id" not in fields:
        notes.append("no doc id found: every row is located across the corpus (set fields.doc_id if one exists)")
    elif fields["doc_id"].split(".")[-1] in ("source", "file_path", "file_name", "url"):
        notes.append(f"fields.doc_id is {fields['doc_id']!r}: its values must be the data set's document ids")
    if "start" in fields and "end" not in fields:
        notes.append("a start offset without an end: fields.start is verified against each row's text")
    return Suggestion(fields=fields, looks_like=_looks_like(info), notes=tuple(notes))


def _first(places: Mapping[str, str], names: Sequence[str], *, integer: bool, taken: set[str]) -> str | None:
    """The first place whose last name is one of ``names`` (a field before a JSON key before a node key)."""
    for name in names:
        for spec in sorted(places, key=lambda s: (s.count("."), s.startswith(_NODE), s)):
            if spec.split(".")[-1] != name or spec in taken:
                continue
            kind = places[spec]
            if integer and not (kind.startswith("INT") or kind == "OTHER"):
                continue
            if not integer and kind not in ("VARCHAR", "INT64", "OTHER"):
                continue
            return spec
    return None


def _longest_text(samples: Sequence[Mapping[str, Any]], names: Sequence[str]) -> str | None:
    def mean_length(name: str) -> float:
        values = [len(v) for r in samples if isinstance(v := r.get(name), str)]
        return sum(values) / len(values) if values else 0.0

    return max(names, key=mean_length, default=None)


@dataclass(frozen=True, slots=True, kw_only=True)
class Inspected:
    """What `rag-eval inspect` found at a URI: its collections, or one collection with rows and a suggested table."""

    target: SearchTarget
    backend: str
    collections: tuple[str, ...]
    info: CollectionInfo | None = None
    samples: list[dict[str, Any]] | None = None
    suggestion: Suggestion | None = None
    load_default: bool = False  # what a run's [collection] load would have to be on this backend
