"""List columns of the per-query table as flat numpy arrays: the pieces the measures are computed from.

A list column of ``n`` rows becomes two parallel arrays, ``row`` (the row each value belongs to, in
order) and ``code`` (the value's index in a vocabulary shared by the columns coded together), so a
per-row count or sum is one ``np.bincount`` over ``row`` and "the first time in its row" is a hash
lookup on (row, code). No Python runs per row or per value; Python runs once per distinct string at
most (the vocabulary), to apply a rule such as ``doc_of``.

>>> import pyarrow as pa
>>> t = pa.table({"a": [["x", "y", "x"], []], "b": [["y"], ["z"]]})
>>> (a, b), vocab = coded(t, ["a", "b"])
>>> a.row.tolist(), vocab.take(a.code).to_pylist(), first_in_row(a).tolist(), first_position(a).tolist()
([0, 0, 0], ['x', 'y', 'x'], [True, True, False], [0, 1, 0])
>>> rank_in_row(b.row, 2).tolist(), per_row(b.row, 2).tolist()
([1, 1], [1, 1])
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

Array = np.ndarray[Any, Any]


@dataclass(frozen=True, slots=True)
class Flat:
    """One list column, flattened: ``row`` and ``code`` (int64, parallel, rows non-decreasing)."""

    row: Array
    code: Array

    def __len__(self) -> int:
        return len(self.row)

    def where(self, mask: Array) -> Flat:
        return Flat(self.row[mask], self.code[mask])


def _list_array(table: pa.Table, name: str) -> pa.ListArray:
    column = table.column(name)
    return column.combine_chunks() if column.num_chunks != 1 else column.chunk(0)


def flat_values(table: pa.Table, name: str) -> tuple[Array, pa.Array]:
    """The rows and the values of a list column (a null list counts as empty)."""
    arr = _list_array(table, name)
    rows = pc.list_parent_indices(arr).to_numpy()  # int64 without nulls, whatever the list type
    return rows, pc.list_flatten(arr)


def coded(table: pa.Table, names: Sequence[str]) -> tuple[list[Flat], pa.Array]:
    """List-of-string columns flattened, their values coded in one shared vocabulary (kept as Arrow:
    rules on the vocabulary run as Arrow compute functions, not Python, for large vocabularies)."""
    parts = [flat_values(table, name) for name in names]
    encoded = pa.concat_arrays([v.cast(pa.string()) for _, v in parts]).dictionary_encode()  # names: one or more
    codes = encoded.indices.to_numpy(zero_copy_only=False).astype(np.int64)  # int32 indices
    out: list[Flat] = []
    start = 0
    for rows, _ in parts:
        out.append(Flat(rows, codes[start : start + len(rows)]))
        start += len(rows)
    return out, encoded.dictionary


CODE_ROWS = 1024  # rows whose strings :func:`row_coded` hashes into one table


def row_coded(table: pa.Table, names: Sequence[str], rows: int | None = None) -> tuple[list[Flat], pa.Array]:
    """:func:`coded` for values that are only compared within a row: the rows are coded ``rows``
    (:data:`CODE_ROWS`) at a time, each slice in a vocabulary of its own, put one after another. A string
    can stand in it more than once, so two codes are equal exactly when the strings are only for values of
    one row. Smaller hash tables stay in the CPU's caches: with two batches of 8,192 rows measured at once,
    ``summarize`` takes about a tenth less time than with one table per batch (docs/performance.md).

    >>> t = pa.table({"a": [["x", "y"], ["y", "y"]]})
    >>> (a,), vocab = row_coded(t, ["a"], rows=1)
    >>> a.row.tolist(), a.code.tolist(), vocab.to_pylist(), first_in_row(a).tolist()
    ([0, 0, 1, 1], [0, 1, 2, 2], ['x', 'y', 'y'], [True, True, True, False])
    """
    step = CODE_ROWS if rows is None else rows
    starts = range(0, table.num_rows, step)
    parts = [coded(table.slice(start, step), names) for start in starts] or [coded(table, names)]  # no rows: one
    vocabs = [vocab for _, vocab in parts]
    first_code = np.cumsum([0] + [len(vocab) for vocab in vocabs])  # each slice's codes follow the one before's
    out = [
        Flat(
            np.concatenate([flats[i].row + step * j for j, (flats, _) in enumerate(parts)]),
            np.concatenate([flats[i].code + first_code[j] for j, (flats, _) in enumerate(parts)]),
        )
        for i in range(len(names))
    ]
    return out, pa.concat_arrays(vocabs)


def int_values(table: pa.Table, name: str) -> Array:
    """The values of a list-of-integer column, flattened."""
    _, values = flat_values(table, name)
    return np.asarray(values.to_numpy(zero_copy_only=False), dtype=np.int64)


def pair_key(row: Array, code: Array, width: int | None = None) -> Array:
    """One int64 per (row, code), equal exactly when both are; keys to be compared must share ``width``
    (more than any code: the vocabulary's size)."""
    if width is None:
        width = int(code.max()) + 1 if len(code) else 1
    return row * width + code


def first_in_row(flat: Flat) -> Array:
    """True where a value appears for the first time in its row."""
    _, first = np.unique(pair_key(flat.row, flat.code), return_index=True)
    out = np.zeros(len(flat), dtype=bool)
    out[first] = True
    return out


def last_in_row(flat: Flat) -> Array:
    """True where a value appears for the last time in its row."""
    return first_in_row(Flat(flat.row[::-1], flat.code[::-1]))[::-1]


def first_position(flat: Flat) -> Array:
    """For every value, the position (in ``flat``) of the first value equal to it in its row."""
    _, first, inverse = np.unique(pair_key(flat.row, flat.code), return_index=True, return_inverse=True)
    return first[inverse]  # type: ignore[no-any-return]


def first_of_row(row: Array) -> Array:
    """True at the first entry of each row (``row`` non-decreasing)."""
    out = np.ones(len(row), dtype=bool)
    out[1:] = row[1:] != row[:-1]
    return out


def rank_in_row(row: Array, n_rows: int) -> Array:
    """1-based position of each entry among the entries of its row (entries in row order)."""
    counts = np.bincount(row, minlength=n_rows)
    starts = np.cumsum(counts) - counts
    return np.arange(len(row)) - starts[row] + 1


def per_row(row: Array, n_rows: int, weights: Array | None = None) -> Array:
    """Entries (or the sum of ``weights``) per row, in value order: a row's sum adds its values left to right."""
    if weights is None:
        return np.bincount(row, minlength=n_rows)
    return np.bincount(row, weights=weights, minlength=n_rows)


def lookup(keys: Array, table_keys: Array, table_values: Array, missing: float | int) -> Array:
    """``table_values`` at ``keys`` (a dict lookup, vectorised); ``missing`` where a key is absent.
    ``table_keys`` must be unique."""
    if not len(table_keys):
        return np.full(len(keys), missing, dtype=np.result_type(table_values.dtype, type(missing)))
    order = np.argsort(table_keys)  # unique keys: any sort gives this order
    sorted_keys = table_keys[order]
    at = np.minimum(np.searchsorted(sorted_keys, keys), len(sorted_keys) - 1)
    found = sorted_keys[at] == keys
    return np.where(found, table_values[order][at], missing)
