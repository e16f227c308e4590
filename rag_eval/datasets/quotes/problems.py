"""How the quotes builder names a problem (file, 1-based line, field) and raises them all at once.

>>> str(Problem("must be a non-empty string", "docs/a.md", 3, "title"))
"docs/a.md:3: field 'title': must be a non-empty string"
"""

from __future__ import annotations

import re
import tomllib
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from rag_eval.core.errors import DatasetError, quoted
from rag_eval.core.parsing import check_regular

ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]*")
KEY_LINE = re.compile(r"^\s*([A-Za-z0-9_-]+|\"[^\"]*\")\s*=")
_TOML_LINE = re.compile(r"at line (\d+)")
_TOML_POSITION = re.compile(r"\s*\(at (line \d+, column \d+|end of document)\)")


@dataclass(frozen=True, slots=True)
class Problem:
    """One problem in the sources: what is wrong, and where."""

    message: str
    path: str
    line: int | None = None
    field: str | None = None

    def __str__(self) -> str:
        where = self.path if self.line is None else f"{self.path}:{self.line}"
        if self.field:
            where += f": field {self.field!r}"
        return f"{where}: {self.message}"


def raise_source_problems(problems: Sequence[Problem]) -> None:
    """Every problem in one :class:`DatasetError` (its place is the first problem's); nothing when none."""
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


def short_quote(text: str, limit: int = 60) -> str:
    """A quote on one line, cut shorter than other values: it is shown beside its document's id."""
    return quoted(" ".join(text.split()), limit)


def line_of(raw: str, offset: int) -> int:
    return raw.count("\n", 0, offset) + 1


def toml_error_line(exc: tomllib.TOMLDecodeError) -> int | None:
    match = _TOML_LINE.search(str(exc))
    return int(match.group(1)) if match else None


def toml_error_text(exc: tomllib.TOMLDecodeError) -> str:
    """The parser's message without its own position (the problem carries the file line)."""
    return _TOML_POSITION.sub("", str(exc)).strip()


def read_text(path: Path, problems: list[Problem]) -> str | None:
    """A source file's text (None, and a problem, when it cannot be read as UTF-8)."""
    try:
        check_regular(path, limit=None)  # a device would be read for ever, a pipe would block
        # universal newlines: CRLF sources build the same bytes as LF sources
        return path.read_text(encoding="utf-8-sig")
    except UnicodeDecodeError as exc:
        problems.append(Problem(f"not valid UTF-8 ({exc.reason} at byte {exc.start})", str(path)))
    except OSError as exc:
        problems.append(Problem(f"cannot be read ({exc.strerror})", str(path)))
    return None
