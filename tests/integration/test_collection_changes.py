"""A collection that changes while a run replays it (rows inserted or deleted by another process, as an ingest
running meanwhile would) is caught: its fingerprint (a collection built elsewhere) or row count (rag_eval's own)
is taken before the replay and again after, the run says so in one line, exits 3 and publishes nothing; a
``--resume`` of it is refused (batches after the change are among its parts), naming the collection, and a new
run completes. On
Milvus Lite and on the server (the LangChain example's collection), and on rag_eval's own collection."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from rag_eval import jobs
from rag_eval.core.errors import CollectionChangedError, ConfigError
from rag_eval.rundir.directory import RunStore
from rag_eval.search.milvus import ChunkRow, MilvusStore
from tests.integration.test_existing_runs import example_collection, example_toml, run
from tests.integration.test_harness_lite import experiment

PUBLISHED = ("per_query.parquet", "summary.json", "manifest.json", "report.md", "report.html", "compare.json")
CHANGE = """
import sys
from pymilvus import MilvusClient
uri, name, how = sys.argv[1:4]
client = MilvusClient(uri)
if how == "inserted":
    client.insert(name, [{"text": "A runbook page added while the run replays.", "vector": [0.05] * 384,
                          "doc_id": "added-meanwhile", "source": "", "title": "", "category": ""}])
else:
    client.delete(name, filter='doc_id == "backup-verification"')
client.flush(name)
client.close()
"""


def change_after_the_first_batch(monkeypatch: pytest.MonkeyPatch, change: Callable[[], None]) -> None:
    original = RunStore.write_batch

    def write_then_change(self: RunStore, number: int, rows: list[dict[str, Any]]) -> None:
        original(self, number, rows)
        if number == 0:
            change()

    monkeypatch.setattr(RunStore, "write_batch", write_then_change)


def nothing_published(out: Path) -> bool:
    return not any((out / name).exists() for name in PUBLISHED) and any((out / ".parts").glob("batch-*.arrow"))


@pytest.mark.parametrize("how", ["inserted", "deleted"])
def test_a_collection_built_elsewhere_that_changes_during_the_run(
    milvus_uri: str, collection_name: str, drop_after: Callable[[str, str], None], tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], how: str,
) -> None:  # fmt: skip
    uri, name = milvus_uri, collection_name
    drop_after(uri, name)
    example_collection(uri, name)
    toml = example_toml(tmp_path, uri, name)
    with toml.open("a") as f:  # three batches: the change lands between the first and the rest
        f.write("\n[timing]\nquery_limit = 96\nbatch_size = 32\n")
    if uri.startswith("http"):  # a server's collection is not loaded by a run unless the experiment says so
        toml.write_text(toml.read_text().replace("[collection]\nname", "[collection]\nload = true\nname"))
    out = tmp_path / "run"

    def change() -> None:  # another process, as another team's ingest would
        done = subprocess.run([sys.executable, "-c", CHANGE, uri, name, how], capture_output=True, text=True,
                              timeout=300)  # fmt: skip
        assert done.returncode == 0, done.stderr

    change_after_the_first_batch(monkeypatch, change)
    assert run(toml, out) == 3
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "changed while the run replayed it" in err[0] and name in err[0], err
    assert "nothing is published" in err[0] and nothing_published(out)
    monkeypatch.undo()

    assert run(toml, out, "--resume") == 2  # the rows before the change and after never make one run
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "@ --resume" in err[0] and "changed while it replayed it" in err[0], err
    assert nothing_published(out)
    assert run(toml, out) == 0 and (out / "per_query.parquet").is_file()


@pytest.mark.milvus_lite
def test_rag_evals_own_collection_that_changes_during_the_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    exp = experiment(tmp_path, batch_size=32, query_limit=64)
    target = jobs.ingest(exp).target  # the collection, built before the run (a run reuses it)

    def change() -> None:  # this process holds the Lite file: the insert goes through the run's own server
        with MilvusStore(target) as store:
            added = ChunkRow(vector_id=10**9, doc_id="added-meanwhile", chunk_index=0, content="Added.", title="",
                             source="", category="", start=None, end=None, vector=[0.05] * 384)  # fmt: skip
            store.insert([added])

    change_after_the_first_batch(monkeypatch, change)
    with pytest.raises(CollectionChangedError, match=r"changed while the run replayed it \(its row count: \d+ before"):
        jobs.run_experiment(exp, tmp_path / "run")
    assert nothing_published(tmp_path / "run")
    monkeypatch.undo()
    with pytest.raises(ConfigError, match=r"was stopped because collection .* changed while it replayed it"):
        jobs.run_experiment(exp, tmp_path / "run", jobs.Execution(resume=True))  # batches after the change in it
    # a new run sees a collection that is not what its manifest says, rebuilds it and completes
    assert jobs.run_experiment(exp, tmp_path / "run").exit_code in (0, 1)
    assert (tmp_path / "run" / "per_query.parquet").is_file()
