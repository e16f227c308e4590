"""One contract for every KnowledgeSearchPort adapter: in-memory, Milvus Lite and the Milvus server.

All three are built from the same rows and searched exactly (FLAT index), so they must agree on the hits,
their order and their fields; optional modes are either honoured exactly like the in-memory reference or
refused with UnsupportedFeatureError, never silently degraded.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass

import pytest

from rag_eval.core.errors import DimensionMismatchError, UnsupportedFeatureError
from rag_eval.core.ports import BatchKnowledgeSearchPort, KnowledgeSearchPort
from rag_eval.core.types import KnowledgeSearchHit, KnowledgeSearchRequest, SearchMode
from rag_eval.search.memory import InMemoryRow, InMemorySearch
from rag_eval.search.milvus import ChunkRow, IndexSpec, MilvusSearch, MilvusStore
from tests.milvus_target import target

DIM = 8
_rng = random.Random(20240611)


def _vec() -> tuple[float, ...]:
    return tuple(round(_rng.gauss(0.0, 1.0), 4) for _ in range(DIM))


# (vector_id, doc_id, chunk_index, category, title, source, char_start, char_end)
_LAYOUT = [
    *[(i, "kb-a", i, "db", "Replication", "kb/a.md", 100 * i, 100 * i + 90) for i in range(4)],
    *[(10 + i, "kb-b", i, "net", "Timeouts", "kb/b.md", 80 * i, 80 * i + 70) for i in range(3)],
    *[(20 + i, "kb-c", i, "db", "Locks", "kb/c.md", 50 * i, 50 * i + 40) for i in range(3)],
    (30, None, 0, "net", "Orphan chunk", "kb/orphan.md", 0, 33),  # missing doc_id
    (31, "kb-d", None, "security", "Certificates", "", None, None),  # missing chunk_index and span
]
ROWS = [
    ChunkRow(vector_id=vid, doc_id=doc, chunk_index=idx, content=f"chunk {vid} of {doc}", title=title,
             source=source, category=cat, start=start, end=end, vector=_vec())
    for vid, doc, idx, cat, title, source, start, end in _LAYOUT
]
QUERIES = {f"q{i}": _vec() for i in range(6)} | {"exact-21": ROWS[8].vector}


def _memory_rows(rows: Sequence[ChunkRow]) -> list[InMemoryRow]:
    return [
        InMemoryRow(vector_id=str(r.vector_id), content=r.content, vector=tuple(r.vector), doc_id=r.doc_id,
                    chunk_index=r.chunk_index, source=r.source or None, title=r.title or None,
                    category=r.category or None, metadata={"char_start": r.start, "char_end": r.end})
        for r in rows
    ]


@dataclass
class Backend:
    kind: str
    port: BatchKnowledgeSearchPort
    make: Callable[[Callable[[str], Sequence[float]]], KnowledgeSearchPort]
    honours_grouping: bool


def _milvus_backend(kind: str, uri: str, name: str) -> Backend:
    with MilvusStore(target(uri, name)) as store:
        store.create(dim=DIM, index=IndexSpec.flat(), manifest={"fixture": "contract"})
        store.insert(ROWS, batch_size=5)
        store.finalize()
        version = store.backend().server_version

    def make(vector_for: Callable[[str], Sequence[float]]) -> MilvusSearch:
        return MilvusSearch(target(uri, name, index=IndexSpec.flat()), lambda texts: [vector_for(t) for t in texts])

    port = make(QUERIES.__getitem__)
    honours = port.features().grouping
    if kind == "server" and version.startswith("v2.3"):
        assert not honours, "Milvus 2.3 ignores group_by_field: the probe must say so"
    return Backend(kind, port, make, honours)


@pytest.fixture(scope="module")
def reference() -> InMemorySearch:
    return InMemorySearch.from_rows(_memory_rows(ROWS), encoder=QUERIES.__getitem__)


@pytest.fixture(
    scope="module",
    params=[
        "memory",
        pytest.param("lite", marks=pytest.mark.milvus_lite),
        pytest.param("server", marks=pytest.mark.milvus_server),
    ],
)
def backend(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Backend]:
    if request.param == "memory":
        def make(vector_for: Callable[[str], Sequence[float]]) -> InMemorySearch:
            return InMemorySearch.from_rows(_memory_rows(ROWS), encoder=vector_for)

        yield Backend("memory", make(QUERIES.__getitem__), make, honours_grouping=True)
        return
    name = f"contract_{random.Random().getrandbits(32):08x}"
    if request.param == "lite":
        uri = str(tmp_path_factory.mktemp("contract") / "milvus.db")
    else:
        uri = str(request.getfixturevalue("server_uri"))
    built = _milvus_backend(request.param, uri, name)
    try:
        yield built
    finally:
        built.port.close()
        if request.param == "server":
            with MilvusStore(target(uri, name)) as store:
                store.drop()


def _ids(hits: Sequence[KnowledgeSearchHit]) -> list[str]:
    return [h.id for h in hits]


def _same_hits(got: Sequence[KnowledgeSearchHit], want: Sequence[KnowledgeSearchHit]) -> None:
    assert _ids(got) == _ids(want)
    for g, w in zip(got, want, strict=True):
        assert g.score == pytest.approx(w.score, abs=1e-5)
        assert (g.doc_id, g.chunk_index, g.vector_id, g.category, g.title, g.source, g.content) == (
            w.doc_id, w.chunk_index, w.vector_id, w.category, w.title, w.source, w.content)
        assert dict(g.metadata) == dict(w.metadata)
        assert g.scores["dense"] == pytest.approx(g.score)


def R(query: str, top_k: int = 5, **kw: object) -> KnowledgeSearchRequest:
    return KnowledgeSearchRequest(query=query, top_k=top_k, **kw)  # type: ignore[arg-type]


def test_adapter_is_a_batch_port(backend: Backend) -> None:
    assert isinstance(backend.port, KnowledgeSearchPort)
    assert isinstance(backend.port, BatchKnowledgeSearchPort)


@pytest.mark.parametrize("top_k", [1, 3, 7, 50])
def test_top_k_is_honoured(backend: Backend, top_k: int) -> None:
    hits = backend.port.search(R("q1", top_k))
    assert len(hits) == min(top_k, len(ROWS))


@pytest.mark.parametrize("query", sorted(QUERIES))
def test_hits_equal_the_reference_best_first(backend: Backend, reference: InMemorySearch, query: str) -> None:
    hits = backend.port.search(R(query, top_k=len(ROWS)))
    scores = [h.score for h in hits]
    assert scores == sorted(scores, reverse=True)
    _same_hits(hits, reference.search(R(query, top_k=len(ROWS))))


def test_exact_vector_is_the_first_hit(backend: Backend) -> None:
    first = backend.port.search(R("exact-21", top_k=1))[0]
    assert (first.id, first.vector_id, first.doc_id, first.chunk_index) == ("21", "21", "kb-c", 1)
    assert first.score == pytest.approx(1.0, abs=1e-5)
    assert dict(first.metadata) == {"char_start": 50, "char_end": 90}


def test_missing_identity_fields_come_back_as_none(backend: Backend) -> None:
    hits = {h.id: h for h in backend.port.search(R("q2", top_k=len(ROWS)))}
    orphan, loose = hits["30"], hits["31"]
    assert orphan.doc_id is None and orphan.chunk_index == 0
    assert (loose.doc_id, loose.chunk_index, loose.source) == ("kb-d", None, None)
    assert dict(loose.metadata) == {"char_start": None, "char_end": None}


@pytest.mark.parametrize("category", ["db", "net", "security", "none-such"])
def test_category_filter(backend: Backend, reference: InMemorySearch, category: str) -> None:
    hits = backend.port.search(R("q3", top_k=len(ROWS), category_filter=category))
    assert {h.category for h in hits} <= {category}
    assert {h.id for h in hits} == {str(r.vector_id) for r in ROWS if r.category == category}
    _same_hits(hits, reference.search(R("q3", top_k=len(ROWS), category_filter=category)))


def test_filter_applies_before_top_k(backend: Backend) -> None:
    hits = backend.port.search(R("q4", top_k=2, category_filter="security"))
    assert _ids(hits) == ["31"]


def test_batch_equals_single(backend: Backend) -> None:
    requests = [
        R("q0", 3), R("q1", 3), R("q2", 5, category_filter="db"), R("q3", 3), R("q4", 1),
        R("q5", 5, category_filter="db"), R("exact-21", 2),
    ]
    batched = backend.port.search_batch(requests)
    assert len(batched) == len(requests)
    for request, hits in zip(requests, batched, strict=True):
        _same_hits(hits, backend.port.search(request))


@pytest.mark.parametrize("group_size", [1, 2])
def test_grouped_mode_is_honoured_or_refused(backend: Backend, reference: InMemorySearch, group_size: int) -> None:
    request = R("q5", top_k=4, mode=SearchMode.GROUPED, group_size=group_size)
    if not backend.honours_grouping:
        with pytest.raises(UnsupportedFeatureError, match="group"):
            backend.port.search(request)
        return
    hits = backend.port.search(request)
    _same_hits(hits, reference.search(request))
    per_doc: dict[str | None, int] = {}
    for h in hits:
        per_doc[h.doc_id] = per_doc.get(h.doc_id, 0) + 1
    assert max(per_doc.values()) <= group_size


def test_hybrid_is_refused_without_full_text(backend: Backend) -> None:
    with pytest.raises(UnsupportedFeatureError) as info:
        backend.port.search(R("q1", mode=SearchMode.HYBRID))
    assert info.value.feature == "hybrid"
    assert info.value.exit_code == 2


def test_dimension_mismatch(backend: Backend) -> None:
    port = backend.make(lambda text: (1.0, 0.0, 0.0))
    try:
        with pytest.raises(DimensionMismatchError, match="dimension"):
            port.search(R("q1"))
    finally:
        port.close()
