"""Spans into an OTLP JSON file, one ``ExportTraceServiceRequest`` a line, as the OpenTelemetry Collector's
file exporter writes them: :class:`OtlpJsonFileExporter`, an SDK ``SpanExporter``.

The spans become OTLP messages with OpenTelemetry's own encoder (``encode_spans``, the one the OTLP
exporters send; package ``opentelemetry-exporter-otlp-proto-common``), and JSON with protobuf's
``MessageToDict``, as the OTLP/JSON encoding asks: camelCase field names, 64-bit integers as strings, enums
as integers, and trace and span ids as lowercase hex (protobuf's JSON would give them in base64).

>>> b64_to_hex("AAECAwQFBgc=")
'0001020304050607'
"""

from __future__ import annotations

import base64
import json
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any, TextIO

try:
    from google.protobuf.json_format import MessageToDict
    from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
    from opentelemetry.sdk.trace import ReadableSpan
    from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult
except ImportError as missing:  # pragma: no cover - the extra is part of dev
    raise ImportError(
        f"rag_eval.serve.otlp_file needs the OpenTelemetry SDK and its OTLP encoder ({missing.name} is missing): "
        "pip install 'rag-eval[trace]'"
    ) from missing

_ID_FIELDS = ("traceId", "spanId", "parentSpanId")


def b64_to_hex(value: str) -> str:
    """An id as protobuf's JSON gives it (base64) in OTLP JSON's lowercase hex."""
    return base64.b64decode(value, validate=True).hex()


def otlp_json(spans: Sequence[ReadableSpan]) -> dict[str, Any]:
    """``spans`` as one ``ExportTraceServiceRequest`` in OTLP JSON (a dict, ready for ``json.dumps``)."""
    request: dict[str, Any] = MessageToDict(encode_spans(spans), use_integers_for_enums=True)
    for resource_spans in request.get("resourceSpans", ()):
        for scope_spans in resource_spans.get("scopeSpans", ()):
            for span in scope_spans.get("spans", ()):
                _hex_ids(span)
                for link in span.get("links", ()):
                    _hex_ids(link)
    return request


def _hex_ids(obj: dict[str, Any]) -> None:
    for name in _ID_FIELDS:
        if name in obj:
            obj[name] = b64_to_hex(obj[name])


class OtlpJsonFileExporter(SpanExporter):
    """Appends each batch of spans to ``path`` as one line of OTLP JSON (the file is created when missing).
    ``exported`` counts the spans written, ``failed`` those of the batches that could not be written (a
    failed export: the SDK's processors log it and go on), so a caller can tell that none was lost."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.exported = 0
        self.failed = 0
        self._lock = threading.Lock()
        self._file: TextIO | None = self.path.open("a", encoding="utf-8")

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        if not spans:
            return SpanExportResult.SUCCESS
        line = json.dumps(otlp_json(spans), ensure_ascii=False, separators=(",", ":")) + "\n"
        with self._lock:
            try:
                if self._file is None:
                    raise ValueError("the exporter is shut down")
                self._file.write(line)
                self._file.flush()
            except (OSError, ValueError):
                self.failed += len(spans)
                return SpanExportResult.FAILURE
            self.exported += len(spans)
        return SpanExportResult.SUCCESS

    def force_flush(self, timeout_millis: int = 30_000) -> bool:
        with self._lock:
            if self._file is not None:
                self._file.flush()
        return True

    def shutdown(self) -> None:
        with self._lock:
            if self._file is not None:
                self._file.close()
                self._file = None
