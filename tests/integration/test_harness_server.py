"""The harness against a real Milvus 2.3.5 server: ingest, reuse, rebuild, replay, refusals."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from rag_eval import jobs
from rag_eval.core.errors import UnsupportedFeatureError
from rag_eval.experiment import Overrides, load_experiment, with_overrides
from tests.conftest import ROOT, SHIPPED
from tests.integration.replay_only import replay_only


@pytest.mark.milvus_server
def test_ingest_reuse_rebuild_and_replay_on_the_server(
    server_uri: str, collection_name: str, drop_after: Callable[[str, str], None], tmp_path: Path
) -> None:
    drop_after(server_uri, collection_name)
    exp = with_overrides(
        load_experiment(SHIPPED / "experiments" / "default.toml"), Overrides(milvus_uri=server_uri,
        collection=collection_name,
        query_limit=60))
    exp = replace(exp, cache_dir=tmp_path / "cache")
    first = jobs.ingest(exp)
    again = jobs.ingest(exp)
    assert not first.reused and again.reused and again.embedded == 0

    result = jobs.run_experiment(exp, tmp_path / "run")  # on the collection built once, reused
    manifest = json.loads((result.out / "manifest.json").read_text())
    assert manifest["milvus"]["backend"] == "server" and manifest["milvus"]["server_version"]
    table = pq.read_table(result.out / "per_query.parquet").to_pandas()
    assert len(table) == 60 * len(exp.configs)
    evidence = result.summary["configs"]["evidence"]
    assert evidence["duplicate_rate"] == 0 and evidence["cap_compliance"] == 1.0
    assert evidence["latency_us"]["search"]["p50"] > 0
    assert manifest["milvus"]["reused"] is True

    rebuilt = jobs.ingest(with_overrides(exp, Overrides(profile="clean")))
    assert not rebuilt.reused and rebuilt.reason == "manifest differs" and rebuilt.collection == collection_name


@pytest.mark.milvus_server
def test_grouped_mode_is_refused_before_anything_is_written(
    server_uri: str, collection_name: str, drop_after: Callable[[str, str], None], tmp_path: Path
) -> None:
    drop_after(server_uri, collection_name)
    exp = with_overrides(
        load_experiment(SHIPPED / "experiments" / "grouped.toml"), Overrides(milvus_uri=server_uri,
        collection=collection_name,
        query_limit=10))
    with pytest.raises(UnsupportedFeatureError, match="ignores grouping"):
        jobs.run_experiment(replace(exp, cache_dir=tmp_path / "cache"), tmp_path / "run")
    assert not (tmp_path / "run").exists()


def test_cli_exit_code_3_when_the_server_is_gone(tmp_path: Path) -> None:  # on a port nothing listens on
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "rag_eval.cli",
            "run",
            str(SHIPPED / "experiments" / "default.toml"),
            "-q",
            "--milvus-uri",
            "http://127.0.0.1:9",
            "--out",
            str(tmp_path / "run"),
        ],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=60,
        env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin"},
    )
    assert proc.returncode == 3, proc.stderr
    assert proc.stderr.strip().count("\n") == 0 and "127.0.0.1:9" in proc.stderr
    assert not (tmp_path / "run").exists()


@pytest.mark.milvus_server
def test_two_runs_on_the_server_give_identical_rows(
    server_uri: str,
    collection_name: str,
    drop_after: Callable[[str, str], None],
    tmp_path: Path,
    shared_dataset: Callable[[str], Path],
) -> None:
    """ClapNQ on the default HNSW index: the first run builds the collection and replays at once with search
    latency not timed, the second reuses it, timing every query. Hits come in one total order (equal scores by
    vector id, ties at a cut-off completed), ingest waits until the rows are indexed, compacted, loaded and
    answering steadily, and every HNSW search skips the index's query cache (a vector's first search after a
    load answers like every later one), so the rows are identical whether the timing pass searched a query
    before or not. Every query is replayed (all 600: a first search answered otherwise showed in 6 of
    them), under one legacy and one evidence config: both retrieve-k (5 and 20) are timed, and the other
    configs only post-process the same hits otherwise."""
    import pandas as pd

    from rag_eval.rundir.rows import LATENCY_COLUMNS

    drop_after(server_uri, collection_name)
    exp = with_overrides(
        load_experiment(ROOT / "tests" / "experiments" / "clapnq.toml"),
        Overrides(dataset=str(shared_dataset("clapnq")), milvus_uri=server_uri, collection=collection_name),
    )
    kept = tuple(c for c in exp.configs if c.name in ("legacy-merge", "evidence"))
    exp = replace(exp, configs=kept, gates=None, cache_dir=tmp_path / "cache")
    jobs.ingest(exp, force=True)
    tables = []
    for n, latency in enumerate(("off", "all")):
        result = replay_only(with_overrides(exp, Overrides(latency=latency)), tmp_path / f"run{n}")
        tables.append(result.rows.drop(columns=list(LATENCY_COLUMNS)))
    pd.testing.assert_frame_equal(tables[0], tables[1])
