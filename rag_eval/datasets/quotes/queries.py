"""The queries of the quotes builder: ``SRC/queries/*.toml``, ``[[query]]`` tables whose
``[[query.evidence]]`` tables quote the documents, each problem named by its file and line.

>>> layout = TomlLayout.scan('[[query]]\\nid = "q1"\\n[[query.evidence]]\\ndoc = "a"\\nquote = "x"\\n')
>>> layout.query_key(0, "id"), layout.evidence_key(0, 0, "quote")
(2, 5)
"""

from __future__ import annotations

import json
import re
import tomllib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rag_eval.core.errors import quoted
from rag_eval.core.parsing import parse_toml
from rag_eval.datasets.quotes.problems import (
    ID,
    KEY_LINE,
    Problem,
    line_of,
    read_text,
    toml_error_line,
    toml_error_text,
)

QUERY_KEYS = ("id", "text", "answerable", "evidence")
EVIDENCE_KEYS = ("doc", "quote")
_TABLE_LINE = re.compile(r"^\s*\[\[\s*([A-Za-z0-9_.\s-]+?)\s*\]\]\s*(#.*)?$")


@dataclass(frozen=True, slots=True)
class Evidence:
    """One quote of a query's evidence, and the line it is on."""

    doc: str
    quote: str
    line: int | None


@dataclass(frozen=True, slots=True)
class SourceQuery:
    """A query that passed every check, where it is written and the line of its id."""

    id: str
    text: str
    answerable: bool
    evidence: tuple[Evidence, ...]
    path: str
    line: int | None
    id_line: int | None


@dataclass(slots=True)
class TomlLayout:
    """Line numbers of ``[[query]]`` tables and their keys, found by scanning the raw text."""

    query_lines: list[int] = field(default_factory=list)
    query_keys: list[dict[str, int]] = field(default_factory=list)
    evidence_keys: list[list[dict[str, int]]] = field(default_factory=list)

    @classmethod
    def scan(cls, raw: str) -> TomlLayout:
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
            key = KEY_LINE.match(line)
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


@dataclass(frozen=True, slots=True)
class _QueryFile:
    """One query file as it is checked: its path, its raw text (for lines), its layout."""

    where: str
    raw: str
    layout: TomlLayout
    problems: list[Problem]

    def problem(self, message: str, line: int | None, key: str | None) -> None:
        self.problems.append(Problem(message, self.where, line, key))


def _find_line(raw: str, needle: str, default: int | None) -> int | None:
    """Line where ``needle`` (as written, or as a TOML basic string would escape it) starts."""
    for candidate in (needle, json.dumps(needle, ensure_ascii=False)[1:-1]):
        at = raw.find(candidate) if candidate else -1
        if at >= 0:
            return line_of(raw, at)
    return default


def load_query_file(path: Path, problems: list[Problem]) -> list[SourceQuery]:
    """The valid queries of one file; every problem of the others goes to ``problems``."""
    where = str(path)
    raw = read_text(path, problems)
    if raw is None:
        return []
    try:
        data = parse_toml(raw)
    except tomllib.TOMLDecodeError as exc:
        problems.append(Problem(f"not valid TOML: {toml_error_text(exc)}", where, toml_error_line(exc)))
        return []
    file = _QueryFile(where=where, raw=raw, layout=TomlLayout.scan(raw), problems=problems)
    for key in sorted(set(data) - {"query"}):
        file.problem("unknown top-level key (queries go in [[query]] tables)", None, key)
    tables = data.get("query", [])
    if not isinstance(tables, list) or not all(isinstance(t, dict) for t in tables):
        file.problem("must be an array of tables ([[query]])", file.layout.query_line(0), "query")
        return []
    return [q for qi, table in enumerate(tables) if (q := _query(file, qi, table)) is not None]


def _query(file: _QueryFile, qi: int, table: Mapping[str, Any]) -> SourceQuery | None:
    """The ``qi``-th ``[[query]]`` table as a query, or None when it has a problem."""
    layout = file.layout
    qline = layout.query_line(qi)
    ok = True
    qid = table.get("id")
    if not isinstance(qid, str) or not ID.fullmatch(qid):
        file.problem("missing or invalid query id", layout.query_key(qi, "id"), "id")
        ok = False
        qid = f"#{qi + 1}"
    label = f"query {qid}"
    text: Any = table.get("text")
    if not isinstance(text, str) or not text.strip():
        file.problem(f"{label}: text must be a non-empty string", layout.query_key(qi, "text"), "text")
        ok = False
    answerable = table.get("answerable", True)
    if not isinstance(answerable, bool):
        file.problem(f"{label}: answerable must be true or false", layout.query_key(qi, "answerable"), "answerable")
        ok = False
    for key in sorted(set(table) - set(QUERY_KEYS)):
        file.problem(f"{label}: unknown key (use: {', '.join(QUERY_KEYS)})", layout.query_key(qi, key), key)
        ok = False
    entries = table.get("evidence", [])
    if not isinstance(entries, list) or not all(isinstance(e, dict) for e in entries):
        file.problem(
            f"{label}: evidence must be an array of tables ([[query.evidence]])",
            layout.query_key(qi, "evidence"),
            "evidence",
        )
        entries, ok = [], False
    if answerable is True and not entries:
        file.problem(
            f"{label} is answerable but has no evidence (add evidence or answerable = false)", qline, "evidence"
        )
        ok = False
    if answerable is False and entries:
        file.problem(f"{label} is unanswerable but has evidence", layout.query_key(qi, "answerable"), "evidence")
        ok = False
    evidence, evidence_ok = _evidence(file, qi, label, entries)
    if not (ok and evidence_ok):
        return None
    return SourceQuery(qid, text.strip(), answerable, evidence, file.where, qline, layout.query_key(qi, "id"))


def _evidence(
    file: _QueryFile, qi: int, label: str, entries: Sequence[Mapping[str, Any]]
) -> tuple[tuple[Evidence, ...], bool]:
    """The query's evidence entries (every one with a doc and a quote string), and whether all are valid."""
    layout, qline = file.layout, file.layout.query_line(qi)
    ok = True
    evidence: list[Evidence] = []
    for ei, entry in enumerate(entries):
        for key in sorted(set(entry) - set(EVIDENCE_KEYS)):
            line = layout.evidence_key(qi, ei, key) or qline
            file.problem(f"{label}: unknown evidence key (use: doc, quote)", line, key)
            ok = False
        doc, quote = entry.get("doc"), entry.get("quote")
        if not isinstance(doc, str) or not doc:
            file.problem(f"{label}: evidence needs a doc id", layout.evidence_key(qi, ei, "doc") or qline, "doc")
            ok = False
        if not isinstance(quote, str) or not quote.strip():
            file.problem(
                f"{label}: evidence needs a non-empty quote", layout.evidence_key(qi, ei, "quote") or qline, "quote"
            )
            ok = False
        if isinstance(doc, str) and isinstance(quote, str):
            line = layout.evidence_key(qi, ei, "quote") or _find_line(file.raw, quote, qline)
            evidence.append(Evidence(doc, quote, line))
    return tuple(evidence), ok


def load_queries(queries_dir: Path, problems: list[Problem]) -> dict[str, SourceQuery]:
    """Valid queries by id, from every query file in ``queries_dir`` in name order."""
    if not queries_dir.is_dir():
        problems.append(Problem("queries directory is missing", str(queries_dir)))
        return {}
    queries: dict[str, SourceQuery] = {}
    for path in sorted(queries_dir.rglob("*.toml")):
        for query in load_query_file(path, problems):
            if query.id in queries:
                other = queries[query.id]
                problems.append(
                    Problem(
                        f"duplicate query id {quoted(query.id)} (also at {other.path}:{other.id_line})",
                        query.path,
                        query.id_line,
                        "id",
                    )
                )
                continue
            queries[query.id] = query
    return queries
