"""Query logs (JSON lines, CSV, Parquet) read into distinct queries: worked examples for every format, the
counts of what is skipped, sampling, every refusal, hostile input, and a property test against a Counter."""

from __future__ import annotations

import csv
import hashlib
import io
import json
import os
import random
import unicodedata
from collections import Counter
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rag_eval.core.errors import ConfigError, DatasetError
from rag_eval.traffic.logs import Traffic, TrafficSpec, read_traffic, spec_problems


def _jsonl(path: Path, rows: list[object]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def _csv(path: Path, header: list[str], rows: list[list[object]]) -> Path:
    buf = io.StringIO()
    writer = csv.writer(buf)
    writer.writerow(header)
    writer.writerows(rows)
    path.write_text(buf.getvalue(), encoding="utf-8", newline="")
    return path


def _parquet(path: Path, columns: dict[str, list[object]]) -> Path:
    pq.write_table(pa.table(columns), path)
    return path


def _read(path: Path, **kw: object) -> Traffic:
    return read_traffic(TrafficSpec(path=path, **kw))  # type: ignore[arg-type]


def _refused(path: Path, **kw: object) -> DatasetError:
    with pytest.raises(DatasetError) as info:
        _read(path, **kw)
    assert info.value.exit_code == 2
    assert str(path) in str(info.value)
    return info.value


def _summary(traffic: Traffic) -> list[tuple[str, str, int, str | None]]:
    return [(q.id, q.text, q.count, q.category) for q in traffic.queries]


ROWS = [
    {"query": "reset my password", "request_id": "r1", "category": "it"},
    {"query": "VPN is down", "request_id": "r2"},
    {"query": "  reset   my password ", "request_id": "r3", "category": "it"},  # same as r1
    {"query": "reset my password", "request_id": "r4", "category": "hr"},  # another category: another request
    {"query": "", "request_id": "r5"},
    {"query": 42, "request_id": "r6"},
    {"query": None, "request_id": "r7"},
    {"query": ["a"], "request_id": "r8"},
    {"request_id": "r9"},
    {"query": "x" * 30, "request_id": "r10"},
    {"query": "VPN is down", "request_id": "r11"},
]


def test_a_jsonl_log_worked_by_hand(tmp_path: Path) -> None:
    path = _jsonl(tmp_path / "log.jsonl", ROWS)
    traffic = _read(path, id="request_id", category="category", max_chars=25)
    assert _summary(traffic) == [
        ("r1", "reset my password", 2, "it"),
        ("r2", "VPN is down", 2, None),
        ("r4", "reset my password", 1, "hr"),
    ]
    assert traffic.records == 11
    assert traffic.distinct == 3
    assert traffic.format == "jsonl"
    skipped = {k: v for k, v in traffic.skipped.items() if v}
    assert skipped == {"blank": 1, "not text": 3, "missing field": 1, "over-long": 1}
    short = _read(path, max_chars=17)
    assert short.skipped["over-long"] == 2  # 22 and 30 characters as written (17 is allowed)
    assert traffic.checksum == hashlib.sha256(path.read_bytes()).hexdigest()


def test_without_an_id_field_ids_are_hashes_of_the_normalised_text(tmp_path: Path) -> None:
    path = _jsonl(tmp_path / "log.ndjson", [{"query": "a  b"}, {"query": "a b"}, {"query": "c"}])
    traffic = _read(path)
    expected = "q-" + hashlib.sha256(b"a b").hexdigest()[:16]
    assert [(q.id, q.text, q.count) for q in traffic.queries] == [
        (expected, "a  b", 2),
        (traffic.queries[1].id, "c", 1),
    ]


def test_identical_means_nfc_stripped_and_whitespace_collapsed(tmp_path: Path) -> None:
    decomposed = unicodedata.normalize("NFD", "café menu")
    rows = [{"q": "café menu"}, {"q": f"\t{decomposed}\n"}, {"q": "café\u2003 menu"}, {"q": "Café menu"}]
    traffic = _read(_jsonl(tmp_path / "log.jsonl", rows), text="q")
    assert [(q.text, q.count) for q in traffic.queries] == [("café menu", 3), ("Café menu", 1)]  # case is kept


def test_ids_are_made_safe_and_unique(tmp_path: Path) -> None:
    rows = [
        {"query": "one", "id": " req  1 "},
        {"query": "two", "id": "req_1"},  # the id the first one got: falls back to its hash id
        {"query": "three", "id": 7},
        {"query": "four", "id": ""},
        {"query": "five", "id": "a\x00b"},
        {"query": "one", "id": "other"},  # a repeat keeps the first occurrence's id
    ]
    traffic = _read(_jsonl(tmp_path / "log.jsonl", rows), id="id")
    ids = [q.id for q in traffic.queries]
    assert ids[0] == "req_1"
    assert ids[1] == "q-" + hashlib.sha256(b"two").hexdigest()[:16]
    assert ids[2] == "7"
    assert ids[3].startswith("q-") and ids[4].startswith("q-")
    assert len(set(ids)) == len(ids) == 5
    assert all(not any(c.isspace() for c in i) for i in ids)


def test_a_csv_log_with_quoted_newlines_and_a_bom(tmp_path: Path) -> None:
    path = tmp_path / "log.csv"
    path.write_bytes(b'\xef\xbb\xbfquery,request_id\n"two\nlines",1\nplain,2\n,3\nplain,4\n')
    traffic = _read(path, id="request_id")
    assert _summary(traffic) == [("1", "two\nlines", 1, None), ("2", "plain", 2, None)]
    assert traffic.skipped["blank"] == 1
    assert traffic.records == 4


def test_a_parquet_log_reads_the_named_columns(tmp_path: Path) -> None:
    path = _parquet(
        tmp_path / "log.parquet",
        {"query": ["a", "b", None, "a"], "rid": [10, 11, 12, 13], "cat": ["x", None, "y", "x"], "other": [1, 2, 3, 4]},
    )
    traffic = _read(path, id="rid", category="cat")
    assert _summary(traffic) == [("10", "a", 2, "x"), ("11", "b", 1, None)]
    assert traffic.skipped["not text"] == 1
    assert traffic.checksum == hashlib.sha256(path.read_bytes()).hexdigest()


def test_a_json_file_of_lines_is_read_as_jsonl(tmp_path: Path) -> None:
    traffic = _read(_jsonl(tmp_path / "log.json", [{"query": "a"}]))
    assert traffic.format == "jsonl"


def test_categories_are_text_and_blank_is_none(tmp_path: Path) -> None:
    rows = [{"query": "a", "c": 3}, {"query": "a", "c": "3"}, {"query": "b", "c": " "}, {"query": "d", "c": [1]}]
    traffic = _read(_jsonl(tmp_path / "log.jsonl", rows), category="c")
    assert [(q.text, q.count, q.category) for q in traffic.queries] == [("a", 2, "3"), ("b", 1, None)]
    assert traffic.skipped["category not a scalar"] == 1


def test_the_manifest_document_holds_counts_and_no_text(tmp_path: Path) -> None:
    path = _jsonl(tmp_path / "log.jsonl", [{"query": "secret words"}, {"query": "secret words"}, {"query": ""}])
    doc = _read(path, sample=5).document()
    assert "secret" not in json.dumps(doc)
    assert doc["records"] == 3 and doc["distinct"] == 1 and doc["queries"] == 1 and doc["occurrences"] == 2
    assert doc["skipped"]["blank"] == 1 and doc["sample"] == 5
    assert TrafficSpec(path=path, show_text=False).as_dict()["show_text"] is False


# sampling


def _sample_ids(path: Path, seed: int, n: int = 10) -> list[str]:
    return [q.text for q in _read(path, sample=n, seed=seed).queries]


def test_a_sample_is_seeded_order_independent_and_in_first_occurrence_order(tmp_path: Path) -> None:
    rows = [{"query": f"query {i}"} for i in range(100)] + [{"query": "query 3"}] * 5
    ordered = _jsonl(tmp_path / "a.jsonl", rows)
    shuffled_rows = rows[:]
    random.Random(7).shuffle(shuffled_rows)
    shuffled = _jsonl(tmp_path / "b.jsonl", shuffled_rows)
    first = _sample_ids(ordered, seed=1)
    assert len(first) == 10
    assert first == _sample_ids(ordered, seed=1)
    assert set(first) == set(_sample_ids(shuffled, seed=1))
    assert set(first) != set(_sample_ids(ordered, seed=2))
    assert first == sorted(first, key=lambda t: int(t.split()[1]))  # the file's order
    ranked = sorted({r["query"] for r in rows}, key=lambda t: hashlib.sha256(f"1:{t}".encode()).hexdigest())
    assert set(first) == set(ranked[:10])  # the oracle: the ten smallest sha256("seed:text")
    traffic = _read(ordered, sample=10, seed=1)
    assert traffic.distinct == 100 and len(traffic.queries) == 10


def test_a_sample_larger_than_the_log_keeps_everything(tmp_path: Path) -> None:
    path = _jsonl(tmp_path / "log.jsonl", [{"query": "a"}, {"query": "b"}])
    assert [q.text for q in _read(path, sample=5).queries] == ["a", "b"]


@pytest.mark.parametrize("sample", [0, -1, 10_000_001, True, 2.5])
def test_a_sample_out_of_range_is_refused(tmp_path: Path, sample: object) -> None:
    path = _jsonl(tmp_path / "log.jsonl", [{"query": "a"}])
    with pytest.raises(ConfigError) as info:
        _read(path, sample=sample)
    assert info.value.exit_code == 2
    assert [p.key for p in info.value.problems] == ["traffic.sample"]


def test_spec_problems_are_collected_at_once() -> None:
    spec = TrafficSpec(path=Path("x"), format="xml", max_chars=0, seed="1")  # type: ignore[arg-type]
    assert [p.key for p in spec_problems(spec)] == ["traffic.format", "traffic.seed", "traffic.max_chars"]


# refusals


def test_a_broken_json_line_names_file_and_line(tmp_path: Path) -> None:
    path = tmp_path / "log.jsonl"
    path.write_text('{"query": "a"}\n{"query": \n', encoding="utf-8")
    err = _refused(path)
    assert (err.line, err.field) == (2, None)
    assert "not JSON" in str(err) and f"{path}:2" in str(err)


def test_a_json_line_that_is_not_an_object_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "log.jsonl"
    path.write_text('{"query": "a"}\n\n["a"]\n', encoding="utf-8")
    err = _refused(path)
    assert err.line == 3 and "JSON object" in str(err)


def test_non_utf8_bytes_name_the_line(tmp_path: Path) -> None:
    for name in ("log.jsonl", "log.csv"):
        path = tmp_path / name
        path.write_bytes(b'query\n"ok"\n' if name.endswith("csv") else b'{"query": "ok"}\n')
        with path.open("ab") as fh:
            fh.write(b'{"query": "caf\xe9"}\n' if name.endswith("jsonl") else b"caf\xe9\n")
        err = _refused(path)
        assert err.line == (2 if name.endswith("jsonl") else 3)
        assert "not UTF-8" in str(err)


@pytest.mark.parametrize("content", [b"", b"\n\n  \n", b"\xef\xbb\xbf"])
def test_an_empty_log_holds_no_query(tmp_path: Path, content: bytes) -> None:
    for name in ("log.jsonl", "log.csv"):
        path = tmp_path / name
        path.write_bytes(content)
        assert "holds no query" in str(_refused(path))


def test_a_csv_with_only_a_header_holds_no_query(tmp_path: Path) -> None:
    assert "holds no query" in str(_refused(_csv(tmp_path / "log.csv", ["query"], [])))


def test_a_log_where_every_record_is_skipped_says_so_with_counts(tmp_path: Path) -> None:
    path = _jsonl(tmp_path / "log.jsonl", [{"query": ""}, {"query": 1}, {"query": " "}])
    err = _refused(path)
    assert "every one of 3 records was skipped (not text 1, blank 2)" in str(err)


def test_a_field_no_record_has_is_a_wrong_field_name(tmp_path: Path) -> None:
    path = _jsonl(tmp_path / "log.jsonl", [{"text": "a"}, {"text": "b"}])
    err = _refused(path)
    assert err.field == "query" and "no record of 2 has the text field 'query'" in str(err)
    path = _jsonl(tmp_path / "log.jsonl", [{"query": "a"}])
    assert _refused(path, id="request_id").field == "request_id"
    assert _refused(path, category="cat").field == "cat"


def test_a_csv_without_the_column_names_file_header_line_and_field(tmp_path: Path) -> None:
    path = _csv(tmp_path / "log.csv", ["question", "id"], [["a", "1"]])
    err = _refused(path)
    assert (err.line, err.field) == (1, "query")
    assert f"{path}:1: field 'query'" in str(err)
    assert "'question'" in str(err)
    assert _refused(path, text="question", id="rid").field == "rid"


def test_a_parquet_without_the_column_names_file_and_field(tmp_path: Path) -> None:
    path = _parquet(tmp_path / "log.parquet", {"question": ["a"]})
    err = _refused(path)
    assert err.field == "query" and "the schema has no text column" in str(err)


def test_a_named_column_given_twice_is_refused_naming_where(tmp_path: Path) -> None:
    """A header or schema that holds the text, id or category column twice: which one is meant cannot be told,
    so it is refused (the first or the last would drop what the other holds without a word); other repeated
    columns do not matter."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    path = _csv(tmp_path / "log.csv", ["query", "id", "query"], [["a", "1", "b"]])
    err = _refused(path)
    assert (err.line, err.field) == (1, "query") and "is there 2 times (columns 1, 3)" in str(err)
    path = _csv(tmp_path / "ids.csv", ["id", "query", "id", "note", "note"], [["1", "a", "2", "x", "y"]])
    assert _refused(path, id="id").field == "id"
    assert [q.text for q in _read(path).queries] == ["a"]  # no id asked for: the repeated id and note columns
    parquet = tmp_path / "log.parquet"
    pq.write_table(pa.Table.from_arrays([pa.array(["a"]), pa.array(["b"])], names=["query", "query"]), parquet)
    err = _refused(parquet)
    assert err.field == "query" and "is there 2 times (columns 1, 2)" in str(err)


def test_a_file_that_is_not_parquet_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "log.parquet"
    path.write_text("query\na\n")
    assert "not a Parquet file" in str(_refused(path))


def test_a_missing_file_a_directory_and_a_fifo_are_refused(tmp_path: Path) -> None:
    assert "no such file" in str(_refused(tmp_path / "nothing.jsonl"))
    (tmp_path / "dir.jsonl").mkdir()
    assert "a directory" in str(_refused(tmp_path / "dir.jsonl"))
    fifo = tmp_path / "pipe.jsonl"
    os.mkfifo(fifo)
    assert "a named pipe" in str(_refused(fifo))  # refused before opening: opening would block


def test_an_unknown_extension_asks_for_a_format(tmp_path: Path) -> None:
    path = tmp_path / "log.txt"
    path.write_text('{"query": "a"}\n')
    err = _refused(path)
    assert err.field == "format"
    assert [q.text for q in _read(path, format="jsonl").queries] == ["a"]


# hostile input


def test_nul_and_control_characters_are_text(tmp_path: Path) -> None:
    rows = [{"query": "a\x00b"}, {"query": "bell\x07"}, {"query": "a\x00b"}, {"query": "\x1b[31mred"}]
    traffic = _read(_jsonl(tmp_path / "log.jsonl", rows))
    assert [(q.text, q.count) for q in traffic.queries] == [("a\x00b", 2), ("bell\x07", 1), ("\x1b[31mred", 1)]
    csv_path = _csv(tmp_path / "log.csv", ["query"], [["a\x00b"], ["bell\x07"]])
    assert [q.text for q in _read(csv_path).queries] == ["a\x00b", "bell\x07"]


def test_a_five_megabyte_line_is_counted_over_long(tmp_path: Path) -> None:
    huge = "y" * 5_000_000
    path = _jsonl(tmp_path / "log.jsonl", [{"query": huge}, {"query": "short"}])
    traffic = _read(path)
    assert [q.text for q in traffic.queries] == ["short"] and traffic.skipped["over-long"] == 1
    csv_path = _csv(tmp_path / "log.csv", ["query"], [[huge], ["short"]])
    assert _read(csv_path).skipped["over-long"] == 1
    assert [q.text for q in _read(path, max_chars=5_000_000).queries] == [huge, "short"]


def test_a_long_id_falls_back_to_the_hash(tmp_path: Path) -> None:
    traffic = _read(_jsonl(tmp_path / "log.jsonl", [{"query": "a", "id": "i" * 201}]), id="id")
    assert traffic.queries[0].id.startswith("q-")


# the property: the same distinct texts and counts as a Counter, in every format

_TEXTS = st.text(alphabet=st.characters(blacklist_categories=("Cs",)), min_size=1, max_size=12).filter(
    lambda t: " ".join(unicodedata.normalize("NFC", t).split()) != ""
)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(pool=st.lists(_TEXTS, min_size=1, max_size=8, unique=True), picks=st.lists(st.integers(0, 7), min_size=1))
def test_every_format_counts_what_a_counter_counts(tmp_path: Path, pool: list[str], picks: list[int]) -> None:
    texts = [pool[i % len(pool)] for i in picks]
    oracle = Counter(" ".join(unicodedata.normalize("NFC", t).split()) for t in texts)
    writers = {
        "log.jsonl": lambda p: _jsonl(p, [{"query": t} for t in texts]),
        "log.csv": lambda p: _csv(p, ["query"], [[t] for t in texts]),
        "log.parquet": lambda p: _parquet(p, {"query": texts}),
    }
    for name, write in writers.items():
        traffic = _read(write(tmp_path / name))
        got = Counter({" ".join(unicodedata.normalize("NFC", q.text).split()): q.count for q in traffic.queries})
        assert got == oracle, name
        assert traffic.records == len(texts)
        firsts = list(dict.fromkeys(" ".join(unicodedata.normalize("NFC", t).split()) for t in texts))
        assert [" ".join(unicodedata.normalize("NFC", q.text).split()) for q in traffic.queries] == firsts
