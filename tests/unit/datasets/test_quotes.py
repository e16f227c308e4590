"""build_dataset: quotes become character spans, and every malformed source is reported."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from rag_eval.core.errors import DatasetError
from rag_eval.datasets.quotes import BuildReport, build_dataset, main

FILLER = "Filler sentence number {i} keeps this body above the minimum length. "


def body(*paragraphs: str, length: int = 2_400) -> str:
    """Markdown body made of ``paragraphs`` followed by numbered filler up to about ``length`` chars."""
    text = "\n\n".join(paragraphs)
    i = 0
    filler: list[str] = []
    while len(text) + sum(map(len, filler)) < length:
        filler.append(FILLER.format(i=i))
        i += 1
    return f"{text}\n\n{''.join(filler).strip()}\n"


def write_doc(src: Path, doc_id: str, text: str, *, front: str | None = None, **meta: str) -> Path:
    fields = {"id": doc_id, "title": f"Title of {doc_id}", "category": "testing", "source": f"kb/{doc_id}.md"}
    fields.update(meta)
    if front is None:
        front = "".join(f"{k} = {json.dumps(v, ensure_ascii=False)}\n" for k, v in fields.items())
    path = src / "docs" / f"{doc_id}.md"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f"+++\n{front}+++\n\n{text}", encoding="utf-8")
    return path


def write_queries(src: Path, toml: str, name: str = "set.toml") -> Path:
    path = src / "queries" / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(toml, encoding="utf-8")
    return path


ALPHA = body(
    "# Alpha\n\nThe replica stopped with error 1062. Check the relay log position first.",
    "## Fix\n\nNever skip events blindly. Compare the row on the source before deciding.",
    "Skip only after the row is proven identical.",
    "Restart the SQL thread. Watch the lag for a minute. Restart the SQL thread.",
)
BETA = body(
    "# Beta — café naïve\n\nLes requêtes lentes ont été analysées. Der Puffer ist voll: größer machen.",
    "Emoji 🚒 precede this sentence about the buffer pool. Ünïcode stays intact.",
)

QUERIES = """\
[[query]]
id = "q1"
text = "replica stopped 1062"
[[query.evidence]]
doc = "alpha"
quote = "The replica stopped with error 1062."
[[query.evidence]]
doc = "alpha"
quote = "Skip only after the row is proven identical."

[[query]]
id = "q2"
text = "puffer voll"
[[query.evidence]]
doc = "beta"
quote = "Der Puffer ist voll: größer machen."
[[query.evidence]]
doc = "beta"
quote = "Ünïcode stays intact."

[[query]]
id = "q3"
text = "postgres vacuum stuck"
answerable = false
"""


@pytest.fixture
def src(tmp_path: Path) -> Path:
    root = tmp_path / "src"
    write_doc(root, "alpha", ALPHA)
    write_doc(root, "beta", BETA)
    write_queries(root, QUERIES)
    return root


def read_spans(out: Path, split: str = "test") -> list[tuple[str, str, int, int]]:
    lines = (out / "qrels" / f"{split}.spans.tsv").read_text(encoding="utf-8").splitlines()
    assert lines[0] == "query-id\tcorpus-id\tstart\tend\tscore"
    rows = []
    for line in lines[1:]:
        q, d, s, e, score = line.split("\t")
        assert score == "1"
        rows.append((q, d, int(s), int(e)))
    return rows


def corpus_texts(out: Path) -> dict[str, str]:
    rows = [json.loads(line) for line in (out / "corpus.jsonl").read_text(encoding="utf-8").splitlines()]
    return {row["_id"]: row["text"] for row in rows}


def snapshot(out: Path) -> dict[str, bytes]:
    return {str(p.relative_to(out)): p.read_bytes() for p in sorted(out.rglob("*")) if p.is_file()}


def line_of(path: Path, needle: str) -> int:
    lines = path.read_text(encoding="utf-8").splitlines()
    return next(i for i, line in enumerate(lines, 1) if needle in line)


# ----------------------------------------------------------------------------- success


def test_build_writes_beir_files_with_exact_offsets(src: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    report = build_dataset(src, out)

    assert report == BuildReport(documents=2, queries=3, answerable=2, spans=4, multi_chunk_queries=2)
    texts = corpus_texts(out)
    assert texts["alpha"] == ALPHA.strip()
    quotes = {
        ("q1", "alpha"): [
            "The replica stopped with error 1062.",
            "Skip only after the row is proven identical.",
        ],
        ("q2", "beta"): ["Der Puffer ist voll: größer machen.", "Ünïcode stays intact."],
    }
    spans = read_spans(out)
    assert len(spans) == 4
    for q, d, s, e in spans:
        assert texts[d][s:e] in quotes[(q, d)]
    # character offsets, not byte offsets: the non-ASCII text before the quote must not shift them
    q2 = [(s, e) for q, _, s, e in spans if q == "q2"]
    assert q2[0][0] == BETA.strip().index("Der Puffer")
    assert BETA.strip().encode("utf-8").index(b"Der Puffer") != q2[0][0]

    qrels = (out / "qrels" / "test.tsv").read_text(encoding="utf-8")
    assert qrels == "query-id\tcorpus-id\tscore\nq1\talpha\t1\nq2\tbeta\t1\n"
    queries = [json.loads(line) for line in (out / "queries.jsonl").read_text(encoding="utf-8").splitlines()]
    assert [(q["_id"], q["metadata"]["answerable"]) for q in queries] == [
        ("q1", True),
        ("q2", True),
        ("q3", False),
    ]


def test_output_is_deterministic_utf8_with_lf(src: Path, tmp_path: Path) -> None:
    build_dataset(src, tmp_path / "a")
    build_dataset(src, tmp_path / "b")
    a, b = snapshot(tmp_path / "a"), snapshot(tmp_path / "b")
    assert a == b
    corpus = a["corpus.jsonl"]
    assert b"\r\n" not in corpus
    assert "café naïve".encode() in corpus  # ensure_ascii=False
    assert set(a) == {"corpus.jsonl", "queries.jsonl", "qrels/test.spans.tsv", "qrels/test.tsv"}


def test_crlf_and_bom_sources_build_the_same_bytes(src: Path, tmp_path: Path) -> None:
    build_dataset(src, tmp_path / "lf")
    for path in [*src.rglob("*.md"), *src.rglob("*.toml")]:
        text = path.read_text(encoding="utf-8")
        path.write_bytes(b"\xef\xbb\xbf" + text.replace("\n", "\r\n").encode("utf-8"))
    build_dataset(src, tmp_path / "crlf")
    assert snapshot(tmp_path / "lf") == snapshot(tmp_path / "crlf")


def test_metadata_and_revises(tmp_path: Path) -> None:
    root = tmp_path / "src"
    write_doc(root, "alpha", ALPHA)
    write_doc(root, "alpha-v2", ALPHA + "\nOne more line.\n", revises="alpha")
    write_queries(root, QUERIES.split('[[query]]\nid = "q2"')[0])
    build_dataset(root, tmp_path / "out")
    rows = {r["_id"]: r for r in map(json.loads, (tmp_path / "out" / "corpus.jsonl").read_text("utf-8").splitlines())}
    assert rows["alpha"]["metadata"] == {"category": "testing", "source": "kb/alpha.md"}
    assert rows["alpha-v2"]["metadata"]["revises"] == "alpha"
    assert rows["alpha"]["title"] == "Title of alpha"


def test_split_name_and_multi_chunk_count(src: Path, tmp_path: Path) -> None:
    write_queries(
        src,
        '[[query]]\nid = "q9"\ntext = "same chunk"\n'
        '[[query.evidence]]\ndoc = "alpha"\nquote = "The replica stopped with error 1062."\n'
        '[[query.evidence]]\ndoc = "alpha"\nquote = "Check the relay log position first."\n',
        name="more.toml",
    )
    report = build_dataset(src, tmp_path / "out", split="dev")
    assert (tmp_path / "out" / "qrels" / "dev.tsv").exists()
    # both quotes of q9 fall in the same 3-sentence chunk: it is not multi-chunk
    assert report.queries == 4
    assert report.multi_chunk_queries == 2


# ----------------------------------------------------------------------------- failures


def test_quote_found_twice_names_file_line_and_field(src: Path, tmp_path: Path) -> None:
    path = write_queries(
        src,
        QUERIES.replace('quote = "Skip only after the row is proven identical."', 'quote = "Restart the SQL thread."'),
    )
    with pytest.raises(DatasetError) as info:
        build_dataset(src, tmp_path / "out")
    err = info.value
    assert err.path == str(path)
    assert err.field == "quote"
    assert err.line == line_of(path, "Restart the SQL thread.")
    assert "found 2 times" in str(err) and "q1" in str(err)
    assert f"{path}:{err.line}" in str(err)


def test_quote_not_found_names_file_line_and_field(src: Path, tmp_path: Path) -> None:
    path = write_queries(src, QUERIES.replace("Der Puffer ist voll", "Der Puffer ist leer"))
    with pytest.raises(DatasetError) as info:
        build_dataset(src, tmp_path / "out")
    err = info.value
    assert (err.path, err.field) == (str(path), "quote")
    assert err.line == line_of(path, "Der Puffer ist leer")
    assert "not found" in str(err) and "'beta'" in str(err)


def test_quote_line_found_for_inline_tables(src: Path, tmp_path: Path) -> None:
    path = write_queries(
        src,
        '[[query]]\nid = "q1"\ntext = "x"\nevidence = [\n'
        '  { doc = "alpha", quote = "The replica stopped with error 1062." },\n'
        '  { doc = "alpha", quote = "No such sentence." },\n]\n',
    )
    with pytest.raises(DatasetError) as info:
        build_dataset(src, tmp_path / "out")
    assert (info.value.line, info.value.field) == (line_of(path, "No such sentence."), "quote")


def test_unknown_doc(src: Path, tmp_path: Path) -> None:
    path = write_queries(src, QUERIES.replace('doc = "beta"\nquote = "Ünïcode', 'doc = "gamma"\nquote = "Ünïcode'))
    with pytest.raises(DatasetError) as info:
        build_dataset(src, tmp_path / "out")
    err = info.value
    assert (err.path, err.field) == (str(path), "doc")
    assert "unknown document 'gamma'" in str(err)


def test_duplicate_query_id_across_files(src: Path, tmp_path: Path) -> None:
    other = write_queries(src, '[[query]]\nid = "q3"\ntext = "again"\nanswerable = false\n', name="z.toml")
    with pytest.raises(DatasetError) as info:
        build_dataset(src, tmp_path / "out")
    assert (info.value.path, info.value.line, info.value.field) == (str(other), 2, "id")
    assert "duplicate query id 'q3'" in str(info.value)


def test_duplicate_doc_id(src: Path, tmp_path: Path) -> None:
    sub = src / "docs" / "archive"
    sub.mkdir()
    (sub / "alpha.md").write_text((src / "docs" / "alpha.md").read_text("utf-8"), encoding="utf-8")
    with pytest.raises(DatasetError) as info:
        build_dataset(src, tmp_path / "out")
    assert info.value.field == "id"
    assert "duplicate document id 'alpha'" in str(info.value)


def test_missing_front_matter_key(src: Path, tmp_path: Path) -> None:
    path = write_doc(src, "gamma", ALPHA, front='id = "gamma"\ntitle = "G"\nsource = "kb/g.md"\n')
    with pytest.raises(DatasetError) as info:
        build_dataset(src, tmp_path / "out")
    assert (info.value.path, info.value.line, info.value.field) == (str(path), 1, "category")


def test_front_matter_id_must_match_file_name(src: Path, tmp_path: Path) -> None:
    path = write_doc(src, "gamma", ALPHA, front='id = "delta"\ntitle = "G"\ncategory = "c"\nsource = "s"\n')
    with pytest.raises(DatasetError) as info:
        build_dataset(src, tmp_path / "out")
    assert (info.value.path, info.value.line, info.value.field) == (str(path), 2, "id")


def test_bad_toml_in_queries_and_front_matter(src: Path, tmp_path: Path) -> None:
    qpath = write_queries(src, '[[query]]\nid = "q1"\ntext = "unterminated\n')
    dpath = write_doc(src, "gamma", ALPHA, front='id = "gamma"\ntitle = G\n')
    with pytest.raises(DatasetError) as info:
        build_dataset(src, tmp_path / "out")
    err = info.value
    assert (err.path, err.line) == (str(dpath), 3)  # documents are read first; line 3 counts the fence
    assert "2 problems" in str(err)
    assert f"{qpath}:3" in str(err)
    assert "not valid TOML" in str(err)


@pytest.mark.parametrize("length", [1_500, 6_500])
def test_body_length_out_of_range(src: Path, tmp_path: Path, length: int) -> None:
    text = body("# Short or long", length=length)
    path = write_doc(src, "gamma", text)
    with pytest.raises(DatasetError) as info:
        build_dataset(src, tmp_path / "out")
    assert (info.value.path, info.value.field) == (str(path), "body")
    assert "must have 2000 to 6000" in str(info.value)


def test_answerable_flags_must_match_evidence(src: Path, tmp_path: Path) -> None:
    path = write_queries(
        src,
        '[[query]]\nid = "q1"\ntext = "no evidence"\n\n'
        '[[query]]\nid = "q2"\ntext = "evidence but unanswerable"\nanswerable = false\n'
        '[[query.evidence]]\ndoc = "alpha"\nquote = "Check the relay log position first."\n',
    )
    with pytest.raises(DatasetError) as info:
        build_dataset(src, tmp_path / "out")
    err = info.value
    assert (err.path, err.line, err.field) == (str(path), 1, "evidence")
    assert "2 problems" in str(err)
    assert "q1 is answerable but has no evidence" in str(err)
    assert "q2 is unanswerable but has evidence" in str(err)
    assert f"{path}:8" in str(err)


def test_all_problems_are_reported_together(src: Path, tmp_path: Path) -> None:
    path = write_queries(
        src,
        QUERIES.replace("The replica stopped with error 1062.", "Not in alpha.").replace(
            'doc = "beta"\nquote = "Der', 'doc = "nowhere"\nquote = "Der'
        ),
    )
    with pytest.raises(DatasetError) as info:
        build_dataset(src, tmp_path / "out")
    err = info.value
    assert (err.path, err.line, err.field) == (str(path), line_of(path, "Not in alpha."), "quote")
    message = str(err)
    assert "2 problems" in message
    assert "not found" in message and "unknown document 'nowhere'" in message
    assert "\n" not in message
    assert len(err.problems) == 2  # type: ignore[attr-defined]


def test_failing_build_leaves_previous_output_unchanged(src: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    build_dataset(src, out)
    before = snapshot(out)
    write_doc(src, "alpha", ALPHA.replace("error 1062", "error 1032"))
    with pytest.raises(DatasetError):
        build_dataset(src, out)
    assert snapshot(out) == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out", "src"]  # no temporary directory left


def test_successful_rebuild_replaces_outputs_and_keeps_other_files(src: Path, tmp_path: Path) -> None:
    out = src.parent / "kb"
    build_dataset(src, out)
    (out / "README.md").write_text("kept", encoding="utf-8")
    write_queries(src, QUERIES.split('[[query]]\nid = "q3"')[0])
    build_dataset(src, out)
    assert (out / "README.md").read_text(encoding="utf-8") == "kept"
    assert "q3" not in (out / "queries.jsonl").read_text(encoding="utf-8")


# ----------------------------------------------------------------------------- command line


def test_cli_prints_report(src: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main([str(src), str(tmp_path / "out"), "--split", "test"]) == 0
    out = capsys.readouterr().out
    assert "2 documents" in out and "3 queries" in out


def test_cli_exits_2_with_one_line_error(src: Path, tmp_path: Path) -> None:
    path = write_queries(src, QUERIES.replace("Der Puffer ist voll", "Der Puffer ist leer").replace("1062.", "9."))
    result = subprocess.run(
        [sys.executable, "-m", "rag_eval.datasets.quotes", str(src), str(tmp_path / "out")],
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 2
    assert result.stdout == ""
    lines = result.stderr.splitlines()
    assert len(lines) == 1
    assert "Traceback" not in result.stderr
    assert str(path) in lines[0] and "quote" in lines[0] and "2 problems" in lines[0]
    assert not (tmp_path / "out").exists()
