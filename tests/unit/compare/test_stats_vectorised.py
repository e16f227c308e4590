"""The percentile of sorted rows, as the intervals of latency measures take it, against numpy."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from rag_eval.compare.orderstats import percentile_rows


@settings(max_examples=60, deadline=None)
@given(
    st.lists(st.floats(0, 1e6, allow_nan=False), min_size=1, max_size=40),
    st.sampled_from([0.0, 5.0, 37.3, 50.0, 90.0, 95.0, 99.0, 100.0]),
)
def test_the_percentile_of_sorted_rows_is_numpys(row: list[float], q: float) -> None:
    x = np.array([row, row[::-1]], dtype=float)
    assert np.array_equal(percentile_rows(x, q), np.percentile(x, q, axis=1))
