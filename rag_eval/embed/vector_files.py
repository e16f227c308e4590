"""Vectors on disk, keyed by text hash: the embedding cache and precomputed vector files.

Both are Parquet files with two columns, ``text_sha256`` (hex) and ``vector``
(``fixed_size_list<float32>``), and key/value metadata: ``model_id``, ``dim``, and for
a precomputed file ``kind`` (chunks or queries), ``chunker`` and ``texts_sha256``
(a checksum over the ordered text hashes the file claims to embed). A second ingest
of the same data therefore embeds nothing, and a precomputed file that no longer
matches its chunks is detected instead of silently used.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from rag_eval.core.errors import EmbeddingMismatchError, RunStoreError
from rag_eval.files import write_parquet


def text_sha256(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def texts_checksum(texts: Iterable[str]) -> str:
    """Checksum over the ordered hashes of ``texts``."""
    digest = hashlib.sha256()
    for t in texts:
        digest.update(text_sha256(t).encode("ascii"))
        digest.update(b"\n")
    return digest.hexdigest()


def model_slug(model_id: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "_", model_id).strip("_")


def _table(hashes: Sequence[str], vectors: np.ndarray, metadata: Mapping[str, str]) -> pa.Table:
    dim = int(vectors.shape[1]) if vectors.ndim == 2 else 0
    flat = pa.array(np.ascontiguousarray(vectors, dtype=np.float32).reshape(-1), type=pa.float32())
    column = pa.FixedSizeListArray.from_arrays(flat, dim)
    table = pa.table({"text_sha256": pa.array(list(hashes), type=pa.string()), "vector": column})
    return table.replace_schema_metadata({k.encode(): v.encode() for k, v in metadata.items()})


VECTOR_ROW_GROUP = 8192  # rows per row group of a vector file: read a group at a time, memory stays small


def _read_vectors(path: Path) -> tuple[list[str], np.ndarray, dict[str, str]]:
    """(text hashes, float32 matrix, metadata) of a vector file, read one row group at a time into one
    matrix: reading a 100,000 x 384 file whole took 900 MB beside its 150 MB of vectors."""
    pf = pq.ParquetFile(path)
    meta = {k.decode(): v.decode() for k, v in (pf.schema_arrow.metadata or {}).items()}
    hashes: list[str] = []
    matrix: np.ndarray | None = None
    groups = pf.metadata.num_row_groups if pf.metadata.num_rows else 0
    for group in range(groups):
        table = pf.read_row_group(group, columns=["text_sha256", "vector"])
        start = len(hashes)
        hashes.extend(table.column("text_sha256").to_pylist())
        column = table.column("vector")
        values = (column.chunk(0) if column.num_chunks == 1 else column.combine_chunks()).flatten().to_numpy()
        block = np.asarray(values, dtype=np.float32).reshape(table.num_rows, -1)
        if groups == 1:
            matrix = block  # one group: the vectors are its Arrow buffer, no copy
        else:
            if matrix is None:
                matrix = np.empty((pf.metadata.num_rows, block.shape[1]), dtype=np.float32)
            matrix[start : len(hashes)] = block
    pa.default_memory_pool().release_unused()  # the decoded groups' buffers go back to the system
    return hashes, matrix if matrix is not None else np.zeros((0, 0), dtype=np.float32), meta


def _file_sha256(path: Path) -> str:
    """sha256 of a file's bytes, read in 1 MiB pieces (a vector file of 100,000 queries is 150 MB)."""
    digest = hashlib.sha256()
    with path.open("rb") as fh:
        for piece in iter(lambda: fh.read(1 << 20), b""):
            digest.update(piece)
    return digest.hexdigest()


class VectorFile:
    """One Parquet file of vectors keyed by text hash (read once, kept in memory)."""

    def __init__(
        self, path: Path, vectors: dict[str, np.ndarray], metadata: dict[str, str], *, checksum: str = "", dim: int = 0
    ) -> None:
        self.path = path
        self.vectors = vectors
        self.metadata = metadata
        self.checksum = checksum  # sha256 of the file's bytes
        self.dim = dim

    @property
    def model_id(self) -> str:
        return self.metadata.get("model_id", "")

    @classmethod
    def read(cls, path: str | Path) -> VectorFile:
        p = Path(path)
        try:
            hashes, matrix, meta = _read_vectors(p)
        except (OSError, pa.ArrowInvalid) as exc:
            raise EmbeddingMismatchError(
                f"cannot read vectors ({exc}); delete the file to rebuild it", path=str(p)
            ) from exc
        checksum = _file_sha256(p)
        if not hashes:
            return cls(p, {}, meta, checksum=checksum)
        _check_matrix(p, hashes, matrix, meta)
        return cls(p, dict(zip(hashes, matrix, strict=True)), meta, checksum=checksum, dim=int(matrix.shape[1]))

    @classmethod
    def write(
        cls, path: str | Path, texts: Sequence[str], vectors: np.ndarray, metadata: Mapping[str, str]
    ) -> VectorFile:
        """Write vectors for ``texts`` (in order) with ``texts_sha256`` added to the metadata."""
        hashes = [text_sha256(t) for t in texts]
        meta = dict(metadata)
        meta["texts_sha256"] = texts_checksum(texts)
        meta["dim"] = str(vectors.shape[1])
        meta["count"] = str(len(texts))
        _check_matrix(Path(path), hashes, np.asarray(vectors), meta)  # never write what read() would refuse
        write_parquet(Path(path), _table(hashes, vectors, meta), row_group_size=VECTOR_ROW_GROUP)
        return cls.read(path)

    def check_matches(self, texts: Sequence[str], *, model_id: str, regenerate_hint: str) -> None:
        """Raise EmbeddingMismatchError unless this file embeds exactly ``texts`` with ``model_id``."""
        if self.metadata.get("model_id") != model_id:
            raise EmbeddingMismatchError(
                f"vectors are from model {self.metadata.get('model_id')!r}, expected {model_id!r}: {regenerate_hint}",
                path=str(self.path),
            )
        missing = sum(1 for t in set(texts) if text_sha256(t) not in self.vectors)
        if self.metadata.get("texts_sha256") != texts_checksum(texts) or missing:
            raise EmbeddingMismatchError(
                f"vectors do not match the {len(texts)} texts they claim to embed "
                f"({missing} without a vector; the data or the chunker changed): {regenerate_hint}",
                path=str(self.path),
            )


def holds_vectors(path: Path, texts: Sequence[str], vectors: np.ndarray, metadata: Mapping[str, str]) -> bool:
    """True when ``path`` already holds exactly these vectors for these texts with this metadata: writing
    them again would change nothing."""
    if not path.is_file():
        return False
    old = VectorFile.read(path)
    if any(old.metadata.get(k) != v for k, v in metadata.items()):
        return False
    if old.metadata.get("texts_sha256") != texts_checksum(texts):
        return False
    return all(
        (v := old.vectors.get(text_sha256(t))) is not None and np.array_equal(v, row.astype(np.float32))
        for t, row in zip(texts, vectors, strict=True)
    )


def _check_matrix(path: Path, hashes: Sequence[str], matrix: np.ndarray, meta: Mapping[str, str]) -> None:
    """Refuse a vector file that is not what it says: non-finite values, or a dimension or row count that
    differs from its own metadata."""
    finite = np.isfinite(matrix).all(axis=1)
    if not finite.all():
        row = int(np.argmin(finite))
        raise EmbeddingMismatchError(
            f"row {row + 1} (text {hashes[row][:12]}…) holds NaN or infinite values: rebuild the vectors",
            path=str(path),
        )
    for key, actual in (("dim", int(matrix.shape[1])), ("count", len(hashes))):
        claimed = meta.get(key)
        if claimed is not None and claimed != str(actual):
            raise EmbeddingMismatchError(
                f"holds {actual} for '{key}' but its metadata says {claimed}: rebuild the vectors", path=str(path)
            )


class EmbeddingCache:
    """On-disk cache of vectors for one model: ``<dir>/<model>.parquet``.

    >>> import tempfile
    >>> cache = EmbeddingCache(tempfile.mkdtemp(), "m")
    >>> cache.put(["a"], np.ones((1, 3), dtype=np.float32)); cache.flush()
    >>> EmbeddingCache(cache.directory, "m").get("a").tolist()
    [1.0, 1.0, 1.0]
    """

    def __init__(self, directory: str | Path | None, model_id: str) -> None:
        """``directory=None`` keeps vectors in memory only."""
        self.directory = Path(directory) if directory is not None else None
        self.model_id = model_id
        self.path = self.directory / f"{model_slug(model_id)}.parquet" if self.directory is not None else None
        self._vectors: dict[str, np.ndarray] = {}
        self._dirty = False
        if self.path is not None and self.path.is_file():
            stored = VectorFile.read(self.path)
            if stored.model_id == model_id:
                self._vectors = stored.vectors

    def __len__(self) -> int:
        return len(self._vectors)

    def get(self, text: str) -> np.ndarray | None:
        return self._vectors.get(text_sha256(text))

    def get_hash(self, digest: str) -> np.ndarray | None:
        return self._vectors.get(digest)

    def put(self, texts: Sequence[str], vectors: np.ndarray) -> None:
        for t, v in zip(texts, vectors, strict=True):
            self._vectors[text_sha256(t)] = np.asarray(v, dtype=np.float32)
        self._dirty = self._dirty or len(texts) > 0

    def flush(self) -> None:
        if not self._dirty or self.path is None:
            return
        hashes = sorted(self._vectors)
        matrix = np.stack([self._vectors[h] for h in hashes]) if hashes else np.zeros((0, 0), dtype=np.float32)
        meta = {"model_id": self.model_id, "dim": str(matrix.shape[1] if hashes else 0)}
        try:
            write_parquet(self.path, _table(hashes, matrix, meta))
        except OSError as exc:
            raise RunStoreError(f"cannot write the embedding cache: {exc.strerror}", path=str(self.path)) from exc
        self._dirty = False
