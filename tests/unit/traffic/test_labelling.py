"""What to label next: which traffic queries are picked, how the picks are shared among the strata, and the
labelling file a person marks."""

from __future__ import annotations

import json
import math
import os
import stat
from collections import Counter
from fractions import Fraction
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rag_eval.core.errors import DatasetError
from rag_eval.datasets.chunking import Chunk
from rag_eval.traffic.labelling import (
    Candidate,
    ChunkText,
    Delivered,
    allocate,
    screen,
    select_for_labelling,
    write_labelling_file,
)


def cand(query_id: str, count: int, disagreement: float, text: str | None = None) -> Candidate:
    return Candidate(query_id=query_id, text=text or f"query {query_id}", count=count, disagreement=disagreement,
                     delivered=())  # fmt: skip


def ids(picked: list[Candidate]) -> list[str]:
    return [c.query_id for c in picked]


# -- the strata -------------------------------------------------------------------------------------------------


def test_the_strata_share_the_picks_by_traffic_with_awkward_counts_worked_by_hand() -> None:
    """Traffic 5 / 14 / 60 / 921 (1,000 in all), 7 picks. All strata open: 7 x 921/1000 = 6.45 would go to
    100+, which holds one query: it takes 1. The other 6 by 5/14/60 (79): 0.38, 1.06, 4.56 -> 0, 1, 4 and the
    largest remainder (.56) to 10-99: 5, over its 2 queries: it takes 2. The other 4 by 5/14 (19): 1.05, 2.95 ->
    1, 2 and the remainder (.95) to 2-9: 3, its 3 queries. The last pick to 1. So 1, 3, 2, 1."""
    ones = [cand(f"s{i}", 1, 0.5) for i in range(5)]
    few = [cand("f2", 2, 0.5), cand("f3", 3, 0.5), cand("f9", 9, 0.5)]
    tens = [cand("t10", 10, 0.5), cand("t50", 50, 0.5)]
    hundreds = [cand("h", 921, 0.5)]
    assert allocate([5, 14, 60, 921], [5, 3, 2, 1], 7) == [1, 3, 2, 1]
    picked = select_for_labelling([*ones, *few, *tens, *hundreds], count=7, labelled_texts=())
    assert ids(picked) == ["h", "t50", "t10", "f9", "f3", "f2", "s0"]


def test_every_stratum_gets_one_pick_even_when_its_traffic_share_rounds_to_nothing() -> None:
    # 10 picks over 3 / 20 / 300 / 5,000: by share 0, 0, 1, 9; 1 and 2-9 each take one from 100+ (the most picks)
    assert allocate([3, 20, 300, 5000], [3, 4, 10, 20], 10) == [1, 1, 1, 7]
    # fewer picks than strata: the strata with the most traffic, one each
    assert allocate([3, 20, 300, 5000], [3, 4, 10, 20], 2) == [0, 0, 1, 1]
    # equal traffic: the rarer stratum first
    assert allocate([6, 6, 0, 0], [6, 3, 0, 0], 1) == [1, 0, 0, 0]


def test_largest_remainder_ties_go_to_the_larger_traffic_then_the_rarer_stratum() -> None:
    # 4 picks over 1 / 3 / 4: 0.5, 1.5, 2 -> 0, 1, 2 and the tie of .5 to the larger traffic: 0, 2, 2; then
    # the stratum of 1 takes one from the most picks, of equals the one with more traffic: 1, 2, 1
    assert allocate([1, 3, 4, 0], [5, 5, 5, 0], 4) == [1, 2, 1, 0]
    # 5 picks over 2 / 2 / 3 (7): 1.43, 1.43, 2.14 -> 1, 1, 2 and the one left to a .43: the first of equals
    assert allocate([2, 2, 3, 0], [5, 5, 5, 0], 5) == [2, 1, 2, 0]


@given(
    traffic_and_sizes=st.lists(st.tuples(st.integers(1, 10_000), st.integers(1, 30)), min_size=4, max_size=4),
    empty=st.lists(st.booleans(), min_size=4, max_size=4),
    picks=st.integers(1, 150),
)
@settings(max_examples=400, deadline=None)
def test_allocation_invariants_against_exact_quotas(
    traffic_and_sizes: list[tuple[int, int]], empty: list[bool], picks: int
) -> None:
    rows = [(0, 0) if e else ts for ts, e in zip(traffic_and_sizes, empty, strict=True)]
    traffic, sizes = [t for t, _ in rows], [s for _, s in rows]
    alloc = allocate(traffic, sizes, picks)
    n = min(picks, sum(sizes))
    assert sum(alloc) == n and all(0 <= a <= s for a, s in zip(alloc, sizes, strict=True))
    filled = [i for i, s in enumerate(sizes) if s]
    if n >= len(filled):
        assert all(alloc[i] >= 1 for i in filled)
    else:
        top = sorted(filled, key=lambda i: (-traffic[i], i))[:n]
        assert alloc == [1 if i in top else 0 for i in range(4)]
    if filled and n >= len(filled):
        total = sum(traffic)
        quotas = {i: Fraction(n * traffic[i], total) for i in filled}
        if all(math.floor(q) >= 1 and math.ceil(q) <= sizes[i] for i, q in quotas.items()):
            # neither the cap nor the one-each rule binds: Hamilton's method, each share its floor or ceiling
            assert all(math.floor(q) <= alloc[i] <= math.ceil(q) for i, q in quotas.items())


# -- which queries --------------------------------------------------------------------------------------------------


def test_ties_in_disagreement_go_to_the_more_frequent_then_the_smaller_id() -> None:
    c = [cand("b", 5, 0.4), cand("a", 5, 0.4), cand("c", 7, 0.4), cand("d", 3, 0.9)]
    assert ids(select_for_labelling(c, count=3, labelled_texts=())) == ["d", "c", "a"]


def test_all_zero_disagreement_picks_nothing() -> None:
    c = [cand("a", 1, 0.0), cand("b", 200, 0.0)]
    assert select_for_labelling(c, count=5, labelled_texts=()) == []
    assert screen(c, ()).agreed == 2


def test_fewer_eligible_queries_than_picks_returns_every_eligible_one_most_contested_first() -> None:
    c = [cand("a", 1, 0.1), cand("b", 40, 0.8), cand("z", 3, 0.0), cand("c", 150, 0.3)]
    assert ids(select_for_labelling(c, count=100, labelled_texts=())) == ["b", "c", "a"]


def test_labelled_texts_are_excluded_whatever_their_case_spacing_and_unicode_form() -> None:
    c = [
        cand("a", 2, 0.5, "  Replica\tLAG  after   failover "),
        cand("b", 2, 0.5, "caf\u00e9 pool exhausted"),  # composed é
        cand("c", 2, 0.5, "STRASSE index bloat"),
        cand("d", 2, 0.5, "deadlock on insert"),
    ]
    labelled = ["replica lag after failover", "Cafe\u0301 POOL exhausted", "straße index\nbloat"]
    assert ids(select_for_labelling(c, count=4, labelled_texts=labelled)) == ["d"]
    assert screen(c, labelled).labelled == 3


def test_duplicate_texts_keep_the_most_frequent() -> None:
    c = [cand("rare", 3, 0.9, "Disk Full"), cand("often", 30, 0.2, "disk  full"), cand("x", 1, 0.1, "other")]
    screened = screen(c, ())
    assert [e.query_id for e in screened.eligible] == ["often", "x"] and screened.duplicates == 1
    # the kept one has no disagreement: the text is not picked (nothing to decide for what users mostly type)
    c2 = [cand("rare", 3, 0.9, "Disk Full"), cand("often", 30, 0.0, "disk full")]
    assert select_for_labelling(c2, count=3, labelled_texts=()) == []


@pytest.mark.parametrize("count", [0, -1])
def test_a_count_below_one_is_refused(count: int) -> None:
    with pytest.raises(ValueError, match="count must be >= 1"):
        select_for_labelling([cand("a", 1, 0.5)], count=count, labelled_texts=())


@pytest.mark.parametrize(("count", "disagreement"), [(0, 0.5), (1, float("nan")), (1, 1.5), (1, -0.1)])
def test_a_candidate_outside_its_ranges_is_refused(count: int, disagreement: float) -> None:
    with pytest.raises(ValueError):
        cand("a", count, disagreement)


def test_a_query_id_given_twice_is_refused() -> None:
    with pytest.raises(ValueError, match="given twice"):
        select_for_labelling([cand("a", 1, 0.5), cand("a", 2, 0.5, "other")], count=2, labelled_texts=())


CANDIDATES = st.lists(
    st.tuples(
        st.sampled_from(["lag", "Lag", "disk full", "deadlock", "LAG ", "pool", "bloat", "vacuum", "x", "y"]),
        st.sampled_from([1, 2, 5, 9, 10, 42, 99, 100, 1000]),
        st.sampled_from([0.0, 0.1, 0.25, 0.5, 1.0]),
    ),
    max_size=30,
).map(lambda rows: [cand(f"q{i}", n, d, f"{t} {i % 4}") for i, (t, n, d) in enumerate(rows)])


@given(candidates=CANDIDATES, count=st.integers(1, 20), data=st.data())
@settings(max_examples=300, deadline=None)
def test_the_result_does_not_depend_on_the_input_order(
    candidates: list[Candidate], count: int, data: st.DataObject
) -> None:
    labelled = ["lag 0", "DISK FULL 1"]
    picked = select_for_labelling(candidates, count=count, labelled_texts=labelled)
    shuffled = data.draw(st.permutations(candidates))
    assert select_for_labelling(shuffled, count=count, labelled_texts=labelled) == picked
    # an oracle written apart: what may be picked, and that each stratum's picks beat its left-out members
    norm = {c.query_id: " ".join(c.text.split()).casefold() for c in candidates}
    best: dict[str, Candidate] = {}
    for c in candidates:
        if norm[c.query_id] in {"lag 0", "disk full 1"}:
            continue
        held = best.get(norm[c.query_id])
        if held is None or (c.count, c.disagreement, held.query_id) > (held.count, held.disagreement, c.query_id):
            best[norm[c.query_id]] = c
    eligible = [c for c in best.values() if c.disagreement > 0]
    assert len(picked) == min(count, len(eligible)) and set(ids(picked)) <= {c.query_id for c in eligible}
    band = {c.query_id: (1 if c.count == 1 else 2 if c.count < 10 else 3 if c.count < 100 else 4) for c in eligible}
    order = {c.query_id: (-c.disagreement, -c.count, c.query_id) for c in eligible}
    for left_out in (c for c in eligible if c not in picked):
        assert all(
            order[p.query_id] < order[left_out.query_id] for p in picked if band[p.query_id] == band[left_out.query_id]
        )
    assert [order[p.query_id] for p in picked] == sorted(order[p.query_id] for p in picked)
    if len(picked) >= len(set(band.values())):
        assert set(band.values()) == {band[p.query_id] for p in picked}


# -- the labelling file -----------------------------------------------------------------------------------------------


def _picked() -> list[Candidate]:
    delivered = (
        Delivered(chunk="doc-a#chunk-0", configs=("legacy", "evidence")),
        Delivered(chunk="doc-a#chunk-3", configs=("evidence",)),
        Delivered(chunk="ghost#chunk-1", configs=("legacy",)),
        Delivered(chunk="lost#chunk-2", configs=("legacy",)),
    )
    return [Candidate(query_id="t1", text="Replica lag ☃", count=12, disagreement=0.75, delivered=delivered)]


CHUNKS = {
    "doc-a#chunk-0": ChunkText.of(Chunk(doc_id="doc-a", chunk_index=0, start=0, end=5, content="Hello", title="A")),
    "doc-a#chunk-3": ChunkText(doc_id="doc-a", start=9, end=14, text="world", title="A"),
    "ghost#chunk-1": ChunkText(doc_id=None, start=None, end=None, text="a row placed nowhere"),
}


def test_the_labelling_file_has_one_query_a_line_every_chunk_ungraded(tmp_path: Path) -> None:
    path = write_labelling_file(tmp_path / "sub" / "label.jsonl", _picked(), CHUNKS)
    lines = path.read_text(encoding="utf-8").splitlines()
    assert len(lines) == 1 and "☃" in lines[0]
    assert json.loads(lines[0]) == {
        "query_id": "t1", "query": "Replica lag ☃", "count": 12, "disagreement": 0.75,
        "chunks": [
            {"chunk": "doc-a#chunk-0", "doc_id": "doc-a", "start": 0, "end": 5, "title": "A", "text": "Hello",
             "delivered_by": ["legacy", "evidence"], "grade": None},
            {"chunk": "doc-a#chunk-3", "doc_id": "doc-a", "start": 9, "end": 14, "title": "A", "text": "world",
             "delivered_by": ["evidence"], "grade": None},
            {"chunk": "ghost#chunk-1", "doc_id": None, "start": None, "end": None, "title": None,
             "text": "a row placed nowhere", "delivered_by": ["legacy"], "grade": None},
            {"chunk": "lost#chunk-2", "doc_id": None, "start": None, "end": None, "title": None, "text": None,
             "delivered_by": ["legacy"], "grade": None},
        ],
    }  # fmt: skip
    assert stat.S_IMODE(path.stat().st_mode) == 0o600  # query texts may be personal data
    assert sorted(p.name for p in path.parent.iterdir()) == ["label.jsonl"]  # no temporary file left


def test_an_existing_file_is_never_overwritten_without_force(tmp_path: Path) -> None:
    path = tmp_path / "label.jsonl"
    path.write_bytes(b'{"marks": "a person\'s work"}\n')
    with pytest.raises(DatasetError, match="already exists") as err:
        write_labelling_file(path, _picked(), CHUNKS)
    assert err.value.path == str(path) and err.value.exit_code == 2
    assert path.read_bytes() == b'{"marks": "a person\'s work"}\n'
    assert sorted(p.name for p in tmp_path.iterdir()) == ["label.jsonl"]
    write_labelling_file(path, _picked(), CHUNKS, force=True)
    assert json.loads(path.read_text(encoding="utf-8"))["query_id"] == "t1"


@pytest.mark.parametrize("query_id", ["a\tb", "a\nb", "", "a b", "x#chunk-1", "nul\x00"])
def test_a_query_id_no_data_set_could_hold_is_refused_before_the_file_is_written(tmp_path: Path, query_id: str) -> None:
    picked = [Candidate(query_id=query_id, text="q", count=1, disagreement=0.5, delivered=())]
    with pytest.raises(DatasetError) as err:
        write_labelling_file(tmp_path / "label.jsonl", picked, {})
    assert err.value.field == "query_id" and not os.listdir(tmp_path)


def test_chunk_text_is_placed_entirely_or_not_at_all() -> None:
    with pytest.raises(ValueError, match="all given or all None"):
        ChunkText(doc_id="d", start=None, end=3, text="x")


def test_no_candidate_is_lost_or_counted_twice_by_the_screen() -> None:
    c = [cand("a", 1, 0.5, "x"), cand("b", 2, 0.5, "X"), cand("c", 1, 0.0, "y"), cand("d", 1, 0.3, "z")]
    s = screen(c, ["z"])
    assert s.labelled + s.duplicates + s.agreed + len(s.eligible) == len(c)
    assert Counter(e.query_id for e in s.eligible) == Counter({"b": 1})


def test_numpy_numbers_become_pythons_so_the_file_can_be_written(tmp_path: Path) -> None:
    np = pytest.importorskip("numpy")
    c = Candidate(query_id="n", text="q", count=np.int64(3), disagreement=np.float32(0.5),
                  delivered=(Delivered(chunk="d#chunk-0", configs=("a",)),))  # fmt: skip
    assert type(c.count) is int and type(c.disagreement) is float
    where = ChunkText(doc_id="d", start=np.int64(0), end=np.int32(4), text="abcd")
    assert (type(where.start), type(where.end)) == (int, int)
    path = write_labelling_file(tmp_path / "l.jsonl", [c], {"d#chunk-0": where})
    assert json.loads(path.read_text())["chunks"][0]["end"] == 4
    with pytest.raises(ValueError, match="count"):
        cand("b", True, 0.5)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="start must be an integer"):
        ChunkText(doc_id="d", start=1.5, end=4, text="abcd")  # type: ignore[arg-type]
