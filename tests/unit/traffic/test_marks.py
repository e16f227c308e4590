"""Every problem of a marked labelling file, named with its file, line and field; nothing written; exit code 2;
and hostile files (a 10 MB line, a NUL in a query, ids with a tab or a newline)."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from rag_eval import cli
from rag_eval.core.errors import DatasetError
from rag_eval.datasets.beir import load_beir
from rag_eval.traffic.labelling import import_labels
from rag_eval.traffic.marks import MAX_LINE_BYTES, normalise_query, query_id_problem, read_marked
from tests.unit.traffic.labelkit import DOC_A, chunks, copy_kb, marked_file, read_lines, snapshot

Rows = list[dict[str, Any]]


def _set(line: int, path: tuple[Any, ...], value: Any) -> Callable[[Rows], None]:
    def change(rows: Rows) -> None:
        target: Any = rows[line - 1]
        for step in path[:-1]:
            target = target[step]
        target[path[-1]] = value

    return change


def _drop(line: int, key: str) -> Callable[[Rows], None]:
    return lambda rows: rows[line - 1].pop(key)


CASES: dict[str, tuple[Callable[[Rows], None], int, str | None]] = {
    "grade 3": (_set(1, ("chunks", 0, "grade"), 3), 1, "chunks[0].grade"),
    "grade -1": (_set(1, ("chunks", 1, "grade"), -1), 1, "chunks[1].grade"),
    "grade true": (_set(1, ("chunks", 0, "grade"), True), 1, "chunks[0].grade"),
    "grade '1'": (_set(2, ("chunks", 0, "grade"), "1"), 2, "chunks[0].grade"),
    "grade 1.0": (_set(2, ("chunks", 1, "grade"), 1.5), 2, "chunks[1].grade"),
    "document not in the corpus": (_set(1, ("chunks", 0, "doc_id"), "gone"), 1, "chunks[0].doc_id"),
    "chunk of another document": (_set(1, ("chunks", 0, "chunk"), "other#chunk-0"), 1, "chunks[0].chunk"),
    "end outside the document": (_set(1, ("chunks", 0, "end"), 10**7), 1, "chunks[0].end"),
    "negative start": (_set(1, ("chunks", 0, "start"), -1), 1, "chunks[0].end"),
    "offsets moved": (_set(1, ("chunks", 1, "start"), 0), 1, "chunks[1].text"),
    "start at end": (lambda rows: rows[0]["chunks"][1].update(start=rows[0]["chunks"][1]["end"]), 1, "chunks[1].end"),
    "start not a number": (_set(1, ("chunks", 0, "start"), "0"), 1, "chunks[0].start"),
    "start missing": (_set(1, ("chunks", 0, "start"), None), 1, "chunks[0].start"),
    "text changed": (_set(2, ("chunks", 0, "text"), "edited"), 2, "chunks[0].text"),
    "unplaced chunk graded relevant": (_set(1, ("chunks", 3, "grade"), 1), 1, "chunks[3].grade"),
    "unplaced chunk with offsets": (_set(1, ("chunks", 3, "start"), 0), 1, "chunks[3].start"),
    "chunk given twice": (lambda rows: rows[0]["chunks"].append(dict(rows[0]["chunks"][0])), 1, "chunks[4].chunk"),
    "chunk not an object": (_set(3, ("chunks", 0), "x"), 3, "chunks[0]"),
    "no chunks": (_set(2, ("chunks",), []), 2, "chunks"),
    "query id missing": (_drop(2, "query_id"), 2, "query_id"),
    "query id a number": (_set(2, ("query_id",), 7), 2, "query_id"),
    "query id with a tab": (_set(2, ("query_id",), "t\tnone"), 2, "query_id"),
    "query id with a newline": (_set(3, ("query_id",), "t\nopen"), 3, "query_id"),
    "query id with a NUL": (_set(3, ("query_id",), "t\x00"), 3, "query_id"),
    "query id given twice": (_set(3, ("query_id",), "t-lag"), 3, "query_id"),
    "query given twice": (_set(3, ("query",), "WHY is the SSD slow on  tuesdays"), 3, "query"),
    "NUL in a query": (_set(1, ("query",), "replica\x00lag"), 1, "query"),
    "blank query": (_set(1, ("query",), "  "), 1, "query"),
}


@pytest.fixture
def kb(tmp_path: Path) -> Path:
    return copy_kb(tmp_path / "kb")


@pytest.mark.parametrize("case", CASES, ids=list(CASES))
def test_every_problem_is_named_with_file_line_and_field_and_nothing_is_written(
    case: str, kb: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    change, line, field = CASES[case]
    rows = read_lines(marked_file(tmp_path))
    change(rows)
    marked = tmp_path / "bad.jsonl"
    marked.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    before = snapshot(kb)
    with pytest.raises(DatasetError) as err:
        import_labels(marked, kb, split="test")
    assert (err.value.path, err.value.line, err.value.field) == (str(marked), line, field)
    assert cli.main(["labels", "import", str(marked), "--dataset", str(kb)]) == 2
    assert f"{marked}:{line}: field {field!r}" in capsys.readouterr().err
    assert snapshot(kb) == before


@pytest.mark.parametrize(
    ("raw", "line", "message"),
    [
        (b"{not json\n", 2, "bad JSON"),
        (b"[1, 2]\n", 2, "a line must be a JSON object"),
        (b"\xff\xfe\n", 2, "not UTF-8"),
        (b"  \n\n", None, None),  # blank lines are skipped
    ],
)
def test_lines_that_are_not_json_objects(kb: Path, tmp_path: Path, raw: bytes, line: int | None, message: str) -> None:
    good = marked_file(tmp_path).read_bytes().splitlines(keepends=True)
    marked = tmp_path / "bad.jsonl"
    marked.write_bytes(good[0] + raw + b"".join(good[1:]))
    if line is None:
        assert import_labels(marked, kb, split="test").added == ("t-lag", "t-none")
        return
    before = snapshot(kb)
    with pytest.raises(DatasetError, match=message) as err:
        import_labels(marked, kb, split="test")
    assert (err.value.line, err.value.field) == (line, None) and snapshot(kb) == before


def test_every_problem_of_the_file_is_listed_at_once(kb: Path, tmp_path: Path) -> None:
    rows = read_lines(marked_file(tmp_path))
    rows[0]["chunks"][0]["grade"] = 5
    rows[1]["chunks"][1]["doc_id"] = "gone"
    marked = tmp_path / "bad.jsonl"
    marked.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    with pytest.raises(DatasetError, match="1 more problem") as err:
        import_labels(marked, kb, split="test")
    assert (err.value.line, err.value.field) == (1, "chunks[0].grade") and "'gone'" in str(err.value)


def test_a_10_mb_line_is_refused_without_reading_it_whole(kb: Path, tmp_path: Path) -> None:
    rows = read_lines(marked_file(tmp_path))
    rows[1]["query"] = "x" * (10 * 1024 * 1024)
    marked = tmp_path / "huge.jsonl"
    marked.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    assert marked.stat().st_size > MAX_LINE_BYTES
    before = snapshot(kb)
    with pytest.raises(DatasetError, match="a line over 4,194,304 bytes") as err:
        import_labels(marked, kb, split="test")
    assert (err.value.line, err.value.field) == (2, None) and len(str(err.value)) < 300
    assert snapshot(kb) == before


def test_an_empty_file_holds_no_query(kb: Path, tmp_path: Path) -> None:
    (tmp_path / "empty.jsonl").write_text("\n")
    with pytest.raises(DatasetError, match="holds no query"):
        import_labels(tmp_path / "empty.jsonl", kb, split="test")


def test_a_query_may_hold_tabs_and_newlines_but_is_written_as_one_json_line(kb: Path, tmp_path: Path) -> None:
    rows = read_lines(marked_file(tmp_path))
    rows[0]["query"] = "replica lag\tafter\nthe backup ☃"
    marked = tmp_path / "m.jsonl"
    marked.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    import_labels(marked, kb, split="test")
    assert load_beir(kb).queries["t-lag"].text == "replica lag\tafter\nthe backup ☃"


def test_read_marked_keeps_the_grades_and_places(tmp_path: Path) -> None:
    copy = copy_kb(tmp_path / "kb")
    queries = read_marked(marked_file(tmp_path), load_beir(copy).documents)
    lag = queries[0]
    assert (lag.line, lag.query_id, lag.fully_marked, queries[2].fully_marked) == (1, "t-lag", True, False)
    a0 = chunks()[f"{DOC_A}#chunk-0"]
    assert (DOC_A, a0.start, a0.end, 2) in lag.spans() and len(lag.spans()) == 2
    assert lag.document_grades() == {DOC_A: 2, "innodb-deadlocks": 0}


def test_ids_and_texts() -> None:
    assert query_id_problem("q-1.x_2") is None
    assert all(query_id_problem(bad) for bad in ("", "a b", "a\u2003b", "a\x1bb", "a#chunk-1"))
    assert normalise_query("Cafe\u0301\u00a0 BAR\n") == normalise_query("café bar") == "café bar"
