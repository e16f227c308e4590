"""Deterministic chunkers: sentence windows, character windows and whole documents.

Every chunk keeps the character range it covers in its document's ``text``
(``text[start:end] == content``), which is what lets chunk-level relevance be
derived from span-level evidence whatever the chunker.

>>> chunker = parse_chunker("sentences:size=2,overlap=0")
>>> [c.content for c in chunker.split("d1", "One. Two. Three.")]
['One. Two.', 'Three.']
>>> [c.content for c in parse_chunker("document").split("d1", "  One. Two. Three. ")]
['One. Two. Three.']
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Protocol

from rag_eval.core.errors import ConfigError, ConfigProblem, quoted

DEFAULT_CHUNKER_SPEC = "sentences:size=3,overlap=0"

# A sentence ends at . ! ? (optionally followed by closing quotes/brackets) followed by
# whitespace, or at a line break; headings and list items are therefore units of their own.
_SENTENCE_END = re.compile(r"(?<=[.!?])[\"')\]]*\s+|\s*\n\s*")


@dataclass(frozen=True, slots=True, kw_only=True)
class Chunk:
    """One chunk of one document; ``content == document_text[start:end]``."""

    doc_id: str
    chunk_index: int
    start: int
    end: int
    content: str
    title: str = ""
    source: str = ""
    category: str = ""

    @property
    def key(self) -> str:
        """The chunk's evidence key (D1 with docId and chunkIndex present)."""
        return f"{self.doc_id}#chunk-{self.chunk_index}"


class Chunker(Protocol):
    @property
    def spec(self) -> str: ...

    def ranges(self, text: str) -> list[tuple[int, int]]: ...

    def split(
        self, doc_id: str, text: str, *, title: str = "", source: str = "", category: str = ""
    ) -> list[Chunk]: ...


def sentence_ranges(text: str) -> list[tuple[int, int]]:
    """Character ranges of the sentence units of ``text``, surrounding whitespace excluded."""
    ranges: list[tuple[int, int]] = []
    pos = 0
    for match in _SENTENCE_END.finditer(text):
        _append_stripped(text, pos, match.start() + _closing_len(match.group()), ranges)
        pos = match.end()
    _append_stripped(text, pos, len(text), ranges)
    return ranges


def _closing_len(sep: str) -> int:
    # keep closing quotes/brackets with the sentence they close
    n = 0
    for ch in sep:
        if ch in "\"')]":
            n += 1
        else:
            break
    return n


def _append_stripped(text: str, start: int, end: int, out: list[tuple[int, int]]) -> None:
    while start < end and text[start].isspace():
        start += 1
    while end > start and text[end - 1].isspace():
        end -= 1
    if end > start:
        out.append((start, end))


class _Base:
    spec: str

    def ranges(self, text: str) -> list[tuple[int, int]]:
        raise NotImplementedError

    def split(self, doc_id: str, text: str, *, title: str = "", source: str = "", category: str = "") -> list[Chunk]:
        return [
            Chunk(
                doc_id=doc_id,
                chunk_index=i,
                start=s,
                end=e,
                content=text[s:e],
                title=title,
                source=source,
                category=category,
            )
            for i, (s, e) in enumerate(self.ranges(text))
        ]

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.spec!r})"


@dataclass(frozen=True, slots=True)
class SentenceWindowChunker(_Base):
    """Windows of ``size`` sentence units, consecutive windows sharing ``overlap`` units."""

    size: int = 3
    overlap: int = 0

    @property
    def spec(self) -> str:  # type: ignore[override]
        return f"sentences:size={self.size},overlap={self.overlap}"

    def ranges(self, text: str) -> list[tuple[int, int]]:
        units = sentence_ranges(text)
        return [(units[i][0], units[j - 1][1]) for i, j in _windows(len(units), self.size, self.overlap)]


@dataclass(frozen=True, slots=True)
class CharWindowChunker(_Base):
    """Windows of ``size`` characters, consecutive windows sharing ``overlap`` characters."""

    size: int = 800
    overlap: int = 100

    @property
    def spec(self) -> str:  # type: ignore[override]
        return f"chars:size={self.size},overlap={self.overlap}"

    def ranges(self, text: str) -> list[tuple[int, int]]:
        out: list[tuple[int, int]] = []
        for i, j in _windows(len(text), self.size, self.overlap):
            _append_stripped(text, i, j, out)
        return out


@dataclass(frozen=True, slots=True)
class DocumentChunker(_Base):
    """One chunk a document: its whole text, surrounding whitespace excluded (none for a blank text), as
    BEIR and MTEB embed a passage.

    >>> DocumentChunker().ranges("  Whole. Text.  "), DocumentChunker().ranges(" ")
    ([(2, 14)], [])
    """

    @property
    def spec(self) -> str:  # type: ignore[override]
        return "document"

    def ranges(self, text: str) -> list[tuple[int, int]]:
        out: list[tuple[int, int]] = []
        _append_stripped(text, 0, len(text), out)
        return out


def _windows(n: int, size: int, overlap: int) -> Iterator[tuple[int, int]]:
    step = size - overlap
    i = 0
    while i < n:
        j = min(n, i + size)
        yield i, j
        if j == n:
            return
        i += step


_WINDOWS: dict[str, type[SentenceWindowChunker] | type[CharWindowChunker]] = {
    "sentences": SentenceWindowChunker,
    "chars": CharWindowChunker,
}
_KINDS = (*_WINDOWS, "document")


def parse_chunker(spec: str) -> SentenceWindowChunker | CharWindowChunker | DocumentChunker:
    """Build a chunker from ``kind:key=value,...`` (kinds: ``sentences``, ``chars``; ``document``, which
    takes no parameter).

    >>> parse_chunker("document:size=3")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    rag_eval.core.errors.ConfigError: 1 configuration problem: 'document' keeps each document whole ... @ chunker
    """
    kind, _, params = spec.strip().partition(":")
    problems: list[ConfigProblem] = []
    cls = _WINDOWS.get(kind)
    if kind not in _KINDS:
        raise ConfigError(
            [ConfigProblem("chunker", f"unknown chunker kind {quoted(kind)} (use one of: {', '.join(_KINDS)})")]
        )
    if cls is None:  # document
        if params.strip():
            raise ConfigError([ConfigProblem("chunker", f"'document' keeps each document whole and takes no "
                                                        f"parameter, got {quoted(spec)}")])  # fmt: skip
        return DocumentChunker()
    values: dict[str, int] = {}
    for part in filter(None, (p.strip() for p in params.split(","))):
        name, eq, raw = part.partition("=")
        if not eq or name not in ("size", "overlap"):
            problems.append(ConfigProblem(f"chunker.{name}", f"unknown parameter in {quoted(spec)} (size, overlap)"))
            continue
        try:
            values[name] = int(raw)
        except ValueError:
            problems.append(ConfigProblem(f"chunker.{name}", f"{quoted(raw)} is not an integer"))
    chunker = cls(**values)
    if chunker.size <= 0:
        problems.append(ConfigProblem("chunker.size", f"must be > 0, got {chunker.size}"))
    if not 0 <= chunker.overlap < max(chunker.size, 1):
        problems.append(ConfigProblem("chunker.overlap", f"must be >= 0 and < size, got {chunker.overlap}"))
    if problems:
        raise ConfigError(problems)
    return chunker
