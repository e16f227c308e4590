"""The OTLP JSON file exporter, driven by the real OpenTelemetry SDK: its lines are OTLP JSON (hex ids, integer
enums), and the trace reader reads the queries back from them."""

from __future__ import annotations

import json
import threading
from pathlib import Path

import pytest

pytest.importorskip("opentelemetry.sdk.trace")
pytest.importorskip("opentelemetry.exporter.otlp.proto.common.trace_encoder")

from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SimpleSpanProcessor, SpanExportResult
from opentelemetry.trace import SpanKind, format_span_id, format_trace_id

from rag_eval.traffic.logs import TrafficSpec, read_traffic
from rag_eval.traffic.otlp import any_value
from rag_eval.traffic.otlp_export import OtlpJsonFileExporter


def _provider(exporter: OtlpJsonFileExporter, *, batch: bool = False) -> TracerProvider:
    provider = TracerProvider(resource=Resource.create({"service.name": "agent"}))
    provider.add_span_processor(BatchSpanProcessor(exporter) if batch else SimpleSpanProcessor(exporter))
    return provider


def _agent_traffic(provider: TracerProvider) -> dict[str, str]:
    """Three requests: a tool call with its own retrieval, a bare retrieval, the tool call again."""
    tracer = provider.get_tracer("agent")
    ids = {}
    for name, query in (("tool", "reset my password"), ("retriever", "VPN is down"), ("tool2", "reset my password")):
        if name.startswith("tool"):
            with tracer.start_as_current_span("lookup_knowledge", kind=SpanKind.INTERNAL) as tool:
                tool.set_attribute("openinference.span.kind", "TOOL")
                tool.set_attribute("tool.name", "lookup_knowledge")
                tool.set_attribute("tool.parameters", json.dumps({"properties": {"query": {"type": "string"}}}))
                tool.set_attribute("input.value", json.dumps({"query": query}))
                tool.set_attribute("input.mime_type", "application/json")
                tool.set_attribute("rag.category", "it")
                ids[name] = format_span_id(tool.get_span_context().span_id)
                with tracer.start_as_current_span("retrieve") as inner:
                    inner.set_attribute("openinference.span.kind", "RETRIEVER")
                    inner.set_attribute("input.value", query)
        else:
            with tracer.start_as_current_span("retrieve") as span:
                span.set_attribute("openinference.span.kind", "RETRIEVER")
                span.set_attribute("input.value", query)
                span.set_attribute("rag.category", "it")
                ids[name] = format_span_id(span.get_span_context().span_id)
                ids["trace"] = format_trace_id(span.get_span_context().trace_id)
    provider.shutdown()
    return ids


def test_the_exported_file_is_otlp_json_and_reads_back_as_queries(tmp_path: Path) -> None:
    path = tmp_path / "traces.otlp.jsonl"
    ids = _agent_traffic(_provider(OtlpJsonFileExporter(path)))
    exports = [json.loads(line) for line in path.read_text().splitlines()]
    assert len(exports) == 5  # one span a line under the simple processor
    spans = [s for e in exports for r in e["resourceSpans"] for sc in r["scopeSpans"] for s in sc["spans"]]
    assert all(len(s["traceId"]) == 32 and len(s["spanId"]) == 16 for s in spans)
    assert all(isinstance(s["kind"], int) and isinstance(s["startTimeUnixNano"], str) for s in spans)
    assert ids["retriever"] in {s["spanId"] for s in spans} and ids["trace"] in {s["traceId"] for s in spans}
    children = [s for s in spans if s["name"] == "retrieve" and s.get("parentSpanId")]
    assert {c["parentSpanId"] for c in children} == {ids["tool"], ids["tool2"]}
    resource = exports[0]["resourceSpans"][0]["resource"]["attributes"]
    assert {"key": "service.name", "value": {"stringValue": "agent"}} in resource

    traffic = read_traffic(TrafficSpec(path=path, category="rag.category"))
    assert [(q.id, q.text, q.count, q.category) for q in traffic.queries] == [
        (ids["tool"], "reset my password", 2, "it"),
        (ids["retriever"], "VPN is down", 1, "it"),
    ]
    assert traffic.records == 5 and traffic.skipped["retriever inside a lookup_knowledge call"] == 2


def test_a_batch_is_one_line_and_attribute_kinds_survive(tmp_path: Path) -> None:
    path = tmp_path / "traces.jsonl"
    provider = _provider(OtlpJsonFileExporter(path), batch=True)
    with provider.get_tracer("t").start_as_current_span("retrieve") as span:
        span.set_attribute("openinference.span.kind", "RETRIEVER")
        span.set_attribute("input.value", "q")
        span.set_attribute("n", 3)
        span.set_attribute("x", 0.5)
        span.set_attribute("flag", True)
        span.set_attribute("tags", ["a", "b"])
    with provider.get_tracer("t").start_as_current_span("other"):
        pass
    provider.shutdown()
    lines = path.read_text().splitlines()
    assert len(lines) == 1
    spans = json.loads(lines[0])["resourceSpans"][0]["scopeSpans"][0]["spans"]
    attrs = {a["key"]: a["value"] for a in spans[0]["attributes"]}
    assert attrs["n"] == {"intValue": "3"}
    assert [any_value(attrs[k]) for k in ("n", "x", "flag", "tags")] == [3, 0.5, True, ["a", "b"]]
    assert read_traffic(TrafficSpec(path=path, format="otlp")).queries[0].text == "q"


def _finished_span(provider: TracerProvider) -> ReadableSpan:
    with provider.get_tracer("t").start_as_current_span("s") as span:
        pass
    assert isinstance(span, ReadableSpan)
    return span


def test_append_empty_exports_and_shutdown(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    path.write_text("previous\n")
    span = _finished_span(TracerProvider())
    exporter = OtlpJsonFileExporter(path, append=True)
    assert exporter.export([]) is SpanExportResult.SUCCESS
    assert exporter.export([span]) is SpanExportResult.SUCCESS
    assert exporter.force_flush()
    assert path.read_text().splitlines()[0] == "previous"
    exporter.shutdown()
    exporter.shutdown()  # twice is fine
    assert exporter.export([span]) is SpanExportResult.FAILURE
    assert len(path.read_text().splitlines()) == 2
    OtlpJsonFileExporter(path).shutdown()  # not appending: truncated
    assert path.read_text() == ""


def test_concurrent_exports_write_whole_lines(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    span = _finished_span(TracerProvider())
    exporter = OtlpJsonFileExporter(path)

    def work() -> None:
        for _ in range(50):
            assert exporter.export([span]) is SpanExportResult.SUCCESS

    threads = [threading.Thread(target=work) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    exporter.shutdown()
    lines = path.read_text().splitlines()
    assert len(lines) == 200 and all("resourceSpans" in json.loads(line) for line in lines)
