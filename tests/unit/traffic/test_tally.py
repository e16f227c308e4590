"""The tally the readers share: what is identical, the order of the skip checks, ids, and the sample's ranks
checked against hashlib by hand."""

from __future__ import annotations

import hashlib

from hypothesis import given
from hypothesis import strategies as st

from rag_eval.traffic.tally import MISSING, REASONS, Record, Tally, hash_id, normalized, safe_id, sample_rank


def _tally(*records: Record, max_chars: int = 100) -> Tally:
    tally = Tally(max_chars=max_chars)
    for record in records:
        tally.add(record)
    return tally


def test_every_reason_is_present_from_the_start() -> None:
    assert Tally(max_chars=1).skipped == dict.fromkeys(REASONS, 0)


def test_length_is_checked_on_the_text_as_written_before_blankness() -> None:
    tally = _tally(Record(line=1, text=" " * 11), Record(line=2, text="a" + " " * 9), max_chars=10)
    assert tally.skipped["over-long"] == 1 and tally.distinct == 1


def test_missing_and_present_fields_are_seen() -> None:
    tally = _tally(Record(line=1, text=MISSING, ident="x"), Record(line=2, text=None))
    assert tally.seen == {"text": True, "id": True, "category": False}
    assert tally.skipped["missing field"] == 1 and tally.skipped["not text"] == 1


def test_the_same_text_under_two_categories_is_two_queries_with_distinct_ids() -> None:
    tally = _tally(Record(line=1, text="a", category="x"), Record(line=2, text="a"), Record(line=3, text="a "))
    queries = tally.queries()
    assert [(q.category, q.count) for q in queries] == [("x", 1), (None, 2)]
    assert queries[1].id == "q-" + hashlib.sha256(b"a").hexdigest()[:16]
    assert queries[0].id == "q-" + hashlib.sha256(b'["x", "a"]').hexdigest()[:16]


def test_a_log_id_equal_to_a_later_querys_hash_id_still_leaves_ids_unique() -> None:
    taken = hash_id("b")
    tally = _tally(Record(line=1, text="a", ident=taken), Record(line=2, text="b"))
    assert [q.id for q in tally.queries()] == [taken, f"{taken}-2"]


def test_safe_ids() -> None:
    assert safe_id("a\tb\n c") == "a_b_c"
    assert safe_id(2.5) == "2.5" and safe_id(True) == "True"
    assert safe_id("x" * 200) == "x" * 200 and safe_id("x" * 201) is None
    assert safe_id("\u200b") is None  # not printable


def test_the_sample_rank_is_sha256_of_seed_and_text() -> None:
    assert sample_rank(3, "vpn down") == hashlib.sha256(b"3:vpn down").hexdigest()


@given(st.text(max_size=30))
def test_normalising_twice_changes_nothing_and_leaves_no_edge_or_double_space(text: str) -> None:
    once = normalized(text)
    assert normalized(once) == once
    assert once == once.strip() and "  " not in once


@given(st.lists(st.sampled_from(["a", "b", "c", "d", "e", "f"]), min_size=1), st.integers(1, 6), st.integers(0, 3))
def test_the_sample_is_the_smallest_ranks_in_first_occurrence_order(texts: list[str], n: int, seed: int) -> None:
    tally = _tally(*(Record(line=i, text=t) for i, t in enumerate(texts)))
    firsts = list(dict.fromkeys(texts))
    smallest = set(sorted(firsts, key=lambda t: hashlib.sha256(f"{seed}:{t}".encode()).hexdigest())[:n])
    assert [q.text for q in tally.queries(sample=n, seed=seed)] == [t for t in firsts if t in smallest]
