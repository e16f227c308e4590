"""The serve TOML file and the flags on top: paths relative to the file, every problem at once (exit 2)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from rag_eval.core.errors import ConfigError
from rag_eval.core.types import SearchMode
from rag_eval.serve.settings import ServeSettings, checked, load_serve_file, parse_fields, problems, with_flags

TOML = """
[serve]
properties = "evidence.properties"
transport = "http"
port = 9000
concurrency = 4
request_timeout = 2.5
mode = "dense"
trace_file = "traces.jsonl"

[milvus]
uri = "kb.db"
collection = "runbooks"
fields = { id = "pk", vector = "embedding", text = "text", doc_id = "metadata.doc_id" }
partitions = ["current"]

[embedder]
provider = "python"
callable = "tests.integration.serve_kit:encode"
"""


def _write(tmp_path: Path, text: str = TOML) -> Path:
    (tmp_path / "evidence.properties").write_text("rag.max-chunks-per-document=3\n")
    (tmp_path / "kb.db").mkdir()
    path = tmp_path / "serve.toml"
    path.write_text(text)
    return path


def test_a_serve_file_is_read_with_its_paths_relative_to_it(tmp_path: Path) -> None:
    s = load_serve_file(_write(tmp_path))
    assert s.properties == (tmp_path / "evidence.properties").resolve()
    assert s.milvus_uri == str(tmp_path.resolve() / "kb.db")
    assert (s.collection, s.transport, s.port, s.concurrency, s.request_timeout) == ("runbooks", "http", 9000, 4, 2.5)
    assert s.fields == {"id": "pk", "vector": "embedding", "text": "text", "doc_id": "metadata.doc_id"}
    assert s.partitions == ("current",) and s.mode is SearchMode.DENSE
    assert s.embedder.provider == "python" and s.embedder.callable == "tests.integration.serve_kit:encode"
    assert s.url == "http://127.0.0.1:9000/mcp"
    assert checked(s) is s
    assert s.config().max_chunks_per_document == 3


def test_every_problem_of_a_file_is_named_at_once(tmp_path: Path) -> None:
    bad = TOML.replace("port = 9000", 'port = "high"').replace("[embedder]", '[embedder]\ncolour = "red"')
    bad += "\n[extra]\nx = 1\n"
    with pytest.raises(ConfigError) as caught:
        load_serve_file(_write(tmp_path, bad))
    keys = {p.key for p in caught.value.problems}
    assert keys == {"extra", "serve.port", "embedder.colour"}
    assert str(tmp_path / "serve.toml") in str(caught.value)


def test_a_file_that_is_not_toml_is_one_line_naming_it(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"serve.toml: 1 configuration problem: not valid TOML"):
        load_serve_file(_write(tmp_path, "[serve\n"))


def test_values_that_cannot_work_are_refused_together(tmp_path: Path) -> None:
    s = ServeSettings(properties=tmp_path / "none.properties", milvus_uri=str(tmp_path / "absent.db"), collection="",
                      transport="sse", port=0, concurrency=0, request_timeout=0)  # fmt: skip
    found = {p.key: p.message for p in problems(s)}
    assert set(found) == {"serve.properties", "milvus.uri", "milvus.collection", "serve.transport", "serve.port",
                          "serve.concurrency", "serve.request_timeout"}  # fmt: skip
    assert "no such Milvus Lite file" in found["milvus.uri"]
    with pytest.raises(ConfigError, match="7 configuration problems"):
        checked(s)


@pytest.mark.parametrize(("concurrency", "refused"), [(0, True), (1, False), (256, False), (257, True), (10**9, True)])
def test_concurrency_is_a_bounded_number_of_worker_threads(tmp_path: Path, concurrency: int, refused: bool) -> None:
    """Each lookup in flight holds a worker thread: a typo's 10**9 is refused, not served until the threads run out."""
    s = replace(load_serve_file(_write(tmp_path)), concurrency=concurrency)
    found = {p.key: p.message for p in problems(s)}
    if refused:
        assert found == {"serve.concurrency": f"1 to 256 lookups at a time (a worker thread each), got {concurrency}"}
    else:
        assert found == {}


def test_precomputed_query_vectors_cannot_serve(tmp_path: Path) -> None:
    s = with_flags(load_serve_file(_write(tmp_path)), {"embedder_provider": "precomputed"})
    assert [p.key for p in problems(s)] == ["embedder.provider"]


def test_flags_override_the_file_one_by_one(tmp_path: Path) -> None:
    s = with_flags(load_serve_file(_write(tmp_path)), {
        "port": 9100, "collection": "other", "field": ["id=id", "vector=v", "text=t"], "log_queries": True,
        "embedder_model": "m", "transport": None, "properties": str(tmp_path / "evidence.properties"),
    })  # fmt: skip
    assert (s.port, s.collection, s.transport, s.log_queries) == (9100, "other", "http", True)
    assert s.fields == {"id": "id", "vector": "v", "text": "t"}
    assert (s.embedder.provider, s.embedder.model) == ("python", "m")


@pytest.mark.parametrize("item", ["id", "=pk", "id=", " = "])
def test_a_field_flag_needs_a_key_and_a_field(item: str) -> None:
    with pytest.raises(ConfigError, match="expected KEY=FIELD"):
        parse_fields([item])
