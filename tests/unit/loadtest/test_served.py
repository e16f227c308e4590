"""A served endpoint measured under load as a step, end to end through the process pool, against a real plain
HTTP endpoint on 127.0.0.1 (the MCP endpoint of `rag-eval serve`: tests/integration/test_load_served.py):
load.json names the endpoint without credentials, holds end-to-end latencies only, and its reports read it."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import replace
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest

from rag_eval import jobs
from rag_eval.experiment import load_experiment
from rag_eval.experiment.load_table import LoadSettings
from rag_eval.experiment.model import ServiceSpec
from rag_eval.loadtest.served import endpoint_target
from rag_eval.reports.console import print_load
from rag_eval.reports.loadtest import load_rows, render_load_markdown
from rag_eval.rundir.reader import read_load
from tests.conftest import SHIPPED
from tests.unit.loadtest.http_fake import answer_json, serving


class _Handler(BaseHTTPRequestHandler):
    def log_message(self, *args: Any) -> None:
        pass

    def do_POST(self) -> None:
        query = json.loads(self.rfile.read(int(self.headers["Content-Length"])))["query"]
        answer_json(self, {"query": query, "evidence": [{"document_id": "d#chunk-0", "content": "x"}]})


@pytest.fixture(scope="module")
def url() -> Iterator[str]:
    with serving(_Handler) as address:
        yield address


def test_the_target_names_the_endpoint_without_credentials() -> None:
    assert endpoint_target(ServiceSpec(http="http://u:p@h/x?k=1", timeout=3))["endpoint"] == "http://h/x"
    assert endpoint_target(ServiceSpec(url="http://h/mcp"))["protocol"] == "mcp"


def test_a_served_endpoint_under_load_is_written_as_load_json_the_reports_read(
    url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    exp = replace(load_experiment(SHIPPED / "experiments" / "default.toml"), query_limit=10,
                  milvus_uri=str(tmp_path / "never.db"))  # fmt: skip
    spec = ServiceSpec(http=url, config="evidence", timeout=5)
    settings = LoadSettings(concurrency=(1, 2), duration_s=0.5, rounds=2, warmup=1)
    jobs.load(exp, tmp_path / "out", settings=settings, endpoint=spec)
    doc = read_load(tmp_path / "out")
    assert doc is not None and not (tmp_path / "never.db").exists()  # no Milvus opened here
    assert doc["target"] == {"kind": "endpoint", "protocol": "http", "endpoint": url, "timeout_s": 5.0}
    assert doc["milvus"] is None and doc["stages"] == ["e2e"] and doc["settings"]["configs"] == ["evidence"]
    assert [(r["config"], r["concurrency"], r["errors"], r["timeouts"]) for r in doc["results"]] == [
        ("evidence", 1, 0, 0), ("evidence", 2, 0, 0)]  # fmt: skip
    for r in doc["results"]:
        assert r["searches"] > 0 and r["latency_us"]["e2e"]["p99"] > 0 and r["latency_us"]["search"]["p99"] is None
        assert len(r["rounds"]) == 2
    requests = pq.read_table(tmp_path / "out" / "load_requests.parquet")
    assert requests.num_rows == sum(r["searches"] for r in doc["results"])
    assert requests.column("search_us").null_count == requests.num_rows
    assert requests.column("e2e_us").null_count == 0 and set(requests.column("outcome").to_pylist()) == {"ok"}
    assert load_rows(doc)[0]["search_p99"] == "–" and load_rows(doc)[0]["failed"] == "0 / 0"
    text = render_load_markdown(doc)
    assert f"the served endpoint {url}" in text and "not seen here" in text and "| 0 / 0 |" in text
    print_load(doc, tmp_path / "out")
    assert "errors/timeouts" in capsys.readouterr().out
