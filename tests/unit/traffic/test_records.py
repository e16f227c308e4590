"""The record readers on their own: the line a record is reported at, short CSV rows, Parquet rows, and the
checksum taken from the bytes read."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from rag_eval.traffic.records import Fields, csv_records, jsonl_records, parquet_records
from rag_eval.traffic.tally import MISSING, Record


def test_a_csv_records_line_is_its_first(tmp_path: Path) -> None:
    path = tmp_path / "log.csv"
    data = b'\n"query","id"\n"a\nb\nc",1\n\nd\n"e",2\n'
    path.write_bytes(data)
    digest = hashlib.sha256()
    records = list(csv_records(path, Fields(text="query", ident="id"), digest))
    assert records == [
        Record(line=3, text="a\nb\nc", ident="1"),
        None,
        Record(line=7, text="d", ident=MISSING),  # a short row lacks the id
        Record(line=8, text="e", ident="2"),
    ]
    assert digest.hexdigest() == hashlib.sha256(data).hexdigest()


def test_jsonl_records_and_blank_lines(tmp_path: Path) -> None:
    path = tmp_path / "log.jsonl"
    path.write_bytes(b'\xef\xbb\xbf{"q": "a", "c": null}\r\n  \n{"x": 1}\n')
    records = list(jsonl_records(path, Fields(text="q", category="c"), hashlib.sha256()))
    assert records == [Record(line=1, text="a", category=None), None, Record(line=3, text=MISSING)]


def test_parquet_rows_are_numbered_from_one_across_batches(tmp_path: Path) -> None:
    path = tmp_path / "log.parquet"
    pq.write_table(pa.table({"q": [f"t{i}" for i in range(70_000)], "n": list(range(70_000))}), path)
    records = list(parquet_records(path, Fields(text="q", ident="n")))
    assert len(records) == 70_000
    assert records[-1] == Record(line=70_000, text="t69999", ident=69_999)
