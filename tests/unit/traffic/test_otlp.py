"""Queries from OTLP JSON trace exports, written by hand here: OpenInference RETRIEVER spans and lookup_knowledge
TOOL spans, a retriever inside a tool call counted once, every AnyValue kind, and the refusals."""

from __future__ import annotations

import base64
import json
import unicodedata
from collections import Counter
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rag_eval.core.errors import DatasetError
from rag_eval.traffic import otlp
from rag_eval.traffic.logs import Traffic, TrafficSpec, read_traffic
from rag_eval.traffic.otlp import any_value

TRACE = "5b8efff798038103d269b633813fc60c"


def _value(value: object) -> dict[str, object]:
    if isinstance(value, bool):
        return {"boolValue": value}
    if isinstance(value, int):
        return {"intValue": str(value)}
    if isinstance(value, float):
        return {"doubleValue": value}
    return {"stringValue": value}


def _span(span_id: str, parent: str = "", trace: str = TRACE, **attrs: object) -> dict[str, object]:
    return {
        "traceId": trace,
        "spanId": span_id,
        "parentSpanId": parent,
        "name": "span",
        "kind": 1,
        "startTimeUnixNano": "1700000000000000000",
        "endTimeUnixNano": "1700000000100000000",
        "attributes": [{"key": k.replace("__", "."), "value": _value(v)} for k, v in attrs.items()],
        "status": {},
    }


def _retriever(span_id: str, query: str, parent: str = "", **attrs: object) -> dict[str, object]:
    kw = {"openinference__span__kind": "RETRIEVER", "input__value": query, **attrs}
    return _span(span_id, parent, **kw)


def _tool(span_id: str, arguments: str, name: str = "lookup_knowledge", **attrs: object) -> dict[str, object]:
    schema = json.dumps({"type": "object", "properties": {"query": {"type": "string"}}})
    kw = {
        "openinference__span__kind": "TOOL",
        "tool__name": name,
        "tool__parameters": schema,
        "input__value": arguments,
    }
    return _span(span_id, **kw, **attrs)


def _export(*spans: dict[str, object]) -> dict[str, object]:
    resource = {"attributes": [{"key": "service.name", "value": {"stringValue": "agent"}}]}
    return {"resourceSpans": [{"resource": resource, "scopeSpans": [{"scope": {"name": "x"}, "spans": list(spans)}]}]}


def _write(path: Path, *exports: dict[str, object]) -> Path:
    path.write_text("".join(json.dumps(e) + "\n" for e in exports), encoding="utf-8")
    return path


def _read(path: Path, **kw: object) -> Traffic:
    return read_traffic(TrafficSpec(path=path, **kw))  # type: ignore[arg-type]


def _refused(path: Path, **kw: object) -> DatasetError:
    with pytest.raises(DatasetError) as info:
        _read(path, **kw)
    assert info.value.exit_code == 2 and str(path) in str(info.value)
    return info.value


def test_retriever_and_tool_spans_worked_by_hand(tmp_path: Path) -> None:
    path = _write(
        tmp_path / "traces.otlp.jsonl",
        _export(
            _retriever("a1", "reset my password"),
            _tool("b1", json.dumps({"query": "VPN is down", "k": 5})),
            _retriever("b2", "VPN is down", parent="b1"),  # the tool's own retrieval: the same request
            _span("c1", openinference__span__kind="LLM", input__value="not a query"),
            _tool("d1", json.dumps({"query": "ignored"}), name="send_email"),
        ),
        _export(_retriever("e1", "reset  my password")),
    )
    traffic = _read(path)
    assert traffic.format == "otlp"
    assert [(q.id, q.text, q.count) for q in traffic.queries] == [
        ("a1", "reset my password", 2),
        ("b1", "VPN is down", 1),
    ]
    assert traffic.records == 4  # the matching spans: a1, b1, b2, e1
    assert traffic.skipped["retriever inside a lookup_knowledge call"] == 1


def test_a_child_written_before_its_parent_is_still_inside_the_call(tmp_path: Path) -> None:
    grandchild = _retriever("c3", "q", parent="c2")
    middle = _span("c2", parent="c1", openinference__span__kind="CHAIN")
    path = _write(tmp_path / "t.json", _export(grandchild), _export(middle, _tool("c1", '{"query": "q"}')))
    traffic = _read(path)
    assert [(q.text, q.count) for q in traffic.queries] == [("q", 1)]
    assert traffic.skipped["retriever inside a lookup_knowledge call"] == 1
    other_trace = _retriever("c3", "q", parent="c1", trace="0" * 32)  # same ids, another trace: another request
    path = _write(tmp_path / "t2.json", _export(other_trace, _tool("c1", '{"query": "q"}')))
    assert [(q.text, q.count) for q in _read(path).queries] == [("q", 2)]


def test_retriever_input_by_mime_type(tmp_path: Path) -> None:
    spans = [
        _retriever("01", json.dumps({"query": "from json", "top_k": 3}), input__mime_type="application/json"),
        _retriever("02", json.dumps("a json string"), input__mime_type="application/json"),
        _retriever("03", "{not json", input__mime_type="application/json"),
        _retriever("04", json.dumps({"question": "x"}), input__mime_type="application/json"),
        _retriever("05", json.dumps({"query": "plain"}), input__mime_type="text/plain"),
        _span("06", openinference__span__kind="RETRIEVER"),
    ]
    traffic = _read(_write(tmp_path / "t.json", _export(*spans)))
    assert [q.text for q in traffic.queries] == ["from json", "a json string", "{not json", '{"query": "plain"}']
    assert traffic.skipped["no query argument"] == 2


def test_a_tool_call_without_a_query_argument_is_counted(tmp_path: Path) -> None:
    spans = [_tool("01", "{bad"), _tool("02", '{"q": "x"}'), _tool("03", '["x"]'), _tool("04", '{"query": 5}')]
    spans.append(_tool("05", '{"query": "fine"}'))
    traffic = _read(_write(tmp_path / "t.json", _export(*spans)))
    assert [q.text for q in traffic.queries] == ["fine"]
    assert traffic.skipped["no query argument"] == 3 and traffic.skipped["not text"] == 1


def test_id_and_category_from_attributes(tmp_path: Path) -> None:
    spans = [
        _retriever("01", "a", rag__category=3, request__id="r 1"),
        _retriever("02", "a", rag__category="3", request__id="r2"),
        _retriever("03", "a", request__id="r3"),
    ]
    path = _write(tmp_path / "t.json", _export(*spans))
    traffic = _read(path, id="request.id", category="rag.category")
    assert [(q.id, q.count, q.category) for q in traffic.queries] == [("r_1", 2, "3"), ("r3", 1, None)]
    assert _refused(path, category="rag.filter").field == "rag.filter"


def test_a_pretty_printed_single_export_is_read(tmp_path: Path) -> None:
    path = tmp_path / "export.json"
    path.write_text("\n" + json.dumps(_export(_retriever("01", "a"), _retriever("02", "b")), indent=2))
    traffic = _read(path)
    assert traffic.format == "otlp" and [q.text for q in traffic.queries] == ["a", "b"]


def test_every_anyvalue_kind() -> None:
    assert any_value({"stringValue": "s"}) == "s"
    assert any_value({"intValue": "-12"}) == -12 and any_value({"intValue": 7}) == 7
    assert any_value({"doubleValue": 0.25}) == 0.25 and any_value({"doubleValue": "NaN"}) != 0
    assert any_value({"boolValue": False}) is False
    assert any_value({"bytesValue": base64.b64encode(b"\x00\xff").decode()}) == b"\x00\xff"
    assert any_value({"arrayValue": {"values": [{"intValue": "1"}, {"stringValue": "x"}]}}) == [1, "x"]
    assert any_value({"arrayValue": {}}) == []
    nested = {"kvlistValue": {"values": [{"key": "a", "value": {"arrayValue": {"values": [{"boolValue": True}]}}}]}}
    assert any_value(nested) == {"a": [True]}
    assert any_value({}) is None and any_value(None) is None
    for bad in (
        {"intValue": "x"},
        {"boolValue": "yes"},
        {"stringValue": 1},
        {"unknownValue": 1},
        [1],
        {"a": 1, "b": 2},
    ):
        with pytest.raises((ValueError, TypeError)):
            any_value(bad)


def test_a_non_string_query_attribute_is_not_text(tmp_path: Path) -> None:
    span = _span("01", openinference__span__kind="RETRIEVER", input__value=12)
    traffic = _read(_write(tmp_path / "t.json", _export(span, _retriever("02", "ok"))))
    assert traffic.skipped["not text"] == 1


# refusals


def test_a_trace_without_matching_spans_is_refused(tmp_path: Path) -> None:
    path = _write(tmp_path / "t.json", _export(_span("01", openinference__span__kind="LLM")))
    err = _refused(path)
    assert "no OpenInference RETRIEVER span and no lookup_knowledge TOOL span" in str(err)


def test_a_line_without_resource_spans_names_line_and_field(tmp_path: Path) -> None:
    path = tmp_path / "t.json"
    path.write_text(json.dumps(_export(_retriever("01", "a"))) + "\n" + '{"resourceLogs": []}\n')
    err = _refused(path, format="otlp")
    assert (err.line, err.field) == (2, "resourceSpans")


def test_a_broken_json_line_in_a_trace_names_the_line(tmp_path: Path) -> None:
    path = tmp_path / "t.json"
    path.write_text(json.dumps(_export(_retriever("01", "a"))) + "\n{broken\n")
    assert _refused(path).line == 2
    pretty = tmp_path / "p.json"
    pretty.write_text('{\n  "resourceSpans": [\n  }\n')
    assert _refused(pretty).line == 3


def test_malformed_attributes_and_spans_are_refused(tmp_path: Path) -> None:
    span = _retriever("01", "a")
    span["attributes"] = [{"value": {"stringValue": "no key"}}]
    assert _refused(_write(tmp_path / "a.json", _export(span))).field == "attributes"
    span["attributes"] = [{"key": "input.value", "value": {"intValue": "nope"}}]
    assert _refused(_write(tmp_path / "b.json", _export(span))).field == "attributes"
    bad = {"resourceSpans": [{"scopeSpans": [{"spans": "x"}]}]}
    assert _refused(_write(tmp_path / "c.json", bad), format="otlp").field == "spans"
    assert _refused(_write(tmp_path / "e.json", {"resourceSpans": [3]}), format="otlp").field == "resourceSpans"
    bad_scope = {"resourceSpans": [{"scopeSpans": ["x"]}]}
    assert _refused(_write(tmp_path / "f.json", bad_scope), format="otlp").field == "scopeSpans"
    bad_id = _retriever("01", "a")
    bad_id["spanId"] = 5
    assert _refused(_write(tmp_path / "d.json", _export(bad_id))).field == "spanId"


def test_the_attribute_names_are_openinferences() -> None:
    semconv = pytest.importorskip("openinference.semconv.trace")
    attrs, kinds = semconv.SpanAttributes, semconv.OpenInferenceSpanKindValues
    assert otlp.SPAN_KIND == attrs.OPENINFERENCE_SPAN_KIND
    assert otlp.INPUT_VALUE == attrs.INPUT_VALUE
    assert otlp.INPUT_MIME_TYPE == attrs.INPUT_MIME_TYPE
    assert otlp.TOOL_NAME == attrs.TOOL_NAME
    assert kinds.RETRIEVER.value == otlp.RETRIEVER and kinds.TOOL.value == otlp.TOOL
    assert semconv.OpenInferenceMimeTypeValues.JSON.value == otlp.JSON_MIME


def _norm(text: str) -> str:
    return " ".join(unicodedata.normalize("NFC", text).split())


_TEXTS = st.text(alphabet=st.characters(blacklist_categories=("Cs",)), min_size=1, max_size=12).filter(_norm)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    pool=st.lists(_TEXTS, min_size=1, max_size=6, unique=True),
    picks=st.lists(st.tuples(st.integers(0, 5), st.booleans(), st.integers(1, 3)), min_size=1, max_size=20),
)
def test_traces_count_what_a_counter_counts(
    tmp_path: Path, pool: list[str], picks: list[tuple[int, bool, int]]
) -> None:
    """Each pick is one request: a bare retrieval, or a tool call with its own retrieval inside; written in
    exports of ``batch`` spans a line, the inner retrieval before its tool span."""
    texts = [pool[i % len(pool)] for i, _, _ in picks]
    spans = []
    for n, ((_, as_tool, _), text) in enumerate(zip(picks, texts, strict=True)):
        if as_tool:
            spans.append(_retriever(f"{n:08x}00000002", text, parent=f"{n:08x}00000001"))
            spans.append(_tool(f"{n:08x}00000001", json.dumps({"query": text})))
        else:
            spans.append(_retriever(f"{n:08x}00000003", text))
    batch = picks[0][2]
    exports = [_export(*spans[i : i + batch]) for i in range(0, len(spans), batch)]
    traffic = _read(_write(tmp_path / "t.otlp.jsonl", *exports))
    assert Counter({_norm(q.text): q.count for q in traffic.queries}) == Counter(_norm(t) for t in texts)
    assert [_norm(q.text) for q in traffic.queries] == list(dict.fromkeys(_norm(t) for t in texts))
    assert traffic.skipped["retriever inside a lookup_knowledge call"] == sum(tool for _, tool, _ in picks)
