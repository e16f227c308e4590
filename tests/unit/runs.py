"""Synthetic run directories for the comparison tests: per-query rows written as the harness writes
them (every column of the run store's schema), the summary computed by the real ``summarize``."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pandas as pd

from rag_eval.compare.runs import ComparedRun
from rag_eval.files import write_json
from rag_eval.metrics.measures import summarize
from rag_eval.rundir.directory import MARKER
from rag_eval.rundir.rows import SCHEMA, rows_to_table

CUTOFFS = (1, 5)


def config(name: str, *, pipeline: str = "evidence", cap: int = 2, return_n: int = 5) -> dict[str, Any]:
    return {
        "name": name, "baseline": False, "mode": "dense", "pipeline": pipeline, "retrieve_k": 20,
        "return_n": return_n, "cap": cap, "cap_aware": None if pipeline == "legacy" else cap, "hash": f"h-{name}",
        "origin": "inline", "rag": {},
    }  # fmt: skip


def row(qid: str, cfg: str, *, delivered: Sequence[str], relevant: Sequence[str] = (), **extra: Any) -> dict[str, Any]:
    """One per-query row: ``delivered`` are true chunk keys (``doc#chunk-i``) in payload order."""
    doc_ids = [c.split("#", 1)[0] for c in delivered]
    base: dict[str, Any] = {f.name: None for f in SCHEMA}
    base.update(
        query_id=qid, config=cfg, query_index=int(qid.lstrip("q") or 0), query_text=f"text {qid}",
        judged=bool(relevant), returned_keys=list(delivered), returned_doc_ids=doc_ids,
        returned_ranks=list(range(1, len(delivered) + 1)),
        returned_scores=[1.0 - i / 100 for i in range(len(delivered))],
        returned_content_sha=[f"sha-{c}" for c in delivered], returned_chars=[100] * len(delivered),
        member_keys=list(delivered), member_chunks=list(delivered), member_doc_ids=doc_ids,
        member_content_sha=[f"sha-{c}" for c in delivered], member_block=list(range(1, len(delivered) + 1)),
        hit_keys=list(delivered), hit_chunks=list(delivered), hit_content_sha=[f"sha-{c}" for c in delivered],
        hit_scores=[1.0] * len(delivered), relevant_chunks=sorted(relevant), relevant_grades=[1] * len(relevant),
        relevant_docs=sorted({c.split("#", 1)[0] for c in relevant}),
        relevant_doc_grades=[1] * len({c.split("#", 1)[0] for c in relevant}),
        delivered_relevant=sorted(set(relevant) & set(delivered)), lost_chunks=[], lost_stages=[],
        n_hits=len(delivered), n_dedup=0, n_cap=0, n_truncated=0, n_blocks=len(delivered),
        guard_references=len(set(delivered)), guard_violations=0, payload_chars=100 * len(delivered),
        transform_us=10.0, search_us=1000.0, postprocess_us=100.0, projection_us=20.0, e2e_us=1130.0,
        postsearch_cpu_us=110.0,
    )  # fmt: skip
    base.update(extra)
    return base


def make_run(
    rows: Sequence[Mapping[str, Any]],
    configs: Sequence[Mapping[str, Any]],
    *,
    baseline: str,
    checksum: str = "c0ffee",
    experiment: str = "synthetic",
    directory: Path | None = None,
    gates: Mapping[str, Any] | None = None,
    index: Mapping[str, Any] | None = None,
) -> ComparedRun:
    """A run in memory, or written to ``directory`` (then read back as ``rag-eval compare`` reads it)."""
    table = rows_to_table([dict(r) for r in rows])
    frame = table.to_pandas()
    cfgs = [{**c, "baseline": c["name"] == baseline} for c in configs]
    summary_configs, _ = summarize(frame, configs=cfgs, cutoffs=CUTOFFS)
    summary = {"experiment": experiment, "baseline": baseline, "cutoffs": list(CUTOFFS), "configs": summary_configs}
    manifest = {
        "experiment": {"name": experiment, "source": None, "chunker": "sentences:size=3,overlap=0",
                       "min_overlap_chars": 1, "ingest_profile": {"name": "clean"}, "cutoffs": list(CUTOFFS),
                       "gates": dict(gates) if gates is not None else None, "baseline": baseline},
        "dataset": {"name": "synthetic", "split": "test", "checksum": checksum, "label_level": "span"},
        "milvus": {"backend": "lite", "server_version": "x", "index": dict(index or {"index_type": "FLAT"})},
        "git": {"commit": "0" * 40, "dirty": False},
        "configs": cfgs,
        "started": "2026-01-01T00:00:00+00:00",
    }  # fmt: skip
    if directory is None:
        summary = json.loads(json.dumps(summary, default=float))
        return ComparedRun(dir=None, table=frame, summary=summary, manifest=manifest)
    directory.mkdir(parents=True, exist_ok=True)
    import pyarrow.parquet as pq

    pq.write_table(table, directory / "per_query.parquet")
    write_json(directory / "summary.json", summary)
    write_json(directory / "manifest.json", manifest)
    write_json(directory / MARKER, {"files": ["per_query.parquet", "summary.json", "manifest.json"]})
    return ComparedRun.from_dir(directory)


def pair_rows(n: int, cfg: str, *, lose: int = 0, offset: int = 0, **extra: Any) -> list[dict[str, Any]]:
    """``n`` queries, each with two relevant chunks of one document; the first ``lose`` deliver only one."""
    out = []
    for i in range(n):
        qid = f"q{i + offset}"
        relevant = [f"d{i}#chunk-0", f"d{i}#chunk-1"]
        delivered = [*relevant[:1], f"x{i}#chunk-0"] if i < lose else [*relevant, f"x{i}#chunk-0"]
        out.append(row(qid, cfg, delivered=delivered, relevant=relevant, **extra))
    return out


def frame_of(run: ComparedRun) -> pd.DataFrame:
    return run.table
