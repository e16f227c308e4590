"""The documents of the quotes builder: ``SRC/docs/**/<doc_id>.md``, TOML front matter between ``+++``
lines, then the markdown body (its text, stripped, is the document's text).

>>> import tempfile
>>> path = Path(tempfile.mkdtemp()) / "a.md"
>>> _ = path.write_text('+++\\nid = "b"\\ntitle = "T"\\ncategory = "c"\\nsource = "s"\\n+++\\nshort')
>>> problems: list[Problem] = []
>>> parse_doc(path, problems) is None, [str(p).split(": ", 1)[1] for p in problems]  # doctest: +NORMALIZE_WHITESPACE
(True, ["field 'id': id 'b' differs from the file name 'a.md'",
        "field 'body': body has 5 characters, must have 2000 to 6000"])
"""

from __future__ import annotations

import tomllib
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rag_eval.core.errors import quoted
from rag_eval.core.parsing import parse_toml
from rag_eval.datasets.quotes.problems import ID, KEY_LINE, Problem, read_text, toml_error_line, toml_error_text

MIN_BODY_CHARS = 2_000
MAX_BODY_CHARS = 6_000

FRONT_MATTER_FENCE = "+++"
REQUIRED_DOC_KEYS = ("id", "title", "category", "source")
OPTIONAL_DOC_KEYS = ("revises",)


@dataclass(frozen=True, slots=True)
class SourceDoc:
    """A document that passed every check, with the lines its ``id`` and ``revises`` keys are on."""

    id: str
    title: str
    category: str
    source: str
    revises: str | None
    text: str
    path: str
    id_line: int | None
    revises_line: int | None


@dataclass(frozen=True, slots=True)
class _FrontMatter:
    lines: list[str]  # the whole file, split into lines
    close: int  # the index of the closing fence
    meta: dict[str, Any]
    key_lines: dict[str, int]  # key -> the 1-based line it is set on


def parse_doc(path: Path, problems: list[Problem]) -> SourceDoc | None:
    """The document of one file, or None with its problems added to ``problems``."""
    where = str(path)
    raw = read_text(path, problems)
    if raw is None:
        return None
    front = _front_matter(raw, where, problems)
    if front is None:
        return None
    values, ok = _values(front.meta, front.key_lines, where, problems)
    ok = _id_ok(values, front.key_lines, path, problems) and ok
    text = "\n".join(front.lines[front.close + 1 :]).strip()
    if not MIN_BODY_CHARS <= len(text) <= MAX_BODY_CHARS:
        problems.append(
            Problem(
                f"body has {len(text)} characters, must have {MIN_BODY_CHARS} to {MAX_BODY_CHARS}",
                where,
                front.close + 2,
                "body",
            )
        )
        ok = False
    if not ok:
        return None
    return SourceDoc(
        id=values["id"],
        title=values["title"],
        category=values["category"],
        source=values["source"],
        revises=values.get("revises"),
        text=text,
        path=where,
        id_line=front.key_lines.get("id"),
        revises_line=front.key_lines.get("revises"),
    )


def _front_matter(raw: str, where: str, problems: list[Problem]) -> _FrontMatter | None:
    """The front matter between the first two fences, parsed, with the line of each key."""
    lines = raw.split("\n")
    if not lines or lines[0].strip() != FRONT_MATTER_FENCE:
        problems.append(Problem(f"must start with a {FRONT_MATTER_FENCE!r} line opening the front matter", where, 1))
        return None
    close = next((i for i in range(1, len(lines)) if lines[i].strip() == FRONT_MATTER_FENCE), None)
    if close is None:
        problems.append(Problem(f"front matter is never closed by a {FRONT_MATTER_FENCE!r} line", where, 1))
        return None
    try:
        meta = parse_toml("\n".join(lines[1:close]))
    except tomllib.TOMLDecodeError as exc:
        line = toml_error_line(exc)
        problems.append(
            Problem(f"front matter is not valid TOML: {toml_error_text(exc)}", where, line + 1 if line else 1)
        )
        return None
    key_lines: dict[str, int] = {}
    for i in range(1, close):
        m = KEY_LINE.match(lines[i])
        if m:
            key_lines.setdefault(m.group(1).strip('"'), i + 1)
    return _FrontMatter(lines=lines, close=close, meta=meta, key_lines=key_lines)


def _values(
    meta: Mapping[str, Any], key_lines: Mapping[str, int], where: str, problems: list[Problem]
) -> tuple[dict[str, str], bool]:
    """The front matter's string values, stripped, and whether every key is known and well formed."""
    ok = True
    values: dict[str, str] = {}
    for key in REQUIRED_DOC_KEYS + OPTIONAL_DOC_KEYS:
        if key not in meta:
            if key in REQUIRED_DOC_KEYS:
                problems.append(Problem("missing front matter key", where, 1, key))
                ok = False
            continue
        value = meta[key]
        if not isinstance(value, str) or not value.strip():
            problems.append(Problem("must be a non-empty string", where, key_lines.get(key, 1), key))
            ok = False
            continue
        values[key] = value.strip()
    for key in sorted(set(meta) - set(REQUIRED_DOC_KEYS + OPTIONAL_DOC_KEYS)):
        problems.append(
            Problem(
                f"unknown front matter key (use: {', '.join(REQUIRED_DOC_KEYS + OPTIONAL_DOC_KEYS)})",
                where,
                key_lines.get(key, 1),
                key,
            )
        )
        ok = False
    return values, ok


def _id_ok(values: Mapping[str, str], key_lines: Mapping[str, int], path: Path, problems: list[Problem]) -> bool:
    """False (and a problem) when the id is not the file's name or not a valid id."""
    where = str(path)
    if "id" in values and values["id"] != path.stem:
        problems.append(
            Problem(
                f"id {quoted(values['id'])} differs from the file name {path.name!r}", where, key_lines.get("id"), "id"
            )
        )
        return False
    if "id" in values and not ID.fullmatch(values["id"]):
        problems.append(Problem(f"id {quoted(values['id'])} is not a valid id", where, key_lines.get("id"), "id"))
        return False
    return True


def load_docs(docs_dir: Path, problems: list[Problem], broken: set[str]) -> dict[str, SourceDoc]:
    """Valid documents by id; the file stems of invalid ones go to ``broken``."""
    if not docs_dir.is_dir():
        problems.append(Problem("documents directory is missing", str(docs_dir)))
        return {}
    docs: dict[str, SourceDoc] = {}
    paths = sorted(docs_dir.rglob("*.md"))
    if not paths:
        problems.append(Problem("no documents (*.md) found", str(docs_dir)))
    for path in paths:
        doc = parse_doc(path, problems)
        if doc is None:
            broken.add(path.stem)
            continue
        if doc.id in docs:
            problems.append(
                Problem(
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
            problems.append(Problem("a document cannot revise itself", doc.path, doc.revises_line, "revises"))
        elif doc.revises not in docs:
            problems.append(
                Problem(f"revises unknown document {quoted(doc.revises)}", doc.path, doc.revises_line, "revises")
            )
    return docs
