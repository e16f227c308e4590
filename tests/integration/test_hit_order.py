"""Every adapter gives hits in one total order (score, then vector id), ties across the cut-off included,
so a narrower width is a prefix of a wider one; and a config's rows do not depend on which wider configs
share its search (exact index)."""

from __future__ import annotations

import random
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pandas as pd
import pyarrow.parquet as pq
import pytest

from rag_eval import jobs
from rag_eval.core.ports import KnowledgeSearchPort
from rag_eval.core.types import KnowledgeSearchRequest
from rag_eval.experiment import ConfigSpec, Overrides, load_experiment, with_overrides
from rag_eval.rundir.rows import LATENCY_COLUMNS
from rag_eval.search.memory import InMemoryRow, InMemorySearch
from rag_eval.search.milvus import ChunkRow, IndexSpec, MilvusSearch, MilvusStore
from tests.conftest import SHIPPED
from tests.milvus_target import target

DIM = 4
TIED = (0.5, 0.5, 0.5, 0.5)
# eight rows share one vector (they tie at every query); their ids sort differently as text and as numbers
TIED_IDS = [1000, 8, 101, 2, 11, 9, 100, 10]
OTHER = {3: (0.5, 0.5, 0.5, -0.5), 4: (0.9, 0.1, 0.0, 0.1), 5: (-0.5, 0.5, 0.5, 0.5), 6: (0.0, 0.0, 1.0, 0.0)}


def _rows() -> list[ChunkRow]:
    vectors = {**{i: TIED for i in TIED_IDS}, **OTHER}
    ids = list(vectors)
    random.Random(7).shuffle(ids)  # insert order is not the answer
    return [
        ChunkRow(
            vector_id=i,
            doc_id=f"d{i % 3}",
            chunk_index=i,
            content=f"row {i}",
            title="t",
            source="s",
            category="c",
            start=0,
            end=5,
            vector=list(vectors[i]),
        )
        for i in ids
    ]


@pytest.fixture(
    scope="module",
    params=[
        "memory",
        pytest.param("lite", marks=pytest.mark.milvus_lite),
        pytest.param("server", marks=pytest.mark.milvus_server),
    ],
)
def port(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[KnowledgeSearchPort]:
    encoder = {"tied": TIED, "near": (0.6, 0.4, 0.5, 0.45)}
    if request.param == "memory":
        rows = [
            InMemoryRow(
                vector_id=str(r.vector_id),
                content=r.content,
                vector=tuple(r.vector),
                doc_id=r.doc_id,
                chunk_index=r.chunk_index,
            )
            for r in _rows()
        ]
        yield InMemorySearch.from_rows(rows, encoder=encoder.__getitem__)
        return
    uri = (
        str(tmp_path_factory.mktemp("order") / "milvus.db")
        if request.param == "lite"
        else str(request.getfixturevalue("server_uri"))
    )
    name = f"order_{random.Random().getrandbits(32):08x}"
    with MilvusStore(target(uri, name)) as store:
        store.create(dim=DIM, index=IndexSpec.flat(), manifest={"fixture": "order"})
        rows = _rows()
        store.insert(rows[:6], batch_size=3)  # more than one insert: more than one segment on a server
        store.insert(rows[6:], batch_size=3)
        store.finalize()
    search = MilvusSearch(target(uri, name, index=IndexSpec.flat()), lambda texts: [encoder[t] for t in texts])
    try:
        yield search
    finally:
        search.close()
        if request.param == "server":
            with MilvusStore(target(uri, name)) as store:
                store.drop()


def _ids(port: KnowledgeSearchPort, query: str, k: int) -> list[str]:
    return [h.vector_id or h.id for h in port.search(KnowledgeSearchRequest(query=query, top_k=k))]


@pytest.mark.parametrize("query", ["tied", "near"])
def test_narrower_widths_are_prefixes_of_the_total_order(port: KnowledgeSearchPort, query: str) -> None:
    full = _ids(port, query, 12)
    assert len(full) == 12
    tied_in_order = [str(i) for i in sorted(TIED_IDS)]
    if query == "tied":
        assert full[:8] == tied_in_order  # equal scores: ascending numeric id, not insert or text order
    else:
        assert [x for x in full if int(x) in TIED_IDS] == tied_in_order
    for k in range(1, 12):
        assert _ids(port, query, k) == full[:k], k


def test_a_config_gives_the_same_rows_alone_and_beside_wider_configs(tmp_path: Path) -> None:
    """Re-ingested copies have identical vectors, so ties at a narrow config's cut-off are common."""
    base = with_overrides(
        load_experiment(SHIPPED / "experiments" / "retrieve-k.toml"), Overrides(milvus_uri=str(tmp_path / "milvus.db")))
    base = replace(base, index=IndexSpec.flat(), cache_dir=tmp_path / "cache", query_limit=120)
    narrow = ConfigSpec(name="k3", config=base.configs[0].config.with_(retrieve_k=3, return_n=3))
    wide = [ConfigSpec(name=f"k{k}", config=base.configs[0].config.with_(retrieve_k=k)) for k in (20, 50)]
    alone = jobs.run_experiment(replace(base, configs=(narrow,), baseline="k3"), tmp_path / "alone")
    shared = jobs.run_experiment(replace(base, configs=(narrow, *wide), baseline="k3"), tmp_path / "shared")

    def rows(out: Path) -> pd.DataFrame:
        table = pq.read_table(out / "per_query.parquet").to_pandas()
        return table[table["config"] == "k3"].drop(columns=list(LATENCY_COLUMNS)).reset_index(drop=True)

    a, s = rows(alone.out), rows(shared.out)
    scores = [list(x) for x in a["hit_scores"]]
    assert any(len(x) > len(set(x)) for x in scores), "the data should hold ties among the hits"
    pd.testing.assert_frame_equal(a, s)
