"""The client processes of a load measurement against a served endpoint, run here in this process against a
real plain-HTTP endpoint on 127.0.0.1: requests timed end to end, failures counted and not timed into the
latencies, an endpoint that answers nothing (or is down) stopped with the project's error naming it; the
summaries and the per-request table of such windows (search and post-process missing, not 0)."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler
from typing import Any

import numpy as np
import pytest

from rag_eval.core.errors import ServiceError
from rag_eval.experiment.model import ServiceSpec
from rag_eval.loadtest import endpoint
from rag_eval.loadtest.driver import Window, requests_table, summarise_level
from rag_eval.loadtest.endpoint import EndpointSetup
from rag_eval.loadtest.worker import ERROR, OK, TIMEOUT, WindowResult
from tests.unit.loadtest.http_fake import answer_json, serving


class _Handler(BaseHTTPRequestHandler):
    def log_message(self, *args: Any) -> None:
        pass

    def do_POST(self) -> None:
        if self.path != "/lookup":
            self.send_response(404)
            self.end_headers()
            return
        query = json.loads(self.rfile.read(int(self.headers["Content-Length"])))["query"]
        if "slow" in query:
            time.sleep(0.5)
        if "bad" in query:
            self.send_response(500)
            self.end_headers()
            return
        answer_json(self, {"query": query, "evidence": [] if "junk" not in query else "x"})


@pytest.fixture(scope="module")
def url() -> Iterator[str]:
    with serving(_Handler) as address:
        yield address


def _window(url: str, queries: tuple[str, ...], *, timeout: float = 5.0, cap: int | None = 6) -> WindowResult:
    setup = EndpointSetup(service=ServiceSpec(http=url, timeout=timeout), config="evidence", queries=queries, warmup=1)
    endpoint.init_worker(setup, threading.Barrier(1))
    assert endpoint.ready(0).ok
    return endpoint.run_window("evidence", 0, 0, 5.0, cap)


def test_every_request_is_timed_end_to_end_and_the_stages_inside_are_not_seen(url: str) -> None:
    got = _window(url, ("disk full", "replica lag"))
    assert got.ok and len(got.e2e_ns) == 6 and (got.e2e_ns > 0).all()
    assert got.search_ns is None and got.post_ns is None and got.outcome is not None
    assert got.outcome.tolist() == [OK] * 6 and got.query_index.tolist() == [0, 1, 0, 1, 0, 1]


def test_errors_and_timeouts_are_counted_and_the_loop_goes_on(url: str) -> None:
    got = _window(url, ("disk full", "bad one", "junk", "slow"), timeout=0.2, cap=8)
    assert got.ok and got.outcome is not None
    assert got.outcome.tolist() == [OK, ERROR, ERROR, TIMEOUT] * 2


def test_an_endpoint_that_keeps_failing_stops_the_measurement_naming_it(url: str) -> None:
    setup = EndpointSetup(service=ServiceSpec(http=url.replace("/lookup", "/gone")), config="e", queries=("q",))
    endpoint.init_worker(setup, threading.Barrier(1))
    refused = endpoint.ready(0)  # a 404 to the warm-up requests
    assert not refused.ok and isinstance(refused.error, ServiceError) and refused.error.exit_code == 3
    assert "/gone: a warm-up request failed" in str(refused.error) and "HTTP 404" in str(refused.error)
    queries = ("disk full", *(["bad"] * 12))
    setup = EndpointSetup(service=ServiceSpec(http=url), config="e", queries=queries)
    endpoint.init_worker(setup, threading.Barrier(1))
    failed = endpoint.run_window("e", 0, 0, 5.0, 13)  # one answered, then ten failures in a row
    assert not failed.ok and isinstance(failed.error, ServiceError)
    assert f"the service at {url}: 10 requests in a row failed under load" in str(failed.error)


def test_a_closed_port_is_the_projects_error_naming_the_endpoint() -> None:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # closed again when the block ends: nothing listens there
    setup = EndpointSetup(service=ServiceSpec(url=f"http://127.0.0.1:{port}/mcp", timeout=5), config="e",
                          queries=("q",), warmup=1)  # fmt: skip
    endpoint.init_worker(setup, None)
    got = endpoint.ready(0)
    assert not got.ok and isinstance(got.error, ServiceError) and got.error.exit_code == 3
    message = str(got.error)
    assert f"the service at http://127.0.0.1:{port}/mcp: cannot be reached" in message and "\n" not in message


def _part(slot: int, e2e_ms: list[float], outcome: list[int]) -> WindowResult:
    e2e = np.asarray([v * 1e6 for v in e2e_ms], dtype=np.int64)
    return WindowResult(
        config="s", slot=slot, started_ns=np.arange(len(e2e), dtype=np.int64), query_index=np.zeros(len(e2e), np.int32),
        search_ns=None, e2e_ns=e2e, post_ns=None, outcome=np.asarray(outcome, dtype=np.int8), wall_ns=int(1e8),
        cpu_s=0.01,
    )  # fmt: skip


def test_a_served_levels_summary_times_the_answered_requests_and_counts_the_others() -> None:
    w0 = Window(config="s", concurrency=2, round=0, machine_busy=None,
                parts=(_part(0, [10, 99, 20], [OK, ERROR, OK]), _part(1, [30, 500], [OK, TIMEOUT])))  # fmt: skip
    w1 = Window(config="s", concurrency=2, round=1, machine_busy=None,
                parts=(_part(0, [10], [OK]), _part(1, [40], [OK])))  # fmt: skip
    s = summarise_level([w0, w1], cpus=2)
    assert (s["searches"], s["errors"], s["timeouts"]) == (5, 1, 1)
    assert s["latency_us"]["e2e"]["max"] == 40_000 and s["latency_us"]["e2e"]["p50"] == 20_000
    assert s["latency_us"]["search"] == {"p50": None, "p95": None, "p99": None, "mean": None, "max": None}
    assert [(r["searches"], r["errors"], r["timeouts"]) for r in s["rounds"]] == [(3, 1, 1), (2, 0, 0)]
    assert s["rounds"][0]["latency_us"]["search"]["p99"] is None
    table = requests_table([w0, w1])
    assert table.num_rows == 7 and table.column("e2e_us").null_count == 0
    assert table.column("search_us").null_count == 7 and table.column("postprocess_us").null_count == 7
    assert table.column("outcome").to_pylist()[:5] == ["ok", "error", "ok", "ok", "timeout"]
