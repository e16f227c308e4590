"""A copy of the shipped incident knowledge base, a labelling file written over its chunks, and marking it."""

from __future__ import annotations

import json
import shutil
from collections.abc import Mapping
from functools import cache
from pathlib import Path
from typing import Any

from rag_eval.datasets.beir import load_beir
from rag_eval.datasets.chunking import DEFAULT_CHUNKER_SPEC, Chunk, parse_chunker
from rag_eval.datasets.labels import chunk_dataset
from rag_eval.traffic.labelling import Candidate, ChunkText, Delivered, write_labelling_file
from tests.conftest import SHIPPED

FILES = ("corpus.jsonl", "queries.jsonl", "qrels/test.tsv", "qrels/test.spans.tsv")
DOC_A, DOC_B = "mysql-replication-lag", "innodb-deadlocks"


def copy_kb(root: Path) -> Path:
    (root / "qrels").mkdir(parents=True)
    for name in FILES:
        shutil.copyfile(SHIPPED / name, root / name)
    return root


@cache
def chunks() -> dict[str, Chunk]:
    data = load_beir(SHIPPED)
    return {c.key: c for c in chunk_dataset(data, parse_chunker(DEFAULT_CHUNKER_SPEC)).chunks}


def chunk_texts() -> dict[str, ChunkText]:
    return {key: ChunkText.of(c) for key, c in chunks().items()}


def candidates() -> list[Candidate]:
    def delivered(*keys: str) -> tuple[Delivered, ...]:
        return tuple(Delivered(chunk=k, configs=("legacy", "evidence")) for k in keys)

    return [
        Candidate(query_id="t-lag", text="replica lag keeps growing after the nightly backup job", count=12,
                  disagreement=0.6,
                  delivered=delivered(f"{DOC_A}#chunk-0", f"{DOC_A}#chunk-2", f"{DOC_B}#chunk-1", "ghost#chunk-9")),
        Candidate(query_id="t-none", text="why is the ssd slow on tuesdays", count=1, disagreement=0.3,
                  delivered=delivered(f"{DOC_B}#chunk-0", f"{DOC_B}#chunk-3")),
        Candidate(query_id="t-open", text="pgbouncer pool exhausted at peak", count=3, disagreement=0.9,
                  delivered=delivered(f"{DOC_A}#chunk-1")),
    ]  # fmt: skip


GRADES: dict[str, dict[str, int | None]] = {
    "t-lag": {f"{DOC_A}#chunk-0": 2, f"{DOC_A}#chunk-2": 1, f"{DOC_B}#chunk-1": 0, "ghost#chunk-9": 0},
    "t-none": {f"{DOC_B}#chunk-0": 0, f"{DOC_B}#chunk-3": 0},
    "t-open": {f"{DOC_A}#chunk-1": None},
}


def labelling_file(path: Path) -> Path:
    return write_labelling_file(path, candidates(), chunk_texts())


def read_lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").split("\n") if line]


def write_lines(path: Path, rows: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")
    return path


def mark(source: Path, target: Path, grades: Mapping[str, Mapping[str, int | None]] = GRADES) -> Path:
    """``source`` with the grades a person set (query id -> chunk key -> grade), written at ``target``."""
    rows = read_lines(source)
    for row in rows:
        for chunk in row["chunks"]:
            chunk["grade"] = grades.get(row["query_id"], {}).get(chunk["chunk"])
    return write_lines(target, rows)


def marked_file(tmp_path: Path) -> Path:
    return mark(labelling_file(tmp_path / "label.jsonl"), tmp_path / "marked.jsonl")


def snapshot(root: Path) -> dict[str, bytes]:
    """Every file below ``root`` (hidden ones too) and its bytes."""
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}
