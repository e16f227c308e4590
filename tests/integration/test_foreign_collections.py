"""Collections built elsewhere, by the real integration libraries where they install beside rag_eval
(langchain-milvus in its three metadata layouts, milvus-haystack) and by hand (a JSON metadata field with no
doc id on some rows; LlamaIndex's layout, whose library needs pymilvus < 3 and cannot be installed here):
described, suggested a field map, read by document, searched, and left exactly as they were."""

from __future__ import annotations

import hashlib
import importlib.util
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from rag_eval.core.types import KnowledgeSearchRequest
from rag_eval.search.milvus import MilvusSearch, SearchTarget, is_server_uri
from rag_eval.search.milvus.existing import ForeignCollection
from rag_eval.search.milvus.fields import parse_field_map
from rag_eval.search.milvus.suggest import suggest

DIM = 8
TEXTS = [
    ("lag", "Check the SQL thread of the replica."),
    ("lag", "Raise the relay log space limit."),
    ("logs", "Rotate the binary logs every week."),
    (None, "Purge binary logs older than the oldest replica position."),  # no doc id
]


def vector(text: str) -> list[float]:
    digest = hashlib.sha256(text.encode()).digest()
    raw = [b / 255.0 + 0.01 for b in digest[:DIM]]
    norm = sum(x * x for x in raw) ** 0.5
    return [x / norm for x in raw]


def query_vector(_: str) -> list[float]:
    return vector(TEXTS[1][1])  # the second row's own vector: it is the nearest, whatever the metric


class Embeddings:
    """LangChain / Haystack embeddings of the texts above, no model."""

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        return [vector(t) for t in texts]

    def embed_query(self, text: str) -> list[float]:
        return query_vector(text)


def langchain(uri: str, name: str, layout: str) -> None:
    from langchain_core.documents import Document
    from langchain_core.embeddings import Embeddings as Base
    from langchain_milvus import Milvus

    docs = [Document(page_content=t, metadata={"doc_id": d or "", "source": f"kb/{d}.md"}) for d, t in TEXTS]
    if layout == "dynamic":  # no key at all where there is no doc id
        docs = [Document(page_content=t, metadata={"doc_id": d, "source": f"kb/{d}.md"} if d else {"source": "kb/x.md"})
                for d, t in TEXTS]  # fmt: skip
    extra: dict[str, Any] = {"scalar": {}, "json": {"metadata_field": "metadata"},
                             "dynamic": {"enable_dynamic_field": True}}[layout]  # fmt: skip
    store = Milvus.from_documents(docs, type("E", (Embeddings, Base), {})(), collection_name=name,
                                  connection_args={"uri": uri}, consistency_level="Strong", **extra)  # fmt: skip
    store.client.flush(name)
    store.client.close()


def haystack(uri: str, name: str) -> None:
    from haystack import Document
    from milvus_haystack import MilvusDocumentStore

    store = MilvusDocumentStore(connection_args={"uri": uri}, collection_name=name, consistency_level="Strong")
    store.write_documents([
        Document(content=t, meta={"doc_id": d, "source": f"kb/{d}.md"} if d else {"source": "kb/x.md"},
                 embedding=vector(t))
        for d, t in TEXTS
    ])  # fmt: skip
    store.client.flush(name)
    store.client.close()


def by_hand(uri: str, name: str, layout: str) -> None:
    """A JSON metadata field with no doc id on some rows (``json``), or LlamaIndex's layout (``llama``)."""
    from pymilvus import DataType, MilvusClient

    client = MilvusClient(uri)
    llama = layout == "llama"
    schema = MilvusClient.create_schema(auto_id=False, enable_dynamic_field=llama)
    schema.add_field("id", DataType.VARCHAR, is_primary=True, max_length=64)
    if llama:
        schema.add_field("doc_id", DataType.VARCHAR, max_length=256)
    schema.add_field("text", DataType.VARCHAR, max_length=4096)
    schema.add_field("embedding", DataType.FLOAT_VECTOR, dim=DIM)
    if not llama:
        schema.add_field("metadata", DataType.JSON)
    index = client.prepare_index_params()
    index.add_index("embedding", index_type="FLAT", metric_type="IP")
    client.create_collection(name, schema=schema, index_params=index, consistency_level="Strong")
    rows = []
    for n, (d, t) in enumerate(TEXTS):
        row: dict[str, Any] = {"id": f"node-{n}", "text": t, "embedding": vector(t)}
        if llama:
            row |= {"doc_id": d or "", "_node_content": f'{{"start_char_idx": {n * 10}, "end_char_idx": {n * 10 + 5}}}',
                    "source": f"kb/{d}.md"}  # fmt: skip
        else:
            row["metadata"] = {"doc_id": d, "source": f"kb/{d}.md"} if d else {"source": "kb/x.md"}
        rows.append(row)
    client.insert(name, rows)
    client.flush(name)
    client.close()


BUILDERS: dict[str, tuple[Callable[[str, str], None], str | None]] = {
    "langchain-scalar": (lambda u, n: langchain(u, n, "scalar"), "langchain_milvus"),
    "langchain-json": (lambda u, n: langchain(u, n, "json"), "langchain_milvus"),
    "langchain-dynamic": (lambda u, n: langchain(u, n, "dynamic"), "langchain_milvus"),
    "haystack": (haystack, "milvus_haystack"),
    "json-by-hand": (lambda u, n: by_hand(u, n, "json"), None),
    "llama-layout": (lambda u, n: by_hand(u, n, "llama"), None),
}
EXPECTED = {  # the suggested map, and which ingest it recognises
    "langchain-scalar": ({"id": "pk", "vector": "vector", "text": "text", "doc_id": "doc_id", "source": "source"},
                         "langchain-milvus"),
    "langchain-json": ({"id": "pk", "vector": "vector", "text": "text", "doc_id": "metadata.doc_id",
                        "source": "metadata.source"}, "langchain-milvus"),
    "langchain-dynamic": ({"id": "pk", "vector": "vector", "text": "text", "doc_id": "doc_id", "source": "source"},
                          "langchain-milvus"),
    "haystack": ({"id": "id", "vector": "vector", "text": "text", "doc_id": "doc_id", "source": "source"},
                 "milvus-haystack"),
    "json-by-hand": ({"id": "id", "vector": "embedding", "text": "text", "doc_id": "metadata.doc_id",
                      "source": "metadata.source"}, "an ingest of its own"),
    "llama-layout": ({"id": "id", "vector": "embedding", "text": "text", "doc_id": "doc_id", "source": "source",
                      "start": "_node_content.start_char_idx", "end": "_node_content.end_char_idx"},
                     "llama-index-vector-stores-milvus"),
}  # fmt: skip


# collections other tests create and drop on the shared server meanwhile (a run never names one so)
OTHER_TESTS = ("t_", "bench_", "hostile_")


def _state(uri: str, name: str) -> tuple[Any, ...]:
    """What a read must not change: every collection there, this one's schema, rows, indexes, partitions."""
    from pymilvus import MilvusClient

    client = MilvusClient(uri)
    try:
        desc = client.describe_collection(name)
        fields = [(f["name"], str(f["type"]), dict(f.get("params") or {})) for f in desc["fields"]]
        indexes = [client.describe_index(name, i) for i in client.list_indexes(name)]
        indexes = [(i["index_type"], i["metric_type"], i["field_name"]) for i in indexes]
        stats = client.get_collection_stats(name)["row_count"]
        names = sorted(c for c in client.list_collections() if c == name or not c.startswith(OTHER_TESTS))
        return (names, fields, stats, indexes, client.list_partitions(name))
    finally:
        client.close()


@pytest.fixture(params=sorted(BUILDERS))
def foreign(request: pytest.FixtureRequest, milvus_uri: str, collection_name: str,
            drop_after: Callable[[str, str], None]) -> Iterator[tuple[str, str, str]]:  # fmt: skip
    kind = request.param
    build, needs = BUILDERS[kind]
    if needs is not None and importlib.util.find_spec(needs) is None:
        pytest.skip(f"{needs} is not installed")
    drop_after(milvus_uri, collection_name)
    build(milvus_uri, collection_name)
    yield kind, milvus_uri, collection_name


def test_described_suggested_read_searched_and_left_as_it_was(foreign: tuple[str, str, str]) -> None:
    kind, uri, name = foreign
    before = _state(uri, name)
    target = SearchTarget(uri=uri, collection=name, index=None)
    with ForeignCollection(target, load=True) as coll:
        suggestion = suggest(coll.info, coll.sample(10))
        fields_table, looks_like = EXPECTED[kind]
        assert (suggestion.fields, suggestion.looks_like) == (fields_table, looks_like)
        fields = parse_field_map(suggestion.fields, schema=coll.info.schema(), dynamic=coll.info.dynamic)
        rows = list(coll.rows(fields).of_documents(["lag", "gone"]))
        assert coll.info.rows == len(TEXTS)
    got = sorted((r.doc_id or "", r.text) for r in rows)
    assert got == sorted((d or "", t) for d, t in TEXTS if d in ("lag", None))
    if kind == "llama-layout":
        assert sorted((r.start, r.end) for r in rows if r.doc_id == "lag") == [(0, 5), (10, 15)]
    with MilvusSearch(target.reading(fields), lambda qs: [query_vector(q) for q in qs]) as port:
        hits = port.search(KnowledgeSearchRequest(query="relay log", top_k=4))
    assert hits[0].content == TEXTS[1][1]
    assert (hits[0].doc_id, hits[0].source, hits[0].chunk_index) == ("lag", "kb/lag.md", None)
    assert [h.score for h in hits] == sorted((h.score for h in hits), reverse=True)  # L2 distances negated
    assert len({h.id for h in hits}) == len(TEXTS)
    assert _state(uri, name) == before


def test_a_collection_that_is_not_loaded_is_refused_unless_loading_is_allowed(
    lite_uri: str, collection_name: str
) -> None:
    from pymilvus import MilvusClient

    from rag_eval.core.errors import CollectionNotLoadedError

    by_hand(lite_uri, collection_name, "json")
    client = MilvusClient(lite_uri)
    client.release_collection(collection_name)
    client.close()
    target = SearchTarget(uri=lite_uri, collection=collection_name, index=None)
    with pytest.raises(CollectionNotLoadedError, match="not loaded"):
        ForeignCollection(target, load=False)
    with ForeignCollection(target, load=True) as coll:
        assert coll.info.load_state == "Loaded"


def test_server_collections_are_not_loaded_by_a_read_that_may_not(
    server_uri: str, collection_name: str, drop_after: Callable[[str, str], None]
) -> None:
    from pymilvus import MilvusClient

    from rag_eval.core.errors import CollectionNotLoadedError

    drop_after(server_uri, collection_name)
    by_hand(server_uri, collection_name, "json")
    client = MilvusClient(server_uri)
    client.release_collection(collection_name)
    target = SearchTarget(uri=server_uri, collection=collection_name, index=None)
    assert is_server_uri(server_uri)
    with pytest.raises(CollectionNotLoadedError, match="not loaded"):
        ForeignCollection(target, load=False)
    assert client.get_load_state(collection_name)["state"].name == "NotLoad"
    client.close()


def test_inspect_lists_describes_and_suggests(lite_uri: str, capsys: pytest.CaptureFixture[str]) -> None:
    """``rag-eval inspect``: the collections at a URI; one collection's schema, index, rows, samples and a
    suggested table that a run accepts as it is; bad arguments exit 2 naming them, nothing created."""
    from rag_eval.cli import main

    if importlib.util.find_spec("langchain_milvus") is None:
        pytest.skip("langchain_milvus is not installed")
    langchain(lite_uri, "kb_json", "json")
    by_hand(lite_uri, "by_hand", "json")
    assert main(["inspect", lite_uri]) == 0
    out = capsys.readouterr().out
    assert "2 collections" in out and "  by_hand" in out and "  kb_json" in out
    assert main(["inspect", lite_uri, "--collection", "kb_json", "--rows", "2"]) == 0
    out = capsys.readouterr().out
    assert "looks like: langchain-milvus" in out and "rows: 4; load state: Loaded" in out
    assert "index AUTOINDEX, metric L2" in out and "sample rows (2):" in out
    assert 'doc_id = "metadata.doc_id"' in out and "load = true" in out
    for argv, named in (
        (["inspect", lite_uri, "--collection", "nope"], "--collection"),
        (["inspect", lite_uri + ".missing"], "URI"),
        (["inspect", "127.0.0.1:19530"], "URI"),
        (["inspect", lite_uri, "--collection", "kb_json", "--rows", "-1"], "--rows"),
    ):
        assert main(argv) == 2
        err = capsys.readouterr().err.strip()
        assert len(err.splitlines()) == 1 and err.endswith(f"@ {named}"), err
    assert not Path(lite_uri + ".missing").exists()


def test_inspect_describes_an_unloaded_server_collection_without_loading_it(
    server_uri: str, collection_name: str, drop_after: Callable[[str, str], None], capsys: pytest.CaptureFixture[str]
) -> None:
    from pymilvus import MilvusClient

    from rag_eval.cli import main

    drop_after(server_uri, collection_name)
    by_hand(server_uri, collection_name, "llama")
    client = MilvusClient(server_uri)
    client.release_collection(collection_name)
    assert main(["inspect", server_uri, "--collection", collection_name]) == 0
    out = capsys.readouterr().out
    assert "load state: NotLoad" in out and "not loaded: sample rows and a suggested table need it loaded" in out
    assert client.get_load_state(collection_name)["state"].name == "NotLoad"
    assert main(["inspect", server_uri, "--collection", collection_name, "--load"]) == 0
    out = capsys.readouterr().out
    assert "looks like: llama-index-vector-stores-milvus" in out and 'start = "_node_content.start_char_idx"' in out
    client.close()
