"""A replay's searches read each row's fields once (ids and scores only from the batched searches, the rows by
id once each, a page ordered by its runs of equal scores) and ask a server for the reach at once: the rows of
the shipped experiments are those of the former search (every field on every page, each hit read, every page
sorted whole, a first page of k + 2), latency columns aside, on Milvus Lite and on a server."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from rag_eval.core.types import KnowledgeSearchHit, SearchMode, hit_order
from rag_eval.experiment import Overrides, load_experiment, with_overrides
from rag_eval.experiment.latency import LatencyMode, TimingPlan
from rag_eval.rundir.rows import LATENCY_COLUMNS
from rag_eval.search.milvus import search
from rag_eval.search.milvus.hits import to_hit
from tests.conftest import SHIPPED
from tests.integration.replay_only import replay_only

FIRST_WIDTHS = search.first_widths


def _former_widths(top_k: int, *, server: bool = False) -> tuple[int, int]:
    """The fetch before: a first page of k + 2 on every backend."""
    return FIRST_WIDTHS(top_k)


def _former_pages(
    self: search.MilvusSearch, how: Any, vectors: list[list[float]], queries: list[str], limit: int, reach: int
) -> Sequence[list[KnowledgeSearchHit]]:
    """The search before: every field on every page, every hit read, every page sorted whole."""
    raws = self._raw_search(how, vectors, queries, limit, reach)
    negate = how.mode is not SearchMode.HYBRID and (self._coll.metric or self._index.metric).upper() == "L2"
    channel = "rrf" if how.mode is SearchMode.HYBRID else "dense"
    pages = [sorted([to_hit(h, negate, channel) for h in raw], key=hit_order) for raw in raws]
    for page in pages:
        self._checked(page, how.category)
    return pages


def _rows(table: pd.DataFrame) -> pd.DataFrame:
    return table.drop(columns=list(LATENCY_COLUMNS)).sort_values(["config", "query_id"]).reset_index(drop=True)


@pytest.mark.parametrize("experiment", ["default.toml", "traffic.toml"])
def test_the_rows_of_a_replay_equal_those_of_the_former_search(
    experiment: str, milvus_uri: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    exp = with_overrides(load_experiment(SHIPPED / "experiments" / experiment), Overrides(milvus_uri=milvus_uri))
    exp = replace(exp, cache_dir=tmp_path / "cache", timing=TimingPlan(mode=LatencyMode.OFF), gates=None)
    with monkeypatch.context() as m:
        m.setattr(search, "first_widths", _former_widths)
        m.setattr(search.MilvusSearch, "_pages", _former_pages)
        former = replay_only(exp, tmp_path / "former")
    queried: list[int] = []
    query = search.MilvusSearch._read_rows

    def counted(self: search.MilvusSearch, reader: Any, pages: Any) -> bool:
        queried.append(len(reader.missing(pages) or ()))
        return query(self, reader, pages)

    with monkeypatch.context() as m:
        m.setattr(search.MilvusSearch, "_read_rows", counted)
        now = replay_only(exp, tmp_path / "now")
    assert len(_rows(now.rows)) == len(_rows(former.rows)) > 0
    pd.testing.assert_frame_equal(_rows(now.rows), _rows(former.rows))
    assert queried and sum(queried) > 0  # the batched searches brought ids only, and the rows were read by id
    assert queried[-1] == 0 or len(queried) == 1  # then kept: the last batches needed no row read again
    assert _measures(now.summary) == _measures(former.summary)


def _measures(summary: dict[str, Any]) -> Any:
    """Each config's measures (its log's queries' too), its latency figures aside."""

    def without_latency(value: Any) -> Any:
        if isinstance(value, dict):
            return {k: without_latency(v) for k, v in value.items() if "latency" not in k}
        return value

    return without_latency(summary["configs"])
