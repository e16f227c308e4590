"""The load mode without a server: its settings and refusals, worker failures, the summaries and reports."""

from __future__ import annotations

import json
import pickle
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from rag_eval.cli import main
from rag_eval.core.errors import (
    ConfigError,
    LoadClientError,
    SearchRequestError,
    SearchUnavailableError,
)
from rag_eval.experiment import experiment_from_table
from rag_eval.experiment.load_table import LoadFlags, LoadSettings, parse_concurrency, with_flags
from rag_eval.loadtest.driver import Window, _collect, _split, requests_table, summarise_level
from rag_eval.loadtest.worker import WindowResult, WorkerSetup
from rag_eval.loadtest.worker import _failure as worker_failure
from rag_eval.reports.loadtest import curve_chart, load_rows, render_load_markdown
from rag_eval.search.milvus.schema import IndexSpec, SearchTarget
from tests.conftest import SHIPPED

DEFAULT = str(SHIPPED / "experiments" / "default.toml")


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("0", "not within 1..64"),
        ("-2", "not within 1..64"),
        ("65", "not within 1..64"),
        ("1000000", "not within 1..64"),
        ("1,2,2", "2 is given twice"),
        ("", "comma-separated integers"),
        ("1,,2", "comma-separated integers"),
        ("two", "comma-separated integers"),
        ("1.5", "comma-separated integers"),
        (",".join(str(i) for i in range(1, 14)), "at most 12"),
    ],
)
def test_bad_concurrency_is_refused_naming_the_flag(text: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message) as err:
        parse_concurrency(text, key="--concurrency")
    assert "@ --concurrency" in str(err.value)


@pytest.mark.parametrize(
    ("flags", "key", "message"),
    [
        ({"duration": 0.0}, "--duration", "must be > 0"),
        ({"duration": -1.0}, "--duration", "must be > 0"),
        ({"duration": float("nan")}, "--duration", "must be > 0"),
        ({"duration": float("inf")}, "--duration", "must be > 0"),
        ({"duration": 601.0}, "--duration", "<= 600"),
        ({"duration": 0.3, "rounds": 5}, "--duration", "at least 0.2 s"),
        ({"duration": 600.0, "concurrency": "1,2,4,8"}, "--duration", "over the 3600 s cap"),
        ({"max_searches": 0}, "--max-searches", "within 1..10,000,000"),
        ({"max_searches": -5}, "--max-searches", "within 1..10,000,000"),
        ({"max_searches": 10**9}, "--max-searches", "within 1..10,000,000"),
        ({"rounds": 1}, "--rounds", "within 2..20"),
        ({"rounds": 21}, "--rounds", "within 2..20"),
        ({"warmup": -1}, "--warmup", "within 0..1000"),
        ({"configs": ["nope"]}, "--configs", "not a config of the experiment"),
        ({"configs": ["a", "a"]}, "--configs", "given twice"),
    ],
)
def test_bad_load_flags_are_refused_naming_the_flag(flags: dict[str, Any], key: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message) as err:
        with_flags(LoadSettings(), LoadFlags(**flags), known_configs=["a", "b"])
    assert f"@ {key}" in str(err.value)


def test_flags_override_the_experiment_table_and_bounds_hold() -> None:
    base = LoadSettings(concurrency=(1, 2), duration_s=4.0, rounds=2)
    s = with_flags(base, LoadFlags(concurrency="8,4", max_searches=1000), known_configs=["a"])
    assert (s.concurrency, s.duration_s, s.rounds, s.window_cap()) == ((4, 8), 4.0, 2, 500)
    assert _split(500, 3) == [167, 167, 166] and _split(None, 2) == [None, None] and sum(_split(2, 4)) == 2


def test_the_load_table_of_an_experiment_is_checked_with_every_problem() -> None:
    table = {
        "dataset": {"path": "."},
        "configs": [{"name": "a", "rag": {}}],
        "load": {"concurrency": [0, 2, 2], "duration": "10", "rounds": 1, "colour": "red", "configs": ["b"]},
    }
    with pytest.raises(ConfigError) as err:
        experiment_from_table(table, base=Path("."), source="exp.toml")
    text = str(err.value)
    for expected in ("@ load.concurrency", "@ load.duration", "@ load.rounds", "@ load.colour", "@ load.configs"):
        assert expected in text
    ok = experiment_from_table(
        {**table, "load": {"concurrency": [4, 1], "duration": 2, "rounds": 2}}, base=Path("."), source="exp.toml"
    )
    assert ok.load == LoadSettings(concurrency=(1, 4), duration_s=2.0, rounds=2)
    assert ok.as_dict()["load"]["concurrency"] == [1, 4]


@pytest.mark.parametrize(
    ("argv", "needle"),
    [
        (["--concurrency", "0"], "@ --concurrency"),
        (["--concurrency", "1,1"], "@ --concurrency"),
        (["--concurrency", "100"], "@ --concurrency"),
        (["--duration", "-1"], "@ --duration"),
        (["--duration", "100000"], "@ --duration"),
        (["--max-searches", "0"], "@ --max-searches"),
        (["--rounds", "1"], "@ --rounds"),
        (["--configs", "evidence,evidence"], "@ --configs"),
    ],
)
def test_cli_refuses_bad_values_with_exit_2_and_one_line(
    argv: list[str], needle: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code = main(["load", DEFAULT, "-q", "--milvus-uri", "http://127.0.0.1:9", "--out", str(tmp_path / "o"), *argv])
    err = capsys.readouterr().err.strip()
    assert code == 2 and needle in err and len(err.splitlines()) == 1
    assert not (tmp_path / "o").exists()


def test_cli_refuses_milvus_lite_before_anything_is_written(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["load", DEFAULT, "-q", "--milvus-uri", str(tmp_path / "lite.db"), "--out", str(tmp_path / "o")])
    err = capsys.readouterr().err.strip()
    assert code == 2 and "load needs a Milvus server" in err and len(err.splitlines()) == 1
    assert not (tmp_path / "o").exists() and not (tmp_path / "lite.db").exists()


def _setup() -> WorkerSetup:
    return WorkerSetup(
        target=SearchTarget(uri="http://user:secret@127.0.0.1:19530", collection="c", index=IndexSpec(), token_env="T",
                            timeout=1.0),
        configs=(), queries=("q",), normalized=("q",), vectors=np.zeros((1, 2), dtype=np.float32),
    )  # fmt: skip


class _Done:
    def __init__(self, result: WindowResult) -> None:
        self._result = result

    def result(self) -> WindowResult:
        return self._result


def test_worker_failures_become_the_projects_errors_without_credentials() -> None:
    ok = WindowResult(config="a", slot=0)
    aborted = WindowResult(config="a", slot=1, ok=False, aborted=True)
    for error in (
        SearchRequestError("Milvus says no", uri="http://127.0.0.1:19530"),
        SearchUnavailableError("Milvus says no", uri="http://127.0.0.1:19530"),
    ):
        # as a client process sends it: the project's error, pickled across the process boundary
        failed = pickle.loads(pickle.dumps(WindowResult(config="a", slot=2, ok=False, error=error)))
        with pytest.raises(type(error), match="Milvus says no") as err:
            _collect(_setup(), [_Done(ok), _Done(aborted), _Done(failed)])  # type: ignore[list-item]
        assert getattr(err.value, "uri", "") == "http://127.0.0.1:19530"
        assert err.value.exit_code == error.exit_code
    with pytest.raises(LoadClientError, match="did not all reach the start"):
        _collect(_setup(), [_Done(ok), _Done(aborted)])  # type: ignore[list-item]
    bug = WindowResult(config="a", slot=0, ok=False, bug="Traceback: ZeroDivisionError")
    with pytest.raises(RuntimeError, match="ZeroDivisionError"):
        _collect(_setup(), [_Done(bug)])  # type: ignore[list-item]
    assert _collect(_setup(), [_Done(ok)]) == (ok,)  # type: ignore[list-item]


def test_a_worker_sends_the_projects_error_without_its_unpicklable_cause() -> None:
    class Unpicklable(Exception):
        def __reduce__(self) -> tuple[object, ...]:
            raise TypeError("cannot pickle this cause")

    try:
        try:
            raise Unpicklable("grpc state")
        except Unpicklable as cause:
            raise SearchUnavailableError("Milvus at http://127.0.0.1:19530 is unreachable", uri="x") from cause
    except SearchUnavailableError as exc:
        failed = worker_failure("a", 3, exc)
    sent = pickle.loads(pickle.dumps(failed))
    assert isinstance(sent.error, SearchUnavailableError) and sent.error.uri == "x"
    assert sent.error.__cause__ is None and not sent.aborted and sent.bug == ""
    buggy = worker_failure("a", 3, ZeroDivisionError("division by zero"))
    assert buggy.error is None and "ZeroDivisionError" in buggy.bug


def _part(slot: int, e2e_ms: list[float], wall_s: float, cpu_s: float) -> WindowResult:
    e2e = np.asarray([v * 1e6 for v in e2e_ms], dtype=np.int64)
    return WindowResult(
        config="a", slot=slot, started_ns=np.arange(len(e2e), dtype=np.int64), query_index=np.zeros(len(e2e), np.int32),
        search_ns=e2e // 2, e2e_ns=e2e, post_ns=e2e // 10, wall_ns=int(wall_s * 1e9), cpu_s=cpu_s,
    )  # fmt: skip


def test_a_level_summary_from_its_windows_worked_by_hand() -> None:
    w0 = Window(config="a", concurrency=2, round=0, machine_busy=0.5,
                parts=(_part(0, [10, 20], 0.04, 0.01), _part(1, [30], 0.05, 0.02)))  # fmt: skip
    w1 = Window(config="a", concurrency=2, round=1, machine_busy=0.7,
                parts=(_part(0, [10, 10, 10], 0.03, 0.01), _part(1, [40], 0.045, 0.02)))  # fmt: skip
    s = summarise_level([w0, w1], cpus=2)
    assert s["searches"] == 7 and s["wall_s"] == pytest.approx(0.05 + 0.045)
    assert s["qps"] == pytest.approx(7 / 0.095)
    e2e = np.array([10, 20, 30, 10, 10, 10, 40]) * 1e3
    assert s["latency_us"]["e2e"]["p99"] == pytest.approx(np.percentile(e2e, 99))
    assert s["latency_us"]["e2e"]["p50"] == pytest.approx(10_000) and s["latency_us"]["e2e"]["max"] == 40_000
    assert s["latency_us"]["search"]["p50"] == pytest.approx(5_000)
    assert s["closed_loop_qps"] == pytest.approx(2 / (e2e.mean() / 1e6))
    assert s["client_cpu"]["per_process_max"] == pytest.approx(0.02 / 0.045)
    assert s["client_cpu"]["machine_share"] == pytest.approx(0.06 / (0.095 * 2))
    assert s["machine_cpu_busy"] == pytest.approx(0.6)
    assert [r["searches"] for r in s["rounds"]] == [3, 4] and s["rounds"][0]["qps"] == pytest.approx(3 / 0.05)
    assert s["rounds"][1]["latency_us"]["e2e"]["p50"] == pytest.approx(10_000)
    table = requests_table([w0, w1])
    assert table.num_rows == 7 and table.column("e2e_us").to_pylist()[:3] == [10_000.0, 20_000.0, 30_000.0]
    assert table.column("process").to_pylist() == [0, 0, 1, 0, 0, 0, 1]


def _doc() -> dict[str, Any]:
    def result(name: str, n: int, qps: float, p99: float) -> dict[str, Any]:
        lat = {"p50": p99 / 4, "p95": p99 / 2, "p99": p99, "mean": p99 / 3, "max": p99 * 2}
        return {"config": name, "concurrency": n, "searches": int(qps * 10), "wall_s": 10.0, "qps": qps,
                "latency_us": {"search": lat, "e2e": lat}, "rounds": [], "client_cpu": {"per_process_mean": 0.3},
                "machine_cpu_busy": 0.9, "loop_efficiency": 0.99}  # fmt: skip

    return {
        "schema_version": 1, "experiment": "x<script>", "run": {"started": None},
        "milvus": {"backend": "server", "server_version": "v2.3.5", "uri": "http://127.0.0.1:19530",
                   "collection": "c", "pymilvus": "3", "index": {"index_type": "HNSW", "metric": "COSINE"}},
        "settings": {"concurrency": [1, 2], "duration_s": 2.0, "rounds": 2, "window_s": 1.0, "max_searches": None,
                     "warmup": 5, "queries": 10, "start_method": "forkserver"},
        "machine": {"cpus": 2, "memory_bytes": 2**34, "platform": "Linux"},
        "machine_load": {"loadavg_start": [1.0, 1.0, 1.0], "loadavg_end": [1.2, 1.0, 1.0],
                         "levels": [{"concurrency": 1, "cpu_busy_before": 0.25}]},
        "started": "s", "finished": "f", "wall_seconds": 9.0, "git": {"commit": "abc", "dirty": False},
        "results": [result("b|*x*", 2, 300.0, 8000.0), result("b|*x*", 1, 200.0, 5000.0), result("a", 1, 100.0, 4e3)],
        "notes": ["a note"],
    }  # fmt: skip


def test_rows_markdown_and_curve_from_a_load_document() -> None:
    doc = _doc()
    rows = load_rows(doc)
    assert [(r["config"], r["clients"], r["scaling"]) for r in rows] == [("b|*x*", 1, "1.00"), ("b|*x*", 2, "0.75"),
                                                                          ("a", 1, "1.00")]  # fmt: skip
    assert rows[1]["e2e_p99"] == "8.0" and rows[1]["client_cpu"] == "30%"
    text = render_load_markdown(doc)
    assert "| b\\|\\*x\\* | 2 | 3000 | 300.0 | 0.75 |" in text and "x\\<script\\>" in text
    assert "CPU busy in the second before each level: 1 clients 25%" in text and "Note: a note" in text
    svg = curve_chart(doc)
    assert svg is not None and svg.startswith("<svg") and "<script" not in svg and "b|*x*" in svg
    assert curve_chart({"results": []}) is None
    json.dumps(doc)  # the document is plain JSON
