"""JSON and TOML text read into Python values, every refusal one ``ValueError`` that says why and, where known,
where.

The standard library refuses malformed text with ``JSONDecodeError`` and ``TOMLDecodeError``, but text that is
well formed can fail in two more ways, which readers that catch only those let through as crashes: nesting
deeper than the interpreter's recursion limit (a ``RecursionError``, not a ``ValueError`` at all), and, for
JSON, an integer of more digits than ``int()`` converts (a plain ``ValueError``, 4,300 digits by default).
Every reader of a file a user wrote or a server sent parses through :func:`parse_json` and :func:`parse_toml`,
so that each of those is the one error it reports with the file and line. Beside them, what such readers share:
:func:`check_regular` (a regular file of sensible size before a byte is read: not ``/dev/zero``, not a pipe),
:func:`unicode_text` and :func:`lone_surrogate` (JSON's ``\\ud800`` without its pair is not Unicode text), and
:func:`ascii_int` (a number written as text: ASCII digits only, never past what ``int()`` converts).

>>> parse_json('{"a": [1, 2]}')
{'a': [1, 2]}
>>> for text in ('{"a": }', "[" * 100_000 + "]" * 100_000, "9" * 5_000):
...     try:
...         parse_json(text)
...     except TextError as exc:
...         print(exc.reason, exc.line, exc.column)
Expecting value 1 7
nested too deeply None None
a number of 5,000 digits, more than the 4,300 a reader converts None None
"""

from __future__ import annotations

import errno
import json
import re
import stat
import sys
import tomllib
from pathlib import Path
from typing import Any

NESTED = "nested too deeply"
SETTINGS_BYTES = 16 * 1024 * 1024  # the most a settings file (experiment, config, gates, serve) may hold
_SURROGATE = re.compile("[\ud800-\udfff]")
_ESCAPED_SURROGATE = re.compile(r"\\u[dD][89a-fA-F]")  # how a surrogate is written in JSON text


class TextError(ValueError):
    """Text that is not JSON this reader can read: ``reason`` in words; ``line`` and ``column`` (1-based)
    where the parser says, else None."""

    def __init__(self, reason: str, line: int | None = None, column: int | None = None) -> None:
        super().__init__(reason if line is None else f"{reason} (line {line}, column {column})")
        self.reason, self.line, self.column = reason, line, column

    @property
    def in_line(self) -> str:
        """The reason, with the column where the parser gives one (for a message that names the line itself)."""
        return self.reason if self.column is None else f"{self.reason} at column {self.column}"


def check_regular(path: Path, *, limit: int | None = SETTINGS_BYTES) -> None:
    """Refuse, before a byte is read, what is not a regular file of at most ``limit`` bytes, as an ``OSError``
    whose ``strerror`` says why (callers report their read errors by it): ``/dev/zero`` named as a config was read
    into memory until the process was killed, a pipe blocks, and a settings file of gigabytes is not one."""
    st = path.stat()  # not there, not allowed: the OSError as it is
    if not stat.S_ISREG(st.st_mode):
        raise OSError(errno.EINVAL, "not a regular file", str(path))
    if limit is not None and st.st_size > limit:
        raise OSError(errno.EFBIG, f"{st.st_size:,} bytes, more than the {limit:,} a settings file may hold", str(path))


def parse_json(text: str | bytes, *, unicode: bool = False) -> Any:
    """``json.loads(text)``, or :class:`TextError` for malformed text, too deep a nesting, or too long a number;
    with ``unicode``, also for a string holding a lone surrogate (``"\\ud800"`` without its pair: JSON spells it,
    but it is not Unicode text, and no file, Arrow column or server takes it)."""
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise TextError(exc.msg, exc.lineno, exc.colno) from None
    except RecursionError:
        raise TextError(NESTED) from None
    except ValueError as exc:  # well formed, not convertible: an integer of more digits than int() reads
        raise TextError(_unconverted(str(exc))) from None
    if unicode and _ESCAPED_SURROGATE.search(text if isinstance(text, str) else text.decode("utf-8", "replace")):
        lone = lone_surrogate(value)
        if lone is not None:
            raise TextError(f"a lone surrogate (\\u{ord(lone):04x}) is not Unicode text")
    return value


def unicode_text(text: str) -> bool:
    """Whether ``text`` is Unicode text, that is has no lone surrogate (only JSON's escapes make one).

    >>> unicode_text("café 😀"), unicode_text("a\\ud800")
    (True, False)
    """
    return text.isascii() or _SURROGATE.search(text) is None


def lone_surrogate(value: object) -> str | None:
    """The first lone surrogate in a parsed JSON value's strings (keys too), walked without recursion."""
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            found = None if item.isascii() else _SURROGATE.search(item)
            if found is not None:
                return found.group()
        elif isinstance(item, dict):
            stack.extend(item.keys())
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
    return None


def ascii_int(text: str) -> int | None:
    """``text`` (surrounding whitespace aside) as a whole number when it is ASCII digits only and no more of them
    than ``int()`` converts; else None: a sign, ``1_0``, ``²`` (a digit to ``str.isdigit``, not to ``int``),
    ``١٢`` (Arabic-Indic digits), a number of 5,000 digits.

    >>> [ascii_int(t) for t in (" 042 ", "-1", "1_0", "²", "١٢", "", "9" * 5_000)]
    [42, None, None, None, None, None, None]
    """
    t = text.strip()
    limit = sys.get_int_max_str_digits() or len(t)  # 0: no limit
    if not (t.isascii() and t.isdigit()) or len(t) > limit:
        return None
    return int(t)


def parse_toml(text: str) -> dict[str, Any]:
    """``tomllib.loads(text)``; too deep a nesting and too long an integer are a ``TOMLDecodeError`` too (without
    a position)."""
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError:
        raise
    except RecursionError:
        raise tomllib.TOMLDecodeError(f"{NESTED} to read") from None
    except ValueError as exc:  # an integer of more digits than int() reads
        raise tomllib.TOMLDecodeError(_unconverted(str(exc))) from None


def _unconverted(message: str) -> str:
    found = re.search(r"limit \((\d+) digits\).*value has (\d+) digits", message)
    if found is None:
        return message.split(";")[0]
    limit, digits = (int(g) for g in found.groups())
    return f"a number of {digits:,} digits, more than the {limit:,} a reader converts"
