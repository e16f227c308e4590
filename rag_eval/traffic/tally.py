"""Counting a log's records into distinct queries: what is identical, which records are skipped and why, the
query ids, and the seeded sample. Every reader (JSON lines, CSV, Parquet, OTLP traces) hands its records to
one :class:`Tally`; the rules: docs/traffic.md, "Reading traffic".

>>> tally = Tally(max_chars=20)
>>> for line, text in enumerate(["reset a password", "  reset  a password ", "", 7, "x" * 21], start=1):
...     tally.add(Record(line=line, text=text))
>>> [(q.id, q.text, q.count) for q in tally.queries()]
[('q-65772dc3068a5f46', 'reset a password', 2)]
>>> tally.records, tally.skipped["blank"], tally.skipped["not text"], tally.skipped["over-long"]
(5, 1, 1, 1)
"""

from __future__ import annotations

import enum
import hashlib
import heapq
import json
import re
import unicodedata
from dataclasses import dataclass, field
from typing import Final, NamedTuple

from rag_eval.core.parsing import unicode_text

MAX_ID_CHARS: Final = 200  # a log's id longer than this is replaced by the hash id
MAX_SAMPLE: Final = 10_000_000  # the largest sample a [traffic] table may ask for

BLANK_LINE: Final = "blank line"
MISSING_FIELD: Final = "missing field"
NOT_TEXT: Final = "not text"
BLANK: Final = "blank"
OVER_LONG: Final = "over-long"
BAD_CATEGORY: Final = "category not a scalar"
REASONS: Final = (BLANK_LINE, MISSING_FIELD, NOT_TEXT, BLANK, OVER_LONG, BAD_CATEGORY)

_WHITESPACE: Final = re.compile(r"\s+")


class Missing(enum.Enum):
    """A field a record does not have at all (unlike a null value)."""

    MISSING = "missing"


MISSING: Final = Missing.MISSING


class Record(NamedTuple):
    """One record of a log: its line (row, export line) and its fields' raw values, :data:`MISSING` where
    the record has no such field."""

    line: int
    text: object
    ident: object = MISSING
    category: object = MISSING


@dataclass(frozen=True, slots=True, kw_only=True)
class TrafficQuery:
    """One distinct query of the log: ``count`` is how many records asked it (under that category)."""

    id: str
    text: str
    count: int
    category: str | None


def normalized(text: str) -> str:
    """The text two records must share to be one query: NFC, stripped, whitespace runs as one space.

    >>> normalized(" Cafe\\u0301\\t\\n menu ")
    'Café menu'
    """
    return " ".join(unicodedata.normalize("NFC", text).split())


def _key_text(text: str, category: str | None) -> str:
    # a query under a category is another request than the same text without one: hashed apart
    return text if category is None else json.dumps([category, text], ensure_ascii=False)


def hash_id(text: str, category: str | None = None) -> str:
    """The id of a query the log gives none for: ``q-`` and the first 16 hex digits of the SHA-256 of its
    normalised text (with a category: of the JSON ``[category, text]``).

    >>> hash_id("reset a password"), hash_id("reset a password", "kb") != hash_id("reset a password")
    ('q-65772dc3068a5f46', True)
    """
    return "q-" + hashlib.sha256(_key_text(text, category).encode("utf-8", "surrogatepass")).hexdigest()[:16]


def safe_id(value: object) -> str | None:
    """A log's id as a query id: scalars as text, whitespace runs as ``_``; None when there is none to use
    (missing, null, blank, a list or object, longer than :data:`MAX_ID_CHARS`, a control character).

    >>> safe_id(" req 42\\t7 "), safe_id(1234), safe_id(""), safe_id(None), safe_id(["a"]), safe_id("a\\x00b")
    ('req_42_7', '1234', None, None, None, None)
    """
    if value is MISSING or value is None or not isinstance(value, str | int | float | bool):
        return None
    text = _WHITESPACE.sub("_", str(value).strip())
    if not text or len(text) > MAX_ID_CHARS or not text.isprintable():
        return None
    return text


def category_of(value: object) -> str | Missing | None:
    """A record's category: scalars as text, blank or null as None; :data:`MISSING` for a list or object
    (the record is skipped and counted).

    >>> category_of(3), category_of("  "), category_of(None), category_of({"a": 1})
    ('3', None, None, <Missing.MISSING: 'missing'>)
    """
    if value is MISSING or value is None:
        return None
    if not isinstance(value, str | int | float | bool):
        return MISSING
    text = str(value)
    if not unicode_text(text):  # a lone surrogate (a JSON escape): no filter can hold it
        return MISSING
    return text if text.strip() else None


def sample_rank(seed: int, text: str, category: str | None = None) -> str:
    """The order a seeded sample keeps distinct queries in (the smallest first): SHA-256 of
    ``"{seed}:{normalised text}"`` (with a category, of the JSON ``[category, text]``), so a sample does not
    depend on the order of the records.

    >>> sample_rank(0, "a") == sample_rank(0, "a") != sample_rank(1, "a")
    True
    """
    return hashlib.sha256(f"{seed}:{_key_text(text, category)}".encode("utf-8", "surrogatepass")).hexdigest()


@dataclass(slots=True)
class _Entry:
    text: str
    key: str
    category: str | None
    ident: str | None
    count: int = 1


@dataclass(slots=True, kw_only=True)
class Tally:
    """Distinct queries with their counts, in order of first occurrence, and the skipped records by reason.

    ``seen`` says which of the fields text, id and category any record had at all: a field no record has
    is a misnamed field (the reader refuses the log)."""

    max_chars: int
    reasons: tuple[str, ...] = REASONS
    records: int = 0
    skipped: dict[str, int] = field(default_factory=dict)
    seen: dict[str, bool] = field(default_factory=lambda: {"text": False, "id": False, "category": False})
    _entries: dict[tuple[str, str | None], _Entry] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.skipped = dict.fromkeys(self.reasons, 0) | self.skipped

    def skip(self, reason: str) -> None:
        """Count a skip that is not a record (a blank line)."""
        self.skipped[reason] = self.skipped.get(reason, 0) + 1

    def add_skipped(self, reason: str) -> None:
        """Count a record skipped for ``reason`` before its text was read (a span without a query)."""
        self.records += 1
        self.skip(reason)

    def add(self, record: Record) -> None:
        """Count one record: a new query, one more of a known one, or a skip with its reason."""
        self.records += 1
        self.seen["id"] |= record.ident is not MISSING
        self.seen["category"] |= record.category is not MISSING
        text = record.text
        if text is MISSING:
            return self.skip(MISSING_FIELD)
        self.seen["text"] = True
        if not isinstance(text, str) or not unicode_text(text):  # a lone surrogate (a JSON escape) is not text
            return self.skip(NOT_TEXT)
        if len(text) > self.max_chars:
            return self.skip(OVER_LONG)
        norm = normalized(text)
        if not norm:
            return self.skip(BLANK)
        category = category_of(record.category)
        if category is MISSING:
            return self.skip(BAD_CATEGORY)
        entry = self._entries.get((norm, category))
        if entry is None:
            self._entries[(norm, category)] = _Entry(text, norm, category, safe_id(record.ident))
        else:
            entry.count += 1
        return None

    @property
    def distinct(self) -> int:
        return len(self._entries)

    def queries(self, *, sample: int | None = None, seed: int = 0) -> tuple[TrafficQuery, ...]:
        """The distinct queries in order of first occurrence, with unique ids (a log's id taken by an
        earlier query falls back to the hash id); with ``sample``, the ``sample`` of smallest
        :func:`sample_rank` (all when there are no more), still in order of first occurrence."""
        entries = list(self._entries.values())
        ids = _unique_ids(entries)
        keep = range(len(entries))
        if sample is not None and sample < len(entries):
            ranked = heapq.nsmallest(sample, keep, key=lambda i: sample_rank(seed, entries[i].key, entries[i].category))
            keep = sorted(ranked)  # type: ignore[assignment]
        return tuple(
            TrafficQuery(id=ids[i], text=entries[i].text, count=entries[i].count, category=entries[i].category)
            for i in keep
        )


def _unique_ids(entries: list[_Entry]) -> list[str]:
    used: set[str] = set()
    ids = []
    for entry in entries:
        ident = entry.ident if entry.ident is not None and entry.ident not in used else None
        if ident is None:
            base = ident = hash_id(entry.key, entry.category)
            n = 1
            while ident in used:  # a log's id that happens to be another query's hash id
                n += 1
                ident = f"{base}-{n}"
        used.add(ident)
        ids.append(ident)
    return ids
