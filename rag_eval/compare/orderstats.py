"""Order statistics by cumulated counts: a percentile of every bootstrap resample without sorting one.

The units are sorted once; in a resample, the value of rank ``k`` is the first sorted value at which the
cumulated count of draws passes ``k`` (:func:`cumulate`, :func:`count_down`). How the bootstrap uses them:
docs/performance.md, "The comparison".
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

ROW_BY_ROW_MIN_COLUMNS = 256  # from this many columns, a row at a time is faster than numpy's cumsum down axis 0


def cumulate(counts: np.ndarray) -> np.ndarray:
    """``np.cumsum(counts, axis=0, out=counts)`` of a C-ordered 2-d array, in place: for a wide array one
    contiguous row added to the next at a time, where numpy's accumulate down the first axis walks each
    column with the row's stride (5-7 times slower for 100-300 rows of 7,500 resamples here).

    >>> x = np.array([[1, 2], [3, 4], [5, 6]], dtype=np.int16)
    >>> cumulate(x).tolist()
    [[1, 2], [4, 6], [9, 12]]
    """
    if counts.shape[1] < ROW_BY_ROW_MIN_COLUMNS or not counts.flags.c_contiguous:
        return np.cumsum(counts, axis=0, out=counts)
    for i in range(1, counts.shape[0]):
        np.add(counts[i], counts[i - 1], out=counts[i])
    return counts


def count_down(mask: np.ndarray) -> np.ndarray:
    """How many rows of each column of a bool matrix are True (``np.count_nonzero(mask, axis=0)``, summed
    in the narrowest integer that holds the count: twice as fast)."""
    return np.asarray(mask.view(np.uint8).sum(axis=0, dtype=narrowest(mask.shape[0])), dtype=np.intp)


def narrowest(count: int) -> type[np.signedinteger[Any]]:
    """The narrowest integer that holds a count (or a cumulated count) of up to ``count``: int16 halves the
    memory a pass over counts reads."""
    return np.int16 if count < np.iinfo(np.int16).max else np.int32


def percentile_rows(values: np.ndarray, percentile: float, in_place: bool = False) -> np.ndarray:
    """numpy's linear percentile of each row of a 2-d array, from the two order statistics it interpolates
    (the rows sorted in place with ``in_place``).

    >>> x = np.array([[4.0, 1.0, 3.0, 2.0]])
    >>> float(percentile_rows(x, 95.0)[0]) == float(np.percentile([4.0, 1.0, 3.0, 2.0], 95.0))
    True
    """
    rows = values if in_place else values.copy()
    rows.sort(axis=1)
    virtual = (rows.shape[1] - 1) * np.true_divide(percentile, 100)
    low = math.floor(virtual)
    return interpolate(rows[:, low], rows[:, min(low + 1, rows.shape[1] - 1)], float(virtual - low))


def interpolate(low: np.ndarray, high: np.ndarray, t: float) -> np.ndarray:
    """numpy's linear interpolation between two order statistics (``np.percentile``'s ``_lerp``)."""
    diff = high - low
    return np.asarray(high - diff * (1 - t) if t >= 0.5 else low + diff * t)
