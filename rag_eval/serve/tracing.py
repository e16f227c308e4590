"""The agent tool traced: :class:`TracedLookup` records each ``lookup_knowledge(query)`` call as OpenTelemetry
spans with OpenInference's semantic conventions, the way a production team instruments its tools.

Per call, a ``TOOL`` span ``lookup_knowledge`` (the tool's name, description and JSON-schema parameters, the
arguments ``{"query": ...}`` as ``input.value`` and the payload's JSON as ``output.value``) and, as its child,
a ``RETRIEVER`` span ``knowledge_search`` around the search port's call (the normalised query the search used
as ``input.value``; each hit's id, score and content as ``retrieval.documents.{i}.document.*``). A failing
search marks both spans ``ERROR`` with the exception recorded, and the exception goes on unchanged. The
tool's result is the untraced tool's: the same steps on the same objects (:meth:`LookupKnowledge.run`), with
the search timed around the port's call alone.

Queries, payloads and the retrieved texts are what users asked and what the knowledge base holds:
``capture_content=False`` leaves every one of them out (the spans keep names, ids, scores, timings and
status), and such a trace cannot be replayed, having no query. ``capture_output=False`` leaves out only the
payload and the documents' texts, the large part, and ``capture_documents=False`` the hits' ids and scores
too: such traces can still be replayed.

OpenTelemetry's API and OpenInference's conventions are the ``trace`` extra; :mod:`rag_eval.core` imports
neither.

>>> from opentelemetry.sdk.trace import TracerProvider
>>> from opentelemetry.sdk.trace.export import SimpleSpanProcessor
>>> from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
>>> from rag_eval.search.memory import InMemorySearch
>>> spans, provider = InMemorySpanExporter(), TracerProvider()
>>> provider.add_span_processor(SimpleSpanProcessor(spans))
>>> port = InMemorySearch.scripted({"replica lag": [
...     dict(id="7", content="Check the SQL thread.", score=0.9, doc_id="lag", chunk_index=0, source="lag.md")]})
>>> traced = TracedLookup(LookupKnowledge(port), provider.get_tracer("kb"))
>>> traced.lookup_knowledge("  replica   lag ").document_ids
('lag#chunk-0',)
>>> [(s.name, s.attributes["openinference.span.kind"], s.attributes["input.value"]) for s in spans.get_finished_spans()]
[('knowledge_search', 'RETRIEVER', 'replica lag'), ('lookup_knowledge', 'TOOL', '{"query": "  replica   lag "}')]
"""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from dataclasses import dataclass, field

from rag_eval.core.lookup import LookupKnowledge, LookupRecord
from rag_eval.core.projector import ProjectedPayload
from rag_eval.core.types import KnowledgeSearchHit, KnowledgeSearchRequest
from rag_eval.files import json_safe

try:
    from openinference.semconv.trace import (
        DocumentAttributes,
        OpenInferenceMimeTypeValues,
        OpenInferenceSpanKindValues,
        SpanAttributes,
    )
    from opentelemetry.trace import Span, Status, StatusCode, Tracer
    from opentelemetry.util.types import AttributeValue
except ImportError as missing:  # pragma: no cover - the extra is part of dev
    raise ImportError(
        f"rag_eval.serve.tracing needs OpenTelemetry and OpenInference's conventions ({missing.name} is missing): "
        "pip install 'rag-eval[trace]'"
    ) from missing

TOOL_NAME = "lookup_knowledge"
SEARCH_SPAN = "knowledge_search"
TOOL_DESCRIPTION = (
    "Look up the knowledge base (runbooks): excerpts relevant to the query, each with its own citable "
    "document_id, best first, and keyword hints beside them."
)
TOOL_PARAMETERS = json.dumps(
    {"type": "object", "properties": {"query": {"type": "string"}}, "required": ["query"]}, separators=(",", ":")
)

_KIND = SpanAttributes.OPENINFERENCE_SPAN_KIND
_JSON = OpenInferenceMimeTypeValues.JSON.value
_TEXT = OpenInferenceMimeTypeValues.TEXT.value
_DOCS = SpanAttributes.RETRIEVAL_DOCUMENTS
_OK = Status(StatusCode.OK)


def tool_arguments(query: str) -> str:
    """The tool call's arguments as the ``input.value`` JSON (non-ASCII characters as they are).

    >>> tool_arguments('Fehler "1205" – wo?')
    '{"query": "Fehler \\\\"1205\\\\" – wo?"}'
    """
    return json.dumps({"query": query}, ensure_ascii=False)


def payload_json(payload: ProjectedPayload) -> str:
    """The tool's result as the ``output.value`` JSON: ``payload.as_dict()``, a score that is not a number as
    null (JSON has no NaN)."""
    return json.dumps(json_safe(payload.as_dict()), ensure_ascii=False)


def document_attributes(hits: Sequence[KnowledgeSearchHit], *, content: bool) -> dict[str, AttributeValue]:
    """``retrieval.documents.{i}.document.id`` and ``.score`` of each hit (``i`` its place in the port's
    order), and its ``.content`` when ``content``; the last hit first.

    A span holds at most the SDK's attribute count limit (128 unless the provider's ``SpanLimits`` or
    ``OTEL_SPAN_ATTRIBUTE_COUNT_LIMIT`` say otherwise: 41 hits with their texts) and drops the oldest
    attribute to take a new one: set in this order, the lowest-ranked hits go first.

    >>> hits = [KnowledgeSearchHit(id=str(i), content="text", score=1 - i / 4) for i in range(2)]
    >>> attributes = document_attributes(hits, content=False)
    >>> [key.removeprefix("retrieval.documents.") for key in attributes]
    ['1.document.id', '1.document.score', '0.document.id', '0.document.score']
    >>> attributes["retrieval.documents.0.document.id"], attributes["retrieval.documents.0.document.score"]
    ('0', 1.0)
    """
    out: dict[str, AttributeValue] = {}
    for i, hit in reversed(list(enumerate(hits))):
        out[f"{_DOCS}.{i}.{DocumentAttributes.DOCUMENT_ID}"] = hit.id
        out[f"{_DOCS}.{i}.{DocumentAttributes.DOCUMENT_SCORE}"] = hit.score
        if content:
            out[f"{_DOCS}.{i}.{DocumentAttributes.DOCUMENT_CONTENT}"] = hit.content
    return out


@dataclass(frozen=True, slots=True)
class TracedLookup:
    """``lookup_knowledge(query)`` of ``tool``, each call recorded by ``tracer`` (a ``TOOL`` span and its
    ``RETRIEVER`` child; the module's docstring). ``capture_content=False`` records no query, payload or
    retrieved text (such a trace cannot be replayed); ``capture_output=False`` leaves out the payload and
    the retrieved texts only; ``capture_documents=False`` leaves out the hits altogether (their ids and
    scores too: twenty hits are about 3.3 kB of OTLP JSON a call)."""

    tool: LookupKnowledge
    tracer: Tracer
    capture_content: bool = True
    capture_output: bool = True
    capture_documents: bool = True
    description: str = TOOL_DESCRIPTION
    _static: dict[str, AttributeValue] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        static: dict[str, AttributeValue] = {
            _KIND: OpenInferenceSpanKindValues.TOOL.value,
            SpanAttributes.TOOL_NAME: TOOL_NAME,
            SpanAttributes.TOOL_DESCRIPTION: self.description,
            SpanAttributes.TOOL_PARAMETERS: TOOL_PARAMETERS,
        }
        object.__setattr__(self, "_static", static)

    @property
    def captures_output(self) -> bool:
        return self.capture_content and self.capture_output

    def run(self, query: str) -> LookupRecord:
        """:meth:`LookupKnowledge.run` of ``query``, traced: the same record (the timings aside)."""
        attributes = dict(self._static)
        if self.capture_content:
            attributes[SpanAttributes.INPUT_VALUE] = tool_arguments(query)
            attributes[SpanAttributes.INPUT_MIME_TYPE] = _JSON
        with self.tracer.start_as_current_span(
            TOOL_NAME, attributes=attributes, record_exception=False, set_status_on_exception=False
        ) as span:
            try:
                record = self._lookup(query)
            except Exception as exc:
                _failed(span, exc, content=self.capture_content)
                raise
            if self.captures_output:
                span.set_attribute(SpanAttributes.OUTPUT_VALUE, payload_json(record.payload))
                span.set_attribute(SpanAttributes.OUTPUT_MIME_TYPE, _JSON)
            span.set_status(_OK)
        return record

    def lookup_knowledge(self, query: str) -> ProjectedPayload:
        """The tool: query in, projected payload out, as the untraced tool gives it."""
        return self.run(query).payload

    __call__ = lookup_knowledge

    def _lookup(self, query: str) -> LookupRecord:
        """The steps of :meth:`LookupKnowledge.run`, the search in its own span."""
        tool, clock = self.tool, time.perf_counter_ns
        t0 = clock()
        hints = tool.transformer.transform(query)
        t1 = clock()
        hits, search_ns = self._search(tool.pipeline.request(hints, tool.mode))
        return tool.pipeline.process(hints, hits, search_ns=search_ns, transform_ns=t1 - t0)

    def _search(self, request: KnowledgeSearchRequest) -> tuple[tuple[KnowledgeSearchHit, ...], int]:
        """The port's hits for ``request`` in a ``RETRIEVER`` span, and the port's time alone."""
        attributes: dict[str, AttributeValue] = {_KIND: OpenInferenceSpanKindValues.RETRIEVER.value}
        if self.capture_content:
            attributes[SpanAttributes.INPUT_VALUE] = request.query
            attributes[SpanAttributes.INPUT_MIME_TYPE] = _TEXT
        clock = time.perf_counter_ns
        with self.tracer.start_as_current_span(
            SEARCH_SPAN, attributes=attributes, record_exception=False, set_status_on_exception=False
        ) as span:
            try:
                t0 = clock()
                hits = self.tool.port.search(request)
                t1 = clock()
            except Exception as exc:
                _failed(span, exc, content=self.capture_content)
                raise
            if self.capture_documents:
                span.set_attributes(document_attributes(hits, content=self.captures_output))
                span.set_attributes(attributes)  # set again, the newest: never the ones a full span drops
            span.set_status(_OK)
        return hits, t1 - t0


def _failed(span: Span, exc: Exception, *, content: bool) -> None:
    """``span`` marked ERROR with the exception recorded; without ``content``, its type only (a message may
    quote the query)."""
    name = type(exc).__name__
    if content:
        span.record_exception(exc)
        span.set_status(Status(StatusCode.ERROR, f"{name}: {exc}"))
    else:
        span.add_event("exception", {"exception.type": f"{type(exc).__module__}.{type(exc).__qualname__}"})
        span.set_status(Status(StatusCode.ERROR, name))
