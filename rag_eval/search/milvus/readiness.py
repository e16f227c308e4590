"""Readiness waits: until a fresh collection answers every search from indexed, sealed segments holding
every row, and the same way twice.

A Milvus server does much of an ingest in the background: it builds indexes asynchronously, merges
small segments and swaps the merged one in, and searches with Bounded consistency. Until that is over
two runs can get different hits. Milvus Lite builds at once and reports no progress; these waits then
return at the first look. Each wait is bounded and says what to check when it runs out.
"""

from __future__ import annotations

import time
from typing import Any, Final

from rag_eval.core.errors import SearchBackendError, SearchRequestError, SearchUnavailableError, UnsupportedFeatureError
from rag_eval.search.milvus.collection import Collection, count, describe, read_description, search_params
from rag_eval.search.milvus.connection import Connection
from rag_eval.search.milvus.schema import VECTOR_FIELD, IndexSpec, one_line

_VISIBLE_WAIT_S: Final = 120.0
_INDEX_WAIT_S: Final = 600.0
_SETTLE_WAIT_S: Final = 20.0
_HANDOFF_MIN_S: Final = 120.0
_HANDOFF_S_PER_ROW: Final = 0.005


def settle(conn: Connection, name: str, index: IndexSpec, *, vector_field: str = VECTOR_FIELD,
           rows_filter: str = "vector_id >= 0", coll: Collection | None = None) -> None:  # fmt: skip
    """Wait until a freshly loaded server answers searches the same way twice in a row.

    Right after a load, a server can still hold rows both in the sealed, indexed segment and in the stream
    it loaded from, and answers the first searches partly by brute force; a run started then gets other
    hits than a run a moment later. Probe with stored vectors until three consecutive answers agree.
    """
    rows = conn.call(
        "query",
        conn.client.query,
        name,
        filter=rows_filter,
        output_fields=[vector_field],
        limit=32,
        collection=name,
    )
    probe = [list(r[vector_field]) for r in rows]
    if not probe:
        return
    coll = coll if coll is not None else describe(conn, name)
    params = search_params(coll, index, 50)
    deadline = time.monotonic() + _SETTLE_WAIT_S
    seen: list[list[list[Any]]] = []
    while time.monotonic() < deadline:
        answer = conn.call(
            "search",
            conn.client.search,
            name,
            data=probe,
            anns_field=vector_field,
            limit=50,
            search_params=params,
            collection=name,
        )
        seen.append([[h["id"] for h in hits] for hits in answer])
        if len(seen) >= 3 and seen[-1] == seen[-2] == seen[-3]:
            return
        time.sleep(0.3)


def handoff_bound(rows: int) -> float:
    """Seconds :func:`wait_handed_over` waits for ``rows`` rows by default: 120 s at least, 5 ms a row
    beyond (a 2.3.5 server took 65 s to merge, index and serve 50,000 x 384 rows on 2 cores)."""
    return max(_HANDOFF_MIN_S, rows * _HANDOFF_S_PER_ROW)


def wait_handed_over(conn: Connection, name: str, rows: int, *, timeout: float | None = None) -> None:
    """Wait until the query nodes serve exactly the stored segments, sealed, holding every row.

    After a compaction the query nodes swap the merged segment in for its sources in the background; until
    then searches may be answered from the sources (other HNSW graphs, other hits), and agreeing probes do
    not show that the swap is over. Bounded by ``timeout`` (default :func:`handoff_bound` of ``rows``):
    past it the server is not serving the collection it stored, an infrastructure failure (exit 3). A
    server without these calls is left to the settle probe.
    """
    bound = handoff_bound(rows) if timeout is None else timeout
    deadline = time.monotonic() + bound
    while True:
        try:
            loaded = conn.call("list loaded segments", conn.client.list_loaded_segments, name, collection=name)
            stored = conn.call("list segments", conn.client.list_persistent_segments, name, collection=name)
        except (SearchBackendError, SearchRequestError, UnsupportedFeatureError):
            return  # a server without these calls: the settle probe alone decides
        kept = {s.segment_id for s in stored if segment_state(s) in ("Flushed", "Sealed")}
        served = {s.segment_id for s in loaded}
        # no index name is asked for: a server builds none for a segment under its size threshold (it is
        # searched brute force for good), and wait_indexed has already waited for every index it builds
        sealed = all(segment_state(s) == "Sealed" for s in loaded)
        if served == kept and sealed and sum(s.num_rows for s in loaded) >= rows:
            return
        if time.monotonic() > deadline:
            raise SearchUnavailableError(
                f"Milvus at {conn.shown} serves {len(served & kept)} of the {len(kept)} stored segments of "
                f"{name!r} ({sum(s.num_rows for s in loaded):,} of {rows:,} rows) after {bound:g} s: check "
                "the query nodes, then finalize again (or allow the hand-off longer)",
                uri=conn.shown,
            )
        time.sleep(0.3)


def segment_state(segment: Any) -> str:
    """A segment's state by name (pymilvus gives an enum, some versions a string)."""
    state = segment.state
    return str(getattr(state, "name", state))


def stored_segments(conn: Connection, name: str) -> int:
    """The collection's stored segments (all of them when the server cannot list them)."""
    try:
        stored = conn.call("list segments", conn.client.list_persistent_segments, name, collection=name)
    except (SearchBackendError, SearchRequestError, UnsupportedFeatureError):
        return 2  # unknown: compact, as before
    return sum(1 for s in stored if segment_state(s) in ("Flushed", "Sealed"))


def compact(conn: Connection, name: str) -> bool:
    """Merge this collection's segments now and wait until the merge is done; False, and nothing done,
    where the client offers no way to name the collection by its id."""
    # A server merges the small segments of a fresh collection in the background, and re-indexes them;
    # searches before and after that answer from different HNSW graphs.
    collection_id = int(read_description(conn, name)["collection_id"])
    job = conn.call("compact", _compact_by_id, conn.client, name, collection_id, collection=name, retry=False)
    if job is None:
        return False
    deadline = time.monotonic() + _INDEX_WAIT_S
    while conn.call("compaction state", conn.client.get_compaction_state, job, collection=name) != "Completed":
        if time.monotonic() > deadline:
            raise SearchUnavailableError(
                f"Milvus at {conn.shown} did not finish compacting {name!r} in {_INDEX_WAIT_S:g} s: "
                "check the data nodes, then ingest again",
                uri=conn.shown,
            )
        time.sleep(0.2)
    return True


def _compact_by_id(client: Any, name: str, collection_id: int, *, timeout: float) -> int | None:
    """The job of a manual compaction of collection ``collection_id`` (None: not sent).

    ``MilvusClient.compact`` (pymilvus 3.0) names the collection only; a 2.3 server reads the request's
    collection id, 0 when unset, and then compacts segments of other collections and not this one. The
    request is built as pymilvus builds it for a server that does not know the name: with the id.
    """
    from pymilvus.client.prepare import Prepare
    from pymilvus.client.utils import check_status

    handler = getattr(client, "_get_connection", lambda: None)()
    stub = getattr(handler, "_stub", None)
    if stub is None:
        return None
    request = Prepare.manual_compaction(
        collection_name=name, is_clustering=False, is_l0=False, collection_id=collection_id
    )
    response = stub.ManualCompaction(request, timeout=timeout)
    check_status(response.status)
    return int(response.compactionID)


def wait_indexed(conn: Connection, name: str, inserted: int) -> None:
    """Wait until every index of the collection covers every row (``inserted`` at least)."""
    # A server builds indexes asynchronously; a segment searched before its index is ready is searched
    # brute force, with other scores than after the hand-off. Lite builds at once and reports no progress.
    deadline = time.monotonic() + _INDEX_WAIT_S
    for index_name in conn.call("list indexes", conn.client.list_indexes, name, collection=name):
        while True:
            info = conn.call("describe index", conn.client.describe_index, name, index_name, collection=name)
            if "indexed_rows" not in info:
                break
            total, done = int(info.get("total_rows", 0)), int(info.get("indexed_rows", 0))
            pending, state = int(info.get("pending_index_rows", 0)), str(info.get("state", "Finished"))
            if state == "Failed":
                raise SearchBackendError(
                    f"Milvus at {conn.shown} failed to build index {index_name!r} of {name!r} "
                    f"({one_line(info.get('index_state_fail_reason', ''))}): check the index parameters",
                    uri=conn.shown,
                )
            if done >= max(total, inserted) and pending == 0 and state == "Finished":
                break
            if time.monotonic() > deadline:
                raise SearchUnavailableError(
                    f"Milvus at {conn.shown} indexed {done:,} of {max(total, inserted):,} rows of "
                    f"{name!r} in {_INDEX_WAIT_S:g} s: check the index nodes, then ingest again",
                    uri=conn.shown,
                )
            time.sleep(0.2)


def wait_visible(conn: Connection, name: str, inserted: int) -> None:
    """Wait until a Strong count shows ``inserted`` rows at least, and the default view as many."""
    # The server searches with Bounded consistency: wait until that view holds every row too.
    deadline = time.monotonic() + _VISIBLE_WAIT_S
    while True:
        strong = count(conn, name, "Strong")
        bounded = count(conn, name, None) if conn.kind == "server" else strong
        if strong >= inserted and bounded == strong:
            return
        if time.monotonic() > deadline:
            raise SearchUnavailableError(
                f"Milvus at {conn.shown} shows {bounded:,} of {max(strong, inserted):,} rows of "
                f"{name!r} after {_VISIBLE_WAIT_S:g} s: check the server's health, then finalize again",
                uri=conn.shown,
            )
        time.sleep(0.2)
