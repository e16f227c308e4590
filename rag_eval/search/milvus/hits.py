"""Milvus hits as :class:`KnowledgeSearchHit`\\ s, in the documented total order.

A replay asks about the same rows again and again (a knowledge base of thousands of chunks, answered for
hundreds of thousands of queries), so :class:`HitReader` reads a row's fields once and keeps them by vector
id: a later hit of the same row, its fields equal to the kept ones, takes them instead of being read again
(a row whose fields changed is read anew). A port whose collection does not change while it is open asks
Milvus for ids and scores only and gives the reader each row's fields once (:meth:`HitReader.missing`,
:meth:`HitReader.remember`, :meth:`HitReader.read_known`). Milvus answers a page best first; only hits of
equal score are put in the total order by id (:func:`in_total_order`), and a page that is not best first is
sorted whole.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from itertools import islice
from operator import ge, gt
from typing import Any

from rag_eval.core.types import KnowledgeSearchHit, fast_constructor, hit_order
from rag_eval.search.milvus.schema import MISSING_INT, MISSING_STR

_new_hit = fast_constructor(KnowledgeSearchHit)
ROWS_KEPT = 1 << 16  # rows whose fields a reader keeps (then it starts again): a bound on a long-lived port's memory
# a row's fields as a hit carries them: content, metadata, doc id, chunk index, source, title, category
_Fields = tuple[str, dict[str, int | None], str | None, int | None, str | None, str | None, str | None]
IdPage = tuple[list[Any], list[float]]  # a page of hits without fields: primary keys and distances


def _opt_str(value: Any) -> str | None:
    return None if value is None or value == MISSING_STR else str(value)


def _opt_int(value: Any) -> int | None:
    return None if value is None or int(value) == MISSING_INT else int(value)


def _fields(get: Callable[..., Any]) -> _Fields:
    return (
        str(get("content", "")),
        {"char_start": _opt_int(get("char_start")), "char_end": _opt_int(get("char_end"))},
        _opt_str(get("doc_id")),
        _opt_int(get("chunk_index")),
        _opt_str(get("source")),
        _opt_str(get("title")),
        _opt_str(get("category")),
    )


def to_hit(raw: Any, negate: bool, channel: str) -> KnowledgeSearchHit:
    """One hit of a rag_eval collection (a pymilvus hit: a dict with ``entity`` and ``distance``), its score
    higher-is-better (``negate``: an L2 distance)."""
    # a pymilvus hit is a dict: plain dict access skips its Python-level overrides (a third of the time)
    entity = dict.get(raw, "entity") or {}
    get = entity.get
    vid = get("vector_id")
    vid = str(vid if vid is not None else getattr(raw, "pk", None))
    distance = float(dict.__getitem__(raw, "distance"))
    score = -distance if negate else distance
    content, metadata, doc_id, chunk_index, source, title, category = _fields(get)
    return _new_hit(vid, content, score, {channel: score}, metadata, doc_id, chunk_index, vid, source, title, category)


class HitReader:
    """The hits of one rag_eval collection's searches, each row's fields read once (kept by vector id, and
    compared with the row's fields as each page brings them: equal, they are taken as kept). The hits it makes
    equal :func:`to_hit`'s; a row's hits share its content string and metadata mapping (read-only, as every
    hit's are).

    >>> reader = HitReader(negate=False, channel="dense")
    >>> raw = {"distance": 0.5, "entity": {"vector_id": 7, "content": "x", "doc_id": "d", "chunk_index": 0}}
    >>> reader.read([raw, {**raw, "distance": 0.75}]) == [to_hit({**raw, "distance": 0.75}, False, "dense"),
    ...                                                  to_hit(raw, False, "dense")]
    True
    """

    __slots__ = ("_channel", "_negate", "_rows")

    def __init__(self, *, negate: bool, channel: str) -> None:
        self._negate = negate
        self._channel = channel
        self._rows: dict[Any, tuple[dict[str, Any], str, _Fields]] = {}

    def missing(self, pages: Sequence[IdPage]) -> list[Any]:
        """The primary keys of ``pages`` (:func:`id_page` each) whose rows are not kept, in the order first
        met."""
        if len(self._rows) > ROWS_KEPT:
            self._rows.clear()
        rows = self._rows
        return list(dict.fromkeys(key for ids, _ in pages for key in ids if key not in rows))

    def remember(self, entities: Sequence[dict[str, Any]]) -> None:
        """Keep the fields of rows read by a query (each with its ``vector_id``)."""
        for entity in entities:
            key = entity["vector_id"]
            self._rows[key] = (entity, str(key), _fields(entity.get))

    def read_known(self, page: IdPage) -> list[KnowledgeSearchHit]:
        """One query's page of ids and distances (:func:`id_page`), every row kept (:meth:`missing` is
        empty), in the documented total order: the hits :meth:`read` makes of the same page with its fields."""
        rows, negate, channel = self._rows, self._negate, self._channel
        made: list[KnowledgeSearchHit] = []
        for key, distance in zip(*page, strict=True):
            _, vid, (content, metadata, doc_id, chunk_index, source, title, category) = rows[key]
            score = -float(distance) if negate else float(distance)
            made.append(_new_hit(vid, content, score, {channel: score}, metadata, doc_id, chunk_index, vid, source,
                                 title, category))  # fmt: skip
        return in_total_order(made)

    def read(self, raws: Sequence[Any]) -> list[KnowledgeSearchHit]:
        """One query's page, in the documented total order (:func:`in_total_order`)."""
        rows, negate, channel = self._rows, self._negate, self._channel
        if len(rows) > ROWS_KEPT:
            rows.clear()
        made: list[KnowledgeSearchHit] = []
        for raw in raws:
            entity = dict.get(raw, "entity") or {}
            key = entity.get("vector_id")
            if key is None:  # no vector id of its own: named by its primary key, read every time
                made.append(to_hit(raw, negate, channel))
                continue
            known = rows.get(key)
            if known is None or known[0] != entity:
                known = rows[key] = (entity, str(key), _fields(entity.get))
            vid = known[1]
            content, metadata, doc_id, chunk_index, source, title, category = known[2]
            distance = float(dict.__getitem__(raw, "distance"))
            score = -distance if negate else distance
            made.append(_new_hit(vid, content, score, {channel: score}, metadata, doc_id, chunk_index, vid, source,
                                 title, category))  # fmt: skip
        return in_total_order(made)


def id_page(raws: Sequence[Any]) -> IdPage | None:
    """A page of hits without fields as its columns: primary keys and distances (a pymilvus page keeps them as
    ``ids`` and ``distances``; else read hit by hit); None when a hit names no primary key.

    >>> class Page(list):
    ...     ids, distances = [7, 3], [0.5, 0.25]
    >>> id_page(Page([{}, {}])), id_page([{"distance": 0.5, "entity": {}}])  # the second: no primary key
    (([7, 3], [0.5, 0.25]), None)
    """
    ids, distances = getattr(raws, "ids", None), getattr(raws, "distances", None)
    if ids is None or distances is None or len(ids) != len(raws) or len(distances) != len(raws):
        ids = [getattr(raw, "pk", None) for raw in raws]
        distances = [dict.__getitem__(raw, "distance") for raw in raws]
    ids = list(ids)
    return None if None in ids else (ids, list(distances))


def in_total_order(hits: list[KnowledgeSearchHit]) -> list[KnowledgeSearchHit]:
    """``hits`` sorted by :func:`hit_order`. A page that is best first (scores not increasing, no NaN), as
    Milvus answers, only has its runs of equal scores sorted (by id); any other is sorted whole.

    >>> page = [KnowledgeSearchHit(id=i, content="", score=s, vector_id=i) for i, s in
    ...         (("9", 0.9), ("12", 0.5), ("3", 0.5), ("10", 0.5), ("1", 0.4), ("2", float("nan")))]
    >>> [h.id for h in in_total_order(page)], [h.id for h in in_total_order(page[:5])]
    (['9', '3', '10', '12', '1', '2'], ['9', '3', '10', '12', '1'])
    """
    scores = [h.score for h in hits]
    if all(map(gt, scores, islice(scores, 1, None))):
        return hits  # strictly best first: the total order already
    if not all(map(ge, scores, islice(scores, 1, None))):
        return sorted(hits, key=hit_order)  # not best first, or a NaN among them
    out = list(hits)
    n, start = len(scores), 0
    while start < n:
        end = start + 1
        while end < n and scores[end] == scores[start]:
            end += 1
        if end - start > 1:
            out[start:end] = sorted(out[start:end], key=hit_order)
        start = end
    return out
