"""Turning a marked labelling file into a data set's labels: queries, span qrels and document qrels.

Each fully marked query becomes a query of ``queries.jsonl`` (its id: the file's ``query_id``), a span qrel per
chunk graded 1 or 2 in ``qrels/<split>.spans.tsv`` (the chunk's offsets, score = grade) and a document qrel per
judged document in ``qrels/<split>.tsv`` (the highest grade of its judged chunks, 0 when none is relevant). A query
with a chunk still ungraded is skipped and reported, never half imported; one already in the data set with the
same text and the same labels is skipped (importing a file twice changes nothing); one in ``queries.jsonl`` with
the same text and no label in the split gets its labels; every other conflict is refused. All or nothing: the
files are staged in a temporary directory inside the data set, the staged data set is loaded with
:func:`~rag_eval.datasets.beir.load_beir`, and only then is each file renamed into place.
"""

from __future__ import annotations

import os
import shutil
import stat
import tempfile
from collections.abc import Collection, Mapping, Sequence
from contextlib import nullcontext
from dataclasses import dataclass
from pathlib import Path

from rag_eval.core.errors import DatasetError, quoted
from rag_eval.datasets.beir import Document, Query, load_beir, load_documents_and_queries, split_problem
from rag_eval.files import held
from rag_eval.traffic.marks import MarkedQuery, json_line, normalise_query, read_marked

QRELS_HEADER = "query-id\tcorpus-id\tscore\n"
SPANS_HEADER = "query-id\tcorpus-id\tstart\tend\tscore\n"
SHOWN_IDS = 10  # query ids named in the one-line summary


@dataclass(frozen=True, slots=True, kw_only=True)
class ImportResult:
    """What an import did: query ids added, skipped and not fully marked, and the qrels written."""

    added: tuple[str, ...]  # new queries, in the file's order
    nothing_relevant: tuple[str, ...]  # of ``added``: every chunk graded 0 (judged, no relevant label)
    span_qrels: int
    document_qrels: int
    skipped: tuple[str, ...]  # already in the data set with the same text and labels
    not_fully_marked: tuple[str, ...]  # a chunk still ungraded: not imported
    unplaced: int  # chunks graded 0 that lie in no document: a judgement no label can hold

    def summary(self) -> str:
        """One line for the console.

        >>> result = ImportResult(added=("t1", "t2"), nothing_relevant=("t2",), span_qrels=3, document_qrels=2,
        ...                       skipped=(), not_fully_marked=("t9",), unplaced=0)
        >>> print(result.summary().replace("; ", ";\\n"))
        2 queries added (1 with nothing relevant), 3 span qrels, 2 document qrels;
        0 skipped (already there);
        1 not fully marked: t9
        """
        line = (
            f"{len(self.added)} queries added ({len(self.nothing_relevant)} with nothing relevant), "
            f"{self.span_qrels} span qrels, {self.document_qrels} document qrels; "
            f"{len(self.skipped)} skipped (already there); {len(self.not_fully_marked)} not fully marked"
        )
        if self.not_fully_marked:
            more = len(self.not_fully_marked) - SHOWN_IDS
            line += ": " + ", ".join(self.not_fully_marked[:SHOWN_IDS]) + (f" and {more} more" if more > 0 else "")
        if self.unplaced:
            line += f"; {self.unplaced} chunk(s) graded 0 lie in no document (no label written for them)"
        return line


@dataclass(frozen=True, slots=True, kw_only=True)
class _Existing:
    documents: Mapping[str, Document]
    queries: Mapping[str, Query]
    spans: Mapping[str, frozenset[tuple[str, int, int, int]]]
    grades: Mapping[str, Mapping[str, int]]


def _existing(root: Path, split: str) -> _Existing:
    """The data set's documents, queries and labels of ``split``; refused when an import would change what the
    split means (TREC qrels the new .tsv would hide, a document-level split spans would turn into a span one)."""
    if why := split_problem(split):
        raise DatasetError(why, path=str(root), field="split")
    qrels = root / "qrels"
    tsv, spans_tsv = qrels / f"{split}.tsv", qrels / f"{split}.spans.tsv"
    trec = [p for p in (qrels / f"{split}.trec", qrels / f"{split}.qrels") if p.is_file()]
    if not tsv.is_file():
        if trec or spans_tsv.is_file():
            found = trec[0] if trec else spans_tsv
            raise DatasetError(
                f"split {split!r} has no {tsv.name} beside this file: the import writes {tsv.name}, which the loader "
                "would read in its place; convert the split to BEIR qrels with span qrels first",
                path=str(found),
            )
        documents, queries = load_documents_and_queries(root)
        return _Existing(documents=documents, queries=queries, spans={}, grades={})
    if not spans_tsv.is_file():
        raise DatasetError(
            f"split {split!r} has document-level labels only (no {spans_tsv.name}): adding span qrels would leave "
            "its queries without chunk labels; label them with spans first",
            path=str(tsv),
        )
    data = load_beir(root, split)
    spans: dict[str, set[tuple[str, int, int, int]]] = {}
    for s in data.spans or ():
        spans.setdefault(s.query_id, set()).add((s.doc_id, s.start, s.end, s.score))
    grades: dict[str, dict[str, int]] = {}
    for q in data.qrels:
        grades.setdefault(q.query_id, {})[q.doc_id] = q.score
    return _Existing(
        documents=data.documents,
        queries=data.queries,
        spans={q: frozenset(s) for q, s in spans.items()},
        grades=grades,
    )


def _standing(query: MarkedQuery, known: _Existing, texts: Mapping[str, str], marked: Path) -> str:
    """``"new"``; ``"unlabelled"``: in ``queries.jsonl`` with the same text and no label in the split (a query of
    another split, or an import cut short between its files); ``"same"``: there with the same text and labels.
    Refused when it is there otherwise."""
    path, line = str(marked), query.line
    other = known.queries.get(query.query_id)
    if other is None:
        same_text = texts.get(normalise_query(query.text))
        if same_text is not None:
            raise DatasetError(
                f"the data set has this query already, as {quoted(same_text)} (case and whitespace aside)",
                path=path,
                line=line,
                field="query",
            )
        return "new"
    if other.text != query.text:
        raise DatasetError(
            f"query id {quoted(query.query_id)} is in the data set with another text ({quoted(other.text)})",
            path=path,
            line=line,
            field="query_id",
        )
    spans, grades = known.spans.get(query.query_id, frozenset()), dict(known.grades.get(query.query_id, {}))
    if (spans, grades) == (query.spans(), query.document_grades()):
        return "same"
    if not spans and not grades:
        return "unlabelled"
    raise DatasetError(
        f"query {quoted(query.query_id)} is in the data set with other labels; the import adds labels and never "
        "changes them: edit the qrels files to change them",
        path=path,
        line=line,
        field="chunks",
    )


def import_labels(marked: str | Path, dataset_dir: str | Path, *, split: str = "test") -> ImportResult:
    """Add the fully marked queries of the file ``marked`` to the BEIR data set ``dataset_dir``, split ``split``
    (see the module docstring). Raises :class:`DatasetError` naming the file, line and field of the first problem;
    nothing is written then."""
    root, path = Path(dataset_dir), Path(marked)
    with held(root, make=False) if root.is_dir() else nullcontext():  # two imports at once take turns
        known = _existing(root, split)
        queries = read_marked(path, known.documents)
        texts = {normalise_query(q.text): qid for qid, q in known.queries.items()}
        added: list[MarkedQuery] = []
        present: set[str] = set()  # of ``added``: in queries.jsonl already
        skipped: list[str] = []
        waiting: list[str] = []
        for query in queries:
            standing = _standing(query, known, texts, path) if query.fully_marked else "waiting"
            if standing == "waiting":
                waiting.append(query.query_id)
            elif standing == "same":
                skipped.append(query.query_id)
            else:
                added.append(query)
                if standing == "unlabelled":
                    present.add(query.query_id)
        if added:
            _write(root, split, added, present)
        return ImportResult(
            added=tuple(q.query_id for q in added),
            nothing_relevant=tuple(q.query_id for q in added if not q.spans()),
            span_qrels=sum(len(q.spans()) for q in added),
            document_qrels=sum(len(q.document_grades()) for q in added),
            skipped=tuple(skipped),
            not_fully_marked=tuple(waiting),
            unplaced=sum(1 for q in added for c in q.chunks if c.doc_id is None),
        )


def _lines(added: Sequence[MarkedQuery], present: Collection[str]) -> tuple[str, str, str]:
    """The lines the import appends to queries.jsonl (but for the ``present`` ones), the span qrels and the
    document qrels."""
    queries: list[str] = []
    spans: list[str] = []
    docs: list[str] = []
    for q in added:
        if q.query_id not in present:
            queries.append(json_line({"_id": q.query_id, "text": q.text, "metadata": {"origin": "traffic"}}))
        spans.extend(f"{q.query_id}\t{d}\t{s}\t{e}\t{g}\n" for d, s, e, g in sorted(q.spans()))
        docs.extend(f"{q.query_id}\t{d}\t{g}\n" for d, g in q.document_grades().items())
    return "".join(line + "\n" for line in queries), "".join(spans), "".join(docs)


def _stage(source: Path, staged: Path, header: str, lines: str) -> None:
    """``source`` (or ``header`` when it does not exist) with ``lines`` appended, at ``staged``, synced."""
    staged.parent.mkdir(parents=True, exist_ok=True)
    with staged.open("wb") as out:
        if source.is_file():
            with source.open("rb") as fh:
                shutil.copyfileobj(fh, out)
            if out.tell():
                with source.open("rb") as fh:
                    fh.seek(-1, os.SEEK_END)
                    if fh.read(1) != b"\n":
                        out.write(b"\n")
        else:
            out.write(header.encode())
        out.write(lines.encode("utf-8"))
        out.flush()
        os.fsync(out.fileno())
    mode = stat.S_IMODE(source.stat().st_mode) if source.is_file() else 0o644
    os.chmod(staged, mode)


def _write(root: Path, split: str, added: Sequence[MarkedQuery], present: Collection[str]) -> None:
    """Stage the three files, load the staged data set, then rename them into place: the queries first, so the
    data set loads at every step."""
    query_lines, span_lines, doc_lines = _lines(added, present)
    names = ("queries.jsonl", f"qrels/{split}.spans.tsv", f"qrels/{split}.tsv")
    headers = ("", SPANS_HEADER, QRELS_HEADER)
    staging = Path(tempfile.mkdtemp(prefix=".labels-import-", dir=root))
    try:
        view = staging / "view"
        for name, header, lines in zip(names, headers, (query_lines, span_lines, doc_lines), strict=True):
            _stage(root / name, view / name, header, lines)
        (view / "corpus.jsonl").symlink_to((root / "corpus.jsonl").resolve())
        try:
            load_beir(view, split)
        except DatasetError as exc:  # named as the file would be after the import
            shown = exc.path.replace(str(view), str(root), 1)
            raise DatasetError(
                f"the data set would not load after the import: {exc.message}",
                path=shown,
                line=exc.line,
                field=exc.field,
            ) from None
        for name in names:
            (root / name).parent.mkdir(exist_ok=True)
            os.replace(view / name, root / name)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
