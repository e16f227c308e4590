"""A DENSE search asks for two hits more than wanted and searches again only where hit k ties with the last:
the rows of a run are those of the former fetch (a page of k + 2 + k/16, widened while the tie runs to its
end), on every config of the shipped default experiment and of ClapNQ (where the shared data set is here),
on Milvus Lite."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from rag_eval.experiment import Experiment, Overrides, load_experiment, with_overrides
from rag_eval.experiment.latency import LatencyMode, TimingPlan
from rag_eval.rundir.rows import LATENCY_COLUMNS
from rag_eval.search.milvus import search
from tests.conftest import ROOT, SHIPPED, shared_datasets_dir
from tests.integration.replay_only import replay_only

pytestmark = pytest.mark.milvus_lite


FIRST_WIDTHS = search.first_widths
NO_TIMING = TimingPlan(mode=LatencyMode.OFF)  # the rows are compared without their latency columns


def _former_widths(top_k: int, *, server: bool = False) -> tuple[int, int]:
    """The fetch before: the first page is the reach itself (k + 2 + k/16), then doubling (as on a server)."""
    _, reach = FIRST_WIDTHS(top_k)
    return reach, reach


def _rows(exp: Experiment, out: Path) -> pd.DataFrame:
    table = replay_only(exp, out).rows
    return table.drop(columns=list(LATENCY_COLUMNS)).sort_values(["config", "query_id"]).reset_index(drop=True)


def _both_fetches(
    exp: Experiment, tmp: Path, monkeypatch: pytest.MonkeyPatch
) -> tuple[pd.DataFrame, pd.DataFrame, Counter[int]]:
    """The run's rows with the former fetch and with this one (the same Lite collection), and the limits
    of this one's search calls, by limit."""
    with monkeypatch.context() as m:
        m.setattr(search, "first_widths", _former_widths)
        former = _rows(exp, tmp / "former")
    limits: Counter[int] = Counter()
    raw_search: Callable[..., Any] = search.MilvusSearch._raw_search

    def counted(self: search.MilvusSearch, mode: Any, vectors: list[Any], *args: Any) -> Any:
        limits[args[1]] += len(vectors)
        return raw_search(self, mode, vectors, *args)

    with monkeypatch.context() as m:
        m.setattr(search.MilvusSearch, "_raw_search", counted)
        now = _rows(exp, tmp / "now")
    return former, now, limits


def test_the_default_experiment_gives_the_rows_of_the_former_fetch(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    default = load_experiment(SHIPPED / "experiments" / "default.toml")
    exp = with_overrides(default, Overrides(milvus_uri=str(tmp_path / "m.db")))
    exp = replace(exp, cache_dir=tmp_path / "cache", timing=NO_TIMING)
    former, now, limits = _both_fetches(exp, tmp_path, monkeypatch)
    assert len(now) == len(former) > 0
    pd.testing.assert_frame_equal(now, former)
    widest = max(c.config.retrieve_k for c in exp.configs)
    assert limits[widest + 2] > 0  # the first pages: two hits more than the widest config's retrieve-k
    scores = [list(x) for x in now["hit_scores"]]
    assert any(len(x) > len(set(x)) for x in scores), "the data should hold ties among the hits"


@pytest.mark.shared_data
@pytest.mark.slow
def test_clapnq_gives_the_rows_of_the_former_fetch(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    base = shared_datasets_dir()
    if base is None or not (base / "clapnq" / "corpus.jsonl").is_file():
        pytest.skip("shared data set 'clapnq' is not here (set RAG_EVAL_SHARED_DATASETS)")
    pytest.importorskip("sentence_transformers", reason="the embed extra is needed to embed ClapNQ once")
    exp = load_experiment(ROOT / "tests" / "experiments" / "clapnq.toml")
    exp = with_overrides(exp, Overrides(dataset=str(base / "clapnq"), milvus_uri=str(tmp_path / "m.db")))
    exp = replace(exp, cache_dir=ROOT / "reports" / "cache" / "embeddings", timing=NO_TIMING)
    former, now, _ = _both_fetches(exp, tmp_path, monkeypatch)
    assert len(now) == len(former) > 0
    pd.testing.assert_frame_equal(now, former)
