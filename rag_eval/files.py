"""Writing a file so that readers see the old file or the new one, never half of either.

Every file the project writes for a reader (run artifacts, vector files, the history, the accepted
baseline's pieces) goes through :func:`replaced`: the content is written to a temporary file beside the
target, flushed to disk, made readable (0644) and renamed over the target in one step; on any failure
the temporary file is removed and the target is left as it was. :func:`name_length_problem` says, before
anything is written, whether a name fits in the file names made of it.

>>> import tempfile, pathlib
>>> with tempfile.TemporaryDirectory() as tmp:
...     path = pathlib.Path(tmp) / "sub" / "x.json"
...     write_json(path, {"a": float("nan")})
...     path.read_text()
'{\\n  "a": null\\n}\\n'
"""

from __future__ import annotations

import json
import math
import os
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

NAME_MAX = 255  # bytes in one file name (NAME_MAX of Linux's file systems and of macOS)


@contextmanager
def replaced(path: str | Path, *, sync: bool = True) -> Iterator[Path]:
    """A temporary path beside ``path`` to write to (the file exists, empty); when the block ends without
    an error it is synced (unless not ``sync``), made 0644 and renamed over ``path``, else it is removed.
    Parent folders are made. Unsynced, the file is whole for every process once renamed, but a power cut
    can leave it short: only for files a reader checks before trusting."""
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, name = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    os.close(fd)
    tmp = Path(name)
    try:
        yield tmp
        if sync:
            with open(tmp, "rb+") as fh:
                os.fsync(fh.fileno())
        os.chmod(tmp, 0o644)
        os.replace(tmp, target)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


@contextmanager
def held(directory: Path, *, make: bool = True) -> Iterator[None]:
    """An exclusive ``flock`` on ``directory`` (made when missing, unless not ``make``), waited for, for the block:
    what two ``accept``, two history appends or two label imports into one data set at once take turns on (no
    lock file is left beside them). The lock goes with its holder, killed or not."""
    import fcntl

    if make:
        directory.mkdir(parents=True, exist_ok=True)
    fd = os.open(directory, os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


def name_length_problem(kind: str, name: str, template: str, shown: str) -> str | None:
    """Why ``name`` (of a ``kind``: config, split, ...) is too long for the longest file name made of it,
    ``template`` (``{}`` the name; ``shown`` says where that file is), or None: it must fit in
    :data:`NAME_MAX` bytes.

    >>> name_length_problem("split", "s" * 245, "{}.spans.tsv", "qrels/<split>.spans.tsv") is None
    True
    >>> name_length_problem("split", "s" * 246, "{}.spans.tsv", "qrels/<split>.spans.tsv").split(",")[-1]
    ' so the name at most 245'
    """
    room = NAME_MAX - len(template.format("").encode())
    size = len(name.encode())
    if size <= room:
        return None
    return (
        f"{size:,} bytes is too long for a {kind} name: it names the file {shown}, and a file name holds at most "
        f"{NAME_MAX} bytes, so the name at most {room}"
    )


def write_bytes(path: str | Path, data: bytes) -> None:
    with replaced(path) as tmp:
        tmp.write_bytes(data)


def write_text(path: str | Path, text: str) -> None:
    write_bytes(path, text.encode("utf-8"))


def write_json(path: str | Path, obj: Any) -> None:
    """JSON, indented; NaN and infinities become null (never the invalid ``NaN`` token)."""
    write_text(path, json.dumps(json_safe(obj), indent=2, ensure_ascii=False, allow_nan=False) + "\n")


def json_safe(obj: Any) -> Any:
    """``obj`` with NaN and infinities as None (JSON has neither) and numpy scalars as Python's.

    >>> json_safe({"a": float("nan"), "b": [1.5, float("inf")]})
    {'a': None, 'b': [1.5, None]}
    """
    if isinstance(obj, float):
        return None if math.isnan(obj) or math.isinf(obj) else obj
    if isinstance(obj, dict):
        return {str(k): json_safe(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [json_safe(v) for v in obj]
    if hasattr(obj, "item") and hasattr(obj, "dtype"):  # a numpy scalar
        return json_safe(obj.item())
    return obj


def write_parquet(
    path: str | Path,
    table: Any,
    *,
    row_group_size: int | None = None,
    sync: bool = True,
    compression: str = "zstd",
    statistics: bool = True,
) -> None:
    """A pyarrow table as a Parquet file, zstd-compressed with column statistics unless told otherwise
    (``sync``: see :func:`replaced`)."""
    import pyarrow.parquet as pq

    with replaced(path, sync=sync) as tmp:
        pq.write_table(
            table, tmp, compression=compression, row_group_size=row_group_size, write_statistics=statistics
        )
