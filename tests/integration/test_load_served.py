"""`rag-eval load --service` against a real `rag-eval serve` over streamable HTTP on 127.0.0.1, serving the
shipped data set's collection from a Milvus Lite file (the server process owns the file; the client processes
speak HTTP only): exit 0, every request timed end to end in load.json and load_requests.parquet with no search
stage, the endpoint named without its credentials. A stdio [service] is refused with exit 2 and one line, and
an endpoint that is down (a closed port) is exit 3 with one line naming it and nothing published."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest

from rag_eval import jobs
from rag_eval.embed.providers import EmbedSettings
from rag_eval.experiment import Overrides, load_experiment, with_overrides
from tests.conftest import SHIPPED
from tests.integration.serve_kit import ROOT, env, free_port, serve_argv, wait_healthy

pytestmark = [pytest.mark.milvus_lite, pytest.mark.slow]

EMBED = "tests.integration.serve_kit:shipped_encode"
CONFIGS = SHIPPED / "experiments" / "configs"
LEVELS = ["--concurrency", "1,2", "--duration", "1", "--rounds", "2", "--warmup", "2", "--limit", "20"]


def _experiment(root: Path, service: str) -> Path:
    """The shipped default experiment with absolute paths and ``service`` as its [service] table."""
    text = (SHIPPED / "experiments" / "default.toml").read_text(encoding="utf-8")
    text = text.replace('path = ".."', f'path = "{SHIPPED}"').replace('"configs/', f'"{CONFIGS}/')
    text = text.replace('uri = "../../../reports/milvus/incident-kb.db"', f'uri = "{root / "unused.db"}"')
    path = root / f"exp-{abs(hash(service))}.toml"
    path.write_text(text + "\n[service]\n" + service + "\n", encoding="utf-8")
    return path


def _load(*argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "rag_eval.cli", "load", "-q", *argv], cwd=ROOT, env=env(),
                          capture_output=True, text=True, timeout=180)  # fmt: skip


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    """The shipped collection ingested into a Lite file, served from a copy of it over streamable HTTP."""
    root = tmp_path_factory.mktemp("load-served")
    exp = with_overrides(load_experiment(SHIPPED / "experiments" / "default.toml"),
                         Overrides(milvus_uri=str(root / "milvus.db")))  # fmt: skip
    exp = replace(exp, cache_dir=root / "cache", embedder=EmbedSettings(provider="python", model="", callable=EMBED))
    collection = jobs.ingest(exp).target.collection
    copy = root / "served.db"
    shutil.copytree(exp.resolved_uri, copy)  # a Lite file is opened by one process at a time: the server's
    port = free_port()
    argv = serve_argv(CONFIGS / "evidence.properties", str(copy), collection, "--transport", "http", "--port",
                      str(port), "--embedder-callable", EMBED)  # fmt: skip
    process = subprocess.Popen(argv, cwd=ROOT, env=env(), stderr=subprocess.DEVNULL)
    try:
        wait_healthy(port, process)
        yield {"root": root, "port": port}
    finally:
        process.terminate()
        process.wait(timeout=30)


def test_the_served_endpoint_under_load_is_timed_end_to_end_for_every_request(served: dict[str, Any]) -> None:
    port, root = served["port"], served["root"]
    exp = _experiment(root, f'url = "http://alice:s3cret@127.0.0.1:{port}/mcp"\nconfig = "evidence"')
    out = root / "out"
    done = _load(str(exp), "--service", "--out", str(out), *LEVELS)
    assert done.returncode == 0, done.stderr
    text = (out / "load.json").read_text(encoding="utf-8")
    doc = json.loads(text)
    assert "s3cret" not in text and "alice" not in text
    assert doc["target"] == {"kind": "endpoint", "protocol": "mcp", "endpoint": f"http://127.0.0.1:{port}/mcp",
                             "timeout_s": 30.0}  # fmt: skip
    assert doc["stages"] == ["e2e"] and doc["milvus"] is None
    assert [(r["config"], r["concurrency"]) for r in doc["results"]] == [("evidence", 1), ("evidence", 2)]
    for r in doc["results"]:
        assert r["searches"] > 0 and r["errors"] == 0 and r["timeouts"] == 0 and len(r["rounds"]) == 2
        assert r["latency_us"]["e2e"]["p50"] > 0 and r["latency_us"]["search"]["p50"] is None
    requests = pq.read_table(out / "load_requests.parquet")
    assert requests.num_rows == sum(r["searches"] for r in doc["results"])
    assert requests.column("e2e_us").null_count == 0 and min(requests.column("e2e_us").to_pylist()) > 0
    assert requests.column("search_us").null_count == requests.num_rows
    assert requests.column("postprocess_us").null_count == requests.num_rows
    assert set(requests.column("outcome").to_pylist()) == {"ok"}
    assert f"the served endpoint http://127.0.0.1:{port}/mcp" in done.stdout.replace("\n", "")


def test_a_stdio_service_is_refused_with_exit_2_and_one_line(served: dict[str, Any]) -> None:
    root = served["root"]
    exp = _experiment(root, 'command = ["rag-eval", "serve", "--properties", "evidence.properties"]')
    done = _load(str(exp), "--service", "--out", str(root / "stdio"), *LEVELS)
    assert done.returncode == 2 and len(done.stderr.strip().splitlines()) == 1, done.stderr
    assert "over stdio (rag-eval serve --properties evidence.properties)" in done.stderr
    assert not (root / "stdio").exists()


def test_an_endpoint_that_is_down_is_exit_3_with_one_line_naming_it_and_nothing_published(
    served: dict[str, Any],
) -> None:
    root, port = served["root"], free_port()  # nothing listens there
    exp = _experiment(root, f'url = "http://127.0.0.1:{port}/mcp"')
    out = root / "down"
    done = _load(str(exp), "--service", "--out", str(out), *LEVELS)
    assert done.returncode == 3 and len(done.stderr.strip().splitlines()) == 1, done.stderr
    assert f"the service at http://127.0.0.1:{port}/mcp: cannot be reached" in done.stderr
    assert not (out / "load.json").exists() and not (out / "load_requests.parquet").exists()
