"""D1: the evidence identity key.

::

    evidenceKey = docId + "#chunk-" + chunkIndex   if docId and chunkIndex are present
                = "vector:" + vectorId             else if vectorId is present
                = "rank:" + originalRank           otherwise

``originalRank`` is the 1-based position of the hit in the list the search port
returned, before any sorting (the first hit is ``rank:1``). It is only unique within
one lookup, which is all the rank fallback promises.

>>> evidence_key(doc_id="runbook-7", chunk_index=3, vector_id="991", original_rank=1)
'runbook-7#chunk-3'
>>> evidence_key(doc_id="runbook-7", chunk_index=None, vector_id="991", original_rank=1)
'vector:991'
>>> evidence_key(doc_id=None, chunk_index=None, vector_id=None, original_rank=4)
'rank:4'
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Protocol

CHUNK_SEPARATOR = "#chunk-"
VECTOR_PREFIX = "vector:"
RANK_PREFIX = "rank:"


def evidence_key(*, doc_id: str | None, chunk_index: int | None, vector_id: str | None, original_rank: int) -> str:
    """The evidence key of one hit (D1). Empty strings count as missing."""
    return key_of(doc_id, chunk_index, vector_id, original_rank)


def key_of(doc_id: str | None, chunk_index: int | None, vector_id: str | None, original_rank: int) -> str:
    """:func:`evidence_key` with positional arguments, for the per-hit loop (keywords cost a third more).

    >>> key_of("runbook-7", 3, "991", 1)
    'runbook-7#chunk-3'
    """
    if doc_id and chunk_index is not None:
        return f"{doc_id}{CHUNK_SEPARATOR}{chunk_index}"
    if vector_id:
        return f"{VECTOR_PREFIX}{vector_id}"
    if original_rank < 1:
        raise ValueError(f"original_rank is 1-based, got {original_rank}")
    return f"{RANK_PREFIX}{original_rank}"


class Identified(Protocol):
    """What D1 reads of a hit."""

    @property
    def doc_id(self) -> str | None: ...
    @property
    def chunk_index(self) -> int | None: ...
    @property
    def vector_id(self) -> str | None: ...


def keys_of(hits: Iterable[Identified]) -> tuple[str, ...]:
    """The evidence keys of hits in the order returned (ranks from 1): :func:`key_of` of each,
    written out in one comprehension (a call per hit cost a third of the keys' time).

    >>> from types import SimpleNamespace as H
    >>> keys_of([H(doc_id="d", chunk_index=0, vector_id="7"), H(doc_id="d", chunk_index=None, vector_id="8"),
    ...          H(doc_id="", chunk_index=1, vector_id=None)])
    ('d#chunk-0', 'vector:8', 'rank:3')
    """
    return tuple(
        [
            f"{d}{CHUNK_SEPARATOR}{c}"
            if (d := h.doc_id) and (c := h.chunk_index) is not None
            else (f"{VECTOR_PREFIX}{v}" if (v := h.vector_id) else f"{RANK_PREFIX}{r}")
            for r, h in enumerate(hits, start=1)
        ]
    )


def key_kind(key: str) -> str:
    """Which branch of D1 produced ``key``: ``chunk``, ``vector`` or ``rank``."""
    if key.startswith(VECTOR_PREFIX):
        return "vector"
    if key.startswith(RANK_PREFIX):
        return "rank"
    return "chunk"
