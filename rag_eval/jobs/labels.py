"""``rag-eval labels next RUN_DIR``: the labelling file of the query log queries the configs disagree on most.

A run that replayed a query log knows, per query, each config's delivered chunks: the disagreement of a query is
the largest ``1 - RBO`` of a config's payload with the baseline config's (:mod:`rag_eval.metrics.labelfree`), the
chunks offered for marking are the union of what the configs delivered, with their texts and offsets from the
run's ``texts.parquet``. Which queries are picked, and how a marked file becomes labels: docs/traffic.md.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from rag_eval.core.errors import ConfigError, ConfigProblem, RunDirectoryError
from rag_eval.metrics.labelfree import PREFIX, baseline_of, overlap_values
from rag_eval.rundir.reader import FinishedRun, read_parquet
from rag_eval.rundir.rows import TRAFFIC
from rag_eval.rundir.texts import TEXTS_FILE
from rag_eval.traffic.labelling import (
    Candidate,
    ChunkText,
    Delivered,
    Screened,
    import_labels,
    screen,
    select_for_labelling,
    write_labelling_file,
)

MAX_COUNT = 100_000  # queries a labelling file may offer
ROW_COLUMNS = ("query_id", "config", "origin", "judged", "query_text", "occurrences", "member_chunks")


def labels_command(action: str, flags: Mapping[str, Any]) -> str:
    """``rag-eval labels next`` or ``labels import``, given its flags: the line it prints."""
    if action == "next":
        path, picked, screened = next_to_label(flags["run_dir"], flags["out"], count=flags["count"],
                                               force=flags["force"])  # fmt: skip
        return (f"{path}: {picked} query log queries to label, the most contested first (of {len(screened.eligible)} "
                f"eligible; left out: {screened.labelled} already in the data set, {screened.duplicates} the same "
                f"text as another, {screened.agreed} where every config delivered the baseline's payload)")  # fmt: skip
    return import_labels(Path(flags["marked"]), Path(flags["dataset"]), split=flags["split"]).summary()


def next_to_label(
    run_dir: str | Path, out: str | Path, *, count: int, force: bool = False
) -> tuple[Path, int, Screened]:
    """Write the labelling file of the ``count`` query log queries to label next; (its path, queries picked, how
    many of the run's query log queries could be picked and why the others could not)."""
    if isinstance(count, bool) or not 1 <= count <= MAX_COUNT:
        raise ConfigError([ConfigProblem("--count", f"expected 1 to {MAX_COUNT:,} queries, got {count}")])
    run = FinishedRun.read(run_dir)
    if not run.manifest.get("traffic"):
        raise RunDirectoryError("this run replayed no query log ([traffic]): nothing to pick from", path=str(run.dir))
    rows = read_parquet(run.dir / "per_query.parquet", ROW_COLUMNS)
    configs: Sequence[Mapping[str, Any]] = run.manifest.get("configs") or []
    traffic = rows[rows["origin"] == TRAFFIC].reset_index(drop=True)
    # a data set's query without a label (ClapNQ's unanswered half) is not labelled yet: it may be picked
    labelled = (rows["origin"] != TRAFFIC) & rows["judged"].fillna(False).astype(bool)
    labelled_texts = rows.loc[labelled, "query_text"].astype(str).unique().tolist()
    candidates = candidates_of(traffic, configs)
    picked = select_for_labelling(candidates, count=count, labelled_texts=labelled_texts)
    path = write_labelling_file(out, picked, chunk_texts(run.dir / TEXTS_FILE), force=force)
    return path, len(picked), screen(candidates, labelled_texts)


def candidates_of(traffic: pd.DataFrame, configs: Sequence[Mapping[str, Any]]) -> list[Candidate]:
    """One candidate per query log query: its disagreement (the largest 1 - RBO with the baseline over the
    other configs; 0 where every payload is the baseline's) and the union of the configs' delivered chunks."""
    if traffic.empty:
        return []
    order = {str(c["name"]): i for i, c in enumerate(configs)}
    baseline = baseline_of(configs)
    frame = traffic.assign(member_keys=traffic["member_chunks"])  # chunks compared by their true key here
    over = overlap_values(frame, configs)
    frame = frame.assign(disagreement=1.0 - over[PREFIX + "rbo"].to_numpy(dtype=float))
    out: list[Candidate] = []
    for qid, group in frame.groupby("query_id", sort=True):
        group = group.sort_values("config", key=lambda s: s.map(order))
        others = group.loc[group["config"] != baseline, "disagreement"].to_numpy(dtype=float)
        defined = others[~np.isnan(others)]
        delivered: dict[str, list[str]] = {}
        for name, chunks in zip(group["config"], group["member_chunks"], strict=True):
            for chunk in chunks if chunks is not None else []:
                configs_of = delivered.setdefault(str(chunk), [])
                if name not in configs_of:
                    configs_of.append(str(name))
        first = group.iloc[0]
        out.append(
            Candidate(
                query_id=str(qid),
                text=str(first["query_text"]),
                count=int(first["occurrences"]) if pd.notna(first["occurrences"]) else 1,
                disagreement=float(min(1.0, max(0.0, defined.max()))) if defined.size else 0.0,
                delivered=tuple(Delivered(chunk=c, configs=tuple(n)) for c, n in delivered.items()),
            )
        )
    return out


def chunk_texts(path: Path) -> dict[str, ChunkText]:
    """The run's chunk texts and offsets, by chunk key (a chunk of no known document: text only)."""
    if not path.is_file():
        return {}
    texts = read_parquet(path)
    out: dict[str, ChunkText] = {}
    starts = texts["start"].to_numpy(dtype=float)
    ends = texts["end"].to_numpy(dtype=float)
    for i, (chunk, doc_id, text, title) in enumerate(
        zip(texts["chunk"], texts["doc_id"], texts["text"], texts["title"], strict=True)
    ):
        placed = isinstance(doc_id, str) and bool(doc_id) and not np.isnan(starts[i]) and not np.isnan(ends[i])
        out[str(chunk)] = ChunkText(
            doc_id=str(doc_id) if placed else None,
            start=int(starts[i]) if placed else None,
            end=int(ends[i]) if placed else None,
            text=str(text) if isinstance(text, str) else None,
            title=str(title) if isinstance(title, str) else "",
        )
    return out
