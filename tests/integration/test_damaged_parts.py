"""``--resume`` over parts damaged or put there from outside: each is exit 3 naming the file, one line, before
a batch replays; once it is removed, the resume replays its batch and the run is whole (nothing lost or
counted twice)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from rag_eval.rundir.parts import write
from tests.conftest import SHIPPED
from tests.integration.test_run_guarantees import _interrupted_run, _resume

pytestmark = pytest.mark.milvus_lite


def test_resume_over_damaged_or_foreign_parts_names_the_file_and_replays_it_once_removed(tmp_path: Path) -> None:
    dataset = tmp_path / "kb"
    shutil.copytree(SHIPPED, dataset, ignore=shutil.ignore_patterns("src", "experiments"))
    out = _interrupted_run(tmp_path, dataset, "m.db")
    parts = out / ".parts"
    first, second = sorted(parts.glob("batch-*.arrow"))
    original = first.read_bytes()
    foreign = parts / "batch-x.arrow"
    damages = {
        first: lambda: first.write_bytes(original[: len(original) // 2]),  # cut short
        second: lambda: write(pa.table({"query_id": ["q1"]}), second),  # another table
        foreign: lambda: foreign.write_bytes(b"not a part"),  # named like a part
    }
    kept = {second: second.read_bytes()}
    for path, damage in damages.items():
        damage()
        refused = _resume(tmp_path, dataset, "m.db")
        assert refused.returncode == 3, refused.stderr
        assert refused.stderr.count("\n") == 1 and "Traceback" not in refused.stderr
        assert str(path) in refused.stderr and "run again" in refused.stderr
        assert not (out / "per_query.parquet").exists()
        if path in kept:
            path.write_bytes(kept[path])
        elif path == foreign:
            foreign.unlink()
        else:
            first.write_bytes(original)
    first.unlink()  # a damaged part removed, as the message says: its batch replays
    resumed = _resume(tmp_path, dataset, "m.db")
    assert resumed.returncode == 0, resumed.stderr
    assert json.loads((out / "manifest.json").read_text())["resumed_batches"] == 1
    table = pq.read_table(out / "per_query.parquet").to_pandas()
    assert len(table) == 264 and not table.duplicated(["query_id", "config"]).any()
