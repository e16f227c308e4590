"""Queries from an OTLP JSON trace export (the OpenTelemetry Collector's file exporter: one
``ExportTraceServiceRequest`` object a line, or a whole file holding one pretty-printed object), read from
OpenInference spans:

- a RETRIEVER span (``openinference.span.kind``): the query is ``input.value`` (with ``input.mime_type``
  ``application/json``: the JSON's ``query`` when it is an object);
- a TOOL span whose ``tool.name`` is ``lookup_knowledge``: the call's ``query`` argument, ``input.value``
  read as a JSON object (``tool.parameters`` is the tool's schema, not the call).

A RETRIEVER span below a lookup_knowledge TOOL span (same trace, through the parent chain of the spans in the
file) is the same request: counted as a record and skipped. The rules: docs/traffic.md, "Traces".

>>> attrs = [{"key": "openinference.span.kind", "value": {"stringValue": "RETRIEVER"}},
...          {"key": "input.value", "value": {"stringValue": "vpn down"}}]
>>> span = {"traceId": "01", "spanId": "02", "attributes": attrs}
>>> _read_span(span, Fields(text="query"), ("t.jsonl", 1))[1].text
'vpn down'
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from rag_eval.core.errors import DatasetError, quoted
from rag_eval.core.parsing import TextError, parse_json
from rag_eval.traffic.records import Fields, json_problem, lines
from rag_eval.traffic.tally import MISSING, Record

# OpenInference's attribute names and values (openinference-semantic-conventions: SpanAttributes,
# OpenInferenceSpanKindValues; the unit tests check these equal the package's constants)
SPAN_KIND: Final = "openinference.span.kind"
INPUT_VALUE: Final = "input.value"
INPUT_MIME_TYPE: Final = "input.mime_type"
TOOL_NAME: Final = "tool.name"
RETRIEVER: Final = "RETRIEVER"
TOOL: Final = "TOOL"
JSON_MIME: Final = "application/json"
LOOKUP_TOOL: Final = "lookup_knowledge"

NO_QUERY_ARGUMENT: Final = "no query argument"
INSIDE_TOOL_CALL: Final = "retriever inside a lookup_knowledge call"
REASONS: Final = (NO_QUERY_ARGUMENT, INSIDE_TOOL_CALL)

_MAX_DEPTH: Final = 64  # nesting of arrayValue / kvlistValue


@dataclass(slots=True)
class _Candidate:
    """A matching span: its query (or why it has none), id and category, and where it sits in its trace."""

    line: int
    retriever: bool
    trace: str
    parent: str
    text: object
    ident: object
    category: object


def otlp_records(path: Path, fields: Fields, digest: Any) -> Iterator[Record | str | None]:
    """A record for every matching span in file order; a skip reason (str) for a matching span without a
    query; None for a blank line. The whole file is read before the first record (a parent span may come
    after its child)."""
    parents: dict[tuple[str, str], str] = {}
    lookups: set[tuple[str, str]] = set()
    found: list[_Candidate] = []
    blank = 0
    for n, export in _exports(path, digest):
        if export is None:
            blank += 1
            continue
        for span, candidate in _spans_and_candidates(export, fields, where=(str(path), n)):
            key = (span.trace, span.ident)
            parents[key] = span.parent
            if span.lookup:
                lookups.add(key)
            if candidate is not None:
                found.append(candidate)
    yield from (None for _ in range(blank))
    for c in found:
        if c.retriever and _below(c.trace, c.parent, parents, lookups):
            yield INSIDE_TOOL_CALL
        elif isinstance(c.text, _Reason):
            yield c.text.reason
        else:
            yield Record(line=c.line, text=c.text, ident=c.ident, category=c.category)


def _below(trace: str, parent: str, parents: dict[tuple[str, str], str], lookups: set[tuple[str, str]]) -> bool:
    seen: set[str] = set()
    while parent and parent not in seen:
        if (trace, parent) in lookups:
            return True
        seen.add(parent)
        parent = parents.get((trace, parent), "")
    return False


def _exports(path: Path, digest: Any) -> Iterator[tuple[int, dict[str, Any] | None]]:
    """(line, export object) of a JSON-lines export, None for a blank line; a file whose first line is not
    JSON is read whole as one document."""
    source = lines(path, digest)
    head: list[str] = []
    for n, line in source:
        head.append(line)
        if not line.strip():
            continue
        try:
            obj = parse_json(line)
        except TextError as exc:
            if exc.column is None:  # well formed but unreadable (too deep, too long a number): not a document's line
                raise DatasetError(json_problem(exc), path=str(path), line=n) from None
            whole = "".join([*head, *(rest for _, rest in source)])
            yield 1, _export(_document(whole, path), path, 1)
            return
        yield from ((k, None) for k in range(1, n))
        yield n, _export(obj, path, n)
        break
    for n, line in source:
        yield n, _export(_load(line, path, n), path, n) if line.strip() else None


def _document(text: str, path: Path) -> object:
    try:
        return parse_json(text)
    except TextError as exc:
        raise DatasetError(json_problem(exc), path=str(path), line=exc.line) from None


def _load(line: str, path: Path, n: int) -> object:
    try:
        return parse_json(line)
    except TextError as exc:
        raise DatasetError(json_problem(exc), path=str(path), line=n) from None


def _export(obj: object, path: Path, n: int) -> dict[str, Any]:
    if not isinstance(obj, dict) or not isinstance(obj.get("resourceSpans"), list):
        what = "has no list" if isinstance(obj, dict) else f"is a JSON {type(obj).__name__}, not an object with a list"
        raise DatasetError(
            f"not an OTLP trace export: the line {what} 'resourceSpans' (an ExportTraceServiceRequest in OTLP "
            "JSON); set format = to the log's format",
            path=str(path),
            line=n,
            field="resourceSpans",
        )
    return obj


@dataclass(slots=True)
class _Span:
    trace: str
    ident: str
    parent: str
    lookup: bool


@dataclass(frozen=True, slots=True)
class _Reason:
    reason: str


def _items(value: object, field: str, where: tuple[str, int]) -> list[Any]:
    if value is None:
        return []
    if not isinstance(value, list):
        raise DatasetError(f"must be a list, not {type(value).__name__}", path=where[0], line=where[1], field=field)
    return value


def _object(value: object, field: str, where: tuple[str, int]) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise DatasetError(
            f"an entry must be an object, not {quoted(value, 60)}", path=where[0], line=where[1], field=field
        )
    return value


def _spans_and_candidates(
    export: dict[str, Any], fields: Fields, *, where: tuple[str, int]
) -> Iterator[tuple[_Span, _Candidate | None]]:
    for resource in _items(export["resourceSpans"], "resourceSpans", where):
        scopes = _object(resource, "resourceSpans", where)
        for scope in _items(scopes.get("scopeSpans", scopes.get("instrumentationLibrarySpans")), "scopeSpans", where):
            for span in _items(_object(scope, "scopeSpans", where).get("spans"), "spans", where):
                yield _read_span(_object(span, "spans", where), fields, where)


def _read_span(span: dict[str, Any], fields: Fields, where: tuple[str, int]) -> tuple[_Span, _Candidate | None]:
    ids = {k: span.get(k) or "" for k in ("traceId", "spanId", "parentSpanId")}
    for key, value in ids.items():
        if not isinstance(value, str):
            raise DatasetError(f"must be a hex string, not {quoted(value)}", path=where[0], line=where[1], field=key)
    wanted = {SPAN_KIND, INPUT_VALUE, INPUT_MIME_TYPE, TOOL_NAME, fields.ident, fields.category}
    attrs = _attributes(span.get("attributes"), wanted, where)
    kind = attrs.get(SPAN_KIND)
    kind = kind.upper() if isinstance(kind, str) else None
    lookup = kind == TOOL and attrs.get(TOOL_NAME) == LOOKUP_TOOL
    shape = _Span(
        trace=ids["traceId"].lower(), ident=ids["spanId"].lower(), parent=ids["parentSpanId"].lower(), lookup=lookup
    )
    if kind != RETRIEVER and not lookup:
        return shape, None
    return shape, _Candidate(
        line=where[1],
        retriever=not lookup,
        trace=shape.trace,
        parent=shape.parent,
        text=_tool_query(attrs) if lookup else _retriever_query(attrs),
        ident=attrs.get(fields.ident, MISSING) if fields.ident is not None else shape.ident or MISSING,
        category=attrs.get(fields.category, MISSING) if fields.category is not None else MISSING,
    )


def _retriever_query(attrs: dict[str, object]) -> object:
    value = attrs.get(INPUT_VALUE)
    if value is None:
        return _Reason(NO_QUERY_ARGUMENT)
    if isinstance(value, str) and attrs.get(INPUT_MIME_TYPE) == JSON_MIME:
        try:
            parsed = parse_json(value)
        except TextError:
            return value
        if isinstance(parsed, dict):
            return parsed.get("query", _Reason(NO_QUERY_ARGUMENT))
        return parsed if isinstance(parsed, str) else value
    return value


def _tool_query(attrs: dict[str, object]) -> object:
    value = attrs.get(INPUT_VALUE)
    if not isinstance(value, str):
        return _Reason(NO_QUERY_ARGUMENT)
    try:
        parsed = parse_json(value)
    except TextError:
        return _Reason(NO_QUERY_ARGUMENT)
    if not isinstance(parsed, dict) or "query" not in parsed:
        return _Reason(NO_QUERY_ARGUMENT)
    return parsed["query"]


def _attributes(value: object, wanted: set[str | None], where: tuple[str, int]) -> dict[str, object]:
    """The span's attributes named in ``wanted``, their OTLP AnyValue read as Python values."""
    out: dict[str, object] = {}
    for item in _items(value, "attributes", where):
        key = item.get("key") if isinstance(item, dict) else None
        if not isinstance(key, str):
            raise DatasetError(
                f"an attribute must be an object with a string 'key', not {quoted(item, 80)}",
                path=where[0],
                line=where[1],
                field="attributes",
            )
        if key in wanted:
            try:
                out[key] = any_value(item.get("value"))
            except (ValueError, TypeError, binascii.Error) as exc:
                raise DatasetError(
                    f"the attribute {quoted(key)} has no OTLP AnyValue ({exc})",
                    path=where[0],
                    line=where[1],
                    field="attributes",
                ) from None
    return out


def any_value(value: object, depth: int = 0) -> object:
    """An OTLP JSON AnyValue as a Python value (``intValue`` may be a string of digits, ``bytesValue`` is
    base64); an empty or missing value is None.

    >>> any_value({"intValue": "42"}), any_value({"arrayValue": {"values": [{"boolValue": True}, {}]}})
    (42, [True, None])
    >>> any_value({"kvlistValue": {"values": [{"key": "k", "value": {"doubleValue": 0.5}}]}})
    {'k': 0.5}
    """
    if value is None or value == {}:
        return None
    if not isinstance(value, dict) or len(value) != 1 or depth > _MAX_DEPTH:
        raise ValueError(f"{quoted(value, 80)} is not an AnyValue with one kind")
    ((kind, inner),) = value.items()
    if kind == "stringValue" and isinstance(inner, str):
        return inner
    if kind == "intValue" and isinstance(inner, str | int) and not isinstance(inner, bool):
        return int(inner)
    if kind == "doubleValue" and isinstance(inner, str | int | float) and not isinstance(inner, bool):
        return float(inner)
    if kind == "boolValue" and isinstance(inner, bool):
        return inner
    if kind == "bytesValue" and isinstance(inner, str):
        return base64.b64decode(inner, validate=True)
    if kind in ("arrayValue", "kvlistValue") and isinstance(inner, dict):
        items = inner.get("values") or []
        if not isinstance(items, list):
            raise ValueError(f"{kind}.values must be a list")
        if kind == "arrayValue":
            return [any_value(v, depth + 1) for v in items]
        return {str(kv.get("key")): any_value(kv.get("value"), depth + 1) for kv in items if isinstance(kv, dict)}
    raise ValueError(f"{quoted(kind, 40)} with {quoted(inner, 60)} is not a known AnyValue")
