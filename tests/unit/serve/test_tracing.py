"""The traced agent tool: its spans (kinds, attributes, parent and child, errors) read back from the SDK's
in-memory exporter, and its result, which is the untraced tool's for every config."""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Iterator

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from opentelemetry.sdk.trace import ReadableSpan, SpanLimits, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, StatusCode

from rag_eval.core.config import RagConfig
from rag_eval.core.errors import SearchRequestError
from rag_eval.core.lookup import LookupKnowledge
from rag_eval.core.ports import PortBase
from rag_eval.core.types import KnowledgeSearchHit, KnowledgeSearchRequest
from rag_eval.search.memory import InMemoryRow, InMemorySearch
from rag_eval.serve.tracing import TOOL_DESCRIPTION, TracedLookup
from tests.conftest import SHIPPED

CONFIGS = SHIPPED / "experiments" / "configs"
LONG = "Raise the relay log space limit, then restart the SQL thread and watch the lag. " * 4
ROWS = [
    InMemoryRow(vector_id="1", content="Check the SQL thread.", vector=(1.0, 0.1, 0.0, 0.2), doc_id="lag",
                chunk_index=0, source="kb/lag.md", title="Replica lag", category="replication"),
    InMemoryRow(vector_id="2", content=LONG, vector=(0.9, 0.2, 0.1, 0.0), doc_id="lag", chunk_index=1,
                source="kb/lag.md", title="Replica lag", category="replication"),
    InMemoryRow(vector_id="3", content="Parallel workers do not help a single hot row.", vector=(0.8, 0.0, 0.3, 0.1),
                doc_id="lag", chunk_index=2, source="kb/lag.md", title="Replica lag", category="replication"),
    InMemoryRow(vector_id="4", content="Check the SQL thread.", vector=(0.99, 0.1, 0.0, 0.2), doc_id="lag",
                chunk_index=0, source="kb/lag.md", title="Replica lag", category="replication"),  # re-ingested copy
    InMemoryRow(vector_id="5", content="A legacy row without its chunk index.", vector=(0.7, 0.3, 0.0, 0.0),
                doc_id="lag", source="kb/lag.md", category="replication"),
    InMemoryRow(vector_id="6", content="Lock waits: find the blocking transaction.", vector=(0.1, 1.0, 0.2, 0.0),
                doc_id="locks", chunk_index=0, source="kb/locks.md", title="Locks", category="locking"),
    InMemoryRow(vector_id="7", content="ERROR 1205: lock wait timeout exceeded; retry the transaction.",
                vector=(0.2, 0.9, 0.0, 0.3), doc_id="locks", chunk_index=1, source="kb/locks.md", category="locking"),
    InMemoryRow(vector_id="8", content="A row that lost its document id.", vector=(0.5, 0.5, 0.5, 0.5)),
    InMemoryRow(vector_id="9", content="Disk full: purge binary logs first.", vector=(0.0, 0.2, 1.0, 0.4),
                doc_id="disk", chunk_index=0, source="kb/disk.md", title="Disk", category="storage"),
]  # fmt: skip
QUERIES = ["replica lag", "  Replica   LAG on db-7?? ", "ERROR 1205 lock wait", "disk full", "", "ünïcödé “quotes” \\"]


def encoder(text: str) -> tuple[float, ...]:
    """A vector that depends on the text (so queries rank the rows differently), never all zero."""
    digest = hashlib.sha256(text.encode("utf-8")).digest()
    return tuple(b / 255 + 0.01 for b in digest[:4])


def configs() -> dict[str, RagConfig]:
    shipped = {p.stem: RagConfig.from_properties_file(p) for p in sorted(CONFIGS.glob("*.properties"))}
    tight = RagConfig.from_properties_text(
        "rag.retrieve-k=9\nrag.return-n=4\nrag.max-chunks-per-document=1\n"
        "rag.projector.max-excerpt-chars=30\nrag.projector.max-total-chars=50"
    )
    filtered = RagConfig.from_properties_text("rag.retrieve-k=5\nrag.category-filter=locking")
    return {**shipped, "tight-budgets": tight, "category-filter": filtered}


@pytest.fixture
def exporter() -> Iterator[InMemorySpanExporter]:
    spans = InMemorySpanExporter()
    yield spans
    spans.clear()


@pytest.fixture
def provider(exporter: InMemorySpanExporter) -> Iterator[TracerProvider]:
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    yield provider
    provider.shutdown()


def traced(provider: TracerProvider, config: RagConfig | None = None, **options: bool) -> TracedLookup:
    tool = LookupKnowledge(InMemorySearch.from_rows(ROWS, encoder), config)
    return TracedLookup(tool, provider.get_tracer("test"), **options)


def by_name(spans: tuple[ReadableSpan, ...]) -> dict[str, ReadableSpan]:
    assert len(spans) == 2, [s.name for s in spans]
    return {s.name: s for s in spans}


def test_the_shipped_configs_are_all_there() -> None:
    assert {"evidence", "legacy", "legacy-first", "evidence-legacy-topk"} <= set(configs())


@pytest.mark.parametrize("name", sorted(configs()))
def test_the_payload_is_the_untraced_tools_for_every_config_and_query(name: str, provider: TracerProvider) -> None:
    config = configs()[name]
    plain = LookupKnowledge(InMemorySearch.from_rows(ROWS, encoder), config)
    tool = traced(provider, config)
    for query in QUERIES:
        want, got = plain.run(query), tool.run(query)
        assert got.payload == want.payload
        assert json.dumps(got.payload.as_dict()) == json.dumps(want.payload.as_dict())  # byte for byte
        assert (got.hints, got.hits, got.outcome.selected, list(got.outcome.trace), got.result) == (
            want.hints, want.hits, want.outcome.selected, list(want.outcome.trace), want.result)  # fmt: skip
        assert tool.lookup_knowledge(query) == tool(query) == plain.lookup_knowledge(query)


@settings(max_examples=60, deadline=None)
@given(query=st.text(max_size=60))
def test_any_query_gives_the_untraced_payload_and_its_arguments_as_json(query: str) -> None:
    spans = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(spans))
    payload = TracedLookup(LookupKnowledge(InMemorySearch.from_rows(ROWS, encoder)), provider.get_tracer("t"))(query)
    assert payload == LookupKnowledge(InMemorySearch.from_rows(ROWS, encoder))(query)
    tool = by_name(spans.get_finished_spans())["lookup_knowledge"]
    assert tool.attributes is not None
    assert json.loads(str(tool.attributes["input.value"])) == {"query": query}
    assert json.loads(str(tool.attributes["output.value"])) == json.loads(json.dumps(payload.as_dict()))


def test_a_call_is_a_tool_span_with_its_retriever_child(
    provider: TracerProvider, exporter: InMemorySpanExporter
) -> None:
    record = traced(provider, configs()["evidence"]).run("  Replica   LAG on db-7?? ")
    spans = by_name(exporter.get_finished_spans())
    tool, search = spans["lookup_knowledge"], spans["knowledge_search"]
    assert tool.parent is None and search.parent is not None
    assert search.parent.span_id == tool.context.span_id and search.context.trace_id == tool.context.trace_id
    assert tool.kind == search.kind == SpanKind.INTERNAL
    assert tool.status.status_code == search.status.status_code == StatusCode.OK
    assert tool.start_time is not None and search.start_time is not None and tool.end_time is not None
    assert tool.start_time <= search.start_time and search.end_time is not None and search.end_time <= tool.end_time
    assert dict(tool.attributes or {}) == {
        "openinference.span.kind": "TOOL",
        "tool.name": "lookup_knowledge",
        "tool.description": TOOL_DESCRIPTION,
        "tool.parameters": '{"type":"object","properties":{"query":{"type":"string"}},"required":["query"]}',
        "input.value": '{"query": "  Replica   LAG on db-7?? "}',
        "input.mime_type": "application/json",
        "output.value": json.dumps(record.payload.as_dict(), ensure_ascii=False),
        "output.mime_type": "application/json",
    }
    expected = {"openinference.span.kind": "RETRIEVER", "input.value": "Replica LAG on db-7??",
                "input.mime_type": "text/plain"}  # fmt: skip
    for i, hit in enumerate(record.hits):
        expected[f"retrieval.documents.{i}.document.id"] = hit.id
        expected[f"retrieval.documents.{i}.document.score"] = hit.score  # type: ignore[assignment]
        expected[f"retrieval.documents.{i}.document.content"] = hit.content
    assert len(record.hits) == len(ROWS) and dict(search.attributes or {}) == expected  # retrieve-k 20: every row


def test_a_span_per_call_each_call_its_own_trace(provider: TracerProvider, exporter: InMemorySpanExporter) -> None:
    tool = traced(provider)
    for query in QUERIES:
        tool(query)
    spans = exporter.get_finished_spans()
    assert [s.name for s in spans] == ["knowledge_search", "lookup_knowledge"] * len(QUERIES)
    assert len({s.context.trace_id for s in spans}) == len(QUERIES)
    inputs = [json.loads(str((s.attributes or {})["input.value"]))["query"] for s in spans[1::2]]
    assert inputs == QUERIES


def test_the_tool_span_is_the_child_of_the_callers_span(
    provider: TracerProvider, exporter: InMemorySpanExporter
) -> None:
    tracer = provider.get_tracer("agent")
    with tracer.start_as_current_span("agent") as agent:
        traced(provider)("replica lag")
    spans = {s.name: s for s in exporter.get_finished_spans()}
    assert spans["lookup_knowledge"].parent is not None
    assert spans["lookup_knowledge"].parent.span_id == agent.get_span_context().span_id
    assert len({s.context.trace_id for s in spans.values()}) == 1


def test_without_content_no_query_payload_or_text_is_recorded(
    provider: TracerProvider, exporter: InMemorySpanExporter
) -> None:
    record = traced(provider, capture_content=False).run("replica lag on db-7")
    spans = by_name(exporter.get_finished_spans())
    tool, search = dict(spans["lookup_knowledge"].attributes or {}), dict(spans["knowledge_search"].attributes or {})
    assert set(tool) == {"openinference.span.kind", "tool.name", "tool.description", "tool.parameters"}
    assert search["retrieval.documents.0.document.id"] == record.hits[0].id
    assert {k.rsplit(".", 1)[-1] for k in search if k.startswith("retrieval.")} == {"id", "score"}
    assert "input.value" not in search
    everything = json.dumps([tool, search])
    assert "replica" not in everything.lower() and "SQL thread" not in everything


def test_without_output_the_query_stays_and_the_texts_go(
    provider: TracerProvider, exporter: InMemorySpanExporter
) -> None:
    traced(provider, capture_output=False).run("replica lag")
    spans = by_name(exporter.get_finished_spans())
    tool, search = dict(spans["lookup_knowledge"].attributes or {}), dict(spans["knowledge_search"].attributes or {})
    assert tool["input.value"] == '{"query": "replica lag"}' and "output.value" not in tool
    assert "output.mime_type" not in tool and search["input.value"] == "replica lag"
    assert not [k for k in search if k.endswith(".content")] and "retrieval.documents.8.document.score" in search


class FailingPort(PortBase):
    def __init__(self, error: Exception) -> None:
        self.error = error

    def search(self, request: KnowledgeSearchRequest) -> tuple[KnowledgeSearchHit, ...]:
        raise self.error


@pytest.mark.parametrize("content", [True, False], ids=["content", "no content"])
def test_a_failing_search_marks_both_spans_and_goes_on_unchanged(
    content: bool, provider: TracerProvider, exporter: InMemorySpanExporter
) -> None:
    error = SearchRequestError("the filter 'replica lag' was refused")
    tool = TracedLookup(LookupKnowledge(FailingPort(error)), provider.get_tracer("t"), capture_content=content)
    with pytest.raises(SearchRequestError) as raised:
        tool("replica lag")
    assert raised.value is error
    spans = by_name(exporter.get_finished_spans())
    for span in spans.values():
        assert span.status.status_code == StatusCode.ERROR
        (event,) = span.events
        assert event.name == "exception" and event.attributes is not None
        assert event.attributes["exception.type"] == "rag_eval.core.errors.SearchRequestError"
        assert ("exception.message" in event.attributes) is content
        assert ("replica" in (span.status.description or "")) is content
    assert not [k for k in spans["knowledge_search"].attributes or {} if k.startswith("retrieval.")]
    assert "output.value" not in (spans["lookup_knowledge"].attributes or {})


def test_a_failing_transform_marks_the_tool_span(provider: TracerProvider, exporter: InMemorySpanExporter) -> None:
    with pytest.raises(TypeError):
        traced(provider)(None)  # type: ignore[arg-type]
    (span,) = exporter.get_finished_spans()
    assert span.name == "lookup_knowledge" and span.status.status_code == StatusCode.ERROR


def test_without_documents_the_retriever_keeps_its_query_only(
    provider: TracerProvider, exporter: InMemorySpanExporter
) -> None:
    payload = traced(provider, capture_output=False, capture_documents=False)("replica lag")
    spans = by_name(exporter.get_finished_spans())
    search = dict(spans["knowledge_search"].attributes or {})
    assert search == {"openinference.span.kind": "RETRIEVER", "input.value": "replica lag",
                      "input.mime_type": "text/plain"}  # fmt: skip
    assert payload.excerpts and spans["knowledge_search"].status.status_code == StatusCode.OK


class SlowPort(PortBase):
    """The in-memory port, each search 20 ms slower."""

    def __init__(self) -> None:
        self.inner = InMemorySearch.from_rows(ROWS, encoder)

    def search(self, request: KnowledgeSearchRequest) -> tuple[KnowledgeSearchHit, ...]:
        time.sleep(0.02)
        return self.inner.search(request)


def test_the_search_is_timed_around_the_ports_call_inside_its_span(
    provider: TracerProvider, exporter: InMemorySpanExporter
) -> None:
    record = TracedLookup(LookupKnowledge(SlowPort()), provider.get_tracer("t")).run("replica lag")
    search = by_name(exporter.get_finished_spans())["knowledge_search"]
    assert search.start_time is not None and search.end_time is not None
    assert 20_000_000 <= record.timings.search_ns <= search.end_time - search.start_time
    assert record.timings.transform_ns > 0 and record.timings.postprocess_ns > 0


def test_a_full_span_drops_the_lowest_ranked_hits_never_its_kind_or_query(exporter: InMemorySpanExporter) -> None:
    """The SDK drops a span's oldest attribute to take one past its limit (here 20: the 9 hits' 27 and 3)."""
    provider = TracerProvider(span_limits=SpanLimits(max_span_attributes=20))
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    record = traced(provider).run("replica lag")
    search = by_name(exporter.get_finished_spans())["knowledge_search"]
    kept = dict(search.attributes or {})
    assert len(kept) == 20 and search.dropped_attributes == 13  # 3 + 27 set, then the 3 again
    assert kept["openinference.span.kind"] == "RETRIEVER" and kept["input.value"] == "replica lag"
    for i in range(5):  # the best five hits whole, the rest dropped from the last up
        assert kept[f"retrieval.documents.{i}.document.id"] == record.hits[i].id
        assert kept[f"retrieval.documents.{i}.document.content"] == record.hits[i].content
    assert not [k for k in kept if k.startswith(("retrieval.documents.6.", "retrieval.documents.8."))]
    provider.shutdown()
