"""Small builders shared by unit tests."""

from __future__ import annotations

import os
from pathlib import Path

from rag_eval.core.types import KnowledgeSearchHit

NOT_FILES = ("a directory", "a device", "a pipe")  # what stands at a path where a regular file is expected


def not_a_file(path: Path, kind: str) -> Path:
    """Put at ``path`` one of :data:`NOT_FILES` (``missing``: nothing): a directory, ``/dev/zero`` (a link to
    it: read for ever) or a named pipe (a read blocks)."""
    if kind == "a directory":
        path.mkdir()
    elif kind == "a device":
        path.symlink_to("/dev/zero")
    elif kind == "a pipe":
        os.mkfifo(path)
    elif kind != "missing":
        raise ValueError(kind)
    return path


def hit(
    vid: str | None,
    score: float,
    doc: str | None = None,
    chunk: int | None = None,
    *,
    content: str | None = None,
    source: str | None = None,
    category: str | None = None,
) -> KnowledgeSearchHit:
    return KnowledgeSearchHit(
        id=vid or f"anon-{score}",
        content=content if content is not None else f"text of {vid}",
        score=score,
        scores={"dense": score},
        doc_id=doc,
        chunk_index=chunk,
        vector_id=vid,
        source=source if source is not None else (f"kb/{doc}.md" if doc else None),
        title=f"Title {doc}" if doc else None,
        category=category,
    )
