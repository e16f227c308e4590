"""Whole tables for tests: a run store's parts read at once, the per-query measures as one frame.

A run never holds either whole (it reads its parts one batch at a time and computes the measures
column-wise, a batch at a time); small test runs and the oracles compare whole tables.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import pandas as pd
import pyarrow as pa

from rag_eval.metrics import perquery
from rag_eval.metrics.measures import as_arrow
from rag_eval.rundir.directory import RunStore
from rag_eval.rundir.rows import SCHEMA


def read_parts(store: RunStore) -> pa.Table:
    """Every finished batch of ``store`` in one table, refused like a run refuses them (a pair twice)."""
    store.check_parts()
    parts = list(store.iter_parts())
    return pa.concat_tables(parts) if parts else SCHEMA.empty_table()


def per_query_frame(
    table: pd.DataFrame | pa.Table,
    cutoffs: Sequence[int],
    caps: Mapping[str, int | None],
    checked_caps: Mapping[str, int | None] | None = None,
) -> pd.DataFrame:
    """One row per (query, config) with every per-query measure (NaN where not defined).

    ``caps``: the cap of the cap-aware recall per config (None: no cap); ``checked_caps``: the
    cap delivery is checked against (``cap_ok`` by stored doc id, ``cap_ok_true`` by true
    document; NaN where a config has none).
    """
    return perquery.compute(as_arrow(table, perquery.COLUMNS), cutoffs, caps, checked_caps or {}).frame
