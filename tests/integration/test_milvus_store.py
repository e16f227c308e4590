"""MilvusStore and MilvusSearch against real Milvus: round trip, missing values, consistency, modes, limits."""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pytest

from rag_eval.core.errors import SearchRequestError, SearchUnavailableError, UnsupportedFeatureError
from rag_eval.core.types import KnowledgeSearchRequest, SearchMode
from rag_eval.search.milvus import MAX_NQ, MAX_TOPK, ChunkRow, IndexSpec, MilvusSearch, MilvusStore, readiness
from rag_eval.search.milvus.readiness import handoff_bound, segment_state, wait_handed_over
from tests.milvus_target import target

DIM = 16
DropAfter = Callable[[str, str], None]


def _rows(n: int, *, seed: int = 3, start: int = 0) -> list[ChunkRow]:
    rng = random.Random(seed)
    return [
        ChunkRow(vector_id=start + i, doc_id=f"doc-{(start + i) // 5}", chunk_index=(start + i) % 5,
                 content=f"chunk {start + i} about {'replication lag' if i % 4 == 0 else 'lock waits'}",
                 title=f"Title {(start + i) // 5}", source=f"kb/{(start + i) // 5}.md",
                 category=("db", "net", "os")[i % 3], start=10 * i, end=10 * i + 9,
                 vector=[rng.gauss(0, 1) for _ in range(DIM)])
        for i in range(n)
    ]


def _encoder(rows: Sequence[ChunkRow]) -> Callable[[Sequence[str]], list[list[float]]]:
    by_id = {str(r.vector_id): list(r.vector) for r in rows}
    return lambda texts: [by_id[t] for t in texts]


def test_round_trip_in_batches_with_manifest_and_reuse(milvus_uri: str, collection_name: str,
                                                       drop_after: DropAfter) -> None:
    drop_after(milvus_uri, collection_name)
    rows = _rows(230)
    manifest = {"dataset_checksum": "sha256:abc", "chunker": {"size": 512}, "rows": 230, "note": "ünïcode ✓"}
    seen: list[int] = []
    with MilvusStore(target(milvus_uri, collection_name)) as store:
        assert not store.exists()
        assert store.read_manifest() is None
        store.create(dim=DIM, index=IndexSpec(), manifest=manifest)
        assert store.exists()
        assert store.insert(iter(rows), batch_size=100, on_batch=seen.append) == 230
        store.finalize()
        assert seen == [100, 100, 30]
        assert store.count() == 230
        assert store.read_manifest() == manifest
        info = store.backend()
        assert info.kind == ("server" if milvus_uri.startswith("http") else "lite")
        assert info.server_version and info.pymilvus_version
    # A later process (here: a new client) reads the manifest back and searches the rows as they were.
    with MilvusStore(target(milvus_uri, collection_name)) as again:
        assert again.read_manifest() == manifest
        assert again.count() == 230
    with MilvusSearch(target(milvus_uri, collection_name), _encoder(rows)) as port:
        hit = port.search(KnowledgeSearchRequest(query="123", top_k=1))[0]
        assert (hit.id, hit.doc_id, hit.chunk_index, hit.title, hit.source) == ("123", "doc-24", 3, "Title 24",
                                                                                "kb/24.md")
        assert hit.content == rows[123].content
        assert dict(hit.metadata) == {"char_start": 1230, "char_end": 1239}


def test_create_drops_an_existing_collection(milvus_uri: str, collection_name: str, drop_after: DropAfter) -> None:
    drop_after(milvus_uri, collection_name)
    with MilvusStore(target(milvus_uri, collection_name)) as store:
        store.create(dim=DIM, index=IndexSpec.flat(), manifest={"v": 1})
        store.insert(_rows(20))
        store.finalize()
        store.create(dim=DIM, index=IndexSpec.flat(), manifest={"v": 2})
        store.insert(_rows(5))
        store.finalize()
        assert store.count() == 5
        assert store.read_manifest() == {"v": 2}


def test_missing_values_map_back_to_none(milvus_uri: str, collection_name: str, drop_after: DropAfter) -> None:
    drop_after(milvus_uri, collection_name)
    row = ChunkRow(vector_id=7, doc_id=None, chunk_index=None, content="orphan", title="", source="", category="",
                   start=None, end=None, vector=[1.0] + [0.0] * (DIM - 1))
    with MilvusStore(target(milvus_uri, collection_name)) as store:
        store.create(dim=DIM, index=IndexSpec.flat(), manifest={})
        store.insert([row, *_rows(10, start=100)])
        store.finalize()
    with MilvusSearch(target(milvus_uri, collection_name), lambda texts: [list(row.vector)] * len(texts)) as port:
        hit = port.search(KnowledgeSearchRequest(query="orphan", top_k=1))[0]
        assert (hit.id, hit.vector_id, hit.content) == ("7", "7", "orphan")
        assert (hit.doc_id, hit.chunk_index, hit.title, hit.source, hit.category) == (None,) * 5
        assert dict(hit.metadata) == {"char_start": None, "char_end": None}
        # "" is how a missing category is stored, so filtering on "" must not return the missing ones
        assert port.search(KnowledgeSearchRequest(query="orphan", top_k=5, category_filter="")) == ()


def test_every_row_is_visible_right_after_finalize(milvus_uri: str, collection_name: str,
                                                   drop_after: DropAfter) -> None:
    """The 2.3 server searches with Bounded consistency: finalize() must leave nothing unseen."""
    drop_after(milvus_uri, collection_name)
    rows = _rows(3000, seed=11)
    with MilvusStore(target(milvus_uri, collection_name)) as store:
        store.create(dim=DIM, index=IndexSpec(), manifest={})
        store.insert(rows, batch_size=1000)
        store.finalize()
    with MilvusSearch(target(milvus_uri, collection_name), _encoder(rows)) as port:
        last = [KnowledgeSearchRequest(query=str(r.vector_id), top_k=1) for r in rows[-50:]]
        assert [hits[0].id for hits in port.search_batch(last)] == [str(r.vector_id) for r in rows[-50:]]


@pytest.mark.milvus_server
def test_big_batches_are_split_under_the_message_cap(server_uri: str, collection_name: str,
                                                     drop_after: DropAfter) -> None:
    """50,000 x 384 floats in one gRPC message is refused by the server: insert() splits by bytes too."""
    np = pytest.importorskip("numpy")
    milvus_uri = server_uri
    drop_after(milvus_uri, collection_name)
    vectors = np.random.default_rng(5).standard_normal((50_000, 384), dtype=np.float32)
    rows = (ChunkRow(vector_id=i, doc_id=f"d{i}", chunk_index=0, content="x", title="", source="", category="c",
                     start=0, end=1, vector=vectors[i]) for i in range(50_000))
    batches: list[int] = []
    with MilvusStore(target(milvus_uri, collection_name)) as store:
        store.create(dim=384, index=IndexSpec.flat(), manifest={})
        assert store.insert(rows, batch_size=50_000, on_batch=batches.append) == 50_000
        store.finalize()
        assert store.count() == 50_000
    assert len(batches) >= 2 and sum(batches) == 50_000


def test_search_batch_splits_over_the_query_cap(milvus_uri: str, collection_name: str,
                                                drop_after: DropAfter) -> None:
    drop_after(milvus_uri, collection_name)
    rows = _rows(40)
    with MilvusStore(target(milvus_uri, collection_name)) as store:
        store.create(dim=DIM, index=IndexSpec.flat(), manifest={})
        store.insert(rows)
        store.finalize()
    with MilvusSearch(target(milvus_uri, collection_name, index=IndexSpec.flat()), _encoder(rows)) as port:
        requests = [KnowledgeSearchRequest(query=str(i % 40), top_k=2) for i in range(MAX_NQ + 7)]
        results = port.search_batch(requests)
        assert len(results) == len(requests)
        assert all(hits[0].id == str(i % 40) for i, hits in enumerate(results))
        with pytest.raises(SearchRequestError, match="16,384"):
            port.search(KnowledgeSearchRequest(query="1", top_k=MAX_TOPK + 1))


def test_hnsw_ef_is_raised_to_the_limit(milvus_uri: str, collection_name: str, drop_after: DropAfter) -> None:
    drop_after(milvus_uri, collection_name)
    rows = _rows(400)
    with MilvusStore(target(milvus_uri, collection_name)) as store:
        store.create(dim=DIM, index=IndexSpec(search_params={"ef": 8}), manifest={})
        store.insert(rows)
        store.finalize()
    narrow = target(milvus_uri, collection_name, index=IndexSpec(search_params={"ef": 8}))
    with MilvusSearch(narrow, _encoder(rows)) as p:
        assert len(p.search(KnowledgeSearchRequest(query="3", top_k=300))) == 300


@pytest.mark.milvus_lite
def test_hybrid_search_on_lite_with_full_text(lite_uri: str) -> None:
    rows = _rows(60)
    with MilvusStore(target(lite_uri, "hybrid")) as store:
        store.create(dim=DIM, index=IndexSpec(), manifest={}, full_text=True)
        store.insert(rows)
        store.finalize()
        assert store.features().hybrid
    with MilvusSearch(target(lite_uri, "hybrid"), _encoder(rows)) as port:
        assert port.features().hybrid and port.features().grouping
        hits = port.search(KnowledgeSearchRequest(query="8", top_k=5, mode=SearchMode.HYBRID, category_filter="net"))
        assert hits and all(h.category == "net" for h in hits) and len(hits) <= 5
        assert all("rrf" in h.scores for h in hits)
        batch = port.search_batch([KnowledgeSearchRequest(query=q, top_k=3, mode=SearchMode.HYBRID)
                                   for q in ("8", "12")])
        assert [len(b) for b in batch] == [3, 3]


@pytest.mark.milvus_server
def test_server_refuses_full_text_clearly(server_uri: str, collection_name: str, drop_after: DropAfter) -> None:
    drop_after(server_uri, collection_name)
    with MilvusStore(target(server_uri, collection_name)) as store:
        if not store.backend().server_version.startswith("v2.3"):
            pytest.skip("this server may have BM25 functions")
        with pytest.raises(UnsupportedFeatureError, match="full-text") as info:
            store.create(dim=DIM, index=IndexSpec(), manifest={}, full_text=True)
        assert info.value.feature == "full_text"
        assert not store.exists()  # the half-made collection is not left behind


@pytest.mark.milvus_lite
def test_lite_path_without_db_suffix_and_parents_created(tmp_path: Path) -> None:
    uri = str(tmp_path / "nested" / "dir" / "lite-store")
    with MilvusStore(target(uri, "plain")) as store:
        store.create(dim=DIM, index=IndexSpec.flat(), manifest={"k": 1})
        store.insert(_rows(3))
        store.finalize()
        assert store.backend().kind == "lite"
    with MilvusStore(target(uri, "plain")) as store:  # closed clients released the file: it opens again
        assert store.count() == 3
        assert store.read_manifest() == {"k": 1}


@pytest.mark.milvus_lite
def test_manifest_size_is_capped(lite_uri: str) -> None:
    with MilvusStore(target(lite_uri, "big")) as store, pytest.raises(SearchRequestError, match="manifest"):
        store.create(dim=DIM, index=IndexSpec(), manifest={"blob": "x" * 300_000})


@pytest.mark.milvus_lite
def test_oversized_text_is_refused_before_milvus(lite_uri: str) -> None:
    row = _rows(1)[0]
    big = ChunkRow(**{**{f: getattr(row, f) for f in row.__slots__}, "content": "é" * 40_000})  # 80,000 bytes
    with MilvusStore(target(lite_uri, "big")) as store:
        store.create(dim=DIM, index=IndexSpec(), manifest={})
        with pytest.raises(SearchRequestError, match="content is 80,000 bytes"):
            store.insert([big])


def _segment_ids(client: Any, name: str) -> set[int]:
    return {s.segment_id for s in client.list_persistent_segments(name) if segment_state(s) in ("Flushed", "Sealed")}


@pytest.mark.milvus_server
def test_finalize_merges_this_collection_and_leaves_the_others(
    server_uri: str, collection_name: str, drop_after: DropAfter, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A 2.3 server compacts what the request's collection id names (0, every collection, when it is not
    set): finalize() merges the two segments of its own collection, and its job plans nothing for another
    collection's segment with over a third of its rows deleted (what a compaction of every collection
    rewrites). The job's own plans are the evidence: the server's automatic compaction may rewrite that
    segment on its own schedule, so the segment's id afterwards proves nothing either way."""
    other = f"{collection_name}_other"
    drop_after(server_uri, collection_name)
    drop_after(server_uri, other)
    rows = _rows(400, seed=5)
    with MilvusStore(target(server_uri, other)) as store:
        store.create(dim=DIM, index=IndexSpec.flat(), manifest={})
        store.insert(rows, batch_size=400)
        store.finalize()
        client = store._conn.client
        client.delete(other, filter="vector_id < 150")
        client.flush(other)
        others = _segment_ids(client, other)
    jobs: list[int | None] = []
    sent = readiness._compact_by_id

    def recorded(*args: Any, **kwargs: Any) -> int | None:
        jobs.append(sent(*args, **kwargs))
        return jobs[-1]

    monkeypatch.setattr(readiness, "_compact_by_id", recorded)
    with MilvusStore(target(server_uri, collection_name)) as store:
        store.create(dim=DIM, index=IndexSpec.flat(), manifest={})
        client = store._conn.client
        for part in (rows[:200], rows[200:]):
            store.insert(part, batch_size=200)
            client.flush(collection_name)
        ours = _segment_ids(client, collection_name)
        assert len(others) == 1 and len(ours) == 2
        store.finalize()
        assert len(_segment_ids(client, collection_name)) == 1 and store.count() == 400
        assert len(jobs) == 1 and jobs[0] is not None
        plans = client.get_compaction_plans(jobs[0]).plans
        sources = {segment for plan in plans for segment in plan.sources}
        assert sources == ours and not sources & others
        # a hand-off that does not end in time is the server's failure, said as such (exit 3)
        late = r"serves 1 of the 1 stored segments .*400 of 401 rows"
        with pytest.raises(SearchUnavailableError, match=late) as caught:
            wait_handed_over(store._conn, collection_name, 401, timeout=0.5)
        assert caught.value.exit_code == 3
    assert handoff_bound(50_000) >= 3 * 65  # the hand-off of 50,000 x 384 rows measured on this server
