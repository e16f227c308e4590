"""An OpenTelemetry span exporter that writes OTLP JSON as the OpenTelemetry Collector's file exporter does:
one ``ExportTraceServiceRequest`` object a line, trace and span ids as hex, enums as integers, 64-bit
integers as strings. :func:`~rag_eval.traffic.logs.read_traffic` reads what it writes (``format = "otlp"``).

The spans are encoded by the OpenTelemetry SDK's own OTLP encoder
(``opentelemetry.exporter.otlp.proto.common.trace_encoder.encode_spans``) and turned into JSON by protobuf's
``json_format``; only the ids are rewritten (protobuf's JSON gives bytes as base64, OTLP JSON as hex). Needs
the ``trace`` extra (``pip install rag-eval[trace]``).

>>> import tempfile, pathlib
>>> from opentelemetry.sdk.trace import TracerProvider
>>> from opentelemetry.sdk.trace.export import SimpleSpanProcessor
>>> with tempfile.TemporaryDirectory() as tmp:
...     path = pathlib.Path(tmp) / "traces.jsonl"
...     provider = TracerProvider()
...     provider.add_span_processor(SimpleSpanProcessor(OtlpJsonFileExporter(path)))
...     with provider.get_tracer("demo").start_as_current_span("retrieve") as span:
...         span.set_attribute("openinference.span.kind", "RETRIEVER")
...     provider.shutdown()
...     export = json.loads(path.read_text())
>>> span = export["resourceSpans"][0]["scopeSpans"][0]["spans"][0]
>>> span["name"], len(span["traceId"]), len(span["spanId"]), span["kind"]
('retrieve', 32, 16, 1)
"""

from __future__ import annotations

import base64
import json
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import IO, Any, Final

from google.protobuf.json_format import MessageToDict
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult

ID_FIELDS: Final = frozenset({"traceId", "spanId", "parentSpanId"})


def otlp_json(spans: Sequence[ReadableSpan]) -> dict[str, Any]:
    """The ``ExportTraceServiceRequest`` of ``spans`` as an OTLP JSON object."""
    message = MessageToDict(encode_spans(spans), use_integers_for_enums=True)
    return _hex_ids(message)  # type: ignore[no-any-return]


def _hex_ids(value: Any) -> Any:
    """``value`` with every trace, span and parent span id (base64 in protobuf's JSON) as lower-case hex;
    ids inside attribute values are values, not keys, and are left alone.

    >>> _hex_ids({"spans": [{"spanId": "AAECAwQFBgc=", "name": "x"}]})
    {'spans': [{'spanId': '0001020304050607', 'name': 'x'}]}
    """
    if isinstance(value, dict):
        return {
            k: base64.b64decode(v).hex() if k in ID_FIELDS and isinstance(v, str) else _hex_ids(v)
            for k, v in value.items()
        }
    if isinstance(value, list):
        return [_hex_ids(v) for v in value]
    return value


class OtlpJsonFileExporter(SpanExporter):
    """Writes every batch of spans as one OTLP JSON line to ``path`` (truncated when opened, or appended to
    with ``append``), flushed after each line; thread-safe. An export after :meth:`shutdown`, or one the
    file cannot take, returns ``FAILURE`` (the SDK's processors log it) rather than raising."""

    def __init__(self, path: str | Path, *, append: bool = False) -> None:
        self.path = Path(path)
        self._lock = threading.Lock()
        self._file: IO[str] | None = self.path.open("a" if append else "w", encoding="utf-8", newline="\n")

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        if not spans:
            return SpanExportResult.SUCCESS
        try:
            line = json.dumps(otlp_json(spans), ensure_ascii=False, separators=(",", ":"), allow_nan=False)
        except (ValueError, TypeError):
            return SpanExportResult.FAILURE
        with self._lock:
            if self._file is None:
                return SpanExportResult.FAILURE
            try:
                self._file.write(line + "\n")
                self._file.flush()
            except (OSError, UnicodeEncodeError):
                return SpanExportResult.FAILURE
        return SpanExportResult.SUCCESS

    def force_flush(self, timeout_millis: int = 30_000) -> bool:
        with self._lock:
            if self._file is not None:
                try:
                    self._file.flush()
                except OSError:
                    return False
        return True

    def shutdown(self) -> None:
        with self._lock:
            if self._file is not None:
                self._file.close()
                self._file = None
