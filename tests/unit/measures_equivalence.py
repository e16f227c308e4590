"""Assert that the column-wise measures give what the row-by-row ones (``rowwise_measures``) give."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa

from rag_eval.metrics import measures

from . import rowwise_measures
from .frames import per_query_frame

NEW_KEYS = ("search_latency",)  # added since the row-by-row computation: the p95's confidence interval


def _same(a: Any, b: Any, where: str) -> None:
    if isinstance(a, Mapping):
        assert isinstance(b, Mapping), (where, a, b)
        assert list(a) == [k for k in b if k not in NEW_KEYS], (where, list(a), list(b))
        for key in a:
            _same(a[key], b[key], f"{where}.{key}")
    elif isinstance(a, list | tuple):
        assert len(a) == len(b), (where, a, b)
        for i, (x, y) in enumerate(zip(a, b, strict=True)):
            _same(x, y, f"{where}[{i}]")
    elif isinstance(a, float | np.floating) and math.isnan(a):
        assert isinstance(b, float | np.floating) and math.isnan(b), (where, a, b)
    else:
        assert a == b and type(a) is type(b), (where, a, b, type(a), type(b))


def assert_same_measures(
    table: pd.DataFrame | pa.Table, configs: Sequence[Mapping[str, Any]], cutoffs: Sequence[int]
) -> None:
    """Summary (every key, in order, to the last bit) and per-query frame (every column the row-by-row
    frame has, to the last bit; any other column NaN only) of both computations."""
    frame = table.to_pandas() if isinstance(table, pa.Table) else table
    old_summary, old_frame = rowwise_measures.summarize(frame, configs=configs, cutoffs=cutoffs)
    new_summary, new_frame = measures.summarize(table, configs=configs, cutoffs=cutoffs)
    _same(old_summary, new_summary, "summary")
    assert len(old_frame) == len(new_frame)
    for column in new_frame.columns:
        if column not in old_frame.columns:
            assert new_frame[column].isna().all(), column
            continue
        old, new = old_frame[column].to_numpy(), new_frame[column].to_numpy()
        if column in ("query_id", "config", "judged"):
            assert list(old) == list(new), column
        else:
            assert np.array_equal(old.astype(float), new.astype(float), equal_nan=True), column
    assert set(old_frame.columns) <= set(new_frame.columns)
    caps = {c["name"]: c["cap_aware"] for c in configs}
    checked = {c["name"]: c["cap"] for c in configs}
    alone = per_query_frame(table, cutoffs, caps, checked)
    pd.testing.assert_frame_equal(alone, new_frame)
