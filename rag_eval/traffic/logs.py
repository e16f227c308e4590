"""Production traffic read into queries: the ``[traffic]`` table as a value (:class:`TrafficSpec`) and
:func:`read_traffic`, which reads a query log (JSON lines, CSV, Parquet) or an OTLP JSON trace export into
distinct queries with their counts (:class:`Traffic`). What is identical, skipped, counted and sampled:
docs/traffic.md, "Reading traffic".

>>> import tempfile, pathlib
>>> with tempfile.TemporaryDirectory() as tmp:
...     path = pathlib.Path(tmp) / "log.jsonl"
...     _ = path.write_text('{"query": "vpn down"}\\n{"query": " vpn  down"}\\n{"query": null}\\n')
...     traffic = read_traffic(TrafficSpec(path=path))
>>> [(q.text, q.count) for q in traffic.queries], traffic.records, traffic.skipped["not text"]
([('vpn down', 2)], 3, 1)
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from rag_eval.core.errors import ConfigError, ConfigProblem, DatasetError, quoted
from rag_eval.core.parsing import TextError, parse_json
from rag_eval.traffic import otlp
from rag_eval.traffic.records import Fields, check_file, csv_records, jsonl_records, lines, parquet_records
from rag_eval.traffic.tally import BLANK_LINE, MAX_SAMPLE, REASONS, Record, Tally, TrafficQuery

FORMATS: Final = ("jsonl", "csv", "parquet", "otlp")
_BY_SUFFIX: Final = {".jsonl": "jsonl", ".ndjson": "jsonl", ".csv": "csv", ".parquet": "parquet", ".pq": "parquet"}
_CHUNK: Final = 1 << 20

__all__ = ["FORMATS", "Traffic", "TrafficQuery", "TrafficSpec", "read_traffic", "spec_problems"]


@dataclass(frozen=True, slots=True, kw_only=True)
class TrafficSpec:
    """The ``[traffic]`` table: which file, in which format, which fields, and the sample.

    ``format`` None: from the extension (``.jsonl``/``.ndjson``, ``.csv``, ``.parquet``); ``.json`` and
    ``.otlp.jsonl`` by their content (an object with ``resourceSpans`` is an OTLP export, other objects are
    JSON lines). ``text`` is ignored for traces (the query is found from the span kind); for traces ``id``
    and ``category`` name span attributes. ``show_text`` is read by the reports.

    >>> TrafficSpec(path=Path("log.csv"), sample=100).as_dict()["sample"]
    100
    """

    path: Path
    format: str | None = None
    text: str = "query"
    id: str | None = None
    category: str | None = None
    sample: int | None = None
    seed: int = 0
    max_chars: int = 4096
    show_text: bool = True

    def as_dict(self) -> dict[str, Any]:
        return {
            "path": str(self.path),
            "format": self.format,
            "text": self.text,
            "id": self.id,
            "category": self.category,
            "sample": self.sample,
            "seed": self.seed,
            "max_chars": self.max_chars,
            "show_text": self.show_text,
        }


@dataclass(frozen=True, slots=True, kw_only=True)
class Traffic:
    """A log read into distinct queries (in order of first occurrence; sampled when the spec asks), with
    the records read, the skipped ones by reason and the file's SHA-256."""

    spec: TrafficSpec
    format: str
    queries: tuple[TrafficQuery, ...]
    records: int
    skipped: Mapping[str, int]
    distinct: int
    checksum: str

    def document(self) -> dict[str, Any]:
        """A JSON-able summary for a run's manifest: counts and settings, no query text.

        >>> import json
        >>> spec = TrafficSpec(path=Path("log.jsonl"))
        >>> query = TrafficQuery(id="q-1", text="secret", count=3, category=None)
        >>> doc = Traffic(spec=spec, format="jsonl", queries=(query,), records=4, skipped={"blank": 1},
        ...               distinct=1, checksum="ab").document()
        >>> doc["queries"], doc["occurrences"], "secret" in json.dumps(doc)
        (1, 3, False)
        """
        return {
            "path": str(self.spec.path),
            "format": self.format,
            "checksum": self.checksum,
            "fields": {"text": self.spec.text if self.format != "otlp" else None, "id": self.spec.id},
            "category": self.spec.category,
            "records": self.records,
            "skipped": dict(self.skipped),
            "distinct": self.distinct,
            "sample": self.spec.sample,
            "seed": self.spec.seed,
            "max_chars": self.spec.max_chars,
            "queries": len(self.queries),
            "occurrences": sum(q.count for q in self.queries),
            "with_category": sum(q.category is not None for q in self.queries),
        }


def spec_problems(spec: TrafficSpec) -> tuple[ConfigProblem, ...]:
    """Every problem of the spec's settings (not of the file), keyed ``traffic.<key>``.

    >>> [p.key for p in spec_problems(TrafficSpec(path=Path("x.csv"), sample=0, format="xml", text=" "))]
    ['traffic.format', 'traffic.text', 'traffic.sample']
    """
    problems = []
    if spec.format is not None and spec.format not in FORMATS:
        problems.append(ConfigProblem("traffic.format", f"{quoted(spec.format)} is not one of {', '.join(FORMATS)}"))
    for key in ("text", "id", "category"):
        value = getattr(spec, key)
        if value is not None and (not isinstance(value, str) or not value.strip()):
            problems.append(ConfigProblem(f"traffic.{key}", f"{quoted(value)} is not a field name"))
    if spec.category is not None and spec.category == spec.text:
        problems.append(ConfigProblem("traffic.category", f"{quoted(spec.category)} is the text field: each request "
                                      "would be filtered by its own query"))  # fmt: skip
    sample = spec.sample
    if sample is not None and (isinstance(sample, bool) or not isinstance(sample, int) or not 0 < sample <= MAX_SAMPLE):
        problems.append(ConfigProblem("traffic.sample", f"{quoted(sample)} is not a whole number 1..{MAX_SAMPLE:,}"))
    if isinstance(spec.seed, bool) or not isinstance(spec.seed, int):
        problems.append(ConfigProblem("traffic.seed", f"{quoted(spec.seed)} is not a whole number"))
    if isinstance(spec.max_chars, bool) or not isinstance(spec.max_chars, int) or spec.max_chars < 1:
        problems.append(ConfigProblem("traffic.max_chars", f"{quoted(spec.max_chars)} is not a whole number >= 1"))
    return tuple(problems)


def read_traffic(spec: TrafficSpec) -> Traffic:
    """Read the file ``spec`` names into distinct queries; a DatasetError (exit 2) names the file, line
    and field of what is wrong, a ConfigError the spec's settings."""
    problems = spec_problems(spec)
    if problems:
        raise ConfigError(problems, path=str(spec.path))
    path = Path(spec.path)
    check_file(path)
    fmt = spec.format or detect_format(path)
    fields = Fields(text=spec.text, ident=spec.id, category=spec.category)
    digest = hashlib.sha256()
    if fmt == "otlp":
        tally = Tally(max_chars=spec.max_chars, reasons=(*REASONS, *otlp.REASONS))
        _count(tally, otlp.otlp_records(path, fields, digest))
        _check_traces(path, tally, fields)
    else:
        tally = Tally(max_chars=spec.max_chars)
        if fmt == "jsonl":
            _count(tally, jsonl_records(path, fields, digest))
        elif fmt == "csv":
            _count(tally, csv_records(path, fields, digest))
        else:
            _count(tally, parquet_records(path, fields))
            digest = _file_digest(path)
        _check_log(path, tally, fields)
    _check_kept(path, tally)
    return Traffic(
        spec=spec,
        format=fmt,
        queries=tally.queries(sample=spec.sample, seed=spec.seed),
        records=tally.records,
        skipped=dict(tally.skipped),
        distinct=tally.distinct,
        checksum=digest.hexdigest(),
    )


def detect_format(path: Path) -> str:
    """The format of ``path`` from its extension, or (``.json``, ``.otlp.jsonl``) from its first object."""
    name = path.name.lower()
    if not name.endswith((".json", ".otlp.jsonl")):
        fmt = _BY_SUFFIX.get(path.suffix.lower())
        if fmt is None:
            raise DatasetError(
                f"cannot tell the format from the extension {quoted(path.suffix)}: set format = to one of "
                f"{', '.join(FORMATS)}",
                path=str(path),
                field="format",
            )
        return fmt
    first = next(((n, line) for n, line in lines(path, hashlib.sha256()) if line.strip()), None)
    if first is None:
        raise DatasetError("holds no query (the file is empty)", path=str(path))
    try:
        obj = parse_json(first[1])
    except TextError:
        return "otlp"  # not JSON lines: one pretty-printed document, which only a trace export may be
    return "otlp" if isinstance(obj, dict) and "resourceSpans" in obj else "jsonl"


def _count(tally: Tally, records: Iterable[Record | str | None]) -> None:
    for record in records:
        if record is None:
            tally.skip(BLANK_LINE)
        elif isinstance(record, str):
            tally.add_skipped(record)
        else:
            tally.add(record)


def _check_log(path: Path, tally: Tally, fields: Fields) -> None:
    if tally.records == 0:
        raise DatasetError("holds no query (no record in the file)", path=str(path))
    for role, name in fields.named():
        if not tally.seen[role]:
            raise DatasetError(
                f"no record of {tally.records:,} has the {role} field {quoted(name)}: set {role} = to the field "
                "that holds it",
                path=str(path),
                field=name,
            )


def _check_traces(path: Path, tally: Tally, fields: Fields) -> None:
    if tally.records == 0:
        raise DatasetError(
            "holds no query: no OpenInference RETRIEVER span and no lookup_knowledge TOOL span", path=str(path)
        )
    for role, name in fields.named()[1:]:
        if not tally.seen[role]:
            raise DatasetError(
                f"no span of {tally.records:,} read has the {role} attribute {quoted(name)}: set {role} = to the "
                "attribute that holds it",
                path=str(path),
                field=name,
            )


def _check_kept(path: Path, tally: Tally) -> None:
    if tally.distinct:
        return
    counts = ", ".join(f"{reason} {n:,}" for reason, n in tally.skipped.items() if n)
    raise DatasetError(f"holds no query: every one of {tally.records:,} records was skipped ({counts})", path=str(path))


def _file_digest(path: Path) -> Any:
    digest = hashlib.sha256()
    try:
        with path.open("rb") as fh:
            while chunk := fh.read(_CHUNK):
                digest.update(chunk)
    except OSError as exc:
        raise DatasetError(f"cannot be read ({exc.strerror})", path=str(path)) from exc
    return digest
