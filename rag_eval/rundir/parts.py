"""A run's parts: one Parquet file of rows per finished batch of queries, ``batch-NNNNN.parquet``.

They are written into the run directory's ``.parts``, or by workers elsewhere under a parts URL
(``--parts``: a shared directory or an fsspec URL), each replay into a directory of its own there, from
where the run takes each finished part into ``.parts`` (:func:`take`), checked whole first. A file named
like a part that is not one is an error naming it, never a batch skipped or read twice.

>>> part_name(7), part_number(Path("batch-00007.parquet")), part_name(123_456)
('batch-00007.parquet', 7, 'batch-123456.parquet')
>>> part_number(Path("/run/.parts/batch-7.parquet"))
Traceback (most recent call last):
...
rag_eval.core.errors.RunStoreError: /run/.parts/batch-7.parquet: named like a part, not one rag-eval wrote \
(batch-NNNNN.parquet): move it away and run again
"""

from __future__ import annotations

import uuid
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from rag_eval.core.errors import RunStoreError
from rag_eval.files import replaced
from rag_eval.rundir.rows import SCHEMA

PATTERN = "batch-*.parquet"
# a part lives until the run is published: written fast (lz4, no column statistics: 2 ms against zstd's 4 ms
# for a batch of 64 rows, a third larger), read once; the published per-query table is zstd
COMPRESSION = "lz4"
RETAKE = "run again with --resume to replay its batch"  # a part under a parts URL is left where it is
REMOVE = "remove it and run again with --resume to replay its batch"  # a part in .parts


def part_name(number: int) -> str:
    """Batch ``number``'s file name, in ``.parts`` and under a parts URL."""
    return f"batch-{number:05d}.parquet"


def part_number(path: Path) -> int:
    """The batch number a part's file name gives (only a name :func:`part_name` makes)."""
    digits = path.name.removeprefix("batch-").removesuffix(".parquet")
    if not (digits.isascii() and digits.isdigit()) or part_name(int(digits)) != path.name:
        why = "named like a part, not one rag-eval wrote (batch-NNNNN.parquet): move it away and run again"
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


def check_part(path: Path, shown: str, *, advice: str) -> None:
    """Refuse a part that is not a whole Parquet file of the run's rows (cut short, or another file): an
    error naming it as ``shown``, with ``advice`` (what replays its batch). Reads its footer only."""
    try:
        names = pq.read_schema(path).names
    except (pa.ArrowException, OSError, ValueError) as exc:
        raise RunStoreError(f"a damaged part, not a whole Parquet file ({exc}): {advice}", path=shown) from exc
    if names != SCHEMA.names:
        raise RunStoreError(f"not a part of a rag-eval run (its columns differ): {advice}", path=shown)
