"""Edges of the core pipeline's building blocks: candidates given as columns whose ranks do not rise
from 1, a return-n of 0, the total hit order with NaN scores, the D1 key's refusal of rank 0, and the
errors a Dask replay raises."""

from __future__ import annotations

import math
import pickle

import pytest

from rag_eval.core.errors import ClusterError, InfrastructureError
from rag_eval.core.identity import key_of
from rag_eval.core.postprocess import EvidencePostProcessor, Stage
from rag_eval.core.types import Candidates, KnowledgeSearchHit, hit_order, to_candidates

from ..helpers import hit


def _columns(ranks: object) -> Candidates:
    hits = tuple(hit(v, 0.5, d, 0) for v, d in (("1", "a"), ("2", "b"), ("3", "c")))  # one score: ranks decide
    keys = tuple(key_of(h.doc_id, h.chunk_index, h.vector_id, 1) for h in hits)
    return Candidates(keys, hits, ranks, [None] * 3)  # type: ignore[arg-type]


def _selected(cands: Candidates) -> list[str]:
    return [s.key for s in EvidencePostProcessor(return_n=5, max_chunks_per_document=2)(cands).selected]


def test_equal_scores_are_ordered_by_rank_whatever_the_rank_sequence_is() -> None:
    assert _selected(_columns(range(1, 4))) == ["a#chunk-0", "b#chunk-0", "c#chunk-0"]
    assert _selected(_columns(range(7, 10))) == ["a#chunk-0", "b#chunk-0", "c#chunk-0"]
    assert _selected(_columns(range(3, 0, -1))) == ["c#chunk-0", "b#chunk-0", "a#chunk-0"]  # falling ranks
    assert _selected(_columns([2, 3, 1])) == ["c#chunk-0", "a#chunk-0", "b#chunk-0"]


def test_columns_of_different_lengths_are_refused_not_cut() -> None:
    hits = (hit("1", 0.5, "a", 0), hit("2", 0.4, "b", 0))
    cands = Candidates(("a#chunk-0", "b#chunk-0"), hits, [1], [None, None])
    with pytest.raises(ValueError, match="zip"):
        EvidencePostProcessor(return_n=5, max_chunks_per_document=2)(cands)


def test_return_n_zero_returns_nothing_and_truncates_every_candidate() -> None:
    out = EvidencePostProcessor(return_n=0, max_chunks_per_document=2)(to_candidates([hit("1", 0.9, "a", 0)]))
    assert out.selected == ()
    assert [e.stage for e in out.trace] == [Stage.TRUNCATION]
    hits = [hit("1", 0.9, "a", 0), hit("2", 0.8, "a", 1), hit("3", 0.7, "a", 2)]
    out = EvidencePostProcessor(return_n=0, max_chunks_per_document=2)(Candidates.from_hits(hits))
    assert out.selected == ()
    assert [e.stage for e in out.trace] == [Stage.TRUNCATION, Stage.TRUNCATION, Stage.CAP]


def test_candidates_made_from_objects_are_dense_unless_told() -> None:
    objects = to_candidates([hit("1", 0.9, "a", 0)], channel="sparse")
    assert Candidates.of(objects).channel == "dense"  # the channel of the columns, not of the objects
    assert Candidates.from_hits([hit("1", 0.9, "a", 0)]).channel == "dense"


def test_nan_scores_come_last_in_the_total_hit_order() -> None:
    nan_first = [hit("1", math.nan, "a", 0), hit("2", -math.inf, "b", 0), hit("3", 0.1, "c", 0)]
    assert [h.id for h in sorted(nan_first, key=hit_order)] == ["3", "2", "1"]  # NaN after minus infinity
    two_nans = [hit("9", math.nan, "a", 0), hit("10", math.nan, "b", 0), hit("8", -0.5, "c", 0)]
    assert [h.id for h in sorted(two_nans, key=hit_order)] == ["8", "9", "10"]  # NaNs by id, like equal scores


def test_rank_zero_is_refused_by_the_d1_key() -> None:
    assert key_of(None, None, None, 1) == "rank:1"
    with pytest.raises(ValueError, match=r"^original_rank is 1-based, got 0$"):
        key_of(None, None, None, 0)


def test_a_cluster_error_names_its_scheduler_and_survives_pickling() -> None:
    err = ClusterError("no workers at tcp://10.0.0.1:8786", address="tcp://10.0.0.1:8786")
    assert isinstance(err, InfrastructureError) and err.exit_code == 3
    assert str(err) == "no workers at tcp://10.0.0.1:8786"
    assert err.address == "tcp://10.0.0.1:8786"
    back = pickle.loads(pickle.dumps(err))
    assert (type(back), str(back), back.address) == (ClusterError, str(err), err.address)
    assert ClusterError("lost a worker").address is None


def test_a_changed_collection_error_names_the_collection_and_where_it_is_and_survives_pickling() -> None:
    from rag_eval.core.errors import CollectionChangedError

    err = CollectionChangedError("rows inserted while the run read them", collection="kb", uri="http://h:19530")
    assert isinstance(err, InfrastructureError) and err.exit_code == 3
    assert (str(err), err.collection, err.uri) == ("rows inserted while the run read them", "kb", "http://h:19530")
    back = pickle.loads(pickle.dumps(err))
    assert (type(back), str(back), back.collection, back.uri) == (CollectionChangedError, str(err), "kb", err.uri)
    assert CollectionChangedError("changed", collection="kb").uri is None


def test_a_tie_at_the_cut_off_running_to_the_end_of_the_page_asks_for_a_wider_search() -> None:
    from rag_eval.search.milvus.search import tie_may_continue

    def page(*scores: float) -> list[KnowledgeSearchHit]:
        return [hit(str(i), s, "d", i) for i, s in enumerate(scores, start=1)]

    assert tie_may_continue(page(0.9, 0.5, 0.5, 0.5), top_k=2, width=4)  # the tie may go on beyond the page
    assert not tie_may_continue(page(0.9, 0.5, 0.5, 0.4), top_k=2, width=4)  # the tie ends inside the page
    assert not tie_may_continue(page(0.9, 0.5, 0.5), top_k=2, width=4)  # a short page holds every row
    assert not tie_may_continue(page(0.9, 0.5), top_k=2, width=2)  # nothing beyond the cut-off asked for
    assert tie_may_continue(page(0.9, math.nan, math.nan), top_k=2, width=3)  # NaNs tie with each other
    assert not tie_may_continue(page(0.9, -math.inf, math.nan), top_k=2, width=3)  # NaN is not minus infinity


@pytest.mark.parametrize("kind", ["EmbedderRequestError", "EmbeddingEndpointError", "ServiceError"])
def test_an_endpoint_error_names_its_endpoint_and_survives_pickling(kind: str) -> None:
    from rag_eval.core import errors

    cls = getattr(errors, kind)
    err = cls("answered 503 three times", endpoint="http://127.0.0.1:8000/v1")
    assert err.endpoint == "http://127.0.0.1:8000/v1" and str(err) == "answered 503 three times"
    back = pickle.loads(pickle.dumps(err))
    assert (type(back), str(back), back.endpoint, back.exit_code) == (cls, str(err), err.endpoint, err.exit_code)
