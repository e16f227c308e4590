"""Where a hit's values live in a collection's rows: the mapping of a collection built elsewhere.

A collection that another ingest wrote (LangChain's, LlamaIndex's, Haystack's or a hand-written one) has
its own field names. :class:`FieldMap` says where each value of the D6 port's hit comes from; each value
is a :class:`FieldRef`: a scalar field (``"source"``), a key inside a JSON field (``"metadata.source"``,
also inside a JSON *string* such as LlamaIndex's ``_node_content``), or a dynamic field (a name that is
not in the schema of a collection with dynamic fields on). Pure Python: no pymilvus.

>>> ref = FieldRef.parse("metadata.source", schema={"metadata": "JSON"}, dynamic=False)
>>> (ref.output, ref.expr, ref.read({"metadata": {"source": "kb/lag.md"}}))
('metadata', 'metadata["source"]', 'kb/lag.md')
>>> FieldRef.parse("_node_content.start_char_idx", schema={}, dynamic=True).read(
...     {"_node_content": '{"start_char_idx": 15}'})
15
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from rag_eval.core.errors import quoted
from rag_eval.core.parsing import ascii_int, parse_json
from rag_eval.search.milvus.quoting import milvus_string_literal

# what the port's hit carries, and whether a collection must map it
HIT_FIELDS: Final = ("id", "vector", "text", "doc_id", "chunk_index", "title", "source", "category", "start", "end")
REQUIRED: Final = ("id", "vector", "text")
SCALAR_TYPES: Final = ("VARCHAR", "INT8", "INT16", "INT32", "INT64", "BOOL", "FLOAT", "DOUBLE")
INTEGER_TYPES: Final = ("INT8", "INT16", "INT32", "INT64")
VECTOR_TYPES: Final = ("FLOAT_VECTOR", "FLOAT16_VECTOR", "BFLOAT16_VECTOR")


class FieldMapError(ValueError):
    """A mapping that does not fit the collection; ``key`` is the ``fields`` key it names."""

    def __init__(self, key: str, message: str) -> None:
        super().__init__(message)
        self.key = key


@dataclass(frozen=True, slots=True, kw_only=True)
class FieldRef:
    """One value's place: ``field`` (a schema field, or a dynamic key), then ``path`` keys inside it."""

    field: str
    path: tuple[str, ...] = ()
    dynamic: bool = False  # a key of the dynamic field ($meta), not a schema field
    json: bool = False  # ``field`` is a JSON field (or a JSON text a path reads into)

    @classmethod
    def parse(cls, spec: str, *, schema: Mapping[str, str], dynamic: bool, key: str = "") -> FieldRef:
        """``spec`` read against ``schema`` (field name -> Milvus type name) and whether the collection has
        dynamic fields; raises :class:`FieldMapError` naming ``key`` when it cannot be found."""
        text = spec.strip()
        if not text or any(not part for part in text.split(".")):
            raise FieldMapError(key, f"{quoted(spec)} is not a field name or a dotted path into a JSON field")
        head, *rest = text.split(".")
        if head in schema:
            kind = schema[head]
            if rest and kind != "JSON" and kind != "VARCHAR":
                raise FieldMapError(key, f"field {head!r} is {kind}: a path ({'.'.join(rest)}) reads only into JSON")
            return cls(field=head, path=tuple(rest), json=bool(rest) or kind == "JSON")
        if dynamic:
            return cls(field=head, path=tuple(rest), dynamic=True, json=bool(rest))
        fields = ", ".join(sorted(schema)) or "none"
        raise FieldMapError(key, f"the collection has no field {quoted(head)} (fields: {fields}; dynamic fields off)")

    @property
    def spec(self) -> str:
        return ".".join((self.field, *self.path))

    @property
    def output(self) -> str:
        """What a search or query asks for to get it (the top-level name; a dynamic key by its name)."""
        return self.field

    @property
    def expr(self) -> str:
        """The left side of a filter on it: ``field``, ``field["k"]["j"]``, ``$meta["key"]``."""
        keys = "".join(f"[{json.dumps(k)}]" for k in self.path)
        if self.dynamic:
            return f"$meta[{json.dumps(self.field)}]{keys}" if keys else self.field
        return f"{self.field}{keys}"

    def read(self, entity: Mapping[str, Any]) -> Any:
        """The value in one returned row (None when any step is missing); a JSON text is parsed on the way."""
        value: Any = entity.get(self.field)
        for k in self.path:
            if isinstance(value, str):
                try:
                    value = parse_json(value)
                except ValueError:
                    return None
            if not isinstance(value, Mapping):
                return None
            value = value.get(k)
        return value


@dataclass(frozen=True, slots=True, kw_only=True)
class FieldMap:
    """Where each value of a hit comes from (None: the collection does not have it)."""

    id: str  # the primary key field
    vector: str  # the vector field searched
    text: FieldRef
    doc_id: FieldRef | None = None
    chunk_index: FieldRef | None = None
    title: FieldRef | None = None
    source: FieldRef | None = None
    category: FieldRef | None = None
    start: FieldRef | None = None
    end: FieldRef | None = None

    def refs(self) -> dict[str, FieldRef]:
        """Every mapped value but the key and the vector, by its name."""
        named = {
            "text": self.text, "doc_id": self.doc_id, "chunk_index": self.chunk_index, "title": self.title,
            "source": self.source, "category": self.category, "start": self.start, "end": self.end,
        }  # fmt: skip
        return {k: v for k, v in named.items() if v is not None}

    def output_fields(self) -> list[str]:
        """The fields a search returns: the key and every mapped top-level field, each once, never the vector."""
        return list(dict.fromkeys([self.id, *(r.output for r in self.refs().values())]))

    def as_table(self) -> dict[str, str]:
        """The ``[collection] fields`` table that gives this mapping."""
        return {"id": self.id, "vector": self.vector, **{k: v.spec for k, v in self.refs().items()}}

    def doc_filter(self, doc_ids: Sequence[str], *, field_is_scalar: bool) -> str:
        """A filter for the rows of these documents (``in`` on a scalar field; ``==`` joined by ``or`` on a
        JSON key or a dynamic field, which Milvus Lite cannot put left of ``in``)."""
        assert self.doc_id is not None
        literals = [milvus_string_literal(d) for d in doc_ids]
        if field_is_scalar and not self.doc_id.path:
            return f"{self.doc_id.expr} in [{', '.join(literals)}]"
        return " or ".join(f"{self.doc_id.expr} == {lit}" for lit in literals)

    def missing_doc_filter(self, *, field_is_scalar: bool) -> str:
        """A filter for the rows without a doc id (an empty string, or no such key)."""
        assert self.doc_id is not None
        if field_is_scalar and not self.doc_id.path:
            return f'{self.doc_id.expr} == ""'
        return f'(not exists {self.doc_id.expr}) or ({self.doc_id.expr} == "")'


def parse_field_map(table: Mapping[str, str], *, schema: Mapping[str, str], dynamic: bool) -> FieldMap:
    """A ``[collection] fields`` table read against the collection's schema (field -> type name); every
    problem is a :class:`FieldMapError` naming its key (the first one found)."""
    unknown = sorted(set(table) - set(HIT_FIELDS))
    if unknown:
        raise FieldMapError(unknown[0], f"unknown key (known: {', '.join(HIT_FIELDS)})")
    for key in REQUIRED:
        if not str(table.get(key, "")).strip():
            raise FieldMapError(key, "required: the collection's field for it")
    pk, vector = table["id"].strip(), table["vector"].strip()
    for key, name, allowed in (("id", pk, ("VARCHAR", "INT64")), ("vector", vector, VECTOR_TYPES)):
        kind = schema.get(name)
        if kind is None:
            known = ", ".join(sorted(schema))
            raise FieldMapError(key, f"the collection has no field {quoted(name)} (fields: {known})")
        if kind not in allowed:
            raise FieldMapError(key, f"field {name!r} is {kind}, not {' or '.join(allowed)}")
    refs = {
        k: FieldRef.parse(str(v), schema=schema, dynamic=dynamic, key=k)
        for k, v in table.items()
        if k not in ("id", "vector")
    }
    for key, ref in refs.items():
        kind = schema.get(ref.field)
        if ref.path or ref.dynamic:
            continue
        if kind not in (*SCALAR_TYPES, "JSON"):
            raise FieldMapError(key, f"field {ref.field!r} is {kind}: map a scalar field or a key of a JSON field")
        if key in ("chunk_index", "start", "end") and kind not in (*INTEGER_TYPES, "JSON", "VARCHAR"):
            raise FieldMapError(key, f"field {ref.field!r} is {kind}, not an integer")
    return FieldMap(id=pk, vector=vector, **refs)


def as_text(value: Any) -> str | None:
    """A stored identity as text: None, ``""`` and non-scalars are missing (D1: empty strings count as missing)."""
    if value is None or isinstance(value, Mapping | list):
        return None
    text = str(value)
    return text if text.strip() else None


def as_index(value: Any) -> int | None:
    """A stored chunk index or offset: an integer >= 0 (or its decimal text), else missing."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value if value >= 0 else None
    if isinstance(value, float) and value.is_integer():
        return int(value) if value >= 0 else None
    if isinstance(value, str):
        return ascii_int(value)
    return None
