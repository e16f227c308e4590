"""The build: every source checked, the quotes located as spans, the BEIR files written as a set; and the
command line (``python -m rag_eval.datasets.quotes``)."""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rag_eval.core.errors import DatasetError, quoted
from rag_eval.datasets.beir import split_problem
from rag_eval.datasets.chunking import DEFAULT_CHUNKER_SPEC, parse_chunker
from rag_eval.datasets.quotes.documents import SourceDoc, load_docs
from rag_eval.datasets.quotes.problems import Problem, raise_source_problems, short_quote
from rag_eval.datasets.quotes.queries import SourceQuery, load_queries

Span = tuple[str, int, int]  # (doc id, start, end)


@dataclass(frozen=True, slots=True)
class BuildReport:
    """What one build wrote."""

    documents: int
    queries: int
    answerable: int
    spans: int
    multi_chunk_queries: int
    chunker: str = DEFAULT_CHUNKER_SPEC

    @property
    def multi_chunk_share(self) -> float:
        """Share of all queries (answerable or not) that are multi-chunk."""
        return self.multi_chunk_queries / self.queries if self.queries else 0.0

    def __str__(self) -> str:
        return (
            f"{self.documents} documents, {self.queries} queries ({self.answerable} answerable), "
            f"{self.spans} spans, {self.multi_chunk_queries} multi-chunk queries "
            f"({self.multi_chunk_share:.1%}) under {self.chunker}"
        )


def locate(
    queries: dict[str, SourceQuery], docs: dict[str, SourceDoc], broken: set[str], problems: list[Problem]
) -> dict[str, list[Span]]:
    """Spans ``(doc_id, start, end)`` of every query, in evidence order.

    Quotes into documents that failed to load (``broken``) are not checked: the
    document's own problem is already reported.
    """
    spans: dict[str, list[Span]] = {}
    for query in queries.values():
        found: list[Span] = []
        for ev in query.evidence:
            doc = docs.get(ev.doc)
            if doc is None and ev.doc in broken:
                continue
            if doc is None:
                unknown = f"query {query.id}: unknown document {quoted(ev.doc)}"
                problems.append(Problem(unknown, query.path, ev.line, "doc"))
                continue
            starts = quote_starts(doc.text, ev.quote)
            if len(starts) != 1:
                how = "not found" if not starts else f"found {len(starts)} times, must be unique"
                problems.append(
                    Problem(
                        f"query {query.id}: quote {short_quote(ev.quote)} {how} in document {quoted(ev.doc)}",
                        query.path,
                        ev.line,
                        "quote",
                    )
                )
                continue
            span = (ev.doc, starts[0], starts[0] + len(ev.quote))
            if span in found:
                twice = f"query {query.id}: the same quote is given twice"
                problems.append(Problem(twice, query.path, ev.line, "quote"))
                continue
            found.append(span)
        spans[query.id] = found
    return spans


def quote_starts(text: str, needle: str) -> list[int]:
    """Start of every occurrence of ``needle`` in ``text``, overlapping ones included.

    >>> quote_starts("aaa", "aa")
    [0, 1]
    """
    found: list[int] = []
    at = text.find(needle)
    while at >= 0:
        found.append(at)
        at = text.find(needle, at + 1)
    return found


def _multi_chunk_queries(spans: dict[str, list[Span]], docs: dict[str, SourceDoc]) -> int:
    """Queries with spans in two or more chunks of one document under the default chunker."""
    chunker = parse_chunker(DEFAULT_CHUNKER_SPEC)
    ranges: dict[str, list[tuple[int, int]]] = {}
    count = 0
    for query_spans in spans.values():
        by_doc: dict[str, list[tuple[int, int]]] = {}
        for doc_id, start, end in query_spans:
            by_doc.setdefault(doc_id, []).append((start, end))
        for doc_id, doc_spans in by_doc.items():
            if len(doc_spans) < 2:
                continue
            if doc_id not in ranges:
                ranges[doc_id] = chunker.ranges(docs[doc_id].text)
            hit = {i for i, (cs, ce) in enumerate(ranges[doc_id]) for s, e in doc_spans if s < ce and cs < e}
            if len(hit) >= 2:
                count += 1
                break
    return count


def _jsonl(rows: list[dict[str, Any]]) -> str:
    return "".join(json.dumps(row, ensure_ascii=False) + "\n" for row in rows)


def render(
    docs: dict[str, SourceDoc], queries: dict[str, SourceQuery], spans: dict[str, list[Span]], split: str
) -> dict[str, str]:
    """The BEIR files by name: the corpus and the queries in id order, the qrels and span qrels sorted."""
    corpus = []
    for doc_id in sorted(docs):
        doc = docs[doc_id]
        meta: dict[str, str] = {"category": doc.category, "source": doc.source}
        if doc.revises:
            meta["revises"] = doc.revises
        corpus.append({"_id": doc.id, "title": doc.title, "text": doc.text, "metadata": meta})
    query_rows = [
        {"_id": q.id, "text": q.text, "metadata": {"answerable": q.answerable}}
        for q in (queries[qid] for qid in sorted(queries))
    ]
    pairs = sorted({(qid, doc_id) for qid, found in spans.items() for doc_id, _, _ in found})
    span_rows = sorted((qid, doc_id, s, e) for qid, found in spans.items() for doc_id, s, e in found)
    qrels = "query-id\tcorpus-id\tscore\n" + "".join(f"{q}\t{d}\t1\n" for q, d in pairs)
    span_qrels = "query-id\tcorpus-id\tstart\tend\tscore\n" + "".join(
        f"{q}\t{d}\t{s}\t{e}\t1\n" for q, d, s, e in span_rows
    )
    return {
        "corpus.jsonl": _jsonl(corpus),
        "queries.jsonl": _jsonl(query_rows),
        f"qrels/{split}.tsv": qrels,
        f"qrels/{split}.spans.tsv": span_qrels,
    }


def _write_atomically(out_dir: Path, files: dict[str, str]) -> None:
    """Every file into a temporary directory beside ``out_dir``, then each moved into place."""
    out_dir.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{out_dir.name}.build-", dir=out_dir.parent))
    try:
        for name, content in files.items():
            target = tmp / name
            target.parent.mkdir(parents=True, exist_ok=True)
            with open(target, "w", encoding="utf-8", newline="\n") as fh:
                fh.write(content)
        for name in files:
            final = out_dir / name
            final.parent.mkdir(parents=True, exist_ok=True)
            os.replace(tmp / name, final)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def build_dataset(src_dir: Path, out_dir: Path, split: str = "test") -> BuildReport:
    """Validate the sources in ``src_dir`` and write the BEIR files with span qrels into ``out_dir``.

    Raises :class:`DatasetError` listing every problem; nothing is written then.
    """
    src_dir, out_dir = Path(src_dir), Path(out_dir)
    problems: list[Problem] = []
    if why := split_problem(split):  # the loader's rule: what is built here must load
        problems.append(Problem(why, str(out_dir), None, "split"))
    if not src_dir.is_dir():
        problems.append(Problem("source directory does not exist", str(src_dir)))
        raise_source_problems(problems)
    broken: set[str] = set()
    docs = load_docs(src_dir / "docs", problems, broken)
    queries = load_queries(src_dir / "queries", problems)
    spans = locate(queries, docs, broken, problems)
    raise_source_problems(problems)

    _write_atomically(out_dir, render(docs, queries, spans, split))
    return BuildReport(
        documents=len(docs),
        queries=len(queries),
        answerable=sum(q.answerable for q in queries.values()),
        spans=sum(len(found) for found in spans.values()),
        multi_chunk_queries=_multi_chunk_queries(spans, docs),
    )


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m rag_eval.datasets.quotes SRC_DIR OUT_DIR [--split test]``: 0 built, 2 a problem in the
    sources (every one listed), 3 the output could not be written."""
    parser = argparse.ArgumentParser(
        prog="python -m rag_eval.datasets.quotes",
        description="Build BEIR files with span qrels from markdown documents and quoted evidence.",
    )
    parser.add_argument("src_dir", type=Path, metavar="SRC_DIR", help="directory holding docs/ and queries/")
    parser.add_argument("out_dir", type=Path, metavar="OUT_DIR", help="directory the built files are written to")
    parser.add_argument("--split", default="test", help="qrels split name (default: test)")
    args = parser.parse_args(argv)
    try:
        report = build_dataset(args.src_dir, args.out_dir, args.split)
    except DatasetError as exc:
        print(f"error: {' '.join(str(exc).split())}", file=sys.stderr)
        return exc.exit_code
    except OSError as exc:
        print(f"error: cannot write {args.out_dir}: {exc.strerror or exc}", file=sys.stderr)
        return 3
    print(report)
    return 0
