"""Two ``accept``s at once and a history append killed with ``kill -9``: the accepted baseline is always one
whole run (the later accept's), never a mix or nothing, and no staging folder is left; the history stays
readable with the night either in it or not, and appends at once both land."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from rag_eval.compare.history import accept, accepted_dir, append_history, history_rows, read_history
from rag_eval.compare.runs import ComparedRun
from tests.conftest import ROOT
from tests.unit.runs import config, make_run, pair_rows


def a_run(directory: Path, *, lose: int) -> ComparedRun:
    rows = pair_rows(30, "base") + pair_rows(30, "cand", lose=lose)
    return make_run(rows, [config("base"), config("cand")], baseline="base", directory=directory)


def test_two_accepts_at_once_leave_one_whole_baseline(tmp_path: Path) -> None:
    runs = [a_run(tmp_path / f"run{i}", lose=i) for i in range(2)]
    digests = {str(r.dir): (r.dir / "per_query.parquet").read_bytes() for r in runs if r.dir is not None}
    root = tmp_path / "acc"
    target = accepted_dir(root, runs[0].experiment)
    for _ in range(8):
        start = threading.Barrier(2)
        done: list[Path] = []

        def accepting(run: ComparedRun, start: threading.Barrier, done: list[Path]) -> None:
            start.wait()  # as `rag-eval accept` does (called here: the command's signals are the main thread's)
            done.append(accept(run.dir or "", root=root, force=True))

        threads = [threading.Thread(target=accepting, args=(r, start, done)) for r in runs]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert done == [target, target]
        kept = ComparedRun.from_dir(target)  # whole: its recorded digests match
        source = str(kept.dir and (kept.dir / "accepted.json").read_text())
        assert (target / "per_query.parquet").read_bytes() in digests.values() and "run" in source
        assert sorted(p.name for p in root.iterdir()) == [target.name]  # no staging or old copy left


def _big_history(path: Path, rows: int) -> None:
    run = a_run(path.parent / "night", lose=3)
    night = history_rows(run, exit_code=0)  # a row per config; the night repeated (a concat of copies, at once)
    frame = night.iloc[np.tile(np.arange(len(night)), rows // len(night))].reset_index(drop=True)
    pq.write_table(pa.Table.from_pandas(frame, preserve_index=False), path)


APPEND = """
import sys
from rag_eval.compare.history import append_history
from rag_eval.compare.runs import ComparedRun
print("ready", flush=True)
append_history(ComparedRun.from_dir(sys.argv[1]), exit_code=0, path=sys.argv[2])
"""


def test_a_history_append_killed_at_any_moment_leaves_a_readable_history(tmp_path: Path) -> None:
    history = tmp_path / "history.parquet"
    _big_history(history, 200_000)  # its write takes long enough to be killed in the middle of it
    night = tmp_path / "night"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    outcomes = set()
    for wait in (0.5, 1.5, 2.5):  # an append here takes about 2.4 s after "ready": killed early, late, after
        before = len(read_history(history))
        proc = subprocess.Popen([sys.executable, "-c", APPEND, str(night), str(history)], stdout=subprocess.PIPE,
                                text=True, env=env)  # fmt: skip
        assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
        time.sleep(wait)
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        after = len(read_history(history))  # readable, whatever the moment
        assert after in (before, before + 2), (before, after)
        outcomes.add(after - before)
    append_history(ComparedRun.from_dir(night), exit_code=0, path=history)  # the next append tidies up
    assert not [p.name for p in tmp_path.iterdir() if p.name.startswith(".")]
    assert outcomes <= {0, 2}


def test_appends_at_once_both_land(tmp_path: Path) -> None:
    history = tmp_path / "history.parquet"
    runs = [a_run(tmp_path / f"night{i}", lose=i) for i in range(4)]
    start = threading.Barrier(len(runs))

    def append(run: ComparedRun) -> None:
        start.wait()
        append_history(run, exit_code=0, path=history)

    threads = [threading.Thread(target=append, args=(r,)) for r in runs]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    frame = read_history(history)
    assert len(frame) == 2 * len(runs) and sorted(set(frame["run_dir"])) == sorted(str(r.dir) for r in runs)


KILLED_WHILE_WRITING = """
import os, signal, sys
import pyarrow.parquet as pq
from rag_eval.compare.history import append_history
from rag_eval.compare.runs import ComparedRun

def half_then_killed(table, where, **kw):
    pq.ParquetWriter(where, table.schema).write_table(table.slice(0, table.num_rows // 2))  # never closed
    os.kill(os.getpid(), signal.SIGKILL)

pq.write_table = half_then_killed
append_history(ComparedRun.from_dir(sys.argv[1]), exit_code=0, path=sys.argv[2])
"""


def test_a_kill_while_the_new_history_is_written_leaves_the_old_one_and_the_next_append_tidies_up(
    tmp_path: Path,
) -> None:
    history = tmp_path / "history.parquet"
    night = a_run(tmp_path / "night", lose=2)
    append_history(night, exit_code=0, path=history)
    before = history.read_bytes()
    proc = subprocess.run([sys.executable, "-c", KILLED_WHILE_WRITING, str(night.dir), str(history)],
                          env={**os.environ, "PYTHONPATH": str(ROOT)}, capture_output=True, timeout=120)  # fmt: skip
    assert proc.returncode == -signal.SIGKILL, proc.stderr
    assert history.read_bytes() == before and len(read_history(history)) == 2  # the night is not in it
    assert len(list(tmp_path.glob(".history.parquet.*.tmp"))) == 1  # the half-written new file
    append_history(night, exit_code=1, path=history)
    assert len(read_history(history)) == 4 and not list(tmp_path.glob(".history.parquet.*.tmp"))
