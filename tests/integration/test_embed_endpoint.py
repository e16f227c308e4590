"""Query vectors from an OpenAI-compatible endpoint, over real HTTP through the ``openai`` client.

Against a real model server (infinity-emb serving all-MiniLM-L6-v2 in ``.venv-infinity``, started here on
127.0.0.1): the LangChain-built example collection replayed with the endpoint's query vectors measures
exactly as with the local sentence-transformers model (the same model), and a second run sends nothing.
Against a small server of the test's own (:mod:`tests.integration.openai_endpoint`, the same JSON): a 429
with Retry-After, 500 twice, a server that dies mid-run (exit 3; the next run sends only the rest), vectors
of the wrong dimension (exit 2) and of another model (the fit check refuses, exit 2). The key is in no file
a run writes and in nothing it prints.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

import numpy as np
import pytest

from rag_eval.cli import main
from rag_eval.datasets.beir import load_beir
from rag_eval.embed.embedders import EmbedderSpec, SentenceTransformerEmbedder
from rag_eval.embed.vector_files import EmbeddingCache
from rag_eval.experiment import load_experiment
from rag_eval.replay.prepare import normalized_queries
from tests.conftest import ROOT, SHIPPED
from tests.integration import infinity_server
from tests.integration.openai_endpoint import Endpoint
from tests.integration.replay_only import Replay, replay_only

pytestmark = [pytest.mark.milvus_lite, pytest.mark.slow]
KEY_ENV = "RAG_EVAL_TEST_EMBED_KEY"
KEY = "sk-test-4f9c2e71b0d84a6f"  # a value that must appear in no file and no output of a run
CI = os.environ.get("CI") == "true"
QUERIES = len(set(normalized_queries(load_beir(SHIPPED))))  # distinct query texts of the test split (264)


def unavailable(reason: str) -> None:
    if CI:
        pytest.fail(f"{reason}; CI must have it")
    pytest.skip(reason)


@pytest.fixture(scope="module")
def minilm() -> Callable[[Sequence[str]], np.ndarray]:
    """all-MiniLM-L6-v2 in this process (the ``embed`` extra): the vectors a test server answers with."""
    try:
        model = SentenceTransformerEmbedder(EmbedderSpec())
    except Exception as exc:
        unavailable(f"all-MiniLM-L6-v2 cannot be loaded here ({exc})")
    return model.encode


@pytest.fixture(scope="module")
def collection(tmp_path_factory: pytest.TempPathFactory) -> str:
    """The LangChain-built example collection (all-MiniLM-L6-v2 vectors, L2), in a Lite file of its own."""
    try:
        import langchain_milvus  # noqa: F401
    except ImportError:
        unavailable("langchain-milvus is not installed (the dev extra)")
    uri = str(tmp_path_factory.mktemp("lc") / "lc.db")
    build = ROOT / "examples" / "existing-collection" / "build_langchain.py"
    done = subprocess.run([sys.executable, str(build), "--uri", uri, "--collection", "kb_chunks"],
                          capture_output=True, text=True, timeout=300)  # fmt: skip
    assert done.returncode == 0, done.stderr
    return uri


@pytest.fixture(scope="module")
def infinity(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    try:
        server = infinity_server.start(tmp_path_factory.mktemp("infinity"))
    except infinity_server.InfinityUnavailable as exc:
        unavailable(f"no infinity-emb server: {exc}")
    try:
        yield server.base_url
    finally:
        infinity_server.stop(server)


def experiment(tmp: Path, uri: str, embedder: str) -> Path:
    text = (SHIPPED / "experiments" / "existing.toml").read_text()
    text = text.replace('uri = "../../../reports/milvus/incident-kb-langchain.db"', f'uri = "{uri}"')
    text = text.replace('path = ".."', f'path = "{SHIPPED}"')
    text = text.replace('properties = "configs/', f'properties = "{SHIPPED}/experiments/configs/')
    text += f'\n[embedder]\ncache_dir = "{tmp / "cache"}"\n{embedder}\n'
    path = tmp / "exp.toml"
    path.write_text(text)
    return path


def endpoint_table(base_url: str, **extra: object) -> str:
    lines = ['provider = "openai"', f'base_url = "{base_url}"', 'model = "all-MiniLM-L6-v2"',
             f'api_key_env = "{KEY_ENV}"']
    lines += [f"{k} = {json.dumps(v)}" for k, v in extra.items()]
    return "\n".join(lines)


def run(toml: Path, out: Path, capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    code = main(["run", str(toml), "--out", str(out), "--quiet"])
    captured = capsys.readouterr()
    return code, captured.out + captured.err


def measures(run: Path | Replay) -> dict[str, float]:
    """Every number of the summary's configs (a run directory's, or a replay's) but timings."""
    out: dict[str, float] = {}

    def walk(value: object, path: str) -> None:
        if isinstance(value, dict):
            for k, v in value.items():
                walk(v, f"{path}/{k}")
        elif isinstance(value, int | float) and not any(w in path for w in ("latency", "seconds", "qps")):
            out[path] = float(value)

    summary = run.summary if isinstance(run, Replay) else json.loads((run / "summary.json").read_text())
    walk(summary["configs"], "")
    return out


def assert_key_nowhere(*roots: Path, output: str) -> None:
    assert KEY not in output
    for root in roots:
        for path in root.rglob("*"):
            if path.is_file():
                assert KEY.encode() not in path.read_bytes(), path


@pytest.fixture(autouse=True)
def key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(KEY_ENV, KEY)


def test_the_endpoints_vectors_measure_as_the_local_models_and_a_second_run_sends_nothing(
    infinity: str, collection: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "local").mkdir()
    local = experiment(tmp_path / "local", collection, "")
    theirs = measures(replay_only(load_experiment(local), tmp_path / "local" / "run"))  # the local model's
    (tmp_path / "api").mkdir()
    api = experiment(tmp_path / "api", collection, endpoint_table(infinity, batch_size=32, concurrency=2))
    code, output = run(api, tmp_path / "api" / "run", capsys)
    assert code == 0, output
    # the first query was sent alone before (its vector's dimension is checked against the collection's)
    assert f"embedding {QUERIES - 1} texts not in the cache to " in output and "tokens" in output
    ours = measures(tmp_path / "api" / "run")
    assert ours.keys() == theirs.keys() and len(ours) > 100
    assert all(ours[k] == pytest.approx(theirs[k], abs=1e-9) for k in ours)
    fit = json.loads((tmp_path / "api" / "run" / "resolution.json").read_text())["embedder_fit"]
    assert fit["rows_sampled"] == 50 and fit["self_retrieval_rate"] >= 0.9 and fit["fits"]
    assert "self-retrieval" in (tmp_path / "api" / "run" / "report.md").read_text()
    cache = EmbeddingCache(tmp_path / "api" / "cache", f"openai:{infinity}:all-MiniLM-L6-v2")
    assert len(cache) == QUERIES + 50
    code, output = run(api, tmp_path / "api" / "again", capsys)
    assert code == 0 and "not in the cache" not in output  # nothing sent
    assert measures(tmp_path / "api" / "again") == ours
    assert_key_nowhere(tmp_path / "api", output=output)


def test_rag_evals_own_collection_is_ingested_with_the_endpoints_vectors(
    infinity: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The default experiment with the endpoint as its embedder: the chunks are embedded through it too, and the
    measures are those of the run on the shipped (sentence-transformers) vectors."""
    tomls = {}
    for name, embedder in (("local", ""), ("api", endpoint_table(infinity))):
        text = (SHIPPED / "experiments" / "default.toml").read_text()
        text = text.replace('uri = "../../../reports/milvus/incident-kb.db"', f'uri = "{tmp_path / name}.db"')
        text = text.replace('path = ".."', f'path = "{SHIPPED}"')
        text = text.replace('properties = "configs/', f'properties = "{SHIPPED}/experiments/configs/')
        tomls[name] = tmp_path / f"{name}.toml"
        tomls[name].write_text(text + f'\n[embedder]\ncache_dir = "{tmp_path / name}-cache"\n{embedder}\n')
    theirs = measures(replay_only(load_experiment(tomls["local"]), tmp_path / "local"))  # the shipped vectors'
    code, output = run(tomls["api"], tmp_path / "api", capsys)
    assert code in (0, 1), output
    ours = measures(tmp_path / "api")
    assert "texts not in the cache to" in output and "embedding 264 texts" in output
    assert ours.keys() == theirs.keys() and all(ours[k] == pytest.approx(theirs[k], abs=1e-9) for k in ours)


@pytest.fixture
def served(minilm: Callable[[Sequence[str]], np.ndarray]) -> Iterator[Endpoint]:
    endpoint = Endpoint(vectors=lambda texts: minilm(texts).tolist()).start()
    yield endpoint
    endpoint.stop()


def test_a_429_waits_its_retry_after_and_500_twice_is_retried(
    served: Endpoint, collection: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    served.plan = ["ok", (429, {"retry-after": "1"}), "ok", (500, {}), (500, {}), "ok"]
    toml = experiment(tmp_path, collection, endpoint_table(served.base_url, batch_size=64, concurrency=1))
    code, output = run(toml, tmp_path / "run", capsys)
    assert code == 0, output
    statuses = [s.answered for s in served.seen[:6]]
    assert statuses == [200, 429, 200, 500, 500, 200]
    assert served.seen[2].at - served.seen[1].at >= 0.95  # Retry-After: 1
    assert served.seen[4].at - served.seen[3].at >= 0.95 and served.seen[5].at - served.seen[4].at >= 1.9  # 1 s, 2 s
    assert all(s.authorization == f"Bearer {KEY}" for s in served.seen)
    assert sorted(served.texts_sent()) == sorted(set(served.texts_sent()))  # every text sent once
    assert_key_nowhere(tmp_path, output=output)


def test_a_server_dying_mid_run_is_exit_3_and_the_next_run_sends_only_the_rest(
    served: Endpoint, minilm: Callable[[Sequence[str]], np.ndarray], collection: str, tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:  # fmt: skip
    served.plan = ["ok"] * 7 + ["die"]  # the first query, the 50 rows of the fit check (4 requests), 2 query batches
    toml = experiment(tmp_path, collection, endpoint_table(served.base_url, batch_size=16, concurrency=1,
                                                           max_retries=1))  # fmt: skip
    code, output = run(toml, tmp_path / "run", capsys)
    lines = [line for line in output.splitlines() if "error" in line]
    assert code == 3, output
    assert len(lines) == 1 and lines[0].startswith("rag-eval: infrastructure error: embedding endpoint ")
    assert served.base_url + "/embeddings" in lines[0] and "failed 2 times" in lines[0]
    assert not (tmp_path / "run").exists()  # nothing of the run written: it is started again, not resumed
    first = served.texts_sent()
    assert len(first) == 1 + 50 + 32
    port = served.server.server_address[1] if served.server is not None else 0
    back = Endpoint(vectors=lambda texts: minilm(texts).tolist()).start(port)  # the cache is keyed by the URL
    try:
        code, output = run(toml, tmp_path / "run2", capsys)
    finally:
        back.stop()
    assert code == 0, output
    assert set(back.texts_sent()).isdisjoint(first) and len(back.texts_sent()) == QUERIES - 1 - 32
    assert_key_nowhere(tmp_path, output=output)


@pytest.mark.parametrize(("status", "code"), [(401, 2), (404, 2), (503, 3)])
def test_a_refusal_is_exit_2_a_failure_exit_3_one_line_without_the_key(
    served: Endpoint, collection: str, tmp_path: Path, capsys: pytest.CaptureFixture[str], status: int, code: int
) -> None:
    """The server says the key back in its error (as hosted APIs do): the one line names the endpoint and the
    status, never the key; a refusal is not retried."""
    served.plan = [(status, {"retry-after": "0"})] * 3
    toml = experiment(tmp_path, collection, endpoint_table(served.base_url, max_retries=2))
    exit_code, output = run(toml, tmp_path / "run", capsys)
    assert exit_code == code
    errors = [line for line in output.splitlines() if "error" in line]
    assert len(errors) == 1 and f"{served.base_url}/embeddings" in errors[0] and f"HTTP {status}" in errors[0]
    assert "status" in errors[0] and "Bearer ***" in errors[0]  # what the server said, the key scrubbed
    answered = [s for s in served.seen if s.answered == status]
    assert len(answered) == (1 if code == 2 else 3) and answered[0].authorization == f"Bearer {KEY}"
    assert not (tmp_path / "run").exists()
    assert_key_nowhere(tmp_path, output=output)


@pytest.mark.parametrize(
    ("indices", "said"),
    [(lambda n: [0] * n, "vectors indexed 0, 0, 0 for 3 texts (0 to 2, once each)"),
     (lambda n: range(1, n + 1), "vectors indexed 1, 2, 3 for 3 texts"),
     (lambda n: [0, 2, 2], "vectors indexed 0, 2, 2 for 3 texts")],
)  # fmt: skip
def test_vectors_whose_indices_do_not_name_each_text_once_are_an_error(
    indices: Callable[[int], Sequence[int]], said: str
) -> None:
    """The answer's ``index`` pairs a vector with its text: one given twice (another missing) was paired by its
    place after sorting, so a text could get its neighbour's vector. Vectors listed in another order with right
    indices (which the API allows) are put back in the texts' order."""
    from rag_eval.embed.openai_compat import RetryableError, openai_send

    def vectors(texts: Sequence[str]) -> list[list[float]]:
        return [[float(len(t)), 1.0] for t in texts]

    for bad in (False, True):
        endpoint = Endpoint(vectors=vectors, indices=indices if bad else range, reversed=not bad).start()
        send, close = openai_send(base_url=endpoint.base_url, model="m", api_key="k", dimensions=None, timeout=10)
        try:
            if bad:
                with pytest.raises(RetryableError, match=re.escape(said)):
                    send(["a", "bb", "ccc"])
            else:
                assert send(["a", "bb", "ccc"]) == [[1.0, 1.0], [2.0, 1.0], [3.0, 1.0]]
        finally:
            close()
            endpoint.stop()


def test_vectors_of_another_dimension_are_exit_2(
    minilm: Callable[[Sequence[str]], np.ndarray], collection: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    endpoint = Endpoint(vectors=lambda texts: minilm(texts)[:, :383].tolist()).start()
    try:
        code, output = run(experiment(tmp_path, collection, endpoint_table(endpoint.base_url)), tmp_path / "run",
                           capsys)  # fmt: skip
    finally:
        endpoint.stop()
    assert code == 2
    assert "holds 384-d vectors but the query vectors are 383-d" in output
    assert not (tmp_path / "run").exists()


def test_another_model_is_refused_by_the_fit_check(
    minilm: Callable[[Sequence[str]], np.ndarray], collection: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The same dimension, another space (all-MiniLM-L6-v2 turned by a fixed random rotation): every query
    would search without error and find near-random neighbours; the fit check refuses the run."""
    rotation, _ = np.linalg.qr(np.random.default_rng(0).standard_normal((384, 384)))
    endpoint = Endpoint(vectors=lambda texts: (minilm(texts) @ rotation).tolist()).start()
    try:
        code, output = run(experiment(tmp_path, collection, endpoint_table(endpoint.base_url)), tmp_path / "run",
                           capsys)  # fmt: skip
    finally:
        endpoint.stop()
    assert code == 2
    assert "the [embedder] does not look like the model this collection was embedded with:" in output
    assert "of 50 rows of kb_chunks find themselves among their first 10 hits" in output
    assert not (tmp_path / "run").exists()
    assert len(endpoint.texts_sent()) == 1 + 50  # refused before any query was replayed


def test_without_the_local_model_the_fit_check_says_it_did_not_run(
    collection: str, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A machine without the ``embed`` extra replays the example on the data set's shipped query vectors (as
    `make existing` does): the fit check cannot embed the rows, says so, and refuses nothing."""
    monkeypatch.setitem(sys.modules, "sentence_transformers", None)  # import sentence_transformers: ImportError
    code, output = run(experiment(tmp_path, collection, ""), tmp_path / "run", capsys)
    assert code == 0, output
    assert "the [embedder] fit check did not run: the rows cannot be embedded here" in output
    fit = json.loads((tmp_path / "run" / "resolution.json").read_text())["embedder_fit"]
    assert fit["checked"] is False and "sentence-transformers is not installed" in fit["why"]
    assert "not checked: the rows cannot be embedded here" in (tmp_path / "run" / "report.md").read_text()
