"""The building blocks of the fast post-process path: generated constructors, candidate columns,
deferred tuples, and the Pipeline's record of a lookup."""

from __future__ import annotations

import dataclasses
import pickle

import pytest

from rag_eval.core.config import RagConfig
from rag_eval.core.lookup import LookupRecord, Pipeline, StageTimings
from rag_eval.core.packing import RagResult
from rag_eval.core.postprocess import PostProcessOutcome, SelectedEvidence, TraceEntry, merged_reasons
from rag_eval.core.projector import ProjectedExcerpt, ProjectedPayload
from rag_eval.core.transform import KnowledgeQueryTransformer
from rag_eval.core.types import (
    Candidates,
    Deferred,
    EvidenceBlock,
    HitReason,
    KnowledgeSearchRequest,
    MemberSpan,
    RetrievedEvidenceCandidate,
    deferred,
    fast_constructor,
    slots_constructor,
    to_candidates,
)

from ..helpers import hit

FAST = [
    HitReason,
    RetrievedEvidenceCandidate,
    MemberSpan,
    EvidenceBlock,
    TraceEntry,
    SelectedEvidence,
    PostProcessOutcome,
    RagResult,
    ProjectedExcerpt,
    ProjectedPayload,
    StageTimings,
    LookupRecord,
]


@pytest.mark.parametrize("cls", FAST, ids=lambda c: c.__name__)
def test_a_fast_constructor_builds_what_the_dataclass_builds(cls: type) -> None:
    fields = dataclasses.fields(cls)
    values = [object() for _ in fields]  # distinct markers: each must land in its own field
    made = fast_constructor(cls)(*values)
    assert type(made) is cls
    assert [getattr(made, f.name) for f in fields] == values
    assert made == cls(**{f.name: v for f, v in zip(fields, values, strict=True)})
    with pytest.raises(dataclasses.FrozenInstanceError):
        setattr(made, fields[0].name, 1)


def test_a_fast_constructor_refuses_a_post_init() -> None:
    with pytest.raises(TypeError, match="__post_init__"):
        fast_constructor(KnowledgeSearchRequest)


@dataclasses.dataclass(frozen=True, slots=True)
class _Base:
    a: int


@dataclasses.dataclass(frozen=True, slots=True)
class _Derived(_Base):  # its own slots are its own fields' (b), its fields are a and b
    b: int


class _Slotted:  # a base of no fields and no slots of its own
    __slots__ = ()


@dataclasses.dataclass(frozen=True, slots=True)
class _OnABase(_Slotted):  # its slots are its fields: only the base tells it apart
    a: int


def _named(field: str) -> type:
    return dataclasses.make_dataclass("Named", [(field, int)], frozen=True, slots=True)


@pytest.mark.parametrize("cls", [_Derived, _OnABase, *(_named(f) for f in ("obj", "new", "twin", "cls"))],
                         ids=["inherited fields", "a base class", "obj", "new", "twin", "cls"])  # fmt: skip
def test_a_fast_constructor_refuses_a_base_class_or_a_field_named_as_its_own_names(cls: type) -> None:
    with pytest.raises(TypeError, match="a base class, slots not its fields, or a field named obj/new/twin/cls"):
        fast_constructor(cls)


def test_candidates_from_hits_are_the_candidates_to_candidates_makes() -> None:
    hits = [hit("7", 0.5, "d", 0), hit("8", 0.4, "d", None), hit(None, 0.3)]
    cands = Candidates.from_hits(hits)
    assert cands.keys == ("d#chunk-0", "vector:8", "rank:3")
    assert list(cands.ranks) == [1, 2, 3]
    assert cands == to_candidates(hits) and to_candidates(hits) == cands
    assert cands[-1] == cands[2] and cands[-1] is cands.get(2)  # made once, then kept
    assert cands[1:] == to_candidates(hits)[1:]
    with pytest.raises(IndexError):
        cands[3]
    assert len(cands) == 3 and repr(cands).startswith("Candidates((RetrievedEvidenceCandidate(")
    assert Candidates.of(cands) is cands and Candidates.of(list(cands)) == cands
    with pytest.raises(AttributeError):
        cands.keys = ()  # type: ignore[misc]
    for same in (cands, to_candidates(hits)):  # hashes as its tuple: a hit's scores are a dict, so neither can
        with pytest.raises(TypeError, match="unhashable type: 'dict'"):
            hash(same)


def test_a_candidate_from_one_hit_is_the_one_its_rank_gives_in_a_list() -> None:
    hits = [hit("7", 0.5, "d", 0), hit("8", 0.4, "d", None), hit(None, 0.3)]
    made = [RetrievedEvidenceCandidate.from_hit(h, rank) for rank, h in enumerate(hits, start=1)]
    assert tuple(made) == to_candidates(hits)
    bm25 = RetrievedEvidenceCandidate.from_hit(hits[1], 4, channel="bm25")
    assert (bm25.key, bm25.hit, bm25.original_rank) == ("vector:8", hits[1], 4)
    assert bm25.hit_reasons == (HitReason(channel="bm25", original_rank=4, score=0.4, vector_id="8"),)
    assert RetrievedEvidenceCandidate.from_hit(hits[2], 9).key == "rank:9"
    assert [c.hit_reasons[0].channel for c in to_candidates(hits, "bm25")] == ["bm25"] * 3


def test_merged_hit_reasons_keep_order_and_take_a_reason_once() -> None:
    r = [HitReason(channel=ch, original_rank=rank, score=0.5) for ch, rank in (("dense", 1), ("bm25", 1), ("dense", 2))]
    d = hit("7", 0.5, "d", 0)

    def member(*reasons: HitReason) -> RetrievedEvidenceCandidate:
        return RetrievedEvidenceCandidate(key="d#chunk-0", hit=d, original_rank=1, hit_reasons=reasons)

    assert merged_reasons([member(r[0], r[1])]) == (r[0], r[1])
    # two reasons share an original rank (two channels): the slow path, each reason once, in order
    assert merged_reasons([member(r[0], r[1]), member(r[1], r[2]), member(r[2])]) == (r[0], r[1], r[2])
    assert merged_reasons([member(r[0]), member(r[2])]) == (r[0], r[2])  # all ranks differ: joined as they are


def test_a_deferred_tuple_is_built_once_when_first_read() -> None:
    calls: list[int] = []

    def build() -> list[int]:
        calls.append(1)
        return [3, 1, 2]

    d = Deferred(build)
    assert calls == []
    assert d == (3, 1, 2) and (3, 1, 2) == d and d == Deferred(lambda: (3, 1, 2))  # noqa: SIM300 (both sides)
    assert d != [3, 1, 2] and d != (3, 1)
    assert sorted(d) == [1, 2, 3] and d.index(2) == 2 and 1 in d and d[1:] == (1, 2)
    assert hash(d) == hash((3, 1, 2)) and repr(d) == "(3, 1, 2)"
    assert pickle.loads(pickle.dumps(d)) == (3, 1, 2)
    assert calls == [1]


def test_a_lookup_record_builds_candidates_and_the_trace_only_when_read() -> None:
    hints = KnowledgeQueryTransformer().transform("why is the replica behind")
    hits = [hit(str(i), 1 - i / 100, f"d{i % 3}", i) for i in range(40)]
    record = Pipeline(RagConfig.from_mapping({"rag.retrieve-k": 30, "rag.return-n": 5})).process(hints, hits)
    made = sum(obj is not None for obj in record.candidates._objects)
    assert made == 5  # the primaries of the returned blocks, no more
    assert record.hits == tuple(hits[:30]) and record.candidates == to_candidates(hits[:30])
    assert len(record.outcome.trace) == 30 and record.outcome.stage_counts()["returned"] == 5


def test_a_fast_constructor_refuses_a_base_class_and_a_field_named_as_its_own_names() -> None:
    @dataclasses.dataclass(frozen=True, slots=True)
    class Named:
        obj: int

    @dataclasses.dataclass(frozen=True, slots=True)
    class Base:
        a: int

    @dataclasses.dataclass(frozen=True, slots=True)
    class Derived(Base):
        b: int

    for cls in (Named, Derived):
        with pytest.raises(TypeError, match="base class"):
            fast_constructor(cls)


def test_candidates_from_hits_are_made_as_the_constructor_makes_them_and_stay_frozen() -> None:
    hits = [hit("7", 0.5, "d", 0), hit("8", 0.4, "d", None), hit(None, 0.3)]
    made = Candidates.from_hits(hits, "bm25")
    built = Candidates(made.keys, tuple(hits), range(1, 4), [None] * 3, "bm25")
    assert type(made) is Candidates and made == built
    assert [getattr(made, n) for n in ("keys", "hits", "ranks", "channel")] == [
        getattr(built, n) for n in ("keys", "hits", "ranks", "channel")
    ]
    assert made[0].hit_reasons[0].channel == "bm25"
    with pytest.raises(dataclasses.FrozenInstanceError):
        made.keys = ()  # type: ignore[misc]

    class Mine(Candidates):  # a subclass keeps its own constructor
        __slots__ = ()

    assert type(Mine.from_hits(hits)) is Mine


def test_deferred_made_without_its_init_is_a_deferred_built_once() -> None:
    calls = []
    d = deferred(lambda: calls.append(1) or (1, 2))
    assert type(d) is Deferred and not calls
    assert d == (1, 2) and d[1] == 2 and len(d) == 2 and calls == [1]
    assert pickle.loads(pickle.dumps(d)) == (1, 2) and calls == [1]
    with pytest.raises(dataclasses.FrozenInstanceError):
        d._value = None  # type: ignore[misc]


def test_a_slots_constructor_refuses_names_that_are_not_the_slots() -> None:
    with pytest.raises(TypeError, match="slots not"):
        slots_constructor(Deferred, ("_build",))
    with pytest.raises(TypeError, match="slots not"):
        slots_constructor(Candidates, ("keys", "hits", "ranks", "objects", "channel"))
