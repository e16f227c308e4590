"""BEIR / span / TREC loaders with their validation, and chunk labels from span overlap."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rag_eval.core.errors import DatasetError
from rag_eval.datasets.beir import load_beir
from rag_eval.datasets.chunking import parse_chunker
from rag_eval.datasets.labels import chunk_dataset, chunk_qrels

from ..helpers import NOT_FILES, not_a_file

TEXT = "Replica lag grows. Check the SQL thread. Look at long transactions. Restart nothing yet."


def write_dataset(
    root: Path,
    *,
    corpus: list[str] | None = None,
    queries: list[str] | None = None,
    qrels: str | None = None,
    spans: str | None = None,
    trec: str | None = None,
) -> Path:
    (root / "qrels").mkdir(parents=True, exist_ok=True)
    docs = corpus or [json.dumps({"_id": "d1", "title": "Lag", "text": TEXT, "metadata": {"category": "replication"}})]
    (root / "corpus.jsonl").write_text("\n".join(docs) + "\n", encoding="utf-8")
    qs = queries or [json.dumps({"_id": "q1", "text": "replica behind"}), json.dumps({"_id": "q2", "text": "x"})]
    (root / "queries.jsonl").write_text("\n".join(qs) + "\n", encoding="utf-8")
    if trec is not None:
        (root / "qrels" / "test.trec").write_text(trec)
    else:
        (root / "qrels" / "test.tsv").write_text(qrels or "query-id\tcorpus-id\tscore\nq1\td1\t1\n")
    if spans is not None:
        (root / "qrels" / "test.spans.tsv").write_text(spans)
    return root


def test_loads_spans_and_checksum_changes_with_content(tmp_path: Path) -> None:
    spans = "query-id\tcorpus-id\tstart\tend\tscore\nq1\td1\t0\t18\t1\nq1\td1\t19\t40\t1\n"
    ds = load_beir(write_dataset(tmp_path / "a", spans=spans))
    assert ds.has_spans and len(ds.spans or ()) == 2
    assert ds.documents["d1"].category == "replication"
    other = load_beir(write_dataset(tmp_path / "b", spans=spans.replace("40", "41")))
    assert other.checksum != ds.checksum


def test_plain_beir_and_trec_qrels(tmp_path: Path) -> None:
    ds = load_beir(write_dataset(tmp_path, trec="q1 0 d1 2\n"))
    assert not ds.has_spans and ds.relevant_docs() == {"q1": {"d1": 2}}


@pytest.mark.parametrize(
    ("kwargs", "file", "line", "field"),
    [
        ({"corpus": ['{"_id": "d1", "text": "a"}', "{not json"]}, "corpus.jsonl", 2, None),
        ({"corpus": ['{"text": "a"}']}, "corpus.jsonl", 1, "_id"),
        ({"corpus": ['{"_id": "d1", "text": "a"}', '{"_id": "d1", "text": "b"}']}, "corpus.jsonl", 2, "_id"),
        ({"queries": ['{"_id": "q1", "text": 5}']}, "queries.jsonl", 1, "text"),
        ({"qrels": "query-id\tcorpus-id\tscore\nq9\td1\t1\n"}, "test.tsv", 2, "query-id"),
        ({"qrels": "query-id\tcorpus-id\tscore\nq1\tdX\t1\n"}, "test.tsv", 2, "corpus-id"),
        ({"qrels": "query-id\tcorpus-id\tscore\nq1\td1\thigh\n"}, "test.tsv", 2, "score"),
        ({"spans": "query-id\tcorpus-id\tstart\tend\tscore\nq1\td1\t5\t5\t1\n"}, "test.spans.tsv", 2, "start"),
        ({"spans": "query-id\tcorpus-id\tstart\tend\tscore\nq1\td1\t0\t9999\t1\n"}, "test.spans.tsv", 2, "end"),
        ({"spans": "query-id\tcorpus-id\tstart\tend\tscore\nq1\td1\t0\t4\n"}, "test.spans.tsv", 2, None),
        ({"trec": "q1 0 d1\n"}, "test.trec", 1, None),
    ],
)
def test_every_problem_names_file_line_and_field(
    tmp_path: Path, kwargs: dict, file: str, line: int, field: str | None
) -> None:
    with pytest.raises(DatasetError) as err:
        load_beir(write_dataset(tmp_path, **kwargs))
    e = err.value
    assert Path(e.path).name == file and e.line == line and e.field == field
    assert "\n" not in str(e) and f"{file}:{line}" in str(e)


def test_problems_are_collected_in_one_error(tmp_path: Path) -> None:
    qrels = "query-id\tcorpus-id\tscore\nq9\td1\t1\nq1\tdX\t1\nq1\td1\tx\n"
    with pytest.raises(DatasetError) as err:
        load_beir(write_dataset(tmp_path, qrels=qrels))
    assert "2 more problem(s)" in str(err.value)


def test_missing_split_and_missing_dir(tmp_path: Path) -> None:
    root = write_dataset(tmp_path)
    with pytest.raises(DatasetError, match="no qrels for split 'dev'"):
        load_beir(root, "dev")
    with pytest.raises(DatasetError, match="not a directory"):
        load_beir(tmp_path / "nope")


@pytest.mark.parametrize("name", ["corpus.jsonl", "queries.jsonl", "qrels/test.tsv", "qrels/test.spans.tsv",
                                  "qrels/test.trec"])  # fmt: skip
@pytest.mark.parametrize("kind", NOT_FILES)
def test_a_data_set_file_that_is_there_but_not_a_regular_file_is_refused(tmp_path: Path, name: str, kind: str) -> None:
    """A device (``/dev/zero``) would be read for ever, a pipe would block, and a labels file that cannot be read
    must not be taken for "no span labels" (the split would load at document level, its spans silently dropped)."""
    root = write_dataset(tmp_path / "kb", spans="query-id\tcorpus-id\tstart\tend\tscore\n")
    target = root / name
    target.unlink(missing_ok=True)
    not_a_file(target, kind)
    with pytest.raises(DatasetError) as err:
        load_beir(root, "test")
    assert str(err.value) == f"{target}: not a regular file" and err.value.exit_code == 2


def test_chunk_labels_from_span_overlap_survive_rechunking(tmp_path: Path) -> None:
    # spans: sentence 1 and sentence 3
    spans = "query-id\tcorpus-id\tstart\tend\tscore\nq1\td1\t0\t18\t1\nq1\td1\t41\t67\t2\n"
    ds = load_beir(write_dataset(tmp_path, spans=spans))
    one = chunk_qrels(ds, chunk_dataset(ds, parse_chunker("sentences:size=1,overlap=0")))
    assert dict(one.relevant("q1")) == {"d1#chunk-0": 1, "d1#chunk-2": 2}
    two = chunk_qrels(ds, chunk_dataset(ds, parse_chunker("sentences:size=2,overlap=0")))
    assert dict(two.relevant("q1")) == {"d1#chunk-0": 1, "d1#chunk-1": 2}
    chars = chunk_qrels(ds, chunk_dataset(ds, parse_chunker("chars:size=30,overlap=0")))
    assert set(chars.relevant("q1")) == {"d1#chunk-0", "d1#chunk-1", "d1#chunk-2"}
    assert one.level == "span" and one.per_document("q1") == {"d1": ["d1#chunk-0", "d1#chunk-2"]}


def test_minimum_overlap_is_configurable(tmp_path: Path) -> None:
    spans = "query-id\tcorpus-id\tstart\tend\tscore\nq1\td1\t15\t30\t1\n"  # 3 chars in chunk 0, 11 in chunk 1
    ds = load_beir(write_dataset(tmp_path, spans=spans))
    corpus = chunk_dataset(ds, parse_chunker("sentences:size=1,overlap=0"))
    assert set(chunk_qrels(ds, corpus).relevant("q1")) == {"d1#chunk-0", "d1#chunk-1"}
    assert set(chunk_qrels(ds, corpus, min_overlap_chars=5).relevant("q1")) == {"d1#chunk-1"}
    assert set(chunk_qrels(ds, corpus, min_overlap_fraction=0.5).relevant("q1")) == {"d1#chunk-1"}


def test_plain_beir_falls_back_to_document_level(tmp_path: Path) -> None:
    ds = load_beir(write_dataset(tmp_path))
    labels = chunk_qrels(ds, chunk_dataset(ds, parse_chunker("sentences:size=1,overlap=0")))
    assert labels.level == "document"
    assert len(labels.relevant("q1")) == 4


def test_chunk_content_is_the_slice_of_the_text() -> None:
    chunker = parse_chunker("sentences:size=2,overlap=1")
    chunks = chunker.split("d", TEXT)
    assert all(TEXT[c.start : c.end] == c.content for c in chunks)
    assert [c.chunk_index for c in chunks] == list(range(len(chunks)))
    assert chunker.split("d", TEXT) == chunks  # deterministic


def _beir(tmp: Path, corpus: str, queries: str) -> Path:
    (tmp / "qrels").mkdir(parents=True, exist_ok=True)
    (tmp / "corpus.jsonl").write_text(corpus)
    (tmp / "queries.jsonl").write_text(queries)
    (tmp / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\n")
    return tmp


@pytest.mark.parametrize("ident", ["d 1", "d\t1", " d1", "d1 ", "d#chunk-3"])
def test_ids_that_would_corrupt_trec_files_or_chunk_keys_are_refused(tmp_path: Path, ident: str) -> None:
    ds = _beir(tmp_path, json.dumps({"_id": ident, "text": "x"}) + "\n", '{"_id": "q1", "text": "y"}\n')
    with pytest.raises(DatasetError, match=r"corpus\.jsonl:1: field '_id'.*single tokens"):
        load_beir(ds)


@pytest.mark.parametrize(("corpus", "queries", "which"), [("", '{"_id": "q", "text": "y"}\n', "corpus.jsonl"),
                                                          ('{"_id": "d", "text": "x"}\n', "\n\n", "queries.jsonl")])
def test_an_empty_corpus_or_query_file_says_so(tmp_path: Path, corpus: str, queries: str, which: str) -> None:
    with pytest.raises(DatasetError, match=rf"{which}: holds no (document|query)") as err:
        load_beir(_beir(tmp_path, corpus, queries))
    assert "unknown" not in str(err.value)


HEADER = "query-id\tcorpus-id\tscore\n"
SPAN_HEADER = "query-id\tcorpus-id\tstart\tend\tscore\n"


@pytest.mark.parametrize(
    ("kwargs", "file"),
    [
        ({"qrels": HEADER}, "test.tsv"),
        ({"qrels": HEADER + "q1\td1\t0\nq2\td1\t0\n"}, "test.tsv"),  # judged, and nothing relevant
        ({"trec": ""}, "test.trec"),
        ({"spans": SPAN_HEADER}, "test.spans.tsv"),  # chunk labels come from the spans
        ({"spans": SPAN_HEADER + "q1\td1\t0\t18\t0\n"}, "test.spans.tsv"),
    ],
)
def test_a_split_without_a_single_relevance_label_is_refused(tmp_path: Path, kwargs: dict, file: str) -> None:
    # every query would be unjudged, and every gate would pass over nothing
    with pytest.raises(DatasetError, match="no relevance label") as err:
        load_beir(write_dataset(tmp_path, **kwargs))
    assert Path(err.value.path).name == file and "\n" not in str(err.value)


def test_both_label_files_without_a_label_are_named(tmp_path: Path) -> None:
    with pytest.raises(DatasetError, match=r"test\.tsv: holds no relevance label.*test\.spans\.tsv"):
        load_beir(write_dataset(tmp_path, qrels=HEADER, spans=SPAN_HEADER))


def test_partial_labels_are_kept(tmp_path: Path) -> None:
    # q2 unjudged, q1 with a non-relevant judgement beside a relevant one: a split that can be evaluated
    ds = load_beir(write_dataset(tmp_path, qrels=HEADER + "q1\td1\t1\n", spans=SPAN_HEADER + "q1\td1\t0\t18\t1\n"))
    assert ds.relevant_docs() == {"q1": {"d1": 1}} and len(ds.queries) == 2


def test_a_run_on_a_split_without_labels_is_refused_before_anything_is_written(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    import shutil

    from rag_eval import cli
    from tests.conftest import SHIPPED
    from tests.unit.experiment.test_experiment_refusals import experiment

    data = tmp_path / "data"
    shutil.copytree(SHIPPED, data, ignore=shutil.ignore_patterns("src", "experiments"))
    (data / "qrels" / "test.spans.tsv").unlink()
    (data / "qrels" / "test.tsv").write_text(HEADER)
    work = tmp_path / "work"
    work.mkdir()
    path = experiment(work, dataset_path=str(data))
    monkeypatch.chdir(work)
    code = cli.main(["run", str(path), "--out", str(work / "out"), "--limit", "4", "-q"])
    err = capsys.readouterr().err
    assert code == 2, err
    assert err.count("\n") == 1 and f"{data / 'qrels' / 'test.tsv'}: holds no relevance label" in err, err
    assert sorted(p.name for p in work.iterdir()) == [path.name]  # no run directory, no Lite file, no reports/
