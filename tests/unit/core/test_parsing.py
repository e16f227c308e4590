"""Hostile JSON and TOML: text that is well formed but nested deeper than the interpreter recurses, or holds an
integer of more digits than ``int()`` converts, is refused like malformed text (one line naming the file and the
line, exit 2), by every reader of a file a user writes or a server sends; none of them crashes."""

from __future__ import annotations

import json
import tomllib
from pathlib import Path

import pytest

from rag_eval.core.errors import ConfigError, DatasetError
from rag_eval.core.parsing import NESTED, TextError, parse_json, parse_toml

from ..helpers import NOT_FILES, not_a_file

DEEP_JSON = "[" * 100_000 + "]" * 100_000
DEEP_TOML = "a = " + "[" * 100_000 + "]" * 100_000 + "\n"
BIG = "9" * 5_000  # Python converts at most 4,300 digits by default


def test_malformed_deep_and_long_numbered_json_are_each_one_text_error() -> None:
    assert parse_json('{"a": [1, 2.5, null]}') == {"a": [1, 2.5, None]}
    assert parse_json(b'{"a": 1}') == {"a": 1}
    assert parse_json("9" * 4_300) == int("9" * 4_300)  # the limit itself is read
    with pytest.raises(TextError) as bad:
        parse_json('{"a": 1,\n "b": }')
    assert (bad.value.reason, bad.value.line, bad.value.column) == ("Expecting value", 2, 7)
    assert bad.value.in_line == "Expecting value at column 7" and isinstance(bad.value, ValueError)
    with pytest.raises(TextError) as deep:
        parse_json('{"q": ' + DEEP_JSON + "}")
    assert (deep.value.reason, deep.value.line, deep.value.column) == (NESTED, None, None)
    assert deep.value.in_line == NESTED
    with pytest.raises(TextError) as big:
        parse_json('{"id": ' + BIG + "}")
    assert big.value.reason == "a number of 5,000 digits, more than the 4,300 a reader converts"


def test_deep_toml_is_a_toml_decode_error() -> None:
    assert parse_toml("a = [[1]]") == {"a": [[1]]}
    with pytest.raises(tomllib.TOMLDecodeError, match=NESTED):
        parse_toml(DEEP_TOML)


def _refused(error: type[Exception], call, *where: str) -> str:  # type: ignore[no-untyped-def]
    with pytest.raises(error) as info:
        call()
    text = str(info.value)
    assert getattr(info.value, "exit_code", 2) == 2, text
    assert "\n" not in text.strip() or error is ConfigError, text
    for part in where:
        assert part in text, (part, text)
    return text


@pytest.mark.parametrize("line", [BIG, DEEP_JSON], ids=["long number", "deep"])
def test_a_query_log_line_of_long_numbers_or_deep_nesting_names_its_line(tmp_path: Path, line: str) -> None:
    from rag_eval.traffic.logs import TrafficSpec, read_traffic

    path = tmp_path / "log.jsonl"
    path.write_text('{"query": "a", "id": 1}\n{"query": "b", "id": ' + line + "}\n", encoding="utf-8")
    text = _refused(DatasetError, lambda: read_traffic(TrafficSpec(path=path, id="id")), f"{path}:2")
    assert "not JSON this reader can read" in text


def test_a_query_logs_first_line_of_a_long_number_is_refused_not_taken_for_a_trace(tmp_path: Path) -> None:
    from rag_eval.traffic.logs import TrafficSpec, read_traffic

    path = tmp_path / "log.jsonl"
    path.write_text('{"query": "a", "id": ' + BIG + "}\n", encoding="utf-8")
    _refused(DatasetError, lambda: read_traffic(TrafficSpec(path=path, id="id")), f"{path}:1", "5,000 digits")


@pytest.mark.parametrize("line", [BIG, DEEP_JSON], ids=["long number", "deep"])
def test_a_trace_export_line_of_long_numbers_or_deep_nesting_names_its_line(tmp_path: Path, line: str) -> None:
    from rag_eval.traffic.logs import TrafficSpec, read_traffic

    path = tmp_path / "traces.otlp.jsonl"
    path.write_text('{"resourceSpans": []}\n{"resourceSpans": [], "x": ' + line + "}\n", encoding="utf-8")
    _refused(DatasetError, lambda: read_traffic(TrafficSpec(path=path)), f"{path}:2", "not JSON this reader can read")


def test_a_pretty_printed_trace_export_nested_too_deeply_is_refused(tmp_path: Path) -> None:
    from rag_eval.traffic.logs import TrafficSpec, read_traffic

    path = tmp_path / "traces.json"
    path.write_text('{\n "resourceSpans": [],\n "x": ' + DEEP_JSON + "\n}\n", encoding="utf-8")
    _refused(DatasetError, lambda: read_traffic(TrafficSpec(path=path, format="otlp")), str(path), NESTED)


def test_a_retriever_spans_json_input_that_cannot_be_read_is_its_text(tmp_path: Path) -> None:
    """An ``input.value`` declared JSON but unreadable (too deep, too long a number) is the text as written."""
    from rag_eval.traffic.otlp import _retriever_query, _tool_query

    for value in (DEEP_JSON, '{"query": ' + BIG + "}"):
        attrs = {"input.value": value, "input.mime_type": "application/json"}
        assert _retriever_query(attrs) == value  # type: ignore[arg-type]
        assert type(_tool_query(attrs)).__name__ == "_Reason"  # type: ignore[arg-type]  # no query argument read


def test_a_marked_labelling_file_with_a_long_number_names_its_line(tmp_path: Path) -> None:
    from rag_eval.traffic.marks import read_marked

    path = tmp_path / "marked.jsonl"
    path.write_text('{"query_id": ' + BIG + "}\n", encoding="utf-8")
    _refused(DatasetError, lambda: read_marked(path, {}), f"{path}:1", "bad JSON (a number of 5,000 digits")


def test_a_beir_corpus_line_nested_too_deeply_is_a_problem_of_its_line(tmp_path: Path) -> None:
    import hashlib

    from rag_eval.datasets.beir import _Problems, read_documents

    path = tmp_path / "corpus.jsonl"
    path.write_text('{"_id": "d1", "text": "x"}\n{"_id": "d2", "text": ' + DEEP_JSON + "}\n", encoding="utf-8")
    problems = _Problems()
    read_documents(path, hashlib.sha256(), problems)
    assert [(p.line, f"bad JSON ({NESTED})" in str(p)) for p in problems.items] == [(2, True)]


def test_a_query_vector_file_nested_too_deeply_names_its_line(tmp_path: Path) -> None:
    from rag_eval.embed.precomputed import read_query_vectors

    path = tmp_path / "queries.jsonl"
    path.write_text('{"id": "q1", "vector": [0.5]}\n{"id": "q2", "vector": ' + DEEP_JSON + "}\n", encoding="utf-8")
    _refused(DatasetError, lambda: read_query_vectors(path), f"{path}:2", "not JSON")


@pytest.mark.parametrize("body", [DEEP_JSON, '{"n": ' + BIG + "}"], ids=["deep", "long number"])
def test_a_run_directorys_json_that_cannot_be_read_is_refused(tmp_path: Path, body: str) -> None:
    from rag_eval.rundir.reader import RunDirectoryError, read_json

    path = tmp_path / "summary.json"
    path.write_text(body, encoding="utf-8")
    _refused(RunDirectoryError, lambda: read_json(path), str(path), "not valid JSON")


@pytest.mark.parametrize("state", ["{", DEEP_JSON, "[1, 2]", '{"n": ' + BIG + "}"],
                         ids=["cut short", "deep", "a list", "long number"])  # fmt: skip
def test_resuming_a_run_whose_state_file_is_damaged_is_refused(tmp_path: Path, state: str) -> None:
    from rag_eval.rundir.directory import STATE_FILE, RunStore

    store = RunStore(tmp_path / "run")
    store.dir.mkdir()
    store.begin({"dataset": "x"}, resume=False)
    (store.parts_dir / STATE_FILE).write_text(state, encoding="utf-8")
    text = _refused(ConfigError, lambda: store.begin({"dataset": "x"}, resume=True), "--resume", "drop --resume")
    assert str(store.parts_dir / STATE_FILE) in text


def test_a_services_answer_that_cannot_be_read_is_a_service_error() -> None:
    from rag_eval.replay.service import ServiceError, _json

    class Spec:
        endpoint = "http://127.0.0.1:1/lookup"

    for answer in (DEEP_JSON, '{"evidence": ' + BIG + "}"):
        with pytest.raises(ServiceError, match="not JSON"):
            _json(answer, Spec())  # type: ignore[arg-type]


def test_a_collections_json_text_too_deep_to_read_is_no_value() -> None:
    from rag_eval.search.milvus.fields import FieldRef

    ref = FieldRef(field="meta", path=("doc",))
    assert ref.read({"meta": json.dumps({"doc": "d1"})}) == "d1"
    assert ref.read({"meta": '{"doc": ' + DEEP_JSON + "}"}) is None
    assert ref.read({"meta": '{"doc": ' + BIG + "}"}) is None


@pytest.mark.parametrize("kind", ["experiment", "rag config", "gates", "serve"])
def test_a_toml_file_nested_too_deeply_is_refused_naming_it(tmp_path: Path, kind: str) -> None:
    from rag_eval.compare.gates import GatesError, load_gates
    from rag_eval.core.config import RagConfig
    from rag_eval.experiment.reader import load_experiment
    from rag_eval.serve.settings import load_serve_file

    path = tmp_path / f"{kind.replace(' ', '-')}.toml"
    path.write_text(DEEP_TOML, encoding="utf-8")
    calls = {
        "experiment": (ConfigError, lambda: load_experiment(path)),
        "rag config": (ConfigError, lambda: RagConfig.from_toml_text(DEEP_TOML, source=str(path))),
        "gates": (GatesError, lambda: load_gates(path)),
        "serve": (ConfigError, lambda: load_serve_file(path)),
    }
    error, call = calls[kind]
    _refused(error, call, str(path), NESTED)


def test_a_quoted_data_sets_query_file_and_front_matter_nested_too_deeply_are_problems(tmp_path: Path) -> None:
    from rag_eval.datasets.quotes.documents import parse_doc
    from rag_eval.datasets.quotes.queries import load_query_file

    queries = tmp_path / "q.toml"
    queries.write_text(DEEP_TOML, encoding="utf-8")
    problems: list = []  # type: ignore[type-arg]
    assert load_query_file(queries, problems) == []
    assert len(problems) == 1 and NESTED in problems[0].message
    doc = tmp_path / "d.md"
    doc.write_text("+++\n" + DEEP_TOML + "+++\nbody\n", encoding="utf-8")
    problems = []
    assert parse_doc(doc, problems) is None
    assert len(problems) == 1 and NESTED in problems[0].message


# -- numbers written as text: ASCII digits only, and never more than int() converts --------------------------------


def test_ascii_int_reads_plain_digits_only() -> None:
    from rag_eval.core.parsing import ascii_int

    assert [ascii_int(t) for t in ("0", " 007 ", "4300" * 1, "9" * 4_300)] == [0, 7, 4300, int("9" * 4_300)]
    assert [ascii_int(t) for t in ("", " ", "-1", "+1", "1.0", "1_0", "1e3", "²", "١٢", "0x10", BIG)] == [None] * 11


def test_a_properties_integer_of_five_thousand_digits_is_out_of_range_not_a_crash() -> None:
    from rag_eval.core.config import RagConfig

    for text in (BIG, "-" + BIG, "0" * 5_000 + "7"):
        problems = None
        try:
            config = RagConfig.from_mapping({"rag.retrieve-k": text})
        except ConfigError as exc:
            problems = [str(p) for p in exc.problems]
        else:
            assert text.endswith("7") and config.retrieve_k == 7  # leading zeros: Java reads 7
            continue
        assert len(problems) == 1 and "outside the 32-bit integer range" in problems[0] and "(5,00" in problems[0]


def test_hits_with_ids_longer_than_int_converts_are_ordered_as_text_after_the_numbers() -> None:
    from rag_eval.core.types import KnowledgeSearchHit, hit_order

    ids = ["10", "9", BIG, "x", "9" * 4_300]
    hits = [KnowledgeSearchHit(id=i, content="", score=0.5) for i in ids]
    assert [h.id for h in sorted(hits, key=hit_order)] == ["9", "10", "9" * 4_300, BIG, "x"]


def test_a_stored_index_as_text_is_read_from_plain_digits_only() -> None:
    from rag_eval.search.milvus.fields import as_index

    assert [as_index(v) for v in ("12", " 3 ", "²", "١٢", BIG, "-1", 4, -4, 2.0, True)] == [
        12, 3, None, None, None, None, 4, None, 2, None]  # fmt: skip


def test_a_latency_sample_size_that_is_not_plain_digits_is_refused() -> None:
    from rag_eval.experiment.latency import TimingPlan

    assert TimingPlan.parse("sample:25").sample_size == 25
    for size in ("²", "١٢", BIG, "0", "-3"):
        with pytest.raises(ConfigError, match="expected sample:N with N >= 1"):
            TimingPlan.parse(f"sample:{size}")


def test_rows_of_one_document_with_numeric_and_other_primary_keys_are_placed_without_comparing_them() -> None:
    """Rows without a chunk index sit in their document by primary key: numeric keys (in number order) before
    the others (in text order); a collection whose text keys are partly digits must not compare a number to a
    text, and a key of 5,000 digits is a text."""
    from rag_eval.datasets.placement import How, Match, StoredRow, placed_elsewhere, sequence

    rows = [StoredRow(pk=pk, doc_id="d", text="abc") for pk in ("12", "doc-a", "9", BIG, "²")]
    assert [sequence(r) for r in rows] == [(1, 12), (1, "doc-a"), (1, 9), (1, BIG), (1, "²")]
    elsewhere = {i: [Match(doc_id="e", ranges=[(0, 3), (10, 13)], how=How.EXACT)] for i in range(len(rows))}
    chosen = placed_elsewhere(rows, elsewhere, {}, {})
    assert sorted(chosen) == list(range(len(rows)))
    assert {r for _, r in chosen.values()} <= {(0, 3), (10, 13)}


# -- lone surrogates: JSON spells them ("\ud800" without its pair), but they are not Unicode text ---------------

LONE = '"lone \\ud800 half"'  # as JSON text
PAIR = '"pair \\ud83d\\ude00 whole"'


def test_a_lone_surrogate_is_refused_only_when_asked_and_a_pair_is_text() -> None:
    from rag_eval.core.parsing import lone_surrogate, unicode_text

    assert parse_json(PAIR, unicode=True) == "pair 😀 whole"
    assert parse_json(LONE) == "lone \ud800 half" and not unicode_text(parse_json(LONE))
    for text in (LONE, '{"k": [1, {"x\\uDC00": 2}]}', "[" * 500 + LONE + "]" * 500):
        with pytest.raises(TextError, match=r"a lone surrogate \(\\ud[8c]00\) is not Unicode text"):
            parse_json(text, unicode=True)
    assert lone_surrogate({"a": ["ok", {"b": "\udfff"}]}) == "\udfff" and lone_surrogate({"a": "é😀"}) is None


def test_a_query_logs_lone_surrogate_texts_are_skipped_as_not_text_and_categories_as_bad(tmp_path: Path) -> None:
    from rag_eval.traffic.logs import TrafficSpec, read_traffic

    path = tmp_path / "log.jsonl"
    path.write_text(
        f'{{"query": {LONE}, "id": "1"}}\n{{"query": {PAIR}, "id": "2"}}\n'
        f'{{"query": "fine", "id": {LONE}}}\n{{"query": "filtered", "cat": {LONE}}}\n',
        encoding="utf-8",
    )
    traffic = read_traffic(TrafficSpec(path=path, id="id", category="cat"))
    assert [q.text for q in traffic.queries] == ["pair 😀 whole", "fine"]
    assert traffic.queries[1].id.startswith("q-")  # an id that is not text: the hash id
    assert (traffic.skipped["not text"], traffic.skipped["category not a scalar"]) == (1, 1)


def test_a_traces_lone_surrogate_query_is_skipped_as_not_text(tmp_path: Path) -> None:
    from rag_eval.traffic.logs import TrafficSpec, read_traffic

    def span(span_id: str, query: str) -> dict[str, object]:
        attrs = {"openinference.span.kind": "RETRIEVER", "input.value": query}
        return {"traceId": "t" * 32, "spanId": span_id, "name": "retrieve",
                "attributes": [{"key": k, "value": {"stringValue": v}} for k, v in attrs.items()]}  # fmt: skip

    export = {"resourceSpans": [{"scopeSpans": [{"spans": [span("a" * 16, "x"), span("b" * 16, "ok query")]}]}]}
    text = json.dumps(export).replace('"x"', LONE)
    path = tmp_path / "traces.otlp.jsonl"
    path.write_text(text + "\n", encoding="utf-8")
    traffic = read_traffic(TrafficSpec(path=path))
    assert [q.text for q in traffic.queries] == ["ok query"] and traffic.skipped["not text"] == 1


def test_files_read_as_data_refuse_a_lone_surrogate_naming_the_line(tmp_path: Path) -> None:
    import hashlib

    from rag_eval.datasets.beir import _Problems, read_documents
    from rag_eval.embed.precomputed import read_query_vectors
    from rag_eval.traffic.marks import read_marked

    marked = tmp_path / "marked.jsonl"
    marked.write_text(f'{{"query_id": "t-1", "query": {LONE}, "chunks": []}}\n', encoding="utf-8")
    _refused(DatasetError, lambda: read_marked(marked, {}), f"{marked}:1", "not Unicode text")
    corpus = tmp_path / "corpus.jsonl"
    corpus.write_text(f'{{"_id": "d1", "text": "x"}}\n{{"_id": "d2", "text": {LONE}}}\n', encoding="utf-8")
    problems = _Problems()
    read_documents(corpus, hashlib.sha256(), problems)
    assert [(p.line, "not Unicode text" in str(p)) for p in problems.items] == [(2, True)]
    vectors = tmp_path / "queries.jsonl"
    vectors.write_text(f'{{"id": "q1", "vector": [0.5]}}\n{{"id": {LONE}, "vector": [0.5]}}\n', encoding="utf-8")
    _refused(DatasetError, lambda: read_query_vectors(vectors), f"{vectors}:2", "not Unicode text")


def test_a_services_payload_with_a_lone_surrogate_is_not_a_payload() -> None:
    from rag_eval.replay.service import check_payload

    payload = {"query": "q", "evidence": [{"document_id": "d#chunk-0", "content": "x\ud800"}]}
    assert check_payload(payload) == "holds a lone surrogate (\\ud800), which is not Unicode text"
    assert check_payload({**payload, "evidence": [{"document_id": "d#chunk-0", "content": "é😀"}]}) is None


@pytest.mark.parametrize("kind", ["missing", *NOT_FILES])
def test_a_query_vector_file_that_is_not_a_regular_file_is_refused(tmp_path: Path, kind: str) -> None:
    """``/dev/zero`` was read into memory for ever and a pipe blocked: both are refused before a byte is read."""
    from rag_eval.embed.precomputed import read_query_vectors

    path = not_a_file(tmp_path / "queries.jsonl", kind)
    why = "no such file" if kind == "missing" else "not a regular file"
    _refused(DatasetError, lambda: read_query_vectors(path), str(path), f"cannot read query vectors: {why}")


# -- settings files: a regular file of at most 16 MiB, in UTF-8 ------------------------------------------------


def _settings_readers() -> dict[str, tuple[type[Exception], object]]:
    from rag_eval.compare.gates import GatesError, load_gates
    from rag_eval.core.config import RagConfig
    from rag_eval.experiment.reader import load_experiment, read_settings
    from rag_eval.serve.settings import load_serve_file

    return {
        "experiment": (ConfigError, load_experiment),
        "config of a .toml": (ConfigError, read_settings),
        "properties": (ConfigError, RagConfig.from_properties_file),
        "gates": (GatesError, load_gates),
        "serve": (ConfigError, load_serve_file),
    }


@pytest.mark.parametrize("reader", ["experiment", "config of a .toml", "properties", "gates", "serve"])
@pytest.mark.parametrize("kind", [*NOT_FILES, "too large"])
def test_a_settings_file_that_is_not_a_regular_file_of_sensible_size_is_refused_unread(
    tmp_path: Path, reader: str, kind: str
) -> None:
    """``/dev/zero`` named as a config was read into memory until the kernel killed the process (measured: exit
    137 within 15 s); a pipe blocked for ever; a 17 MiB file is not a settings file."""
    error, read = _settings_readers()[reader]
    path = tmp_path / ("x.properties" if reader == "properties" else "x.toml")
    if kind in NOT_FILES:
        not_a_file(path, kind)
    else:
        with path.open("wb") as fh:
            fh.truncate(17 * 1024 * 1024)  # sparse: no disk used
    why = "not a regular file" if kind != "too large" else "17,825,792 bytes, more than the 16,777,216"
    _refused(error, lambda: read(path), str(path), why)  # type: ignore[operator]


@pytest.mark.parametrize("reader", ["experiment", "config of a .toml", "gates", "serve"])
def test_a_toml_settings_file_that_is_not_utf8_is_refused_naming_the_byte(tmp_path: Path, reader: str) -> None:
    error, read = _settings_readers()[reader]
    path = tmp_path / "x.toml"
    path.write_bytes(b'[experiment]\nname = "caf\xe9"\n')
    _refused(error, lambda: read(path), str(path), "not UTF-8 (invalid continuation byte at byte 24)")  # type: ignore[operator]


def test_a_quoted_data_sets_source_that_is_a_pipe_is_a_problem_not_a_hang(tmp_path: Path) -> None:
    from rag_eval.datasets.quotes.problems import read_text

    path = not_a_file(tmp_path / "doc.md", "a pipe")
    problems: list = []  # type: ignore[type-arg]
    assert read_text(path, problems) is None
    assert [p.message for p in problems] == ["cannot be read (not a regular file)"]


def test_a_marked_labelling_file_that_is_a_pipe_is_refused_not_waited_on(tmp_path: Path) -> None:
    from rag_eval.traffic.marks import read_marked

    path = not_a_file(tmp_path / "marked.jsonl", "a pipe")
    _refused(DatasetError, lambda: read_marked(path, {}), str(path), "cannot read: not a regular file")


@pytest.mark.parametrize("kind", NOT_FILES)
def test_a_history_that_is_there_but_not_a_file_is_refused_not_read_as_no_history(
    tmp_path: Path, kind: str, capsys: pytest.CaptureFixture[str]
) -> None:
    from rag_eval.cli import main

    path = not_a_file(tmp_path / "history.parquet", kind)
    assert main(["history", "--history", str(path)]) == 2
    assert f"{path}: is not a file" in capsys.readouterr().err
    assert main(["history", "--history", str(tmp_path / "none.parquet")]) == 0  # not there yet: no history
