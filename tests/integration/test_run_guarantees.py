"""What a run guarantees whatever else happens: one run per directory at a time, a resume only of the same
thing, final files published as a set (a failed write leaves the previous run's files whole), nothing
written when the start is refused."""

from __future__ import annotations

import json
import os
import resource
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from tests.conftest import ROOT, SHIPPED

pytestmark = pytest.mark.milvus_lite
DEFAULT = SHIPPED / "experiments" / "default.toml"
ENV = {**os.environ, "PYTHONPATH": str(ROOT)}


def cli(*args: str, cwd: Path, **kw: object) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "rag_eval.cli", *args], capture_output=True, text=True, cwd=cwd, env=ENV,
        timeout=600, **kw,  # type: ignore[arg-type]
    )  # fmt: skip


def test_a_second_run_into_the_same_directory_is_refused_and_the_first_is_unharmed(tmp_path: Path) -> None:
    out = tmp_path / "run"
    first = subprocess.Popen(
        [sys.executable, "-m", "rag_eval.cli", "run", str(DEFAULT), "-q", "--milvus-uri", str(tmp_path / "a.db"),
         "--out", str(out)],
        cwd=tmp_path, env=ENV, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    deadline = time.monotonic() + 120
    while not (out / ".lock.json").exists() and time.monotonic() < deadline and first.poll() is None:
        time.sleep(0.05)
    assert (out / ".lock.json").exists(), "the first run should hold the directory"
    t0 = time.monotonic()
    second = cli("run", str(DEFAULT), "-q", "--milvus-uri", str(tmp_path / "b.db"), "--out", str(out), cwd=tmp_path)
    assert second.returncode == 2, second.stderr
    assert time.monotonic() - t0 < 30  # refused at once, not after its own replay
    assert f"pid {first.pid}" in second.stderr and "in use by another run" in second.stderr
    assert second.stderr.count("\n") == 1
    assert not (tmp_path / "b.db").exists()  # refused before it opened anything
    _, err = first.communicate(timeout=600)
    assert first.returncode == 0, err
    table = pq.read_table(out / "per_query.parquet").to_pandas()
    assert len(table) == 264 * 5 and not table.duplicated(["query_id", "config"]).any()
    assert not (out / ".lock.json").exists() and not (out / ".parts").exists()


def _interrupted_run(tmp_path: Path, dataset: Path, uri: str) -> Path:
    """A run stopped after its first batches (a crash), its parts kept for --resume."""
    out = tmp_path / "run"
    code = (
        "import sys; from rag_eval import cli\n"
        "from rag_eval.replay import batches as replay\n"
        "orig = replay.Replayer.run_batch\n"
        "calls = {'n': 0}\n"
        "def crash(self, batch):\n"
        "    calls['n'] += 1\n"
        "    if calls['n'] == 3: raise KeyboardInterrupt\n"
        "    return orig(self, batch)\n"
        "replay.Replayer.run_batch = crash\n"
        "sys.exit(cli.main(sys.argv[1:]))\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code, "run", "--dataset", str(dataset), "--config",
         f"e={SHIPPED / 'experiments' / 'configs' / 'evidence.properties'}", "--milvus-uri", uri, "--out", str(out),
         "-q"],
        capture_output=True, text=True, cwd=tmp_path, env=ENV, timeout=600,
    )  # fmt: skip
    assert proc.returncode == 130, proc.stderr
    assert len(list((out / ".parts").glob("batch-*.arrow"))) == 2
    return out


def _resume(tmp_path: Path, dataset: Path, uri: str) -> subprocess.CompletedProcess[str]:
    evidence = SHIPPED / "experiments" / "configs" / "evidence.properties"
    return cli(
        "run", "--dataset", str(dataset), "--config", f"e={evidence}",
        "--milvus-uri", uri, "--out", str(tmp_path / "run"), "-q", "--resume", cwd=tmp_path,
    )  # fmt: skip


def test_resume_refuses_changed_labels_and_ignores_the_uris_spelling(tmp_path: Path) -> None:
    dataset = tmp_path / "kb"
    shutil.copytree(SHIPPED, dataset, ignore=shutil.ignore_patterns("src", "experiments"))
    _interrupted_run(tmp_path, dataset, "m.db")
    qrels = dataset / "qrels" / "test.spans.tsv"
    original = qrels.read_text()
    lines = original.splitlines()
    qrels.write_text("\n".join([lines[0], *lines[2:]]) + "\n")  # one evidence span fewer
    changed = _resume(tmp_path, dataset, "./m.db")
    assert changed.returncode == 2, changed.stderr
    assert "data set checksum" in changed.stderr and "--resume" in changed.stderr
    assert changed.stderr.count("\n") == 1
    qrels.write_text(original)
    resumed = _resume(tmp_path, dataset, "./m.db")  # the same Lite file, spelled differently
    assert resumed.returncode == 0, resumed.stderr
    assert json.loads((tmp_path / "run" / "manifest.json").read_text())["resumed_batches"] == 2
    assert pq.read_table(tmp_path / "run" / "per_query.parquet").num_rows == 264


def test_resume_with_nothing_to_resume_and_out_naming_a_file_write_nothing(tmp_path: Path) -> None:
    nothing = cli("run", str(DEFAULT), "-q", "--milvus-uri", str(tmp_path / "m.db"), "--out",
                  str(tmp_path / "run"), "--resume", cwd=tmp_path)  # fmt: skip
    assert nothing.returncode == 2 and "nothing to resume" in nothing.stderr
    (tmp_path / "afile").write_text("mine")
    a_file = cli("run", str(DEFAULT), "-q", "--milvus-uri", str(tmp_path / "m.db"), "--out",
                 str(tmp_path / "afile"), cwd=tmp_path)  # fmt: skip
    assert a_file.returncode == 2 and "is a file" in a_file.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["afile"] and (tmp_path / "afile").read_text() == "mine"


def _limit_file_size(limit: int) -> None:
    resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))


def test_a_failed_write_leaves_the_previous_run_whole(tmp_path: Path) -> None:
    out = tmp_path / "run"
    args = ["run", str(DEFAULT), "-q", "--milvus-uri", str(tmp_path / "m.db"), "--out", str(out)]
    assert cli(*args, cwd=tmp_path).returncode == 0
    before = {p.relative_to(out): p.read_bytes() for p in out.rglob("*") if p.is_file() and ".lock" not in p.name}
    # the second run writes its batches (small) but not its report (over 300 kB): the disk is "full"
    failed = cli(*args, "--limit", "100", cwd=tmp_path, preexec_fn=lambda: _limit_file_size(300_000))
    assert failed.returncode == 3, failed.stderr
    assert failed.stderr.count("\n") == 1 and "Traceback" not in failed.stderr
    after = {p.relative_to(out): p.read_bytes() for p in out.rglob("*") if p.is_file() and ".lock" not in p.name}
    published = {k: v for k, v in after.items() if not str(k).startswith(".parts")}
    assert published == before  # the old set, whole: not half old, half new
    assert json.loads((out / "run.complete.json").read_text())["files"]
    assert not (out / ".staging").exists()
