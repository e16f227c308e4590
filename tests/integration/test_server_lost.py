"""The Milvus a run searches, lost mid-run: exit 3 with one line, nothing published, the finished batches kept;
``--resume`` then completes the run with exactly the rows an uninterrupted run gives (latency aside).

The server is shared by every test of the session (one per machine: its etcd port is fixed), so no test may
kill it: the loss is a TCP proxy between the run and the server (:mod:`tests.integration.tcp_proxy`) that the
test cuts (every connection reset, new ones refused) and restores, as a crashed and restarted server looks to
the run. On Milvus Lite the proxy sits between the run's client and the in-process Lite server."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow.parquet as pq
import pytest

from rag_eval.cli import main
from rag_eval.rundir.directory import RunStore
from rag_eval.rundir.rows import LATENCY_COLUMNS
from tests.conftest import SHIPPED
from tests.integration.tcp_proxy import Proxy

PUBLISHED = ("per_query.parquet", "summary.json", "manifest.json", "report.md", "compare.json")


def rows(out: Path) -> pd.DataFrame:
    table = pq.read_table(out / "per_query.parquet").to_pandas().drop(columns=list(LATENCY_COLUMNS))
    frame: pd.DataFrame = table.sort_values(["query_id", "config"]).reset_index(drop=True)
    return frame


def run(uri: str, collection: str, out: Path, *extra: str) -> int:
    configs = SHIPPED / "experiments" / "configs"
    return main(["run", "--dataset", str(SHIPPED), "--config", f"legacy={configs / 'legacy.properties'}",
                 "--config", f"evidence={configs / 'evidence.properties'}", "--milvus-uri", uri, "--collection",
                 collection, "--limit", "160", "--out", str(out), "-q", *extra])  # fmt: skip


def cut_after_the_first_batch(monkeypatch: pytest.MonkeyPatch, cut: Callable[[], None]) -> Callable[..., None]:
    """``cut()`` once the first batch is kept; returns the unpatched ``write_batch``."""
    original = RunStore.write_batch

    def write_then_cut(self: RunStore, number: int, batch: list[dict[str, Any]]) -> None:
        original(self, number, batch)
        if number == 0:
            cut()

    monkeypatch.setattr(RunStore, "write_batch", write_then_cut)
    return original


def lost_then_resumed(uri: str, collection: str, proxies: Callable[[], list[Proxy]], tmp_path: Path,
                      monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:  # fmt: skip
    out = tmp_path / "run"
    assert run(uri, collection, tmp_path / "whole") in (0, 1)  # builds the collection; the rows to match
    capsys.readouterr()

    def cut() -> None:
        for proxy in proxies():
            proxy.cut()

    original = cut_after_the_first_batch(monkeypatch, cut)
    assert run(uri, collection, out) == 3
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "Milvus" in err[0], err
    assert not any((out / name).exists() for name in PUBLISHED)
    assert len(list((out / ".parts").glob("batch-*.arrow"))) == 1
    monkeypatch.setattr(RunStore, "write_batch", original)
    for proxy in proxies():
        proxy.restore()  # the server back (on the same port)
    assert run(uri, collection, out, "--resume") in (0, 1)
    pd.testing.assert_frame_equal(rows(tmp_path / "whole"), rows(out))


@pytest.mark.milvus_server
def test_the_server_lost_mid_run_is_exit_3_and_resume_completes_it(
    server_uri: str, drop_after: Callable[[str, str], None], tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:  # fmt: skip
    host, port = server_uri.removeprefix("http://").rsplit(":", 1)
    proxy = Proxy((host, int(port)))
    collection = f"hostile_lost_{uuid.uuid4().hex[:8]}"
    drop_after(server_uri, collection)
    try:
        lost_then_resumed(proxy.uri, collection, lambda: [proxy], tmp_path, monkeypatch, capsys)
    finally:
        proxy.cut()


@pytest.fixture
def lite_through_proxies(monkeypatch: pytest.MonkeyPatch) -> Iterator[Callable[[], list[Proxy]]]:
    """Every Lite server this process starts, reached through a proxy of its own."""
    from milvus_lite.server_manager import server_manager_instance as manager

    made: dict[str, Proxy] = {}
    real = manager.start_and_get_uri

    def through_a_proxy(path: str, args: Any = None) -> str | None:
        local = real(path, args)
        if local is None:
            return None
        if local not in made:
            made[local] = Proxy(("127.0.0.1", int(local.rsplit(":", 1)[1])))
        return made[local].uri

    monkeypatch.setattr(manager, "start_and_get_uri", through_a_proxy)
    yield lambda: list(made.values())
    for proxy in made.values():
        proxy.cut()


@pytest.mark.milvus_lite
def test_lite_lost_mid_run_is_exit_3_and_resume_completes_it(
    lite_through_proxies: Callable[[], list[Proxy]], tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:  # fmt: skip
    uri = str(tmp_path / "milvus.db")
    lost_then_resumed(uri, "kb_lost", lite_through_proxies, tmp_path, monkeypatch, capsys)
