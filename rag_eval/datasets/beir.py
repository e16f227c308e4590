"""Loaders: BEIR with span qrels, plain BEIR (document-level qrels only), TREC qrels.

Files are streamed line by line and hashed as they are read (the data set checksum); a split is a plain name
(:func:`split_problem`), so it can name nothing outside ``qrels/``; a split with no relevance label at all is
refused (every gate would pass over nothing). Every problem is reported with file, line and field, up to
``MAX_PROBLEMS`` raised as one :class:`DatasetError`. The layout: docs/harness.md, "Data sets".
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rag_eval.core.errors import DatasetError, quoted
from rag_eval.core.parsing import TextError, parse_json
from rag_eval.files import name_length_problem

MAX_PROBLEMS = 20
SPLIT_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")  # joined into qrels/<split>.tsv
SPLIT_RULE = "a split is a plain name (letters, digits, '.', '_', '-', starting with a letter or digit)"


def split_name_problem(split: str) -> str | None:
    """Why ``split`` is not a plain name, or None.

    >>> split_name_problem("dev.v2") is None
    True
    >>> split_name_problem("../../x")
    "'../../x': a split is a plain name (letters, digits, '.', '_', '-', starting with a letter or digit)"
    """
    return None if SPLIT_NAME.fullmatch(split) else f"{quoted(split)}: {SPLIT_RULE}"


def split_problem(split: str) -> str | None:
    """Why the loader cannot read the files of ``split``, or None: a plain name, short enough for the
    longest file name it looks for (``qrels/<split>.spans.tsv``)."""
    return split_name_problem(split) or name_length_problem(
        "split", split, "{}.spans.tsv", "qrels/<split>.spans.tsv of the data set"
    )


@dataclass(frozen=True, slots=True, kw_only=True)
class Document:
    id: str
    title: str
    text: str
    metadata: Mapping[str, Any] = field(default_factory=dict)

    @property
    def category(self) -> str:
        return str(self.metadata.get("category") or "")

    @property
    def source(self) -> str:
        """Human-readable path or id of the document (metadata ``source`` when it names a path)."""
        src = self.metadata.get("source")
        return str(src) if isinstance(src, str) and "/" in src else self.id


@dataclass(frozen=True, slots=True, kw_only=True)
class Query:
    id: str
    text: str
    metadata: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Qrel:
    query_id: str
    doc_id: str
    score: int


@dataclass(frozen=True, slots=True)
class SpanQrel:
    query_id: str
    doc_id: str
    start: int
    end: int
    score: int


@dataclass(frozen=True, slots=True, kw_only=True)
class Dataset:
    name: str
    path: Path
    split: str
    documents: Mapping[str, Document]
    queries: Mapping[str, Query]
    qrels: tuple[Qrel, ...]
    spans: tuple[SpanQrel, ...] | None  # None: plain BEIR, document-level relevance only
    checksum: str  # sha256 over the files read, in a fixed order

    @property
    def has_spans(self) -> bool:
        return self.spans is not None

    def relevant_docs(self) -> dict[str, dict[str, int]]:
        out: dict[str, dict[str, int]] = {}
        for q in self.qrels:
            if q.score > 0:
                out.setdefault(q.query_id, {})[q.doc_id] = q.score
        return out


class _Problems:
    """Collects problems; raises one DatasetError naming the first (and listing them all)."""

    def __init__(self) -> None:
        self.items: list[DatasetError] = []

    def add(self, message: str, *, path: Path, line: int | None = None, field: str | None = None) -> None:
        if len(self.items) < MAX_PROBLEMS:
            self.items.append(DatasetError(message, path=str(path), line=line, field=field))

    def raise_if_any(self) -> None:
        if not self.items:
            return
        first = self.items[0]
        if len(self.items) == 1:
            raise first
        more = "; ".join(str(e) for e in self.items[1:])
        capped = f" (first {MAX_PROBLEMS} shown)" if len(self.items) >= MAX_PROBLEMS else ""
        raise DatasetError(
            f"{first.message}; {len(self.items) - 1} more problem(s){capped}: {more}",
            path=first.path,
            line=first.line,
            field=first.field,
        )


def _check_file(path: Path) -> None:
    """Refuse a data set file that is not there, or is there but not a regular file (a directory, a pipe, a
    device such as ``/dev/zero``, which would be read for ever)."""
    if not path.is_file():
        raise DatasetError("missing file" if not path.exists() else "not a regular file", path=str(path))


def _lines(path: Path, digest: Any) -> Iterator[tuple[int, str]]:
    """(1-based line number, line) pairs; feeds the checksum with the raw bytes."""
    try:
        with path.open("rb") as fh:
            for n, raw in enumerate(fh, start=1):
                digest.update(raw)
                try:
                    yield n, raw.decode("utf-8").rstrip("\r\n")
                except UnicodeDecodeError as exc:
                    raise DatasetError(f"not UTF-8 ({exc.reason})", path=str(path), line=n) from exc
    except OSError as exc:
        raise DatasetError(f"cannot read: {exc.strerror}", path=str(path)) from exc


def _jsonl(path: Path, digest: Any, problems: _Problems, kind: str) -> Iterator[tuple[int, dict[str, Any]]]:
    seen: set[str] = set()
    for n, line in _lines(path, digest):
        if not line.strip():
            continue
        try:
            obj = parse_json(line, unicode=True)
        except TextError as exc:
            problems.add(f"bad JSON ({exc.in_line})", path=path, line=n)
            continue
        if not isinstance(obj, dict):
            problems.add(f"a {kind} must be a JSON object", path=path, line=n)
            continue
        ident = obj.get("_id")
        if not isinstance(ident, str) or not ident:
            problems.add("missing or empty (must be a non-empty string)", path=path, line=n, field="_id")
            continue
        if any(ch.isspace() for ch in ident) or "#chunk-" in ident:
            # ids become TREC docnos and qids (whitespace-separated) and the doc part of chunk keys
            problems.add(
                f"{quoted(ident)} holds whitespace or '#chunk-': ids must be single tokens",
                path=path,
                line=n,
                field="_id",
            )
            continue
        if ident in seen:
            problems.add(f"duplicate id {quoted(ident)}", path=path, line=n, field="_id")
            continue
        seen.add(ident)
        if not isinstance(obj.get("text"), str):
            problems.add("missing or not a string", path=path, line=n, field="text")
            continue
        meta = obj.get("metadata", {})
        if meta is None:
            meta = {}
        if not isinstance(meta, dict):
            problems.add("must be a JSON object", path=path, line=n, field="metadata")
            continue
        obj["metadata"] = meta
        yield n, obj


def read_documents(path: Path, digest: Any, problems: _Problems) -> dict[str, Document]:
    docs: dict[str, Document] = {}
    for n, obj in _jsonl(path, digest, problems, "document"):
        title = obj.get("title", "")
        if title is not None and not isinstance(title, str):
            problems.add("must be a string", path=path, line=n, field="title")
            continue
        docs[obj["_id"]] = Document(id=obj["_id"], title=title or "", text=obj["text"], metadata=obj["metadata"])
    return docs


def read_queries(path: Path, digest: Any, problems: _Problems) -> dict[str, Query]:
    return {
        obj["_id"]: Query(id=obj["_id"], text=obj["text"], metadata=obj["metadata"])
        for _, obj in _jsonl(path, digest, problems, "query")
    }


def _int(value: str, *, path: Path, line: int, field: str, problems: _Problems) -> int | None:
    try:
        return int(value)
    except ValueError:
        problems.add(f"{quoted(value)} is not an integer", path=path, line=line, field=field)
        return None


def _tsv_rows(
    path: Path, digest: Any, columns: tuple[str, ...], problems: _Problems
) -> Iterator[tuple[int, list[str]]]:
    header_seen = False
    for n, line in _lines(path, digest):
        if not line.strip():
            continue
        cells = line.split("\t")
        if not header_seen:
            header_seen = True
            if cells[0].strip().lower() in ("query-id", "query_id", "qid"):
                if len(cells) != len(columns):
                    problems.add(
                        f"header has {len(cells)} columns, expected {len(columns)}: {', '.join(columns)}",
                        path=path,
                        line=n,
                    )
                continue
        if len(cells) != len(columns):
            problems.add(
                f"{len(cells)} tab-separated columns, expected {len(columns)}: {', '.join(columns)}", path=path, line=n
            )
            continue
        yield n, [c.strip() for c in cells]


def read_qrels_tsv(
    path: Path, digest: Any, problems: _Problems, docs: Mapping[str, Document], queries: Mapping[str, Query]
) -> list[Qrel]:
    out: list[Qrel] = []
    seen: set[tuple[str, str]] = set()
    for n, (qid, did, raw) in _tsv_rows(path, digest, ("query-id", "corpus-id", "score"), problems):
        score = _int(raw, path=path, line=n, field="score", problems=problems)
        if _known(qid, did, (path, n), problems, (docs, queries)) and score is not None:
            if (qid, did) in seen:
                problems.add(f"duplicate judgement for ({qid}, {did})", path=path, line=n, field="corpus-id")
                continue
            seen.add((qid, did))
            out.append(Qrel(qid, did, score))
    return out


def read_trec_qrels(
    path: Path, digest: Any, problems: _Problems, docs: Mapping[str, Document], queries: Mapping[str, Query]
) -> list[Qrel]:
    """TREC qrels: ``qid iteration docno relevance``, whitespace separated."""
    out: list[Qrel] = []
    for n, line in _lines(path, digest):
        cells = line.split()
        if not cells:
            continue
        if len(cells) != 4:
            problems.add(f"{len(cells)} columns, expected 4: qid iteration docno relevance", path=path, line=n)
            continue
        qid, _, did, raw = cells
        score = _int(raw, path=path, line=n, field="relevance", problems=problems)
        if _known(qid, did, (path, n), problems, (docs, queries)) and score is not None:
            out.append(Qrel(qid, did, score))
    return out


def read_span_qrels(
    path: Path, digest: Any, problems: _Problems, docs: Mapping[str, Document], queries: Mapping[str, Query]
) -> list[SpanQrel]:
    out: list[SpanQrel] = []
    columns = ("query-id", "corpus-id", "start", "end", "score")
    for n, (qid, did, raw_s, raw_e, raw_score) in _tsv_rows(path, digest, columns, problems):
        start = _int(raw_s, path=path, line=n, field="start", problems=problems)
        end = _int(raw_e, path=path, line=n, field="end", problems=problems)
        score = _int(raw_score, path=path, line=n, field="score", problems=problems)
        if not _known(qid, did, (path, n), problems, (docs, queries)) or None in (start, end, score):
            continue
        assert start is not None and end is not None and score is not None
        length = len(docs[did].text)
        if start >= end:
            problems.add(f"start {start} >= end {end}", path=path, line=n, field="start")
        elif start < 0 or end > length:
            where = f"outside the text of {quoted(did)} (0-{length})"
            problems.add(f"span {start}-{end} {where}", path=path, line=n, field="end")
        else:
            out.append(SpanQrel(qid, did, start, end, score))
    return out


def _known(
    qid: str,
    did: str,
    where: tuple[Path, int],
    problems: _Problems,
    known: tuple[Mapping[str, Document], Mapping[str, Query]],
) -> bool:
    """True when the qrels line at ``where`` (file, line) names a known query and document; else each
    unknown id is a problem of that line."""
    (path, line), (docs, queries) = where, known
    ok = True
    if qid not in queries:
        problems.add(f"unknown query {quoted(qid)}", path=path, line=line, field="query-id")
        ok = False
    if did not in docs:
        problems.add(f"unknown document {quoted(did)}", path=path, line=line, field="corpus-id")
        ok = False
    return ok


def _require_labels(
    qrels_path: Path, qrels: list[Qrel], spans_path: Path | None, spans: list[SpanQrel] | None
) -> None:
    """A split with no relevance label is refused: every query would be unjudged and every gate would pass
    over nothing. Document labels come from the qrels; chunk labels from the spans when there are spans."""
    no_spans = spans_path is not None and not any(s.score > 0 for s in spans or ())
    if not any(q.score > 0 for q in qrels):
        also = f" (nor does {spans_path})" if no_spans else ""
        raise DatasetError(
            f"holds no relevance label, no judgement with a score above 0{also}: every query would be unjudged; "
            "add the labels or give the split that has them",
            path=str(qrels_path),
        )
    if no_spans:
        raise DatasetError(
            "holds no relevance label, no evidence span with a score above 0: chunk labels come from the spans, so "
            "every query would be unjudged; add the spans, or remove the file to label every chunk of a relevant "
            "document",
            path=str(spans_path),
        )


def load_beir(path: str | Path, split: str = "test", *, name: str | None = None) -> Dataset:
    """Load a BEIR directory (with span qrels when present) and validate it.

    >>> import tempfile, pathlib
    >>> d = pathlib.Path(tempfile.mkdtemp())
    >>> _ = (d / "corpus.jsonl").write_text('{"_id": "d1", "title": "T", "text": "Hello world."}\\n')
    >>> _ = (d / "queries.jsonl").write_text('{"_id": "q1", "text": "hi"}\\n')
    >>> (d / "qrels").mkdir()
    >>> _ = (d / "qrels" / "test.tsv").write_text("query-id\\tcorpus-id\\tscore\\nq1\\td1\\t1\\n")
    >>> ds = load_beir(d)
    >>> (len(ds.documents), ds.has_spans, ds.relevant_docs())
    (1, False, {'q1': {'d1': 1}})
    """
    root = Path(path)
    if why := split_problem(split):
        raise DatasetError(why, path=str(root), field="split")
    if not root.is_dir():
        raise DatasetError(
            "not a directory (expected a BEIR data set: corpus.jsonl, queries.jsonl, qrels/)", path=str(root)
        )
    digest = hashlib.sha256()
    problems = _Problems()
    corpus_path = root / "corpus.jsonl"
    queries_path = root / "queries.jsonl"
    for required in (corpus_path, queries_path):
        _check_file(required)
    docs = read_documents(corpus_path, digest, problems)
    queries = read_queries(queries_path, digest, problems)
    problems.raise_if_any()
    for found, where, what in ((docs, corpus_path, "document"), (queries, queries_path, "query")):
        if not found:
            raise DatasetError(f"holds no {what} (an empty data set cannot be evaluated)", path=str(where))

    tsv = root / "qrels" / f"{split}.tsv"
    for ext in (".tsv", ".trec", ".qrels", ".spans.tsv"):  # there but unreadable: never taken for "no labels"
        if (label_file := root / "qrels" / f"{split}{ext}").exists() and not label_file.is_file():
            _check_file(label_file)
    trec = next(
        (
            root / "qrels" / f"{split}{ext}"
            for ext in (".trec", ".qrels")
            if (root / "qrels" / f"{split}{ext}").is_file()
        ),
        None,
    )
    spans_path = root / "qrels" / f"{split}.spans.tsv"
    if tsv.is_file():
        qrels_path, qrels = tsv, read_qrels_tsv(tsv, digest, problems, docs, queries)
    elif trec is not None:
        qrels_path, qrels = trec, read_trec_qrels(trec, digest, problems, docs, queries)
    else:
        raise DatasetError(
            f"no qrels for split {split!r} (expected qrels/{split}.tsv or qrels/{split}.trec)", path=str(root / "qrels")
        )
    spans = read_span_qrels(spans_path, digest, problems, docs, queries) if spans_path.is_file() else None
    problems.raise_if_any()
    _require_labels(qrels_path, qrels, spans_path if spans is not None else None, spans)
    return Dataset(
        name=name or root.name,
        path=root,
        split=split,
        documents=docs,
        queries=queries,
        qrels=tuple(qrels),
        spans=tuple(spans) if spans is not None else None,
        checksum=digest.hexdigest(),
    )


def load_documents_and_queries(path: str | Path) -> tuple[dict[str, Document], dict[str, Query]]:
    """The documents and queries of a BEIR directory, checked as :func:`load_beir` checks them, without reading
    a split's qrels (for a tool that adds the labels of a split that may not exist yet).

    >>> import tempfile, pathlib
    >>> d = pathlib.Path(tempfile.mkdtemp())
    >>> _ = (d / "corpus.jsonl").write_text('{"_id": "d1", "text": "Hello."}\\n')
    >>> _ = (d / "queries.jsonl").write_text('{"_id": "q1", "text": "hi"}\\n')
    >>> docs, queries = load_documents_and_queries(d)
    >>> (docs["d1"].text, queries["q1"].text)
    ('Hello.', 'hi')
    """
    root = Path(path)
    digest, problems = hashlib.sha256(), _Problems()
    for name in ("corpus.jsonl", "queries.jsonl"):
        _check_file(root / name)
    docs = read_documents(root / "corpus.jsonl", digest, problems)
    queries = read_queries(root / "queries.jsonl", digest, problems)
    problems.raise_if_any()
    return docs, queries


def corpus_has_metadata(path: Path) -> bool:
    """Whether any document of the data set in ``path`` carries a non-empty ``metadata`` object (a source, a
    category: what an export of production documents has; a plain BEIR corpus has ``_id``, ``title`` and
    ``text`` only). A corpus that cannot be read counts as having it: the loader names its problem later.

    >>> import tempfile
    >>> with tempfile.TemporaryDirectory() as d:
    ...     _ = (Path(d) / "corpus.jsonl").write_text('{"_id": "a", "title": "", "text": "x"}')
    ...     corpus_has_metadata(Path(d))
    False
    """
    try:
        with open(path / "corpus.jsonl", encoding="utf-8") as fh:
            for line in fh:
                if '"metadata"' not in line:
                    continue
                try:
                    meta = parse_json(line).get("metadata")
                except (ValueError, AttributeError):
                    return True
                if meta:
                    return True
    except (OSError, UnicodeError):
        return True
    return False
