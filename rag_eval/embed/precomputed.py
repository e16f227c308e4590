"""Query vectors computed elsewhere (``provider = "precomputed"``): a Parquet or JSONL file.

Each row is a query and its vector: ``id`` (the query id of the data set) or ``text`` (the query text, as
in ``queries.jsonl``), and ``vector`` (a list of numbers). JSONL, one object a line::

    {"id": "q17", "vector": [0.012, -0.034, ...]}

Parquet: the columns ``id`` or ``text``, and ``vector`` (a list of floats). Every query of the split must have
a vector, of one dimension, finite; else the run is refused (exit 2) naming how many lack one and the first
ids. Vectors are normalised when ``normalize`` is true.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from rag_eval.core.errors import DatasetError
from rag_eval.core.parsing import parse_json
from rag_eval.embed.vector_files import VectorFile, text_sha256

SHOWN = 5  # ids named when queries have no vector


def read_query_vectors(path: Path) -> tuple[str, dict[str, list[float]]]:
    """("id" or "text", key -> vector) of a Parquet or JSONL file (a regular file: a device would be read for
    ever, a pipe would block)."""
    if not path.is_file():
        raise DatasetError("cannot read query vectors: " + ("no such file" if not path.exists() else
                                                             "not a regular file"), path=str(path))  # fmt: skip
    if path.suffix.lower() == ".parquet":
        return _parquet(path)
    return _jsonl(path)


def _parquet(path: Path) -> tuple[str, dict[str, list[float]]]:
    try:
        table = pq.read_table(path)
    except (OSError, pa.ArrowInvalid) as exc:
        raise DatasetError(f"cannot read query vectors: {exc}", path=str(path)) from exc
    names = table.column_names
    key = "id" if "id" in names else "text" if "text" in names else None
    if key is None or "vector" not in names:
        raise DatasetError(f"expected the columns id (or text) and vector, found {names}", path=str(path))
    found: dict[str, tuple[str, list[float]]] = {}
    for row, (k, vector) in enumerate(zip(table.column(key).to_pylist(), table.column("vector").to_pylist(),
                                          strict=True)):  # fmt: skip
        if k is None:
            raise DatasetError(f"null on row {row:,}", path=str(path), field=key)
        _keep(found, str(k), vector, f"row {row:,}", path=path)
    return key, {k: vector for k, (_, vector) in found.items()}


def _keep(
    found: dict[str, tuple[str, list[float]]], key: str, vector: list[float], at: str, *, path: Path,
    line: int | None = None,
) -> None:
    """``vector`` as ``key``'s, given ``at`` (a row, or ``line``'s line); a key given again must come with the same
    vector (two would be a guess)."""
    where, earlier = found.setdefault(key, (at, vector))
    if earlier != vector:
        here = at if line is None else "this one"
        raise DatasetError(f"{key!r} is given twice with different vectors ({where} and {here}): one query, one "
                           "vector", path=str(path), line=line)  # fmt: skip


def _jsonl(path: Path) -> tuple[str, dict[str, list[float]]]:
    found: dict[str, tuple[str, list[float]]] = {}
    kind = ""
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as exc:
        raise DatasetError(f"cannot read query vectors: {exc}", path=str(path)) from exc
    for n, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            obj = parse_json(line, unicode=True)
        except ValueError as exc:
            raise DatasetError(f"not JSON ({exc.args[0]})", path=str(path), line=n) from exc
        keys = [k for k in ("id", "text") if isinstance(obj, dict) and k in obj]
        key = keys[0] if keys else ""
        if not key:
            raise DatasetError("expected an object with id (or text) and vector", path=str(path), line=n)
        if kind and key != kind:
            raise DatasetError(f"keyed by {key} where earlier lines are keyed by {kind}", path=str(path), line=n)
        kind = key
        if not isinstance(obj[key], str | int) or isinstance(obj[key], bool):
            raise DatasetError("expected text or a whole number", path=str(path), line=n, field=key)
        vector = obj.get("vector")
        if not isinstance(vector, list) or not all(_number(v) for v in vector):
            raise DatasetError("expected a list of numbers", path=str(path), line=n, field="vector")
        _keep(found, str(obj[key]), vector, f"line {n:,}", path=path, line=n)
    return kind or "id", {k: vector for k, (_, vector) in found.items()}


def _number(v: object) -> bool:
    return isinstance(v, int | float) and not isinstance(v, bool)


def query_vector_file(
    path: Path, queries: Sequence[tuple[str, str, str]], *, model_id: str, normalize: bool, split: str
) -> VectorFile:
    """The vectors of ``queries`` ((id, text, normalised text) each) from ``path``, keyed as the resolver looks
    them up (the hash of the normalised text)."""
    kind, found = read_query_vectors(path)
    missing = [qid for qid, text, _ in queries if (qid if kind == "id" else text) not in found]
    if missing:
        shown = ", ".join(missing[:SHOWN]) + (", ..." if len(missing) > SHOWN else "")
        raise DatasetError(
            f"{len(missing):,} of the {len(queries):,} queries of split {split!r} have no vector (by {kind}; first: "
            f"{shown}): every query needs one (embedder.file)",
            path=str(path),
        )
    vectors: dict[str, np.ndarray] = {}
    dims: set[int] = set()
    for qid, text, norm in queries:
        vector = np.asarray(found[qid if kind == "id" else text], dtype=np.float32)
        if not np.isfinite(vector).all() or vector.ndim != 1 or vector.size == 0:
            raise DatasetError(f"the vector of query {qid!r} is empty or holds NaN or infinite values", path=str(path))
        if normalize and (norm_ := float(np.linalg.norm(vector))) > 0:
            vector = vector / norm_
        dims.add(vector.size)
        vectors[text_sha256(norm)] = vector
    if len(dims) > 1:
        raise DatasetError(f"query vectors of different dimensions {sorted(dims)}: one model gives one", path=str(path))
    dim = dims.pop() if dims else 0
    return VectorFile(path, vectors, {"model_id": model_id, "kind": "queries"}, dim=dim)
