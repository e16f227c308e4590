"""A deployed service's payloads against the pipeline's: the conformance diff, and the measures read from
payloads alone.

:func:`first_difference` names where two payloads of one query first differ, field by field in the order the
agent reads them: the query, then the evidence block by block (each block's ``document_id``, ``source``,
``title``, ``content``, ``score``, ``rank``, ``truncated``, then any other key), then the hints; None when
they are identical. ``conformance`` is the share of queries whose payloads are identical.

:func:`payload_measures` reads the delivered chunks from the payload's chunk-scoped ``document_id`` (D5:
``doc#chunk-i``, or ``vector:N`` for a row without its chunk index, whose true chunk the collection's rows
say): an excerpt delivers its chunk when it is not truncated. The chunk-level standard measures are then
:func:`~rag_eval.metrics.perquery.standard_measures`' (the in-process run's own code). A legacy service's
``document_id`` is the source: no chunk can be read from it, so such excerpts are counted as ``unscoped``
and deliver nothing (its chunk measures read 0, and say so).

>>> a = {"query": "q", "evidence": [{"document_id": "lag#chunk-0", "content": "x", "score": 0.9}], "hints": {}}
>>> first_difference(a, a) is None
True
>>> first_difference(a, {**a, "evidence": [{"document_id": "lag#chunk-1", "content": "x", "score": 0.9}]})
'evidence[0].document_id'
>>> first_difference(a, {**a, "evidence": []})
'evidence: 1 block(s) expected, 0 given'
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import pyarrow as pa

from rag_eval.core.identity import CHUNK_SEPARATOR
from rag_eval.metrics.perquery import standard_measures

FIELDS = ("document_id", "source", "title", "content", "score", "rank", "truncated")
VECTOR_PREFIX = "vector:"


def first_difference(expected: Mapping[str, Any], given: Mapping[str, Any]) -> str | None:
    """Where ``given`` first differs from ``expected`` (a field path), or None when they are identical."""
    if expected.get("query") != given.get("query"):
        return "query"
    want, got = list(expected.get("evidence") or []), list(given.get("evidence") or [])
    for i, (a, b) in enumerate(zip(want, got, strict=False)):
        for key in (*FIELDS, *sorted((set(a) | set(b)) - set(FIELDS))):
            if not _same(a.get(key), b.get(key)):
                return f"evidence[{i}].{key}"
    if len(want) != len(got):
        return f"evidence: {len(want)} block(s) expected, {len(got)} given"
    hints_a, hints_b = expected.get("hints") or {}, given.get("hints") or {}
    for key in sorted(set(hints_a) | set(hints_b)):
        if hints_a.get(key) != hints_b.get(key):
            return f"hints.{key}"
    for key in sorted((set(expected) | set(given)) - {"query", "evidence", "hints"}):
        if expected.get(key) != given.get(key):
            return key
    return None


def _same(a: Any, b: Any) -> bool:
    """Equal, a number as the same number whether written as an int or a float (JSON does not say)."""
    if isinstance(a, bool) or isinstance(b, bool):
        return a is b
    if isinstance(a, int | float) and isinstance(b, int | float):
        return float(a) == float(b) or (math.isnan(float(a)) and math.isnan(float(b)))
    return bool(a == b)


def delivered_chunks(payload: Mapping[str, Any], chunk_of: Callable[[str], str | None]) -> tuple[list[str], int]:
    """The chunks a payload delivers whole, in its order, and how many excerpts have no chunk-scoped id.

    >>> payload = {"evidence": [{"document_id": "a#chunk-0"}, {"document_id": "a#chunk-1", "truncated": True},
    ...                         {"document_id": "vector:7"}, {"document_id": "kb/a.md"}]}
    >>> delivered_chunks(payload, {"7": "a#chunk-4"}.get)
    (['a#chunk-0', 'a#chunk-4'], 1)
    """
    chunks: list[str] = []
    unscoped = 0
    for excerpt in payload.get("evidence") or []:
        key = str(excerpt.get("document_id"))
        if key.startswith(VECTOR_PREFIX):
            chunk = chunk_of(key.removeprefix(VECTOR_PREFIX))
        elif CHUNK_SEPARATOR in key:
            chunk = key
        else:
            unscoped += 1
            continue
        if chunk is not None and not excerpt.get("truncated"):
            chunks.append(chunk)
    return chunks, unscoped


def payload_measures(
    payloads: Mapping[str, Mapping[str, Any]],
    relevance: Mapping[str, Mapping[str, int]],
    chunk_of: Callable[[str], str | None],
    cutoffs: Sequence[int],
) -> dict[str, Any]:
    """The chunk-level standard measures of the labelled queries' payloads (mean over the judged ones), and the
    counts: queries, judged queries, excerpts without a chunk-scoped id."""
    ids = [q for q in payloads if relevance.get(q)]
    members, unscoped = [], 0
    for q in ids:
        chunks, n = delivered_chunks(payloads[q], chunk_of)
        members.append(chunks)
        unscoped += n
    unscoped += sum(delivered_chunks(payloads[q], chunk_of)[1] for q in payloads if not relevance.get(q))
    out: dict[str, Any] = {"queries": len(payloads), "judged_queries": len(ids), "unscoped_excerpts": unscoped}
    if not ids:
        return out
    rel = [sorted(relevance[q]) for q in ids]
    table = pa.table({
        "member_chunks": pa.array(members, pa.list_(pa.string())),
        "relevant_chunks": pa.array(rel, pa.list_(pa.string())),
        "relevant_grades": pa.array([[relevance[q][c] for c in r] for q, r in zip(ids, rel, strict=True)],
                                    pa.list_(pa.int64())),
        "judged": pa.array([True] * len(ids)),
    })  # fmt: skip
    frame = standard_measures(table, cutoffs)
    out.update({name: float(frame[name].mean()) for name in frame.columns})
    return out


def conformance(differences: Mapping[str, str | None]) -> float:
    """The share of queries whose payloads are identical (1.0 with no query: nothing differs).

    >>> conformance({"q1": None, "q2": "evidence[0].score", "q3": None, "q4": None})
    0.75
    """
    return sum(1 for d in differences.values() if d is None) / len(differences) if differences else 1.0
