"""The records of a query log, read from JSON lines, CSV or Parquet, one :class:`~rag_eval.traffic.tally.Record`
at a time: JSON lines streamed line by line (the standard library's ``json``), CSV by the standard library's
``csv`` module (quoted newlines allowed; a record's line is its first), Parquet by pyarrow (only the named
columns, in batches). A file is read once; its SHA-256 is taken from the same bytes.

>>> import tempfile, pathlib, hashlib
>>> with tempfile.TemporaryDirectory() as tmp:
...     path = pathlib.Path(tmp) / "log.csv"
...     _ = path.write_text('query,id\\n"two\\nlines",7\\nplain,8\\n')
...     list(csv_records(path, Fields(text="query", ident="id"), hashlib.sha256()))
[Record(line=2, text='two\\nlines', ident='7', category=<Missing.MISSING: 'missing'>), \
Record(line=4, text='plain', ident='8', category=<Missing.MISSING: 'missing'>)]
"""

from __future__ import annotations

import csv
import stat
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Final, NamedTuple

from rag_eval.core.errors import DatasetError, as_written, quoted
from rag_eval.core.parsing import TextError, parse_json
from rag_eval.traffic.tally import MISSING, Record

BOM: Final = "\ufeff"
_KINDS: Final = (
    (stat.S_ISDIR, "a directory"),
    (stat.S_ISFIFO, "a named pipe"),
    (stat.S_ISSOCK, "a socket"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
)
_BATCH_ROWS: Final = 65_536


class Fields(NamedTuple):
    """The fields (keys, columns, span attributes) a record's text, id and category are read from."""

    text: str
    ident: str | None = None
    category: str | None = None

    def named(self) -> tuple[tuple[str, str], ...]:
        """(role, field) of every field the user named."""
        pairs = (("text", self.text), ("id", self.ident), ("category", self.category))
        return tuple((role, name) for role, name in pairs if name is not None)


def check_file(path: Path) -> None:
    """Refuse what is not a regular file (missing, a directory, a pipe, a device) before opening it: a
    named pipe would block the reader."""
    try:
        info = path.stat()
    except FileNotFoundError:
        raise DatasetError("no such file: name a query log or trace export", path=str(path)) from None
    except OSError as exc:
        raise DatasetError(f"cannot be read ({exc.strerror})", path=str(path)) from exc
    if not stat.S_ISREG(info.st_mode):
        kind = next((name for test, name in _KINDS if test(info.st_mode)), "not a regular file")
        raise DatasetError(f"is {kind}, not a file: name a query log or trace export", path=str(path))


def lines(path: Path, digest: Any) -> Iterator[tuple[int, str]]:
    """(1-based line number, text with its line end) of every line, decoded as UTF-8 (a byte order mark at
    the start is dropped); the raw bytes feed ``digest``. Only one line is held at a time."""
    try:
        with path.open("rb") as fh:
            for n, raw in enumerate(fh, start=1):
                digest.update(raw)
                try:
                    text = raw.decode("utf-8")
                except UnicodeDecodeError as exc:
                    at = f"byte {exc.start + 1} of the line"
                    raise DatasetError(f"not UTF-8 ({exc.reason} at {at})", path=str(path), line=n) from None
                yield n, text.removeprefix(BOM) if n == 1 else text
    except OSError as exc:
        raise DatasetError(f"cannot be read ({exc.strerror})", path=str(path)) from exc


def json_problem(exc: TextError) -> str:
    """What is wrong with a JSON line, in words: where the parser says, the column; else why it cannot be read."""
    return f"not JSON this reader can read ({exc.reason})" if exc.column is None else f"not JSON ({exc.in_line})"


def json_object(line: str, *, path: Path, n: int) -> dict[str, Any]:
    """One JSON line as an object, or the DatasetError naming the file and line."""
    try:
        obj = parse_json(line)
    except TextError as exc:
        raise DatasetError(json_problem(exc), path=str(path), line=n) from None
    if not isinstance(obj, dict):
        raise DatasetError(f"a record must be a JSON object, not {type(obj).__name__}", path=str(path), line=n)
    return obj


def jsonl_records(path: Path, fields: Fields, digest: Any) -> Iterator[Record | None]:
    """One record per JSON line; None for a blank line (counted by the tally). Fields are top-level keys."""
    for n, line in lines(path, digest):
        if not line or line.isspace():  # not strip(): that would copy a huge line
            yield None
            continue
        obj = json_object(line, path=path, n=n)
        yield Record(
            line=n,
            text=obj.get(fields.text, MISSING),
            ident=obj.get(fields.ident, MISSING) if fields.ident is not None else MISSING,
            category=obj.get(fields.category, MISSING) if fields.category is not None else MISSING,
        )


class _Counted:
    """The lines of a file, counting how many were handed out (a CSV record's first line)."""

    def __init__(self, source: Iterator[tuple[int, str]]) -> None:
        self.source = source
        self.read = 0

    def __iter__(self) -> Iterator[str]:
        for n, text in self.source:
            self.read = n
            yield text


def csv_records(path: Path, fields: Fields, digest: Any) -> Iterator[Record | None]:
    """One record per CSV row after the header (the first line that is not blank, which must hold every
    named column); None for a blank line. A row shorter than the header lacks the columns past its end."""
    counted = _Counted(lines(path, digest))
    rows = csv.reader(counted, strict=True)
    csv.field_size_limit(sys.maxsize)  # a field may be as long as a line: long queries are counted, not fatal
    try:
        header = next((row for row in rows if any(cell.strip() for cell in row)), None)
        if header is None:  # blank lines, or nothing
            return
        at = counted.read
        where = {}
        for role, name in fields.named():
            if name not in header:
                shown = ", ".join(quoted(h, 40) for h in header[:20])
                raise DatasetError(
                    f"the header has no {role} column {quoted(name)} (its columns: {shown}): set {role} = to one",
                    path=str(path),
                    line=at,
                    field=name,
                )
            _once(header, role, name, path=path, line=at)
            where[role] = header.index(name)
        start = counted.read + 1
        for row in rows:
            if not row:
                yield None
            else:
                yield Record(
                    line=start,
                    text=_cell(row, where.get("text")),
                    ident=_cell(row, where.get("id")),
                    category=_cell(row, where.get("category")),
                )
            start = counted.read + 1
    except csv.Error as exc:
        raise DatasetError(f"not CSV ({exc})", path=str(path), line=counted.read) from None


def _once(names: list[str], role: str, name: str, *, path: Path, line: int | None) -> None:
    """Refuse a named column that the header or schema holds more than once: which one is meant cannot be told."""
    places = [i for i, n in enumerate(names, start=1) if n == name]
    if len(places) > 1:
        shown = ", ".join(str(i) for i in places)
        raise DatasetError(f"the {role} column {quoted(name)} is there {len(places)} times (columns {shown}): "
                           "which one holds the values cannot be told; rename all but one", path=str(path),
                           line=line, field=name)  # fmt: skip


def _cell(row: list[str], index: int | None) -> object:
    return MISSING if index is None or index >= len(row) else row[index]


def parquet_records(path: Path, fields: Fields) -> Iterator[Record]:
    """One record per row (``line`` is the 1-based row), reading only the named columns, in batches."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    try:
        source = pq.ParquetFile(path)
    except (pa.ArrowException, OSError) as exc:
        raise DatasetError(f"not a Parquet file ({exc})", path=str(path)) from None
    names = source.schema_arrow.names
    for role, name in fields.named():
        if name not in names:
            shown = ", ".join(as_written(n) for n in names[:20])
            raise DatasetError(
                f"the schema has no {role} column {quoted(name)} (its columns: {shown}): set {role} = to one",
                path=str(path),
                field=name,
            )
        _once(names, role, name, path=path, line=None)
    columns = list(dict.fromkeys(name for _, name in fields.named()))
    row = 0
    try:
        for batch in source.iter_batches(batch_size=_BATCH_ROWS, columns=columns):
            values = {name: batch.column(name).to_pylist() for name in columns}
            for i in range(batch.num_rows):
                row += 1
                yield Record(
                    line=row,
                    text=values[fields.text][i],
                    ident=values[fields.ident][i] if fields.ident is not None else MISSING,
                    category=values[fields.category][i] if fields.category is not None else MISSING,
                )
    except (pa.ArrowException, OSError) as exc:
        raise DatasetError(f"cannot be read as Parquet past row {row:,} ({exc})", path=str(path)) from None
