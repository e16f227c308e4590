"""The flattened-list helpers of ``metrics/columns.py`` against plain-Python definitions, on generated
rows with repeated values (the case a qrel given twice or a chunk delivered twice makes)."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
from hypothesis import given, settings
from hypothesis import strategies as st

from rag_eval.metrics.columns import (
    Flat,
    coded,
    first_in_row,
    first_position,
    last_in_row,
    lookup,
    rank_in_row,
    row_coded,
)
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


VALUES = ["a", "b", "é", "", "a#chunk-1"]
string_rows = st.lists(st.one_of(st.none(), st.lists(st.sampled_from(VALUES), max_size=5)), max_size=12)


def _values(table: pa.Table, name: str) -> list[str]:
    return [v for row in table.column(name).to_pylist() for v in (row or [])]


@settings(max_examples=examples(300), deadline=None)
@given(string_rows, string_rows, st.integers(1, 5))
def test_codes_of_rows_coded_a_few_at_a_time_are_equal_within_a_row_exactly_when_the_strings_are(
    left: list[list[str] | None], right: list[list[str] | None], step: int
) -> None:
    n = max(len(left), len(right))
    lists = pa.list_(pa.string())
    table = pa.table(
        {"l": pa.array(left + [[]] * (n - len(left)), lists), "r": pa.array(right + [[]] * (n - len(right)), lists)}
    )
    (lf, rf), vocab = row_coded(table, ["l", "r"], rows=step)
    (lw, rw), _ = coded(table, ["l", "r"])  # one vocabulary: the rows as they were
    entries = []
    for sliced, whole, name in ((lf, lw, "l"), (rf, rw, "r")):
        assert sliced.row.tolist() == whole.row.tolist()
        assert vocab.take(pa.array(sliced.code)).to_pylist() == _values(table, name)
        entries += zip(sliced.row.tolist(), sliced.code.tolist(), _values(table, name), strict=True)
    for r1, c1, v1 in entries:
        for r2, c2, v2 in entries:
            if r1 == r2:
                assert (c1 == c2) == (v1 == v2)
    assert len(vocab) <= len(entries)


def test_rows_coded_in_slices_give_a_string_of_two_slices_two_codes() -> None:
    table = pa.table({"a": [["x", "y"], ["y"], ["y", "x"]]})
    (a,), vocab = row_coded(table, ["a"], rows=2)
    assert a.row.tolist() == [0, 0, 1, 2, 2]
    assert a.code.tolist() == [0, 1, 1, 2, 3]  # "y" of row 2 is coded in the second slice's vocabulary
    assert vocab.to_pylist() == ["x", "y", "y", "x"]
    (b,), whole = row_coded(table, ["a"])  # fewer rows than a slice: one vocabulary
    assert whole.to_pylist() == ["x", "y"] and b.code.tolist() == [0, 1, 1, 1, 0]
    (e,), empty = row_coded(table.slice(0, 0), ["a"])
    assert len(e) == 0 and len(empty) == 0
