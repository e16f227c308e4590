"""Reading a marked labelling file: one query a line, each delivered chunk graded by a person.

The file is the one :func:`rag_eval.traffic.labelling.write_labelling_file` wrote, with each chunk's ``grade``
set to 0 (not relevant), 1 or 2 (relevant, graded), or left ``null``. Every problem is named with the file, the
1-based line and the field (``chunks[2].grade``), up to :data:`MAX_PROBLEMS` at once, in one
:class:`~rag_eval.core.errors.DatasetError`: bad JSON, a grade that is not null/0/1/2, a chunk whose document is
not in the corpus, offsets outside the document, a chunk whose text is no longer the document's
``text[start:end]`` (the corpus changed since the file was written), an id that cannot go into a TSV file.

>>> query_id_problem("t-42") is None
True
>>> query_id_problem("a\\tb")
"'a\\\\tb' holds whitespace or a control character: a query id goes into TSV and TREC files as one token"
>>> normalise_query("  Replica\\u00a0 LAG\\n") == normalise_query("replica lag")
True
"""

from __future__ import annotations

import json
import unicodedata
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rag_eval.core.errors import DatasetError, quoted
from rag_eval.core.parsing import TextError, check_regular, parse_json
from rag_eval.datasets.beir import Document

GRADES = (0, 1, 2)  # 0 not relevant; 1 and 2 relevant, graded
MAX_LINE_BYTES = 4 * 1024 * 1024  # a query and its delivered chunks' texts; a longer line is not one we wrote
MAX_PROBLEMS = 20
CHUNK_MARK = "#chunk-"


def normalise_query(text: str) -> str:
    """A query's text as the labelled set is compared on: NFC, stripped, whitespace runs collapsed, casefolded."""
    return " ".join(unicodedata.normalize("NFC", text).split()).casefold()


def json_line(obj: Any) -> str:
    r"""``obj`` as one line of JSON, non-ASCII kept but for the line and paragraph separators (U+2028, U+2029),
    escaped so that no editor or reader splitting lines the Unicode way cuts the line.

    >>> json_line({"q": "a\u2028b é"})
    '{"q": "a\\u2028b é"}'
    """
    return (
        json.dumps(obj, ensure_ascii=False, allow_nan=False).replace("\u2028", "\\u2028").replace("\u2029", "\\u2029")
    )


def _controls(text: str, allowed: str = "") -> bool:
    return any(unicodedata.category(ch) == "Cc" and ch not in allowed for ch in text)


def query_id_problem(query_id: str) -> str | None:
    """Why ``query_id`` cannot be a query id of a data set, or None: a non-empty single token without a control
    character or ``#chunk-`` (ids go into TSV and TREC files and into chunk keys)."""
    if not query_id:
        return "empty: a query id is a non-empty single token"
    if any(ch.isspace() for ch in query_id) or _controls(query_id) or CHUNK_MARK in query_id:
        return (
            f"{quoted(query_id)} holds whitespace or a control character: a query id goes into TSV and TREC files "
            "as one token"
            if CHUNK_MARK not in query_id
            else f"{quoted(query_id)} holds '#chunk-': a query id is a single token without it"
        )
    return None


@dataclass(frozen=True, slots=True, kw_only=True)
class MarkedChunk:
    key: str
    doc_id: str | None  # None: the harness could not place the chunk in a document
    start: int | None
    end: int | None
    grade: int | None  # None: not marked yet


@dataclass(frozen=True, slots=True, kw_only=True)
class MarkedQuery:
    line: int
    query_id: str
    text: str
    chunks: tuple[MarkedChunk, ...]

    @property
    def fully_marked(self) -> bool:
        return all(c.grade is not None for c in self.chunks)

    def spans(self) -> frozenset[tuple[str, int, int, int]]:
        """(document, start, end, grade) of every chunk graded relevant."""
        return frozenset(
            (c.doc_id, c.start, c.end, c.grade)
            for c in self.chunks
            if c.grade and c.doc_id is not None and c.start is not None and c.end is not None
        )

    def document_grades(self) -> dict[str, int]:
        """The highest grade of each document a judged chunk lies in (0: judged, nothing relevant there)."""
        out: dict[str, int] = {}
        for c in self.chunks:
            if c.doc_id is not None and c.grade is not None:
                out[c.doc_id] = max(out.get(c.doc_id, 0), c.grade)
        return out


class _Problems:
    def __init__(self, path: Path) -> None:
        self.path, self.items = path, list[DatasetError]()

    def add(self, message: str, line: int, field: str | None = None) -> None:
        if len(self.items) < MAX_PROBLEMS:
            self.items.append(DatasetError(message, path=str(self.path), line=line, field=field))

    def raise_if_any(self) -> None:
        if not self.items:
            return
        first, rest = self.items[0], self.items[1:]
        if not rest:
            raise first
        more = "; ".join(str(e) for e in rest)
        raise DatasetError(
            f"{first.message}; {len(rest)} more problem(s): {more}", path=first.path, line=first.line, field=first.field
        )


def _lines(path: Path) -> Iterator[tuple[int, str]]:
    """(1-based line number, line), a line read at most :data:`MAX_LINE_BYTES` at a time."""
    try:
        check_regular(path, limit=None)  # a pipe would block, a device be read for ever
        with path.open("rb") as fh:
            n = 0
            while raw := fh.readline(MAX_LINE_BYTES + 1):
                n += 1
                if len(raw) > MAX_LINE_BYTES:
                    raise DatasetError(
                        f"a line over {MAX_LINE_BYTES:,} bytes: not a line of a labelling file", path=str(path), line=n
                    )
                try:
                    yield n, raw.decode("utf-8")
                except UnicodeDecodeError as exc:
                    raise DatasetError(f"not UTF-8 ({exc.reason})", path=str(path), line=n) from exc
    except OSError as exc:
        raise DatasetError(f"cannot read: {exc.strerror}", path=str(path)) from exc


def read_marked(path: Path, documents: Mapping[str, Document]) -> tuple[MarkedQuery, ...]:
    """Every query of the marked file at ``path``, checked against the corpus ``documents``.

    Refused (one :class:`DatasetError`, every problem named): see the module docstring; also a query id or a
    query text given twice (texts compared as :func:`normalise_query` does), a chunk given twice in a query, a
    chunk without a document graded relevant, a file without a query.
    """
    problems = _Problems(path)
    out: list[MarkedQuery] = []
    ids: set[str] = set()
    texts: dict[str, str] = {}
    for n, line in _lines(path):
        if not line.strip():
            continue
        try:
            obj = parse_json(line, unicode=True)
        except TextError as exc:
            problems.add(f"bad JSON ({exc.in_line})", n)
            continue
        query = _query(obj, n, documents, problems)
        if query is None:
            continue
        if query.query_id in ids:
            problems.add(f"query id {quoted(query.query_id)} given twice", n, "query_id")
            continue
        ids.add(query.query_id)
        if (other := texts.setdefault(normalise_query(query.text), query.query_id)) != query.query_id:
            problems.add(f"the same query as {quoted(other)} (case and whitespace aside)", n, "query")
            continue
        out.append(query)
    problems.raise_if_any()
    if not out:
        raise DatasetError("holds no query (a labelling file has one JSON object a line)", path=str(path))
    return tuple(out)


def _query(obj: Any, n: int, documents: Mapping[str, Document], problems: _Problems) -> MarkedQuery | None:
    if not isinstance(obj, dict):
        problems.add("a line must be a JSON object", n)
        return None
    ident, text, chunks = obj.get("query_id"), obj.get("query"), obj.get("chunks")
    if not isinstance(ident, str):
        problems.add("missing or not a string", n, "query_id")
        return None
    if why := query_id_problem(ident):
        problems.add(why, n, "query_id")
        return None
    if not isinstance(text, str) or not text.strip():
        problems.add("missing, empty or not a string", n, "query")
        return None
    if _controls(text, "\t\n\r"):
        problems.add(f"{quoted(text)} holds a control character (a NUL, an escape)", n, "query")
        return None
    if not isinstance(chunks, list) or not chunks:
        problems.add("missing, empty or not a list", n, "chunks")
        return None
    marked: list[MarkedChunk] = []
    keys: set[str] = set()
    for i, raw in enumerate(chunks):
        chunk = _chunk(raw, (n, f"chunks[{i}]"), documents, problems)
        if chunk is None:
            continue
        if chunk.key in keys:
            problems.add(f"chunk {quoted(chunk.key)} given twice", n, f"chunks[{i}].chunk")
            continue
        keys.add(chunk.key)
        marked.append(chunk)
    if len(marked) != len(chunks):
        return None
    return MarkedQuery(line=n, query_id=ident, text=text, chunks=tuple(marked))


def _int_or_none(value: Any) -> bool:
    return value is None or (isinstance(value, int) and not isinstance(value, bool))


def _chunk(
    raw: Any, where: tuple[int, str], documents: Mapping[str, Document], problems: _Problems
) -> MarkedChunk | None:
    n, at = where
    if not isinstance(raw, dict):
        problems.add("a chunk must be a JSON object", n, at)
        return None
    key, doc_id, start, end, grade = (raw.get(k) for k in ("chunk", "doc_id", "start", "end", "grade"))
    if not isinstance(key, str) or not key:
        problems.add("missing or not a string", n, f"{at}.chunk")
        return None
    if not _int_or_none(grade) or (grade is not None and grade not in GRADES):
        problems.add(f"{quoted(grade)} is not a grade: null (not marked), 0 (not relevant), 1 or 2", n, f"{at}.grade")
        return None
    if doc_id is None:
        if start is not None or end is not None:
            problems.add("offsets without a document (doc_id is null)", n, f"{at}.start")
            return None
        if grade:
            problems.add(
                "cannot be marked relevant: this chunk was not placed in a document (doc_id is null), so no label "
                "can point at it; grade it 0",
                n,
                f"{at}.grade",
            )
            return None
        return MarkedChunk(key=key, doc_id=None, start=None, end=None, grade=grade)
    if not _placed(raw, where, documents, problems):
        return None
    return MarkedChunk(key=key, doc_id=doc_id, start=start, end=end, grade=grade)


def _placed(
    raw: dict[str, Any], where: tuple[int, str], documents: Mapping[str, Document], problems: _Problems
) -> bool:
    """Whether a chunk placed in a document still is that document's text at its offsets."""
    n, at = where
    key, doc_id, start, end, text = (raw.get(k) for k in ("chunk", "doc_id", "start", "end", "text"))
    if not isinstance(doc_id, str) or doc_id not in documents:
        problems.add(f"document {quoted(doc_id)} is not in the corpus", n, f"{at}.doc_id")
        return False
    if str(key).rpartition(CHUNK_MARK)[0] != doc_id:
        problems.add(f"chunk {quoted(key)} is not a chunk of {quoted(doc_id)}", n, f"{at}.chunk")
        return False
    for name, value in (("start", start), ("end", end)):
        if value is None or not _int_or_none(value):
            problems.add(f"{quoted(value)} is not a character offset", n, f"{at}.{name}")
            return False
    assert isinstance(start, int) and isinstance(end, int)
    length = len(documents[doc_id].text)
    if not 0 <= start < end <= length:
        problems.add(f"offsets {start}-{end} outside the text of {quoted(doc_id)} (0-{length})", n, f"{at}.end")
        return False
    if text != documents[doc_id].text[start:end]:
        problems.add(
            f"no longer the text of {quoted(doc_id)} at {start}-{end}: the corpus changed since the file was "
            "written; write a new labelling file",
            n,
            f"{at}.text",
        )
        return False
    return True
