"""A run's parts: one Arrow IPC file of rows per finished batch of queries, ``batch-NNNNN.arrow``.

They are written into the run directory's ``.parts``, or by workers elsewhere under a parts URL
(``--parts``: a shared directory or an fsspec URL), each replay into a directory of its own there, from
where the run takes each finished part into ``.parts`` (:func:`take`), checked whole first. A file named
like a part that is not one is an error naming it, never a batch skipped or read twice.

>>> part_name(7), part_number(Path("batch-00007.arrow")), part_name(123_456)
('batch-00007.arrow', 7, 'batch-123456.arrow')
>>> part_number(Path("/run/.parts/batch-7.arrow"))
Traceback (most recent call last):
...
rag_eval.core.errors.RunStoreError: /run/.parts/batch-7.arrow: named like a part, not one rag-eval wrote \
(batch-NNNNN.arrow): move it away and run again
"""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import BinaryIO

import pyarrow as pa
import pyarrow.ipc as ipc

from rag_eval.core.errors import RunStoreError
from rag_eval.files import replaced
from rag_eval.rundir.rows import SCHEMA

SUFFIX = ".arrow"
PATTERN = f"batch-*{SUFFIX}"
# a part lives until the run is published: written once and read about twelve times (the per-query table, the
# summary, the texts, the rankings: each a pass over the parts), so an Arrow IPC file, lz4 (no encoding to
# undo, only the columns asked for read: a Parquet part took five times as long to read and twice as long to write,
# a part without compression is 2.5 times as large for a few percent less time; docs/performance.md, "The
# parts"); the published per-query table is Parquet (zstd)
COMPRESSION = "lz4"
RETAKE = "run again with --resume to replay its batch"  # a part under a parts URL is left where it is
REMOVE = "remove it and run again with --resume to replay its batch"  # a part in .parts


def part_name(number: int) -> str:
    """Batch ``number``'s file name, in ``.parts`` and under a parts URL."""
    return f"batch-{number:05d}{SUFFIX}"


def part_number(path: Path) -> int:
    """The batch number a part's file name gives (only a name :func:`part_name` makes)."""
    digits = path.name.removeprefix("batch-").removesuffix(SUFFIX)
    if not (digits.isascii() and digits.isdigit()) or part_name(int(digits)) != path.name:
        why = f"named like a part, not one rag-eval wrote (batch-NNNNN{SUFFIX}): move it away and run again"
        raise RunStoreError(why, path=str(path))
    return int(digits)


def listed(parts_dir: Path) -> dict[int, Path]:
    """The parts in ``parts_dir`` by batch number."""
    return {part_number(path): path for path in parts_dir.glob(PATTERN)}


def session_url(base: str) -> str:
    """A new directory of one replay's own under the parts URL ``base``."""
    return f"{base.rstrip('/')}/rag-eval-{uuid.uuid4().hex[:12]}"


def take(url: str, number: int, parts_dir: Path) -> Path:
    """Move batch ``number``'s part from the parts URL ``url`` into ``parts_dir``: atomically (a resume
    reads only whole parts) and only when it is a whole part of the run's columns (a damaged one is an
    error naming it, left where it is). Returns its path in ``parts_dir``."""
    import fsspec

    fs, root = fsspec.core.url_to_fs(url)
    name = part_name(number)
    source, shown = f"{root.rstrip('/')}/{name}", f"{url.rstrip('/')}/{name}"
    target = parts_dir / name
    try:
        with replaced(target) as tmp:
            fs.get_file(source, str(tmp))
            check_part(tmp, shown, advice=RETAKE)
        fs.rm_file(source)
    except OSError as exc:
        raise RunStoreError(f"cannot move a finished batch in from {url}: {exc}", path=str(parts_dir)) from exc
    return target


def drop_session(url: str) -> None:
    """Remove one replay's own directory under a parts URL (never anything else), empty by now."""
    import fsspec

    fs, root = fsspec.core.url_to_fs(url)
    try:
        if fs.exists(root):
            fs.rm(root, recursive=True)
    except OSError:
        pass  # a leftover empty directory holds nothing anyone reads


def _opened(path: Path) -> pa.OSFile:
    """``path`` open to read, when it is a regular file (a named pipe would block the read for ever, a
    device never end)."""
    if not path.is_file():
        raise OSError(f"not a regular file: {path}")
    return pa.OSFile(str(path))


def write(table: pa.Table, sink: Path | BinaryIO, compression: str | None = COMPRESSION) -> None:
    """``table`` (of :data:`SCHEMA`) as a part: an Arrow IPC file (footer last, so a file cut short is
    refused by :func:`check_part`) into ``sink``, a path or an open binary file (``compression``: the
    parts' own unless told otherwise, for comparing formats)."""
    target = str(sink) if isinstance(sink, Path) else sink
    with ipc.new_file(target, table.schema, options=ipc.IpcWriteOptions(compression=compression)) as writer:
        writer.write_table(table)


def read(path: Path, schema: pa.Schema) -> pa.Table:
    """A part's rows, only the columns of ``schema`` (fields of :data:`SCHEMA`): columns not asked for are not
    read (an ordinary file, not memory-mapped: as fast here, and every file system reads it). Raises what
    pyarrow raises for a file that is not a whole part, OSError for what is not a regular file."""
    with _opened(path) as source:
        reader = ipc.open_file(source)
        names = reader.schema.names
        if names != SCHEMA.names:
            raise ValueError("its columns differ from a part's")
        wanted = [names.index(name) for name in schema.names]
        options = ipc.IpcReadOptions(included_fields=wanted)
        table = ipc.open_file(source, options=options).read_all().select(schema.names)
    return table if table.schema.equals(schema) else table.cast(schema)


def check_part(path: Path, shown: str, *, advice: str) -> None:
    """Refuse a part that is not a whole Arrow IPC file of the run's rows (cut short, or another file): an
    error naming it as ``shown``, with ``advice`` (what replays its batch). Reads its footer only."""
    try:
        with _opened(path) as source:
            names = ipc.open_file(source).schema.names
    except (pa.ArrowException, OSError, ValueError) as exc:
        raise RunStoreError(f"a damaged part, not a whole Arrow file ({exc}): {advice}", path=shown) from exc
    if names != SCHEMA.names:
        raise RunStoreError(f"not a part of a rag-eval run (its columns differ): {advice}", path=shown)
