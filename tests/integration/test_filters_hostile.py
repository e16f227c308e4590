"""Hostile category filters against both real Milvus kinds: the result set never widens.

Each value returns exactly the rows whose category is that value (stored verbatim for some of them, so
that quoting is shown to round-trip and not just to fail closed), and nothing else.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest

from rag_eval.core.errors import FilterError
from rag_eval.core.types import KnowledgeSearchRequest
from rag_eval.search.milvus import ChunkRow, IndexSpec, MilvusSearch, MilvusStore, milvus_string_literal
from tests.milvus_target import target

HOSTILE = [
    'x" or id > 0 or "',
    'x" or vector_id >= 0 or category != "',
    "x' or 1==1 or '",
    '"',
    "'",
    "\\",
    "\\\\",
    'q\\"',
    "a\\",
    "\\'",
    "a\nb",
    "a\r\nb",
    "a\tb",
    "a\x00b",
    "\\n",
    "\\u0041",
    "{category}",
    "%",
    "db%",
    "é✓😀 ǅ\u2028\ufeff",
    "",
    " db",
    "DB",
    "z" * 1000,
    ") or (1 == 1",
    "db\" ) or ( category like \"%",
]
STORED = ["db", "net", *HOSTILE[:6], "a\nb", "a\x00b", "\\u0041", "{category}", "é✓😀 ǅ\u2028\ufeff", "z" * 1000]
DIM = 4


@pytest.fixture(
    scope="module",
    params=[
        pytest.param("lite", marks=pytest.mark.milvus_lite),
        pytest.param("server", marks=pytest.mark.milvus_server),
    ],
)
def port(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[MilvusSearch]:
    if request.param == "lite":
        uri = str(tmp_path_factory.mktemp("hostile") / "milvus.db")
    else:
        uri = str(request.getfixturevalue("server_uri"))
    name = f"hostile_{uuid.uuid4().hex[:12]}"
    rows = [ChunkRow(vector_id=i, doc_id=f"d{i}", chunk_index=0, content=f"row {i}", title="", source="",
                     category=cat, start=0, end=1, vector=[1.0, 0.01 * i, 0.5, 0.25]) for i, cat in enumerate(STORED)]
    with MilvusStore(target(uri, name)) as store:
        store.create(dim=DIM, index=IndexSpec.flat(), manifest={})
        store.insert(rows)
        store.finalize()

    def encoder(texts: list[str]) -> list[list[float]]:
        return [[1.0, 0.0, 0.5, 0.25] for _ in texts]

    with MilvusSearch(target(uri, name, index=IndexSpec.flat()), encoder) as searching:
        yield searching
    if request.param == "server":
        with MilvusStore(target(uri, name)) as store:
            store.drop()


@pytest.mark.parametrize("value", HOSTILE, ids=[repr(v)[:24] for v in HOSTILE])
def test_filter_never_widens(port: MilvusSearch, value: str) -> None:
    hits = port.search(KnowledgeSearchRequest(query="q", top_k=len(STORED) + 5, category_filter=value))
    expected = {str(i) for i, cat in enumerate(STORED) if cat == value and cat != ""}
    assert {h.id for h in hits} == expected
    assert all(h.category == value for h in hits)


def test_hostile_values_in_one_batch(port: MilvusSearch) -> None:
    requests = [KnowledgeSearchRequest(query="q", top_k=50, category_filter=v) for v in HOSTILE]
    for value, hits in zip(HOSTILE, port.search_batch(requests), strict=True):
        assert all(h.category == value for h in hits)


def test_text_that_is_not_utf8_is_refused(port: MilvusSearch) -> None:
    with pytest.raises(FilterError, match="UTF-8"):
        port.search(KnowledgeSearchRequest(query="q", top_k=5, category_filter="x\ud800"))


def test_literal_quoting() -> None:
    assert milvus_string_literal('a"b') == '"a\\"b"'
    assert milvus_string_literal("a\\b") == '"a\\\\b"'
    assert milvus_string_literal("a\nb") == '"a\\nb"'
    assert milvus_string_literal("it's") == '"it\'s"'
