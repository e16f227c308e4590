"""A marked labelling file into a data set's labels: the round trip write -> mark -> import -> load, importing
twice, the conflicts and the splits an import refuses, and the command line."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rag_eval import cli
from rag_eval.core.errors import DatasetError
from rag_eval.datasets.beir import load_beir
from rag_eval.datasets.chunking import DEFAULT_CHUNKER_SPEC, parse_chunker
from rag_eval.datasets.labels import chunk_dataset, chunk_qrels
from rag_eval.traffic.labelling import import_labels
from tests.unit.traffic.labelkit import (
    DOC_A,
    DOC_B,
    GRADES,
    chunks,
    copy_kb,
    labelling_file,
    mark,
    marked_file,
    read_lines,
    snapshot,
    write_lines,
)


@pytest.fixture
def kb(tmp_path: Path) -> Path:
    return copy_kb(tmp_path / "kb")


def test_the_round_trip_write_mark_import_load(kb: Path, tmp_path: Path) -> None:
    result = import_labels(marked_file(tmp_path), kb, split="test")
    assert result.added == ("t-lag", "t-none") and result.nothing_relevant == ("t-none",)
    assert result.not_fully_marked == ("t-open",) and result.skipped == () and result.unplaced == 1
    assert (result.span_qrels, result.document_qrels) == (2, 3)  # t-lag: A 2, B 0; t-none: B 0
    data = load_beir(kb, "test")
    assert len(data.queries) == 264 + 2 and data.queries["t-lag"].text.startswith("replica lag keeps growing")
    c = chunks()
    a0, a2 = c[f"{DOC_A}#chunk-0"], c[f"{DOC_A}#chunk-2"]
    assert {(s.doc_id, s.start, s.end, s.score) for s in data.spans or () if s.query_id == "t-lag"} == {
        (DOC_A, a0.start, a0.end, 2),
        (DOC_A, a2.start, a2.end, 1),
    }
    assert {(q.doc_id, q.score) for q in data.qrels if q.query_id == "t-lag"} == {(DOC_A, 2), (DOC_B, 0)}
    assert {(q.doc_id, q.score) for q in data.qrels if q.query_id == "t-none"} == {(DOC_B, 0)}
    assert "t-open" not in data.queries
    # the labels are the chunks the person graded, under the chunker that wrote the file
    labels = chunk_qrels(data, chunk_dataset(data, parse_chunker(DEFAULT_CHUNKER_SPEC)))
    assert dict(labels.relevant("t-lag")) == {f"{DOC_A}#chunk-0": 2, f"{DOC_A}#chunk-2": 1}
    assert dict(labels.relevant("t-none")) == {}  # judged, nothing relevant: unjudged by the measures
    assert data.relevant_docs()["t-lag"] == {DOC_A: 2} and "t-none" not in data.relevant_docs()


def test_importing_the_same_file_again_changes_nothing(kb: Path, tmp_path: Path) -> None:
    marked = marked_file(tmp_path)
    first = import_labels(marked, kb, split="test")
    before = snapshot(kb)
    again = import_labels(marked, kb, split="test")
    assert snapshot(kb) == before
    assert again.added == () and again.skipped == first.added and again.not_fully_marked == ("t-open",)
    assert (again.span_qrels, again.document_qrels) == (0, 0)
    # the person finishes the last query: only it is added
    done = mark(tmp_path / "label.jsonl", tmp_path / "done.jsonl", {**GRADES, "t-open": {f"{DOC_A}#chunk-1": 1}})
    last = import_labels(done, kb, split="test")
    assert last.added == ("t-open",) and last.skipped == ("t-lag", "t-none") and last.not_fully_marked == ()
    assert load_beir(kb).relevant_docs()["t-open"] == {DOC_A: 1}


def test_a_new_split_gets_its_files_with_their_headers(kb: Path, tmp_path: Path) -> None:
    import_labels(marked_file(tmp_path), kb, split="traffic")
    assert (kb / "qrels" / "traffic.tsv").read_text().startswith("query-id\tcorpus-id\tscore\n")
    assert (kb / "qrels" / "traffic.spans.tsv").read_text().startswith("query-id\tcorpus-id\tstart\tend\tscore\n")
    data = load_beir(kb, "traffic")
    assert {s.query_id for s in data.spans or ()} == {"t-lag"} and len(data.qrels) == 3
    assert load_beir(kb, "test").spans == load_beir(copy_kb(tmp_path / "fresh")).spans  # the other split untouched


def test_queries_without_a_final_newline_are_appended_to_on_a_line_of_their_own(kb: Path, tmp_path: Path) -> None:
    queries = kb / "queries.jsonl"
    queries.write_bytes(queries.read_bytes().rstrip(b"\n"))
    import_labels(marked_file(tmp_path), kb, split="test")
    assert len(load_beir(kb).queries) == 266


def _refused(kb: Path, marked: Path, split: str = "test") -> DatasetError:
    before = snapshot(kb)
    with pytest.raises(DatasetError) as err:
        import_labels(marked, kb, split=split)
    assert snapshot(kb) == before  # byte-identical, no staging left behind
    return err.value


def test_a_query_id_in_the_data_set_with_another_text_is_refused(kb: Path, tmp_path: Path) -> None:
    rows = read_lines(marked_file(tmp_path))
    rows[1]["query_id"] = "q001"
    err = _refused(kb, write_lines(tmp_path / "m.jsonl", rows))
    assert (err.path, err.line, err.field) == (str(tmp_path / "m.jsonl"), 2, "query_id")
    assert "another text" in err.message


def test_a_query_the_data_set_has_under_another_id_is_refused(kb: Path, tmp_path: Path) -> None:
    first = json.loads((kb / "queries.jsonl").read_text(encoding="utf-8").splitlines()[0])
    rows = read_lines(marked_file(tmp_path))
    rows[0]["query"] = "  " + first["text"].upper() + " "
    err = _refused(kb, write_lines(tmp_path / "m.jsonl", rows))
    assert (err.line, err.field) == (1, "query") and "'q001'" in err.message


def test_a_query_imported_before_with_other_labels_is_refused(kb: Path, tmp_path: Path) -> None:
    import_labels(marked_file(tmp_path), kb, split="test")
    changed = {**GRADES, "t-lag": {**GRADES["t-lag"], f"{DOC_A}#chunk-2": 2}}
    err = _refused(kb, mark(tmp_path / "label.jsonl", tmp_path / "m.jsonl", changed))
    assert (err.line, err.field) == (1, "chunks") and "other labels" in err.message


def test_a_split_of_only_nothing_relevant_is_refused_as_the_loader_would(kb: Path, tmp_path: Path) -> None:
    zeros = {q: dict.fromkeys(g, 0) for q, g in GRADES.items()}
    err = _refused(kb, mark(labelling_file(tmp_path / "label.jsonl"), tmp_path / "m.jsonl", zeros), split="fresh")
    assert err.path == str(kb / "qrels" / "fresh.tsv") and "would not load after the import" in err.message


def test_splits_an_import_would_change_the_meaning_of_are_refused(kb: Path, tmp_path: Path) -> None:
    marked = marked_file(tmp_path)
    (kb / "qrels" / "old.trec").write_text("q001 0 mysql-replication-lag 1\n")
    assert _refused(kb, marked, split="old").path == str(kb / "qrels" / "old.trec")
    (kb / "qrels" / "docs.tsv").write_bytes((kb / "qrels" / "test.tsv").read_bytes())
    err = _refused(kb, marked, split="docs")
    assert err.path == str(kb / "qrels" / "docs.tsv") and "document-level labels only" in err.message
    assert _refused(kb, marked, split="../test").field == "split"


def test_the_command_prints_one_line_and_exits_0(kb: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    marked = marked_file(tmp_path)
    assert cli.main(["labels", "import", str(marked), "--dataset", str(kb)]) == 0
    out = capsys.readouterr().out
    assert out == (
        "2 queries added (1 with nothing relevant), 2 span qrels, 3 document qrels; 0 skipped (already there); "
        "1 not fully marked: t-open; 1 chunk(s) graded 0 lie in no document (no label written for them)\n"
    )
    assert cli.main(["labels", "import", str(marked), "--dataset", str(kb), "--split", "test", "-q"]) == 0
    assert capsys.readouterr().out.startswith("0 queries added (0 with nothing relevant), 0 span qrels")


def test_the_command_names_the_file_line_and_field_and_exits_2(
    kb: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    rows = read_lines(marked_file(tmp_path))
    rows[2]["chunks"][0]["grade"] = 3
    marked = write_lines(tmp_path / "m.jsonl", rows)
    before = snapshot(kb)
    assert cli.main(["labels", "import", str(marked), "--dataset", str(kb)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"{marked}:3: field 'chunks[0].grade'" in err and "Traceback" not in err
    assert snapshot(kb) == before
    assert cli.main(["labels", "import", str(tmp_path / "missing.jsonl"), "--dataset", str(kb)]) == 2
    assert "missing.jsonl: cannot read" in capsys.readouterr().err


def test_a_query_of_another_split_gets_its_labels_in_this_one_without_a_second_line(kb: Path, tmp_path: Path) -> None:
    """Also what an import cut short between its files leaves: the query in queries.jsonl, no label yet."""
    marked = marked_file(tmp_path)
    import_labels(marked, kb, split="test")
    queries = (kb / "queries.jsonl").read_bytes()
    result = import_labels(marked, kb, split="traffic")
    assert result.added == ("t-lag", "t-none") and (kb / "queries.jsonl").read_bytes() == queries
    data = load_beir(kb, "traffic")
    assert {s.query_id for s in data.spans or ()} == {"t-lag"} and data.relevant_docs()["t-lag"] == {DOC_A: 2}
    assert import_labels(marked, kb, split="traffic").skipped == ("t-lag", "t-none")


def test_line_separators_in_a_query_stay_inside_its_json_line(kb: Path, tmp_path: Path) -> None:
    rows = read_lines(marked_file(tmp_path))
    rows[0]["query"] = "replica lag\u2028after the backup\u2029job"
    marked = write_lines(tmp_path / "m.jsonl", rows)
    import_labels(marked, kb, split="test")
    last = (kb / "queries.jsonl").read_text(encoding="utf-8").split("\n")[-3]
    assert "\u2028" not in last and "\\u2028" in last
    assert load_beir(kb).queries["t-lag"].text == "replica lag\u2028after the backup\u2029job"


def test_two_imports_into_one_data_set_at_once_take_turns_and_both_land(
    kb: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each import reads the data set, then replaces its files: two at once, unlocked, the second's replace
    dropped the first's queries. The second now waits for the first (a lock on the data set's directory, no
    file left beside it) and reads what the first wrote."""
    import threading

    from rag_eval.traffic import imports

    first = marked_file(tmp_path)
    second = write_lines(tmp_path / "second.jsonl", [
        {**row, "query_id": f"{row['query_id']}-2", "query": f"{row['query']} once more"} for row in read_lines(first)
    ])  # fmt: skip
    writing, go = threading.Event(), threading.Event()
    write = imports._write

    def held_up(*args: object) -> None:  # the first import stops between reading and writing, until told
        if not writing.is_set():
            writing.set()
            assert go.wait(30)
        write(*args)  # type: ignore[arg-type]

    monkeypatch.setattr(imports, "_write", held_up)
    results: dict[str, object] = {}
    a = threading.Thread(target=lambda: results.setdefault("first", import_labels(first, kb, split="test")))
    b = threading.Thread(target=lambda: results.setdefault("second", import_labels(second, kb, split="test")))
    a.start()
    assert writing.wait(30)
    b.start()
    b.join(0.5)
    assert b.is_alive()  # waiting for the first import to end
    go.set()
    a.join(30)
    b.join(30)
    assert set(results) == {"first", "second"}
    data = load_beir(kb, "test")
    assert {"t-lag", "t-none", "t-lag-2", "t-none-2"} <= set(data.queries) and len(data.queries) == 264 + 4
    assert {q.query_id for q in data.qrels} >= {"t-lag", "t-lag-2"}
    assert not [p.name for p in kb.iterdir() if p.name.startswith(".")]  # no lock file, no staging left
