"""The replay plan and its strategies: the run's execution settings pick one (serial without a cluster,
Dask with one, its cluster reached first); the serial strategy gives a plan's batches the rows the
replayer gives them, skips the batches a resumed run has, and says where the replay ran."""

from __future__ import annotations

import math
from pathlib import Path

import pyarrow as pa
import pytest

from rag_eval.cluster.settings import Cluster
from rag_eval.core.config import RagConfig
from rag_eval.core.errors import ClusterError
from rag_eval.datasets.chunking import Chunk
from rag_eval.embed.embedders import VectorResolver
from rag_eval.experiment import ConfigSpec
from rag_eval.experiment.latency import LatencyMode, TimingPlan
from rag_eval.ingest.collection import IngestRow
from rag_eval.replay.batches import Replayer
from rag_eval.replay.prepare import Progress
from rag_eval.replay.strategies import SERIAL, DaskReplay, ReplayPlan, SerialReplay, strategy_for
from rag_eval.rundir.directory import RunStore
from rag_eval.rundir.rows import LATENCY_COLUMNS, Truth
from rag_eval.search.memory import InMemoryRow, InMemorySearch
from rag_eval.search.milvus import IndexSpec, SearchTarget
from tests.unit.frames import read_parts

LATENCY = list(LATENCY_COLUMNS)
QUERIES = tuple((f"q{i}", f"why is replica {i} behind") for i in range(5))
CONFIGS = (
    ConfigSpec(name="wide", config=RagConfig.from_mapping({"rag.retrieve-k": 4, "rag.return-n": 3})),
    ConfigSpec(name="narrow", config=RagConfig.from_mapping({"rag.retrieve-k": 2, "rag.return-n": 2})),
)


class Recorded(Progress):
    """Progress that keeps what it was told."""

    def __init__(self) -> None:
        super().__init__(quiet=True)
        self.phases: dict[str, int] = {}
        self.ticks: dict[str, int] = {}
        self.lines: list[str] = []

    def phase(self, label: str, total: int) -> None:
        self.phases[label] = total

    def tick(self, label: str, n: int) -> None:
        self.ticks[label] = self.ticks.get(label, 0) + n

    def log(self, message: str) -> None:
        self.lines.append(message)


def corpus() -> tuple[list[IngestRow], InMemorySearch]:
    rows, mem = [], []
    for vid, sim in enumerate([0.99, 0.9, 0.7, 0.5, 0.2], start=1):
        chunk = Chunk(doc_id=f"d{vid % 2}", chunk_index=vid, start=0, end=9, content=f"chunk {vid}", source="kb/d.md")
        rows.append(IngestRow(vector_id=vid, chunk=chunk, doc_id=chunk.doc_id, chunk_index=vid, kind="clean"))
        mem.append(InMemoryRow(vector_id=str(vid), content=chunk.content, vector=(sim, math.sqrt(1 - sim * sim)),
                               doc_id=chunk.doc_id, chunk_index=vid, source=chunk.source))  # fmt: skip
    return rows, InMemorySearch.from_rows(mem, encoder=lambda text: (1.0, 0.0))


def plan_of(rows: list[IngestRow], *, done: frozenset[int] = frozenset()) -> ReplayPlan:
    relevance = {q: {"d1#chunk-1": 1, "d0#chunk-4": 1} for q, _ in QUERIES}
    return ReplayPlan(
        queries=QUERIES, texts=tuple(t for _, t in QUERIES), resolver=VectorResolver("m"), configs=CONFIGS,
        truth=Truth.of_rows(rows, relevance=relevance, doc_relevance={q: {"d1": 1, "d0": 1} for q in relevance}),
        target=SearchTarget(uri="kb.db", collection="kb", index=IndexSpec.flat()), batch_size=2, warmup=1,
        timing=TimingPlan(mode=LatencyMode.ALL), done=done,
    )  # fmt: skip


def store_at(path: Path) -> RunStore:
    store = RunStore(path)
    store.begin({"experiment": "t"}, resume=False)
    return store


def without_latency(store: RunStore) -> pa.Table:
    return read_parts(store).drop_columns(LATENCY)


def test_no_cluster_picks_the_serial_strategy_which_gives_the_replayers_rows(tmp_path: Path) -> None:
    rows, port = corpus()
    plan, progress = plan_of(rows), Recorded()
    with strategy_for(None) as strategy:
        assert isinstance(strategy, SerialReplay)
        outcome = strategy.run(plan, port, store := store_at(tmp_path / "plan"), progress)
    direct = store_at(tmp_path / "direct")
    Replayer(port, list(CONFIGS), plan.truth, warmup=1, timing=plan.timing).run(list(QUERIES), direct, batch_size=2)
    assert without_latency(store).equals(without_latency(direct)) and store.finished_batches() == {0, 1, 2}
    assert outcome.execution == SERIAL == {"replay": "serial, in the run's own process",
                                           "search_timing": "in the same pass, batch by batch"}  # fmt: skip
    assert outcome.timing_seconds > 0  # every query timed (warm-up included)
    # one search per query and signature (wide and narrow share one), a timing per query and retrieve-k
    assert progress.phases == {"retrieve": 5, "timing": 10, "post-process": 10}
    assert progress.ticks["retrieve"] == 5 and progress.ticks["post-process"] == 10 and progress.lines == []


def test_the_batches_a_resumed_run_has_are_not_replayed_again(tmp_path: Path) -> None:
    rows, port = corpus()
    plan, progress = plan_of(rows, done=frozenset({1})), Recorded()
    assert plan.batches == [range(0, 2), range(2, 4), range(4, 5)] and plan.todo == [0, 2]
    outcome = SerialReplay().run(plan, port, store := store_at(tmp_path / "run"), progress)
    assert store.finished_batches() == {0, 2}
    assert sorted(set(read_parts(store).column("query_index").to_pylist())) == [0, 1, 4]
    assert progress.phases == {"retrieve": 3, "timing": 6, "post-process": 6}
    assert progress.ticks["skipped"] == 2
    assert progress.lines == ["resuming: 1 of 3 query batches already finished"]
    assert outcome.execution == SERIAL


def test_a_cluster_is_reached_when_its_strategy_is_picked() -> None:
    entered = False
    unreachable = Cluster(scheduler="tcp://127.0.0.1:9", connect_timeout=1.0)
    refused = pytest.raises(ClusterError, match=r"cannot reach the Dask scheduler at tcp://127\.0\.0\.1:9")
    with refused as caught, strategy_for(unreachable):
        entered = True
    assert caught.value.exit_code == 3 and not entered


def test_the_dask_strategy_says_where_the_batches_ran_and_where_latency_was_timed() -> None:
    local = DaskReplay(cluster=Cluster(workers=2), client=None).execution()
    assert local["replay"] == "query batches as Dask tasks on 2 local worker processes (Dask LocalCluster)"
    assert local["search_timing"].startswith("in the run's own process, serially, before any worker searches")
    assert local["postprocess_timing"].startswith("in the workers")
    remote = DaskReplay(cluster=Cluster(scheduler="tcp://h:8786"), client=None).execution()
    assert remote["replay"] == "query batches as Dask tasks on the workers of the Dask scheduler at tcp://h:8786"
