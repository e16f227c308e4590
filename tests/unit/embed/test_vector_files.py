"""Vector files are refused when they are not what they claim: NaN, a dimension or row count that differs from
their metadata or from the model, rows missing; the message names the file. The collection manifest records
the dimension and the files' checksums, so corrected files rebuild the collection instead of reusing it."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest

from rag_eval.core.errors import EmbeddingMismatchError
from rag_eval.embed.embedders import DEFAULT_MODEL, EmbedderSpec, VectorResolver
from rag_eval.embed.vector_files import VectorFile
from rag_eval.files import write_parquet
from tests.conftest import SHIPPED

MODEL = EmbedderSpec(model=DEFAULT_MODEL).model_id
TEXTS = ["first text", "second text", "third text"]


def write(tmp: Path, vectors: np.ndarray, name: str = "chunks.parquet", texts: list[str] = TEXTS) -> Path:
    path = tmp / name
    VectorFile.write(path, texts, vectors.astype(np.float32), {"model_id": MODEL, "kind": "chunks"})
    return path


def test_nan_vectors_are_refused_naming_file_and_row(tmp_path: Path) -> None:
    vectors = np.ones((3, 384))
    vectors[1, 7] = np.nan
    path = tmp_path / "chunks.parquet"
    with pytest.raises(EmbeddingMismatchError, match=r"chunks\.parquet: row 2 .*NaN"):
        write(tmp_path, vectors)
    assert not path.exists()  # refused before anything is written
    good = write(tmp_path, np.ones((3, 384)))
    table = pq.read_table(good)
    matrix = np.ones((3, 384), np.float32)
    matrix[1, 7] = np.nan
    from rag_eval.embed.vector_files import _table

    pq.write_table(_table(table.column("text_sha256").to_pylist(), matrix, {"model_id": MODEL}), good)
    with pytest.raises(EmbeddingMismatchError, match="row 2"):
        VectorFile.read(good)


def test_metadata_that_lies_about_dim_or_count(tmp_path: Path) -> None:
    path = write(tmp_path, np.ones((3, 384)))
    table = pq.read_table(path)
    meta = dict(table.schema.metadata or {})
    for key, wrong in ((b"dim", b"128"), (b"count", b"5")):
        pq.write_table(table.replace_schema_metadata({**meta, key: wrong}), path)
        with pytest.raises(EmbeddingMismatchError, match=f"metadata says {wrong.decode()}"):
            VectorFile.read(path)


def test_rows_missing_from_a_file_whose_checksum_still_matches(tmp_path: Path) -> None:
    path = write(tmp_path, np.ones((3, 384)))
    table = pq.read_table(path)
    pq.write_table(table.slice(0, 2).replace_schema_metadata({**table.schema.metadata, b"count": b"2"}), path)
    with pytest.raises(EmbeddingMismatchError, match="1 without a vector"):
        VectorFile.read(path).check_matches(TEXTS, model_id=MODEL, regenerate_hint="rebuild")


def test_dimension_must_match_the_model_and_the_other_file(tmp_path: Path) -> None:
    small = VectorFile.read(write(tmp_path, np.ones((3, 128)), "chunks.parquet"))
    with pytest.raises(EmbeddingMismatchError, match=r"chunks\.parquet: vectors are 128-d but .* gives 384-d"):
        VectorResolver(MODEL, precomputed=[small])
    other = EmbedderSpec(model="some/other-model").model_id
    a = VectorFile.write(tmp_path / "a.parquet", TEXTS, np.ones((3, 64), np.float32), {"model_id": other})
    b = VectorFile.write(tmp_path / "b.parquet", ["q"], np.ones((1, 32), np.float32), {"model_id": other})
    with pytest.raises(EmbeddingMismatchError, match=r"b\.parquet: vectors are 32-d but .*a\.parquet holds 64-d"):
        VectorResolver(other, precomputed=[a, b])
    assert VectorResolver(other, precomputed=[a]).dim == 64


def _copy_dataset(tmp: Path) -> Path:
    ds = tmp / "kb"
    shutil.copytree(SHIPPED, ds, ignore=shutil.ignore_patterns("src", "experiments"))
    return ds


def _run(tmp: Path, ds: Path, out: str) -> subprocess.CompletedProcess[str]:
    evidence = SHIPPED / "experiments" / "configs" / "evidence.properties"
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "rag_eval.cli",
            "run",
            "--dataset",
            str(ds),
            "--config",
            f"e={evidence}",
            "--milvus-uri",
            str(tmp / "m.db"),
            "--out",
            str(tmp / out),
            "--limit",
            "10",
            "-q",
        ],
        capture_output=True,
        text=True,
        cwd=tmp,
        timeout=300,
    )


@pytest.mark.milvus_lite
def test_cut_vector_files_are_refused_and_changed_files_rebuild_the_collection(tmp_path: Path) -> None:
    ds = _copy_dataset(tmp_path)
    files = sorted((ds / "vectors").glob("*.parquet"))
    originals = {f: f.read_bytes() for f in files}
    for f in files:  # both files cut to 128 dimensions: consistent with each other, not with the model
        vf = VectorFile.read(f)
        texts_meta = dict(vf.metadata)
        table = pq.read_table(f)
        matrix = np.stack([vf.vectors[h] for h in table.column("text_sha256").to_pylist()])[:, :128]
        from rag_eval.embed.vector_files import _table

        texts_meta["dim"] = "128"
        write_parquet(f, _table(table.column("text_sha256").to_pylist(), matrix, texts_meta))
    proc = _run(tmp_path, ds, "cut")
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.count("\n") == 1 and ".parquet: vectors are 128-d" in proc.stderr
    assert not (tmp_path / "cut").exists()

    for f, data in originals.items():
        f.write_bytes(data)
    first = _run(tmp_path, ds, "good")
    assert first.returncode == 0, first.stderr
    # the same chunk vectors in another order: the file's checksum changes, so the collection is rebuilt
    chunks = next(f for f in files if f.name.startswith("chunks"))
    table = pq.read_table(chunks)
    pq.write_table(table.take(list(reversed(range(table.num_rows)))), chunks)
    again = subprocess.run(
        [sys.executable, "-m", "rag_eval.cli", "ingest", "--dataset", str(ds), "--milvus-uri", str(tmp_path / "m.db")],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=300,
    )
    assert again.returncode == 0, again.stderr
    assert "built (new collection" in again.stdout or "manifest differs" in again.stdout
