"""The flattened-list helpers of ``metrics/columns.py`` against plain-Python definitions, on generated
rows with repeated values (the case a qrel given twice or a chunk delivered twice makes)."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from rag_eval.metrics.columns import Flat, first_in_row, first_position, last_in_row, lookup, rank_in_row
from tests.budget import examples

# rows non-decreasing, values from a small vocabulary so that repeats are common
flats = st.lists(st.tuples(st.integers(0, 4), st.integers(0, 3)), max_size=30).map(
    lambda pairs: Flat(
        np.asarray(sorted(r for r, _ in pairs), dtype=np.int64),
        np.asarray([c for _, c in sorted(pairs, key=lambda p: p[0])], dtype=np.int64),
    )
)


def _entries(flat: Flat) -> list[tuple[int, int]]:
    return list(zip(flat.row.tolist(), flat.code.tolist(), strict=True))


@settings(max_examples=examples(300), deadline=None)
@given(flats)
def test_first_and_last_in_row_and_first_position_are_their_definitions(flat: Flat) -> None:
    entries = _entries(flat)
    first_seen: dict[tuple[int, int], int] = {}
    last_seen: dict[tuple[int, int], int] = {}
    for i, entry in enumerate(entries):
        first_seen.setdefault(entry, i)
        last_seen[entry] = i
    assert first_in_row(flat).tolist() == [first_seen[e] == i for i, e in enumerate(entries)]
    assert last_in_row(flat).tolist() == [last_seen[e] == i for i, e in enumerate(entries)]
    assert first_position(flat).tolist() == [first_seen[e] for e in entries]


@settings(max_examples=examples(300), deadline=None)
@given(flats)
def test_rank_in_row_counts_from_one_in_each_row(flat: Flat) -> None:
    seen: dict[int, int] = {}
    expected = []
    for r in flat.row.tolist():
        seen[r] = seen.get(r, 0) + 1
        expected.append(seen[r])
    assert rank_in_row(flat.row, 6).tolist() == expected


def test_a_value_given_twice_in_a_row_is_last_at_its_second_place() -> None:
    flat = Flat(np.array([0, 0, 0, 1], dtype=np.int64), np.array([5, 2, 5, 5], dtype=np.int64))
    assert last_in_row(flat).tolist() == [False, True, True, True]
    assert first_in_row(flat).tolist() == [True, True, False, True]


def test_lookup_gives_the_missing_value_for_absent_keys_and_with_no_table() -> None:
    keys = np.array([3, 9, 1], dtype=np.int64)
    found = lookup(keys, np.array([1, 3], dtype=np.int64), np.array([10, 30], dtype=np.int64), missing=0)
    assert found.tolist() == [30, 0, 10]
    empty = lookup(keys, np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64), missing=0)
    assert empty.tolist() == [0, 0, 0] and empty.dtype == np.int64
