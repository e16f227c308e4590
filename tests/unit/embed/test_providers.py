"""The [embedder] providers: settings and their checks, the cache key, the callable and precomputed
providers, the resolver keeping what arrived before a failure, the fit check's counting."""

from __future__ import annotations

import json
import re
import sys
import textwrap
from collections.abc import Iterator, Sequence
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from rag_eval.core.errors import ConfigError, DatasetError, EmbedderUnavailableError, EmbeddingEndpointError
from rag_eval.embed.embedders import VectorResolver
from rag_eval.embed.fit import FitResult, sample_rows, self_retrieved
from rag_eval.embed.precomputed import query_vector_file
from rag_eval.embed.providers import EmbedSettings, NamedEmbedder, api_key, settings_problems
from rag_eval.embed.vector_files import EmbeddingCache, text_sha256
from rag_eval.experiment import experiment_from_table

KB = Path(__file__).resolve().parents[3] / "datasets" / "incident-kb"


def read(embedder: dict[str, object], *, collection: bool = False) -> object:
    table: dict[str, object] = {"dataset": {"path": str(KB)}, "embedder": embedder,
                                "configs": [{"name": "a", "rag": {}}]}  # fmt: skip
    if collection:
        table["collection"] = {"name": "c", "fields": {"id": "pk", "vector": "v", "text": "t"}}
    return experiment_from_table(table, base=Path("."), source="exp.toml")


def problems(embedder: dict[str, object], **kw: bool) -> list[str]:
    with pytest.raises(ConfigError) as err:
        read(embedder, **kw)
    return [str(p) for p in err.value.problems]


def test_the_openai_table_is_read_whole() -> None:
    exp = read({"provider": "openai", "base_url": "http://127.0.0.1:8080/v1", "model": "text-embedding-3-small",
                "dimensions": 256, "api_key_env": "OPENAI_API_KEY", "batch_size": 100, "concurrency": 3,
                "requests_per_minute": 600, "timeout": 20, "max_retries": 2, "max_texts": 10_000,
                "fit_min": 0.8, "fit_sample": 20, "fit_k": 5, "fit_seed": 3})  # fmt: skip
    s = exp.embedder  # type: ignore[attr-defined]
    assert (s.provider, s.model, s.dimensions, s.batch_size, s.concurrency, s.requests_per_minute, s.timeout,
            s.max_retries, s.max_texts, s.fit_min, s.fit_sample, s.fit_k, s.fit_seed) == (
        "openai", "text-embedding-3-small", 256, 100, 3, 600, 20.0, 2, 10_000, 0.8, 20, 5, 3)  # fmt: skip
    assert s.model_id == "openai:http://127.0.0.1:8080/v1:text-embedding-3-small:256"


def test_the_default_embedder_keeps_its_cache_key() -> None:
    """A run of the local model keys its cache and identity as before (warm caches stay warm)."""
    exp = read({})
    assert exp.embedder.model_id == "sentence-transformers/all-MiniLM-L6-v2"  # type: ignore[attr-defined]
    assert exp.embedder_identity == ["sentence-transformers/all-MiniLM-L6-v2", True]  # type: ignore[attr-defined]


URL = {"provider": "openai", "base_url": "http://h/v1", "model": "m"}


@pytest.mark.parametrize(
    ("table", "expected"),
    [
        ({"provider": "cohere"},
         "'cohere' is not one of sentence-transformers, openai, precomputed, python @ embedder.provider"),
        ({"provider": "openai", "model": "m"},
         "required: the endpoint's URL, such as http://127.0.0.1:8080/v1 @ embedder.base_url"),
        ({"provider": "openai", "base_url": "http://h/v1"}, "required: the model the endpoint serves @ embedder.model"),
        ({**URL, "dimensions": 0}, "must be >= 1, got 0 @ embedder.dimensions"),
        ({**URL, "requests_per_minute": 0}, "must be > 0, got 0 @ embedder.requests_per_minute"),
        ({**URL, "api_key_env": "sk-abc"}, "'sk-abc' is not an environment variable's name @ embedder.api_key_env"),
        ({"provider": "python", "callable": "mod.fn"},
         "expected 'package.module:function', got 'mod.fn' @ embedder.callable"),
        ({"fit_min": 1.5}, "a share from 0 to 1 of the sampled rows, got 1.5 @ embedder.fit_min"),
        ({"concurrency": 0}, "must be >= 1, got 0 @ embedder.concurrency"),
        ({"providr": "openai"}, "unknown key @ embedder.providr"),
    ],
)  # fmt: skip
def test_each_bad_value_is_named_by_its_key(table: dict[str, object], expected: str) -> None:
    assert expected in problems(table)


def test_precomputed_query_vectors_need_a_collection_and_a_file() -> None:
    found = problems({"provider": "precomputed"})
    assert "required: the file of query vectors (Parquet or JSONL) @ embedder.file" in found
    assert any("need a [collection]" in p for p in found)


def test_the_key_is_read_from_its_variable_and_a_missing_one_is_exit_2(monkeypatch: pytest.MonkeyPatch) -> None:
    s = EmbedSettings(provider="openai", base_url="http://h/v1", model="m", api_key_env="RAG_EVAL_TEST_KEY")
    monkeypatch.delenv("RAG_EVAL_TEST_KEY", raising=False)
    with pytest.raises(EmbedderUnavailableError, match="RAG_EVAL_TEST_KEY") as err:
        api_key(s)
    assert err.value.exit_code == 2
    monkeypatch.setenv("RAG_EVAL_TEST_KEY", "sk-123")
    assert api_key(s) == "sk-123"
    assert "sk-123" not in json.dumps(s.as_dict()) + s.model_id


def test_the_cache_key_names_provider_endpoint_model_dimensions_and_normalisation() -> None:
    base = EmbedSettings(provider="openai", base_url="http://h:1/v1/", model="m")
    ids = {base.model_id, EmbedSettings(provider="openai", base_url="http://h:2/v1", model="m").model_id,
           EmbedSettings(provider="openai", base_url="http://h:1/v1", model="n").model_id,
           EmbedSettings(provider="openai", base_url="http://h:1/v1", model="m", dimensions=8).model_id,
           EmbedSettings(provider="openai", base_url="http://h:1/v1", model="m", normalize=False).model_id,
           EmbedSettings(provider="python", callable="a:b").model_id, EmbedSettings().model_id}  # fmt: skip
    assert len(ids) == 7
    assert base.model_id == EmbedSettings(provider="openai", base_url="http://k:s@h:1/v1", model="m").model_id


@pytest.fixture
def module(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """A module of the working directory with embedding functions, as a user would write one."""
    (tmp_path / "my_embedder.py").write_text(textwrap.dedent("""
        calls = []
        def embed(texts):
            calls.append(list(texts))
            return [[float(len(t)), 1.0, 0.0] for t in texts]
        def short(texts):
            return [[1.0]] * (len(texts) - 1)
        def nan(texts):
            return [[float("nan"), 1.0] for t in texts]
    """))
    monkeypatch.syspath_prepend(str(tmp_path))
    yield "my_embedder"
    sys.modules.pop("my_embedder", None)


def test_the_python_provider_calls_the_function_in_batches_and_normalises(module: str) -> None:
    s = EmbedSettings(provider="python", callable=f"{module}:embed", batch_size=2)
    emb = s.build()
    out = emb.encode(["abc", "d", "efgh"])
    assert sys.modules[module].calls == [["abc", "d"], ["efgh"]]
    assert np.allclose(np.linalg.norm(out, axis=1), 1.0)
    assert np.allclose(out[0], np.array([3.0, 1.0, 0.0]) / np.sqrt(10.0))
    raw = EmbedSettings(provider="python", callable=f"{module}:embed", normalize=False).build()
    assert raw.encode(["abc"]).tolist() == [[3.0, 1.0, 0.0]]


@pytest.mark.parametrize(
    ("name", "why"),
    [("short", "for 2 texts"), ("nan", "NaN or infinite"), ("missing", "cannot import"), ("calls", "not a function")],
)
def test_a_callable_that_does_not_give_vectors_is_refused(module: str, name: str, why: str) -> None:
    with pytest.raises(EmbedderUnavailableError, match=why):
        EmbedSettings(provider="python", callable=f"{module}:{name}").build().encode(["a", "b"])


def test_a_run_over_max_texts_is_refused_before_anything_is_sent(module: str) -> None:
    s = EmbedSettings(provider="python", callable=f"{module}:embed", max_texts=3)
    resolver = VectorResolver(s.model_id, factory=s.build, notice=lambda line: None)
    resolver.resolve(["a", "b"])
    with pytest.raises(EmbedderUnavailableError, match=r"would send 4 texts .* over embedder\.max_texts = 3"):
        resolver.resolve(["c", "d"])
    assert sys.modules[module].calls == [["a", "b"]]


def test_the_run_says_how_many_texts_it_sends_and_about_how_many_tokens() -> None:
    s = EmbedSettings(provider="openai", base_url="http://h/v1", model="m")
    named = NamedEmbedder(object(), s)
    line = "embedding 2 texts not in the cache to http://h/v1/embeddings (m), about 3 tokens"
    assert named.announce(["a" * 8, "b"]) == line


class Failing:
    """An embedder whose third batch fails, as an endpoint that dies mid-run."""

    model_id = "m"

    def encode_batches(self, texts: Sequence[str]) -> Iterator[tuple[list[str], np.ndarray]]:
        for i in range(0, len(texts), 2):
            if i >= 4:
                raise EmbeddingEndpointError("endpoint gone", endpoint="http://h/v1/embeddings")
            batch = list(texts[i : i + 2])
            yield batch, np.ones((len(batch), 3), dtype=np.float32)

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        return np.ones((len(texts), 3), dtype=np.float32)


def test_what_arrived_before_a_failure_stays_in_the_cache_and_the_next_run_sends_only_the_rest(tmp_path: Path) -> None:
    texts = [f"t{i}" for i in range(6)]
    first = VectorResolver("m", cache=EmbeddingCache(tmp_path, "m"), factory=Failing, notice=lambda line: None)
    with pytest.raises(EmbeddingEndpointError):
        first.resolve(texts)
    second = VectorResolver("m", cache=EmbeddingCache(tmp_path, "m"), factory=Failing)
    assert second.missing(texts) == ["t4", "t5"]


def write_queries(path: Path, rows: list[dict[str, object]]) -> Path:
    if path.suffix == ".parquet":
        pq.write_table(pa.Table.from_pylist(rows), path)
    else:
        path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


QUERIES = [("q1", "Why is the DB slow?", "why is the db slow"), ("q2", "Disk full", "disk full"),
           ("q3", "x", "x")]  # fmt: skip


@pytest.mark.parametrize("suffix", [".jsonl", ".parquet"])
def test_precomputed_vectors_by_id_or_text_are_keyed_by_the_normalised_query(tmp_path: Path, suffix: str) -> None:
    by_id = write_queries(tmp_path / f"ids{suffix}", [{"id": q, "vector": [3.0, 4.0]} for q, _, _ in QUERIES])
    by_text = write_queries(tmp_path / f"texts{suffix}", [{"text": t, "vector": [0.0, 2.0]} for _, t, _ in QUERIES])
    vf = query_vector_file(by_id, QUERIES, model_id="p", normalize=True, split="test")
    assert vf.dim == 2 and vf.vectors[text_sha256("disk full")].tolist() == pytest.approx([0.6, 0.8])
    raw = query_vector_file(by_text, QUERIES, model_id="p", normalize=False, split="test")
    assert raw.vectors[text_sha256("x")].tolist() == [0.0, 2.0]


def test_queries_without_a_vector_are_exit_2_naming_how_many_and_the_first(tmp_path: Path) -> None:
    path = write_queries(tmp_path / "q.jsonl", [{"id": "q2", "vector": [1.0]}])
    with pytest.raises(DatasetError) as err:
        query_vector_file(path, QUERIES, model_id="p", normalize=True, split="test")
    assert err.value.exit_code == 2
    assert "2 of the 3 queries of split 'test' have no vector (by id; first: q1, q3)" in str(err.value)


@pytest.mark.parametrize(
    ("lines", "why"),
    [(['{"id": "q1", "vector": ["a"]}'], "q.jsonl:1: field 'vector': expected a list of numbers"),
     (["not json"], "q.jsonl:1: not JSON"),
     (['{"id": "q1", "vector": [1]}', '{"text": "x", "vector": [1]}'], "q.jsonl:2: keyed by text"),
     (['{"id": "q1", "vector": [1]}', '{"id": "q2", "vector": [1, 2]}', '{"id": "q3", "vector": [1]}'],
      "different dimensions [1, 2]"),
     (['{"id": "q1", "vector": [1, 0]}', '{"id": "q2", "vector": [1, 0]}', '{"id": "q1", "vector": [0, 1]}'],
      "q.jsonl:3: 'q1' is given twice with different vectors (line 1 and this one): one query, one vector"),
     (['{"id": null, "vector": [1]}'], "q.jsonl:1: field 'id': expected text or a whole number"),
     (['{"id": ["q1"], "vector": [1]}'], "q.jsonl:1: field 'id': expected text or a whole number"),
     (['{"text": true, "vector": [1]}'], "q.jsonl:1: field 'text': expected text or a whole number")],
)  # fmt: skip
def test_a_bad_query_vector_file_names_the_line(tmp_path: Path, lines: list[str], why: str) -> None:
    path = tmp_path / "q.jsonl"
    path.write_text("\n".join(lines) + "\n")
    with pytest.raises(DatasetError, match=re.escape(why)):
        query_vector_file(path, QUERIES, model_id="p", normalize=True, split="test")


@pytest.mark.parametrize("suffix", [".jsonl", ".parquet"])
def test_a_query_given_twice_with_one_vector_is_read_once(tmp_path: Path, suffix: str) -> None:
    rows = [{"id": q, "vector": [3.0, 4.0]} for q, _, _ in QUERIES] + [{"id": "q2", "vector": [3.0, 4.0]}]
    vf = query_vector_file(write_queries(tmp_path / f"q{suffix}", rows), QUERIES, model_id="p", normalize=False,
                           split="test")  # fmt: skip
    assert len(vf.vectors) == 3 and vf.vectors[text_sha256("disk full")].tolist() == [3.0, 4.0]


def test_parquet_query_vectors_refuse_a_query_given_twice_with_two_vectors_and_a_null_id(tmp_path: Path) -> None:
    rows = [{"id": q, "vector": [3.0, 4.0]} for q, _, _ in QUERIES] + [{"id": "q2", "vector": [4.0, 3.0]}]
    twice = "q.parquet: 'q2' is given twice with different vectors (row 1 and row 3)"
    with pytest.raises(DatasetError, match=re.escape(twice)):
        query_vector_file(write_queries(tmp_path / "q.parquet", rows), QUERIES, model_id="p", normalize=False,
                          split="test")  # fmt: skip
    rows = [{"id": q, "vector": [3.0, 4.0]} for q, _, _ in QUERIES] + [{"id": None, "vector": [1.0, 1.0]}]
    with pytest.raises(DatasetError, match=re.escape("n.parquet: field 'id': null on row 3")):
        query_vector_file(write_queries(tmp_path / "n.parquet", rows), QUERIES, model_id="p", normalize=False,
                          split="test")  # fmt: skip


def test_the_sample_is_seeded_and_independent_of_read_order() -> None:
    rows = [(f"{i:03d}", f"text {i}") for i in range(200)]
    first = sample_rows(rows, 50, 7)
    assert first == sample_rows(list(reversed(rows)), 50, 7) and len(first) == 50
    assert first != sample_rows(rows, 50, 8)


def test_a_row_finds_itself_by_key_or_by_a_copy_within_the_first_k() -> None:
    rows = [("1", "a"), ("2", "b"), ("3", "c"), ("4", "d")]
    hits = [[("9", "z"), ("1", "a")], [("7", "b")], [("5", "x"), ("6", "y"), ("3", "c")], []]
    assert self_retrieved(rows, hits, k=2) == 2  # row 1 at rank 2, row 2 by its copy; row 3 at rank 3
    assert self_retrieved(rows, hits, k=3) == 3


def test_the_fit_refuses_under_the_minimum_with_the_counts() -> None:
    fit = FitResult(sampled=50, found=3, k=10, minimum=0.5, seed=0, model_id="m")
    assert not fit.fits and fit.rate == 0.06
    assert fit.message("kb_chunks").startswith(
        "the [embedder] does not look like the model this collection was embedded with: 3 of 50 rows of kb_chunks "
        "find themselves"
    )
    assert FitResult(sampled=50, found=25, k=10, minimum=0.5, seed=0, model_id="m").fits
    assert FitResult(sampled=50, found=0, k=10, minimum=0.0, seed=0, model_id="m").fits


def test_the_passage_is_text_or_beir_s_title_and_text() -> None:
    beir = EmbedSettings(passage="title+text")
    assert beir.passage_text("Title ", "Body.") == "Title  Body."  # as BEIR joins them: one space, then strip()
    assert beir.passage_text("", " Body.") == "Body." and EmbedSettings().passage_text("T", " Body.") == " Body."
    assert beir.model_id == EmbedSettings().model_id  # the cache keys vectors by text: no model of its own
    assert beir.as_dict()["passage"] == "title+text" and "passage" not in EmbedSettings().as_dict()
    assert settings_problems(EmbedSettings(passage="title"), existing=False) == [
        ("passage", "'title' is not one of text, title+text")
    ]
    assert [key for key, _ in settings_problems(beir, existing=True)] == ["passage"]  # a [collection]: none embedded
    assert settings_problems(beir, existing=False) == []
