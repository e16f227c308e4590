"""A run's ``[service]`` on Milvus Lite: the served tool started over stdio with the config the experiment
expects conforms on every query (labelled and a query log's) and measures as the in-process run does; one
started with another cap does not, and the run names the differing queries with both payloads; a plain HTTP
service that times out, answers an error or malformed JSON, or dies mid-run stops the run with exit 3, and
``--resume`` asks only the queries left.

The oracle of the measures is the run's own summary of the same config (computed from its rows, not from
payloads); the oracle of conformance is the payloads themselves, compared here as dictionaries.
"""

from __future__ import annotations

import json
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import replace
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from rag_eval import jobs
from rag_eval.core.errors import ServiceError
from rag_eval.embed.providers import EmbedSettings
from rag_eval.experiment import Experiment, Overrides, load_experiment, with_overrides
from rag_eval.experiment.model import ServiceSpec
from rag_eval.replay.step import Execution
from rag_eval.traffic.logs import TrafficSpec
from tests.conftest import SHIPPED
from tests.integration.serve_kit import free_port

pytestmark = [pytest.mark.milvus_lite, pytest.mark.slow]

EMBED = "tests.integration.serve_kit:shipped_encode"
CONFIGS = SHIPPED / "experiments" / "configs"


@pytest.fixture(scope="module")
def setup(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    root = tmp_path_factory.mktemp("service")
    base = with_overrides(
        load_experiment(SHIPPED / "experiments" / "default.toml"), Overrides(milvus_uri=str(root / "milvus.db"))
    )
    log = root / "log.jsonl"
    log.write_text("".join(json.dumps({"query": q}) + "\n" for q in ["replica lag after failover", "disk full"] * 2))
    base = replace(base, cache_dir=root / "cache", query_limit=30,
                   configs=tuple(c for c in base.configs if c.name in ("legacy-merge", "evidence")),
                   embedder=EmbedSettings(provider="python", model="", callable=EMBED),
                   traffic=TrafficSpec(path=log))  # fmt: skip
    plain = jobs.run_experiment(base, root / "plain")
    manifest = json.loads((plain.out / "manifest.json").read_text())
    return {"root": root, "base": base, "plain": plain, "collection": manifest["milvus"]["collection"]}


def _served(setup: dict[str, Any], properties: Path) -> ServiceSpec:
    command = (sys.executable, "-m", "rag_eval.cli", "serve", "--properties", str(properties), "--milvus-uri",
               setup["base"].resolved_uri, "--collection", setup["collection"], "--embedder-provider", "python",
               "--embedder-callable", EMBED)  # fmt: skip
    return ServiceSpec(command=command, config="evidence", timeout=60)


def test_the_served_tool_with_the_expected_config_conforms_and_measures_as_the_run(setup: dict[str, Any]) -> None:
    exp = replace(setup["base"], service=_served(setup, CONFIGS / "evidence.properties"))
    result = jobs.run_experiment(exp, setup["root"] / "served")
    doc = result.service
    assert doc is not None and result.exit_code == 0
    assert doc["queries"] == 32  # 30 labelled, 2 distinct logged
    assert doc["conformance"] == 1.0 and doc["conformance_traffic"] == 1.0 and doc["differing"] == []
    assert [g["outcome"] for g in doc["gates"]] == ["pass"]
    service, pipeline = doc["measures"]["service"], doc["measures"]["pipeline"]
    assert service == pipeline
    summary = setup["plain"].summary["configs"]["evidence"]["chunk"]
    assert {k: service[f"chunk:{k}"] for k in summary} == pytest.approx(summary, abs=1e-12)
    assert service["judged_queries"] == 30 and service["unscoped_excerpts"] == 0
    assert json.loads((result.out / "service.json").read_text())["conformance"] == 1.0


def test_a_service_with_another_cap_does_not_conform_and_the_run_names_the_queries(
    setup: dict[str, Any], tmp_path: Path
) -> None:
    three = tmp_path / "cap3.properties"
    three.write_text((CONFIGS / "evidence.properties").read_text().replace("per-document=2", "per-document=3"))
    exp = replace(setup["base"], service=_served(setup, three))
    result = jobs.run_experiment(exp, setup["root"] / "cap3")
    doc = result.service
    assert doc is not None and result.exit_code == 1
    assert 0 < doc["conformance"] < 1
    assert [g["outcome"] for g in doc["gates"]] == ["fail"]
    for d in doc["differing"]:
        assert d["pipeline"] != d["service"] and d["first_difference"].startswith(("evidence", "hints"))
        assert d["pipeline"]["query"] == d["service"]["query"] == d["query"]
    identical = doc["queries"] - len(doc["differing"])
    assert doc["conformance"] == identical / doc["queries"]
    report = (result.out / "service.md").read_text()
    assert all(d["query_id"] in report for d in doc["differing"][:20])


class Fake:
    """A plain HTTP service answering the pipeline's payloads by query text, failing as told at request ``at``."""

    def __init__(self, payloads: dict[str, Any], port: int) -> None:
        self.payloads, self.port = payloads, port
        self.mode, self.at, self.asked = "ok", -1, 0
        self.server: ThreadingHTTPServer | None = None

    def start(self) -> None:
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def do_POST(self) -> None:
                query = json.loads(self.rfile.read(int(self.headers["Content-Length"])))["query"]
                n, fake.asked = fake.asked, fake.asked + 1
                mode = fake.mode if n == fake.at else "ok"
                if mode == "die":
                    threading.Thread(target=fake.stop).start()
                    return
                if mode == "slow":
                    time.sleep(3)
                body = b"<html>oops" if mode == "malformed" else json.dumps(fake.payloads[query]).encode()
                self.send_response(500 if mode == "error" else 200)
                self.send_header("Content-Type", "application/json")
                self.end_headers()
                self.wfile.write(body)

        self.server = ThreadingHTTPServer(("127.0.0.1", self.port), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def stop(self) -> None:
        if self.server is not None:
            self.server.shutdown()
            self.server.server_close()
            self.server = None


@pytest.fixture
def fake(setup: dict[str, Any]) -> Iterator[Fake]:
    answers = setup["root"] / "served" / ".service" / "payloads.jsonl"
    if not answers.is_file():
        pytest.skip("needs the conforming run's payloads")
    payloads = {row["payload"]["query"]: row["payload"] for row in map(json.loads, answers.read_text().splitlines())}
    service = Fake(payloads, free_port())
    service.start()
    yield service
    service.stop()


FAILURES = [("slow", "no answer within 1 s"), ("error", "HTTP 500"), ("malformed", "not JSON"),
            ("die", "stopped answering|could not reach")]  # fmt: skip


@pytest.mark.parametrize(("mode", "said"), FAILURES)
def test_a_failing_service_stops_the_run_with_exit_3_and_resume_completes_it(
    setup: dict[str, Any], fake: Fake, tmp_path: Path, mode: str, said: str
) -> None:
    spec = ServiceSpec(http=f"http://127.0.0.1:{fake.port}/lookup", config="evidence", timeout=1, concurrency=1)
    exp: Experiment = replace(setup["base"], service=spec)
    fake.mode, fake.at = mode, 7
    with pytest.raises(ServiceError, match=said) as caught:
        jobs.run_experiment(exp, tmp_path / "run")
    assert caught.value.exit_code == 3 and "query 'q" in str(caught.value) and "--resume" in str(caught.value)
    assert not (tmp_path / "run" / "service.json").exists()
    if mode == "die":  # it went down: up again, as an operator would bring it back
        deadline = time.monotonic() + 10
        while fake.server is not None and time.monotonic() < deadline:
            time.sleep(0.05)
        fake.start()
    fake.mode, asked = "ok", fake.asked
    result = jobs.run_experiment(exp, tmp_path / "run", Execution(resume=True))
    assert result.service is not None and result.service["conformance"] == 1.0
    assert fake.asked - asked == 32 - 7  # the 7 answered before the failure are not asked again


def test_the_served_tool_over_http_conforms(setup: dict[str, Any], tmp_path: Path) -> None:
    """The run's Milvus Lite file is served from a copy: a Lite file is opened by one process at a time."""
    import shutil
    import subprocess

    from tests.integration.serve_kit import ROOT, env, serve_argv, wait_healthy

    copy = tmp_path / "served.db"
    shutil.copytree(setup["base"].resolved_uri, copy)
    port = free_port()
    argv = serve_argv(CONFIGS / "evidence.properties", str(copy), setup["collection"], "--transport", "http",
                      "--port", str(port), "--embedder-callable", EMBED)  # fmt: skip
    process = subprocess.Popen(argv, cwd=ROOT, env=env())
    try:
        wait_healthy(port, process)
        spec = ServiceSpec(url=f"http://127.0.0.1:{port}/mcp", config="evidence", concurrency=8)
        result = jobs.run_experiment(replace(setup["base"], service=spec), tmp_path / "run")
    finally:
        process.terminate()
        process.wait(timeout=30)
    assert result.service is not None and result.exit_code == 0
    assert result.service["conformance"] == 1.0 and result.service["queries"] == 32


def test_a_legacy_service_conforms_to_the_legacy_config_and_its_chunks_cannot_be_read(setup: dict[str, Any]) -> None:
    """A legacy service's document_id is the source: diffed against the legacy config it conforms, and its
    excerpts are counted as unscoped, delivering no chunk (the legacy config's own rows know better)."""
    spec = replace(_served(setup, CONFIGS / "legacy.properties"), config="legacy-merge")
    result = jobs.run_experiment(replace(setup["base"], service=spec), setup["root"] / "legacy")
    doc = result.service
    assert doc is not None and doc["conformance"] == 1.0 and result.exit_code == 0
    service = doc["measures"]["service"]
    answers = (result.out / ".service" / "payloads.jsonl").read_text().splitlines()
    rows = [json.loads(line) for line in answers]
    labelled = [e for r in rows if not r["query_id"].startswith("traffic:") for e in r["payload"]["evidence"]]
    keys = [e["document_id"] for e in labelled]
    assert service["unscoped_excerpts"] == sum(1 for k in keys if "#chunk-" not in k and not k.startswith("vector:"))
    assert service["unscoped_excerpts"] > 0
    assert "not chunk-scoped" in (result.out / "service.md").read_text()
