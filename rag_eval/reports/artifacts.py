"""The files the reports make of a run, a comparison and a load measurement, rendered and named, for
the run store to publish (:mod:`rag_eval.rundir.publish` writes what it is handed, in this order).

>>> doc = {"run": {"dir": "r", "experiment": "e"}, "against": None, "exit_code": 0, "queries_compared": 3,
...        "left_out": {"only_in_run": [], "only_in_against": []}, "alpha": 0.05, "resamples": 99, "seed": 1,
...        "gates_file": "g.toml", "notes": [], "test": "t", "comparisons": []}
>>> [a.name for a in comparison_files(doc)]
['compare.json', 'junit.xml', 'summary.md']
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from functools import partial
from pathlib import Path
from typing import Any

import pyarrow as pa

from rag_eval.files import json_safe
from rag_eval.loadtest.driver import LoadResult
from rag_eval.metrics.perquery import doc_of
from rag_eval.reports.junit import render_junit
from rag_eval.reports.loadtest import render_load_markdown
from rag_eval.reports.markdown import render_markdown
from rag_eval.reports.rundata import COMPARE_FILE
from rag_eval.reports.summary import render_summary
from rag_eval.rundir.publish import Artifact, JsonFile, ParquetFile, Ranking, Render, TextFile
from rag_eval.rundir.reader import LOAD, LOAD_REQUESTS, LOAD_SUMMARY

REPORT_MD = "report.md"
RESOLUTION_FILE = "resolution.json"
COMPARISON_FILES = (COMPARE_FILE, "junit.xml", "summary.md")


def comparison_names(suffix: str = "") -> tuple[str, str, str]:
    """The names of a comparison's files, ``suffix`` before each extension.

    >>> comparison_names("-vs-night")
    ('compare-vs-night.json', 'junit-vs-night.xml', 'summary-vs-night.md')
    """
    a, b, c = (f"{stem}{suffix}.{ext}" for stem, _, ext in (name.rpartition(".") for name in COMPARISON_FILES))
    return a, b, c


def comparison_files(document: Mapping[str, Any], suffix: str = "") -> list[Artifact]:
    """``compare.json``, ``junit.xml`` (one testcase per gate) and ``summary.md`` (the gate table); with
    ``suffix`` (``-vs-OTHER``: a comparison against another run) ``compare-vs-OTHER.json`` and so on."""
    compare_json, junit, summary = comparison_names(suffix)
    return [
        JsonFile(compare_json, document),
        TextFile(junit, render_junit(document)),
        TextFile(summary, render_summary(document)),
    ]


def load_files(result: LoadResult) -> list[Artifact]:
    """``load_requests.parquet``, ``load.md``, then ``load.json`` (what readers look for) last."""
    return [
        ParquetFile(LOAD_REQUESTS, result.requests),
        TextFile(LOAD_SUMMARY, render_load_markdown(json_safe(result.document))),
        JsonFile(LOAD, result.document),
    ]


def run_files(
    summary: Mapping[str, Any],
    manifest: Mapping[str, Any],
    comparison: Mapping[str, Any],
    load: LoadResult | None,
    resolution: Mapping[str, Any] | None = None,
) -> list[Artifact]:
    """Every rendered file of a run, in the order they are written: ``summary.json`` (and, for a collection
    built elsewhere, ``resolution.json``: where each of its rows was located), the load files, ``report.md``,
    the comparison's, and ``manifest.json`` last."""
    return [
        JsonFile("summary.json", summary),
        *((JsonFile(RESOLUTION_FILE, resolution),) if resolution is not None else ()),
        *(load_files(load) if load is not None else ()),
        TextFile(REPORT_MD, render_markdown(dict(summary), dict(manifest), comparison)),
        *comparison_files(comparison),
        JsonFile("manifest.json", manifest),
    ]


def html_report(shown_dir: Path) -> Render:
    """What renders ``report.html`` into the staging directory, naming ``shown_dir`` as the run's."""
    from rag_eval.reports.html import render_html  # its figures import matplotlib: not for a comparison alone

    return partial(render_html, shown_dir=shown_dir)


def trec_rankings(parts: Iterator[pa.Table]) -> Iterator[Ranking]:
    """(config, query id, delivered chunks, delivered documents) of every row, part by part, ranked as the
    measures rank them, each with its search score (:func:`scored_rankings`)."""
    for part in parts:
        for row in part.to_pylist():
            chunks, docs = scored_rankings(row)
            yield row["config"], row["query_id"], chunks, docs


def scored_rankings(row: Mapping[str, Any]) -> tuple[list[tuple[str, float]], list[tuple[str, float]]]:
    """The delivered chunks and documents of a row in delivered order (as
    :func:`~rag_eval.metrics.measures.chunk_ranking` and :func:`~rag_eval.metrics.measures.doc_ranking` rank
    them), each with its search score: a chunk's best hit's score (else its block's), a document's that of
    its first delivered chunk.

    >>> row = {"member_chunks": ["d#chunk-1", "d#chunk-0", "e#chunk-0"], "member_block": [1, 1, 2],
    ...        "returned_scores": [0.9, 0.7], "hit_chunks": ["d#chunk-1", "e#chunk-0", "d#chunk-0"],
    ...        "hit_scores": [0.9, 0.7, 0.6]}
    >>> scored_rankings(row)
    ([('d#chunk-1', 0.9), ('d#chunk-0', 0.6), ('e#chunk-0', 0.7)], [('d', 0.9), ('e', 0.7)])
    """
    best: dict[str, float] = {}
    for chunk, score in zip(row["hit_chunks"], row["hit_scores"], strict=True):
        best.setdefault(chunk, float(score))
    blocks, block_scores = row["member_block"], row["returned_scores"]
    chunks: dict[str, float] = {}
    for chunk, block in zip(row["member_chunks"], blocks, strict=True):
        if chunk not in chunks:
            chunks[chunk] = best.get(chunk, float(block_scores[block - 1]))
    docs: dict[str, float] = {}
    for chunk, score in chunks.items():
        if not chunk.startswith("unknown:"):
            docs.setdefault(doc_of(chunk), score)
    return list(chunks.items()), list(docs.items())
