"""Build a BEIR data set with span qrels from markdown documents and quoted evidence.

Sources live in one directory::

    SRC/docs/**/<doc_id>.md     +++ TOML front matter +++, then the markdown body
    SRC/queries/*.toml          [[query]] tables whose [[query.evidence]] quote the documents

A document's ``text`` is its body with surrounding whitespace stripped. Every
evidence quote must occur exactly once in the text of the document it names;
its position becomes a span ``(start, end)`` (0-based, end exclusive). The
build writes, into ``OUT``::

    corpus.jsonl  queries.jsonl  qrels/<split>.tsv  qrels/<split>.spans.tsv

Every problem found is reported at once, in one :class:`DatasetError` naming
the source file, the 1-based line and the field of the first problem. Outputs
are written to a temporary directory first and moved into place only when the
whole build succeeded, so a failing build leaves the previous output as it was.

Command line::

    python -m rag_eval.datasets.quotes SRC_DIR OUT_DIR [--split test]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import sys
import tempfile
import tomllib
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rag_eval.core.errors import DatasetError, quoted
from rag_eval.datasets.beir import split_problem
from rag_eval.datasets.chunking import DEFAULT_CHUNKER_SPEC, parse_chunker

__all__ = ["MAX_BODY_CHARS", "MIN_BODY_CHARS", "BuildReport", "build_dataset", "main"]

MIN_BODY_CHARS = 2_000
MAX_BODY_CHARS = 6_000

FRONT_MATTER_FENCE = "+++"
REQUIRED_DOC_KEYS = ("id", "title", "category", "source")
OPTIONAL_DOC_KEYS = ("revises",)
QUERY_KEYS = ("id", "text", "answerable", "evidence")
EVIDENCE_KEYS = ("doc", "quote")

_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]*")
_TOML_LINE = re.compile(r"at line (\d+)")
_TOML_POSITION = re.compile(r"\s*\(at (line \d+, column \d+|end of document)\)")
_KEY_LINE = re.compile(r"^\s*([A-Za-z0-9_-]+|\"[^\"]*\")\s*=")
_TABLE_LINE = re.compile(r"^\s*\[\[\s*([A-Za-z0-9_.\s-]+?)\s*\]\]\s*(#.*)?$")


@dataclass(frozen=True, slots=True)
class BuildReport:
    """What one build wrote."""

    documents: int
    queries: int
    answerable: int
    spans: int
    multi_chunk_queries: int
    chunker: str = DEFAULT_CHUNKER_SPEC

    @property
    def multi_chunk_share(self) -> float:
        """Share of all queries (answerable or not) that are multi-chunk."""
        return self.multi_chunk_queries / self.queries if self.queries else 0.0

    def __str__(self) -> str:
        return (
            f"{self.documents} documents, {self.queries} queries ({self.answerable} answerable), "
            f"{self.spans} spans, {self.multi_chunk_queries} multi-chunk queries "
            f"({self.multi_chunk_share:.1%}) under {self.chunker}"
        )


# ----------------------------------------------------------------------------- problems


@dataclass(frozen=True, slots=True)
class _Problem:
    message: str
    path: str
    line: int | None = None
    field: str | None = None

    def __str__(self) -> str:
        where = self.path if self.line is None else f"{self.path}:{self.line}"
        if self.field:
            where += f": field {self.field!r}"
        return f"{where}: {self.message}"


def _raise_problems(problems: Sequence[_Problem]) -> None:
    if not problems:
        return
    first = problems[0]
    if len(problems) == 1:
        error = DatasetError(first.message, path=first.path, line=first.line, field=first.field)
    else:
        listed = "; ".join(f"({i}) {p}" for i, p in enumerate(problems, 1))
        error = DatasetError(
            f"{len(problems)} problems in the data set sources: {listed}",
            path=first.path,
            line=first.line,
            field=first.field,
        )
    error.problems = tuple(str(p) for p in problems)  # type: ignore[attr-defined]
    raise error


def _short(text: str, limit: int = 60) -> str:
    """A quote on one line, cut shorter than other values: it is shown beside its document's id."""
    return quoted(" ".join(text.split()), limit)


def _line_of(raw: str, offset: int) -> int:
    return raw.count("\n", 0, offset) + 1


def _toml_error_line(exc: tomllib.TOMLDecodeError) -> int | None:
    match = _TOML_LINE.search(str(exc))
    return int(match.group(1)) if match else None


def _toml_error_text(exc: tomllib.TOMLDecodeError) -> str:
    """The parser's message without its own position (the problem carries the file line)."""
    return _TOML_POSITION.sub("", str(exc)).strip()


# ----------------------------------------------------------------------------- documents


@dataclass(frozen=True, slots=True)
class _Doc:
    id: str
    title: str
    category: str
    source: str
    revises: str | None
    text: str
    path: str
    id_line: int | None
    revises_line: int | None


def _read_text(path: Path, problems: list[_Problem]) -> str | None:
    try:
        # universal newlines: CRLF sources build the same bytes as LF sources
        return path.read_text(encoding="utf-8-sig")
    except UnicodeDecodeError as exc:
        problems.append(_Problem(f"not valid UTF-8 ({exc.reason} at byte {exc.start})", str(path)))
    except OSError as exc:
        problems.append(_Problem(f"cannot be read ({exc.strerror})", str(path)))
    return None


def _parse_doc(path: Path, problems: list[_Problem]) -> _Doc | None:
    where = str(path)
    raw = _read_text(path, problems)
    if raw is None:
        return None
    lines = raw.split("\n")
    if not lines or lines[0].strip() != FRONT_MATTER_FENCE:
        problems.append(_Problem(f"must start with a {FRONT_MATTER_FENCE!r} line opening the front matter", where, 1))
        return None
    close = next((i for i in range(1, len(lines)) if lines[i].strip() == FRONT_MATTER_FENCE), None)
    if close is None:
        problems.append(_Problem(f"front matter is never closed by a {FRONT_MATTER_FENCE!r} line", where, 1))
        return None
    front = "\n".join(lines[1:close])
    try:
        meta = tomllib.loads(front)
    except tomllib.TOMLDecodeError as exc:
        line = _toml_error_line(exc)
        problems.append(
            _Problem(f"front matter is not valid TOML: {_toml_error_text(exc)}", where, line + 1 if line else 1)
        )
        return None

    key_lines: dict[str, int] = {}
    for i in range(1, close):
        m = _KEY_LINE.match(lines[i])
        if m:
            key_lines.setdefault(m.group(1).strip('"'), i + 1)

    ok = True
    values: dict[str, str] = {}
    for key in REQUIRED_DOC_KEYS + OPTIONAL_DOC_KEYS:
        if key not in meta:
            if key in REQUIRED_DOC_KEYS:
                problems.append(_Problem("missing front matter key", where, 1, key))
                ok = False
            continue
        value = meta[key]
        if not isinstance(value, str) or not value.strip():
            problems.append(_Problem("must be a non-empty string", where, key_lines.get(key, 1), key))
            ok = False
            continue
        values[key] = value.strip()
    for key in sorted(set(meta) - set(REQUIRED_DOC_KEYS + OPTIONAL_DOC_KEYS)):
        problems.append(
            _Problem(
                f"unknown front matter key (use: {', '.join(REQUIRED_DOC_KEYS + OPTIONAL_DOC_KEYS)})",
                where,
                key_lines.get(key, 1),
                key,
            )
        )
        ok = False
    if "id" in values and values["id"] != path.stem:
        problems.append(
            _Problem(
                f"id {quoted(values['id'])} differs from the file name {path.name!r}",
                where,
                key_lines.get("id"),
                "id",
            )
        )
        ok = False
    elif "id" in values and not _ID.fullmatch(values["id"]):
        problems.append(_Problem(f"id {quoted(values['id'])} is not a valid id", where, key_lines.get("id"), "id"))
        ok = False

    text = "\n".join(lines[close + 1 :]).strip()
    if not MIN_BODY_CHARS <= len(text) <= MAX_BODY_CHARS:
        problems.append(
            _Problem(
                f"body has {len(text)} characters, must have {MIN_BODY_CHARS} to {MAX_BODY_CHARS}",
                where,
                close + 2,
                "body",
            )
        )
        ok = False
    if not ok:
        return None
    return _Doc(
        id=values["id"],
        title=values["title"],
        category=values["category"],
        source=values["source"],
        revises=values.get("revises"),
        text=text,
        path=where,
        id_line=key_lines.get("id"),
        revises_line=key_lines.get("revises"),
    )


def _load_docs(docs_dir: Path, problems: list[_Problem], broken: set[str]) -> dict[str, _Doc]:
    """Valid documents by id; the file stems of invalid ones go to ``broken``."""
    if not docs_dir.is_dir():
        problems.append(_Problem("documents directory is missing", str(docs_dir)))
        return {}
    docs: dict[str, _Doc] = {}
    paths = sorted(docs_dir.rglob("*.md"))
    if not paths:
        problems.append(_Problem("no documents (*.md) found", str(docs_dir)))
    for path in paths:
        doc = _parse_doc(path, problems)
        if doc is None:
            broken.add(path.stem)
            continue
        if doc.id in docs:
            problems.append(
                _Problem(
                    f"duplicate document id {quoted(doc.id)} (also in {docs[doc.id].path})",
                    doc.path,
                    doc.id_line,
                    "id",
                )
            )
            continue
        docs[doc.id] = doc
    for doc in docs.values():
        if doc.revises is None:
            continue
        if doc.revises == doc.id:
            problems.append(_Problem("a document cannot revise itself", doc.path, doc.revises_line, "revises"))
        elif doc.revises not in docs:
            problems.append(
                _Problem(f"revises unknown document {quoted(doc.revises)}", doc.path, doc.revises_line, "revises")
            )
    return docs


# ----------------------------------------------------------------------------- queries


@dataclass(frozen=True, slots=True)
class _Evidence:
    doc: str
    quote: str
    line: int | None


@dataclass(frozen=True, slots=True)
class _Query:
    id: str
    text: str
    answerable: bool
    evidence: tuple[_Evidence, ...]
    path: str
    line: int | None
    id_line: int | None


@dataclass(slots=True)
class _TomlLayout:
    """Line numbers of ``[[query]]`` tables and their keys, found by scanning the raw text."""

    query_lines: list[int] = field(default_factory=list)
    query_keys: list[dict[str, int]] = field(default_factory=list)
    evidence_keys: list[list[dict[str, int]]] = field(default_factory=list)

    @classmethod
    def scan(cls, raw: str) -> _TomlLayout:
        layout = cls()
        current: dict[str, int] | None = None
        for number, line in enumerate(raw.split("\n"), 1):
            table = _TABLE_LINE.match(line)
            if table:
                name = re.sub(r"\s+", "", table.group(1))
                if name == "query":
                    layout.query_lines.append(number)
                    layout.query_keys.append({})
                    layout.evidence_keys.append([])
                    current = layout.query_keys[-1]
                elif name == "query.evidence" and layout.evidence_keys:
                    layout.evidence_keys[-1].append({})
                    current = layout.evidence_keys[-1][-1]
                else:
                    current = None
                continue
            if line.lstrip().startswith("["):
                current = None
                continue
            key = _KEY_LINE.match(line)
            if key and current is not None:
                current.setdefault(key.group(1).strip('"'), number)
        return layout

    def query_line(self, qi: int) -> int | None:
        return self.query_lines[qi] if qi < len(self.query_lines) else None

    def query_key(self, qi: int, key: str) -> int | None:
        if qi < len(self.query_keys) and key in self.query_keys[qi]:
            return self.query_keys[qi][key]
        return self.query_line(qi)

    def evidence_key(self, qi: int, ei: int, key: str) -> int | None:
        if qi < len(self.evidence_keys) and ei < len(self.evidence_keys[qi]):
            return self.evidence_keys[qi][ei].get(key)
        return None


def _find_line(raw: str, needle: str, default: int | None) -> int | None:
    """Line where ``needle`` (as written, or as a TOML basic string would escape it) starts."""
    for candidate in (needle, json.dumps(needle, ensure_ascii=False)[1:-1]):
        at = raw.find(candidate) if candidate else -1
        if at >= 0:
            return _line_of(raw, at)
    return default


def _load_query_file(path: Path, problems: list[_Problem]) -> list[_Query]:
    where = str(path)
    raw = _read_text(path, problems)
    if raw is None:
        return []
    try:
        data = tomllib.loads(raw)
    except tomllib.TOMLDecodeError as exc:
        problems.append(_Problem(f"not valid TOML: {_toml_error_text(exc)}", where, _toml_error_line(exc)))
        return []
    layout = _TomlLayout.scan(raw)
    for key in sorted(set(data) - {"query"}):
        problems.append(_Problem("unknown top-level key (queries go in [[query]] tables)", where, None, key))
    tables = data.get("query", [])
    if not isinstance(tables, list) or not all(isinstance(t, dict) for t in tables):
        problems.append(_Problem("must be an array of tables ([[query]])", where, layout.query_line(0), "query"))
        return []

    queries: list[_Query] = []
    for qi, table in enumerate(tables):
        qline = layout.query_line(qi)
        ok = True
        qid = table.get("id")
        if not isinstance(qid, str) or not _ID.fullmatch(qid):
            problems.append(_Problem("missing or invalid query id", where, layout.query_key(qi, "id"), "id"))
            ok = False
            qid = f"#{qi + 1}"
        label = f"query {qid}"
        text = table.get("text")
        if not isinstance(text, str) or not text.strip():
            problems.append(
                _Problem(f"{label}: text must be a non-empty string", where, layout.query_key(qi, "text"), "text")
            )
            ok = False
        answerable = table.get("answerable", True)
        if not isinstance(answerable, bool):
            problems.append(
                _Problem(
                    f"{label}: answerable must be true or false",
                    where,
                    layout.query_key(qi, "answerable"),
                    "answerable",
                )
            )
            ok = False
        for key in sorted(set(table) - set(QUERY_KEYS)):
            problems.append(
                _Problem(
                    f"{label}: unknown key (use: {', '.join(QUERY_KEYS)})",
                    where,
                    layout.query_key(qi, key),
                    key,
                )
            )
            ok = False
        entries = table.get("evidence", [])
        if not isinstance(entries, list) or not all(isinstance(e, dict) for e in entries):
            problems.append(
                _Problem(
                    f"{label}: evidence must be an array of tables ([[query.evidence]])",
                    where,
                    layout.query_key(qi, "evidence"),
                    "evidence",
                )
            )
            entries, ok = [], False
        if answerable is True and not entries:
            problems.append(
                _Problem(
                    f"{label} is answerable but has no evidence (add evidence or answerable = false)",
                    where,
                    qline,
                    "evidence",
                )
            )
            ok = False
        if answerable is False and entries:
            problems.append(
                _Problem(
                    f"{label} is unanswerable but has evidence",
                    where,
                    layout.query_key(qi, "answerable"),
                    "evidence",
                )
            )
            ok = False
        evidence: list[_Evidence] = []
        for ei, entry in enumerate(entries):
            for key in sorted(set(entry) - set(EVIDENCE_KEYS)):
                problems.append(
                    _Problem(
                        f"{label}: unknown evidence key (use: doc, quote)",
                        where,
                        layout.evidence_key(qi, ei, key) or qline,
                        key,
                    )
                )
                ok = False
            doc, quote = entry.get("doc"), entry.get("quote")
            if not isinstance(doc, str) or not doc:
                problems.append(
                    _Problem(
                        f"{label}: evidence needs a doc id",
                        where,
                        layout.evidence_key(qi, ei, "doc") or qline,
                        "doc",
                    )
                )
                ok = False
            if not isinstance(quote, str) or not quote.strip():
                problems.append(
                    _Problem(
                        f"{label}: evidence needs a non-empty quote",
                        where,
                        layout.evidence_key(qi, ei, "quote") or qline,
                        "quote",
                    )
                )
                ok = False
            if isinstance(doc, str) and isinstance(quote, str):
                line = layout.evidence_key(qi, ei, "quote") or _find_line(raw, quote, qline)
                evidence.append(_Evidence(doc, quote, line))
        if ok:
            queries.append(
                _Query(qid, text.strip(), answerable, tuple(evidence), where, qline, layout.query_key(qi, "id"))
            )
    return queries


def _load_queries(queries_dir: Path, problems: list[_Problem]) -> dict[str, _Query]:
    if not queries_dir.is_dir():
        problems.append(_Problem("queries directory is missing", str(queries_dir)))
        return {}
    queries: dict[str, _Query] = {}
    for path in sorted(queries_dir.rglob("*.toml")):
        for query in _load_query_file(path, problems):
            if query.id in queries:
                other = queries[query.id]
                problems.append(
                    _Problem(
                        f"duplicate query id {quoted(query.id)} (also at {other.path}:{other.id_line})",
                        query.path,
                        query.id_line,
                        "id",
                    )
                )
                continue
            queries[query.id] = query
    return queries


# ----------------------------------------------------------------------------- spans


def _locate(
    queries: dict[str, _Query], docs: dict[str, _Doc], broken: set[str], problems: list[_Problem]
) -> dict[str, list[tuple[str, int, int]]]:
    """Spans ``(doc_id, start, end)`` of every query, in evidence order.

    Quotes into documents that failed to load (``broken``) are not checked: the
    document's own problem is already reported.
    """
    spans: dict[str, list[tuple[str, int, int]]] = {}
    for query in queries.values():
        found: list[tuple[str, int, int]] = []
        for ev in query.evidence:
            doc = docs.get(ev.doc)
            if doc is None and ev.doc in broken:
                continue
            if doc is None:
                unknown = f"query {query.id}: unknown document {quoted(ev.doc)}"
                problems.append(_Problem(unknown, query.path, ev.line, "doc"))
                continue
            starts = _occurrences(doc.text, ev.quote)
            if len(starts) != 1:
                how = "not found" if not starts else f"found {len(starts)} times, must be unique"
                problems.append(
                    _Problem(
                        f"query {query.id}: quote {_short(ev.quote)} {how} in document {quoted(ev.doc)}",
                        query.path,
                        ev.line,
                        "quote",
                    )
                )
                continue
            span = (ev.doc, starts[0], starts[0] + len(ev.quote))
            if span in found:
                problems.append(
                    _Problem(f"query {query.id}: the same quote is given twice", query.path, ev.line, "quote")
                )
                continue
            found.append(span)
        spans[query.id] = found
    return spans


def _occurrences(text: str, needle: str) -> list[int]:
    """Start of every occurrence of ``needle`` in ``text``, overlapping ones included."""
    found: list[int] = []
    at = text.find(needle)
    while at >= 0:
        found.append(at)
        at = text.find(needle, at + 1)
    return found


def _multi_chunk_queries(spans: dict[str, list[tuple[str, int, int]]], docs: dict[str, _Doc]) -> int:
    chunker = parse_chunker(DEFAULT_CHUNKER_SPEC)
    ranges: dict[str, list[tuple[int, int]]] = {}
    count = 0
    for query_spans in spans.values():
        by_doc: dict[str, list[tuple[int, int]]] = {}
        for doc_id, start, end in query_spans:
            by_doc.setdefault(doc_id, []).append((start, end))
        for doc_id, doc_spans in by_doc.items():
            if len(doc_spans) < 2:
                continue
            if doc_id not in ranges:
                ranges[doc_id] = chunker.ranges(docs[doc_id].text)
            hit = {i for i, (cs, ce) in enumerate(ranges[doc_id]) for s, e in doc_spans if s < ce and cs < e}
            if len(hit) >= 2:
                count += 1
                break
    return count


# ----------------------------------------------------------------------------- output


def _jsonl(rows: list[dict[str, Any]]) -> str:
    return "".join(json.dumps(row, ensure_ascii=False) + "\n" for row in rows)


def _render(
    docs: dict[str, _Doc],
    queries: dict[str, _Query],
    spans: dict[str, list[tuple[str, int, int]]],
    split: str,
) -> dict[str, str]:
    corpus = []
    for doc_id in sorted(docs):
        doc = docs[doc_id]
        meta: dict[str, str] = {"category": doc.category, "source": doc.source}
        if doc.revises:
            meta["revises"] = doc.revises
        corpus.append({"_id": doc.id, "title": doc.title, "text": doc.text, "metadata": meta})
    query_rows = [
        {"_id": q.id, "text": q.text, "metadata": {"answerable": q.answerable}}
        for q in (queries[qid] for qid in sorted(queries))
    ]
    pairs = sorted({(qid, doc_id) for qid, found in spans.items() for doc_id, _, _ in found})
    span_rows = sorted((qid, doc_id, s, e) for qid, found in spans.items() for doc_id, s, e in found)
    qrels = "query-id\tcorpus-id\tscore\n" + "".join(f"{q}\t{d}\t1\n" for q, d in pairs)
    span_qrels = "query-id\tcorpus-id\tstart\tend\tscore\n" + "".join(
        f"{q}\t{d}\t{s}\t{e}\t1\n" for q, d, s, e in span_rows
    )
    return {
        "corpus.jsonl": _jsonl(corpus),
        "queries.jsonl": _jsonl(query_rows),
        f"qrels/{split}.tsv": qrels,
        f"qrels/{split}.spans.tsv": span_qrels,
    }


def _write_atomically(out_dir: Path, files: dict[str, str]) -> None:
    out_dir.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{out_dir.name}.build-", dir=out_dir.parent))
    try:
        for name, content in files.items():
            target = tmp / name
            target.parent.mkdir(parents=True, exist_ok=True)
            with open(target, "w", encoding="utf-8", newline="\n") as fh:
                fh.write(content)
        for name in files:
            final = out_dir / name
            final.parent.mkdir(parents=True, exist_ok=True)
            os.replace(tmp / name, final)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


# ----------------------------------------------------------------------------- entry points


def build_dataset(src_dir: Path, out_dir: Path, split: str = "test") -> BuildReport:
    """Validate the sources in ``src_dir`` and write the BEIR files with span qrels into ``out_dir``.

    Raises :class:`DatasetError` listing every problem; nothing is written then.
    """
    src_dir, out_dir = Path(src_dir), Path(out_dir)
    problems: list[_Problem] = []
    if why := split_problem(split):  # the loader's rule: what is built here must load
        problems.append(_Problem(why, str(out_dir), None, "split"))
    if not src_dir.is_dir():
        problems.append(_Problem("source directory does not exist", str(src_dir)))
        _raise_problems(problems)
    broken: set[str] = set()
    docs = _load_docs(src_dir / "docs", problems, broken)
    queries = _load_queries(src_dir / "queries", problems)
    spans = _locate(queries, docs, broken, problems)
    _raise_problems(problems)

    _write_atomically(out_dir, _render(docs, queries, spans, split))
    return BuildReport(
        documents=len(docs),
        queries=len(queries),
        answerable=sum(q.answerable for q in queries.values()),
        spans=sum(len(found) for found in spans.values()),
        multi_chunk_queries=_multi_chunk_queries(spans, docs),
    )


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m rag_eval.datasets.quotes",
        description="Build BEIR files with span qrels from markdown documents and quoted evidence.",
    )
    parser.add_argument("src_dir", type=Path, metavar="SRC_DIR", help="directory holding docs/ and queries/")
    parser.add_argument("out_dir", type=Path, metavar="OUT_DIR", help="directory the built files are written to")
    parser.add_argument("--split", default="test", help="qrels split name (default: test)")
    args = parser.parse_args(argv)
    try:
        report = build_dataset(args.src_dir, args.out_dir, args.split)
    except DatasetError as exc:
        print(f"error: {' '.join(str(exc).split())}", file=sys.stderr)
        return exc.exit_code
    except OSError as exc:
        print(f"error: cannot write {args.out_dir}: {exc.strerror or exc}", file=sys.stderr)
        return 3
    print(report)
    return 0


if __name__ == "__main__":
    sys.exit(main())
