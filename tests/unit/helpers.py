"""Small builders shared by unit tests."""

from __future__ import annotations

from rag_eval.core.types import KnowledgeSearchHit


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
