"""The OTLP JSON file exporter: each batch one line, read back and checked field by field against the spans
the SDK made (ids in hex, times as strings, enums as integers, attributes typed), and parsed again into the
protobuf message with protobuf's own JSON parser once the ids are base64 again."""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

import pytest
from google.protobuf.json_format import ParseDict
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExportResult
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import Link, SpanKind, Status, StatusCode

from rag_eval.serve.otlp_file import OtlpJsonFileExporter, otlp_json


def make_spans() -> tuple[ReadableSpan, ...]:
    """An agent span, a child with typed attributes, a failed grandchild and a linked span."""
    memory = InMemorySpanExporter()
    provider = TracerProvider(resource=Resource.create({"service.name": "knowledge-service"}))
    provider.add_span_processor(SimpleSpanProcessor(memory))
    tracer = provider.get_tracer("kb.tools", "1.2")
    with tracer.start_as_current_span("agent", kind=SpanKind.SERVER) as agent:
        attrs = {"input.value": '{"query": "Fehler – “1205”"}', "n": 3, "score": 0.25, "ok": True, "ids": ["a", "b"]}
        with (
            tracer.start_as_current_span("lookup_knowledge", attributes=attrs),
            tracer.start_as_current_span("knowledge_search") as search,
        ):
            search.set_status(Status(StatusCode.ERROR, "boom"))
    with tracer.start_as_current_span("later", links=[Link(agent.get_span_context())]):
        pass
    provider.shutdown()
    return memory.get_finished_spans()


def spans_of(request: dict[str, Any]) -> list[dict[str, Any]]:
    return [s for rs in request["resourceSpans"] for ss in rs["scopeSpans"] for s in ss["spans"]]


def attributes(span: dict[str, Any]) -> dict[str, Any]:
    return {a["key"]: a["value"] for a in span.get("attributes", [])}


def test_a_batch_is_one_line_of_otlp_json_with_hex_ids(tmp_path: Path) -> None:
    spans = make_spans()
    out = tmp_path / "traces.jsonl"
    exporter = OtlpJsonFileExporter(out)
    assert exporter.export(spans) is SpanExportResult.SUCCESS
    exporter.shutdown()
    (line,) = out.read_text(encoding="utf-8").splitlines()
    assert "Fehler – “1205”" in line  # UTF-8 as it is, not escaped
    request = json.loads(line)
    (resource_spans,) = request["resourceSpans"]
    resource = attributes(resource_spans["resource"])
    assert resource["service.name"] == {"stringValue": "knowledge-service"}
    (scope_spans,) = resource_spans["scopeSpans"]
    assert scope_spans["scope"] == {"name": "kb.tools", "version": "1.2"}
    written = {s["name"]: s for s in scope_spans["spans"]}
    assert set(written) == {s.name for s in spans}
    for span in spans:
        got = written[span.name]
        assert got["traceId"] == f"{span.context.trace_id:032x}" and got["spanId"] == f"{span.context.span_id:016x}"
        assert got.get("parentSpanId") == (f"{span.parent.span_id:016x}" if span.parent else None)
        assert got["startTimeUnixNano"] == str(span.start_time) and got["endTimeUnixNano"] == str(span.end_time)
        assert got["kind"] == span.kind.value + 1  # the OTLP enum: 1 internal, 2 server, ...
    assert written["agent"]["kind"] == 2 and written["knowledge_search"]["status"] == {"code": 2, "message": "boom"}
    assert attributes(written["lookup_knowledge"]) == {
        "input.value": {"stringValue": '{"query": "Fehler – “1205”"}'},
        "n": {"intValue": "3"},
        "score": {"doubleValue": 0.25},
        "ok": {"boolValue": True},
        "ids": {"arrayValue": {"values": [{"stringValue": "a"}, {"stringValue": "b"}]}},
    }
    (link,) = written["later"]["links"]
    assert link["traceId"] == written["agent"]["traceId"] and link["spanId"] == written["agent"]["spanId"]


def test_the_line_is_the_encoders_message(tmp_path: Path) -> None:
    """With the ids in base64 again, protobuf's JSON parser gives back the message the OTLP encoder made."""
    spans = make_spans()
    request = otlp_json(spans)
    for span in spans_of(request):
        for obj in (span, *span.get("links", [])):
            for key in ("traceId", "spanId", "parentSpanId"):
                if key in obj:
                    obj[key] = base64.b64encode(bytes.fromhex(obj[key])).decode()
    assert ParseDict(request, ExportTraceServiceRequest()) == encode_spans(spans)


def test_batches_append_lines_and_nothing_after_shutdown(tmp_path: Path) -> None:
    spans = make_spans()
    out = tmp_path / "traces.jsonl"
    out.write_text('{"resourceSpans":[]}\n', encoding="utf-8")  # the file's lines are kept: appended to
    exporter = OtlpJsonFileExporter(out)
    assert exporter.export(spans[:2]) is SpanExportResult.SUCCESS
    assert exporter.export(()) is SpanExportResult.SUCCESS  # an empty batch writes no line
    assert exporter.export(spans[2:]) is SpanExportResult.SUCCESS
    assert exporter.force_flush()
    exporter.shutdown()
    assert exporter.export(spans) is SpanExportResult.FAILURE
    assert (exporter.exported, exporter.failed) == (len(spans), len(spans))
    lines = [json.loads(x) for x in out.read_text(encoding="utf-8").splitlines()]
    assert [len(spans_of(x)) for x in lines] == [0, 2, len(spans) - 2]


def test_an_unwritable_batch_fails_and_is_counted(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    exporter = OtlpJsonFileExporter(tmp_path / "traces.jsonl")

    def full(_: str) -> int:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(exporter._file, "write", full)
    spans = make_spans()
    assert exporter.export(spans) is SpanExportResult.FAILURE
    assert (exporter.exported, exporter.failed) == (0, len(spans))
