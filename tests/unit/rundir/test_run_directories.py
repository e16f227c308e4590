"""Who may write into a run directory: every command that writes there holds the run's lock (a comparison
too), the lock records and prints its holder without credentials, a directory rag-eval did not write is
not taken for one, and a comparison names the run it was computed from so that a report never shows it
beside another run's rows."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pyarrow as pa
import pytest

from rag_eval import cli
from rag_eval.core.errors import ConfigError, ReportInputError
from rag_eval.reports.rundata import load_run
from rag_eval.rundir.directory import RunStore
from tests.conftest import ROOT, SHIPPED
from tests.report_runs import synthetic_run
from tests.unit.runs import config, make_run, pair_rows

DEFAULT = SHIPPED / "experiments" / "default.toml"
ENV = {**os.environ, "PYTHONPATH": str(ROOT)}
SECRETS = ("s3cret", "hunter2", "wJalrXUtnFEMI", "tok3n")
HOLDER_ARGV = [
    "rag-eval", "run", "exp.toml", "--milvus-uri", "http://alice:s3cret@db.example:19530",
    "--milvus-uri=https://bob:hunter2@db.example:443/?token=tok3n", "--parts", "s3://AKIA:wJalrXUtnFEMI@bucket/p",
]  # fmt: skip

# holds the run directory's lock as a run does, its command line HOLDER_ARGV, until the release file appears
HOLD = (
    "import json, sys, time, pathlib\n"
    "from rag_eval.rundir.directory import RunStore\n"
    "directory, release = pathlib.Path(sys.argv[1]), pathlib.Path(sys.argv[2])\n"
    "sys.argv = json.loads(sys.argv[3])\n"
    "with RunStore(directory).locked():\n"
    "    print('held', flush=True)\n"
    "    while not release.exists():\n"
    "        time.sleep(0.05)\n"
)
# `rag-eval compare` whose comparison waits for the release file: it holds whatever it holds meanwhile
SLOW_COMPARE = (
    "import importlib, sys, time, pathlib\n"
    "from rag_eval import cli\n"
    "job = importlib.import_module('rag_eval.jobs.compare')\n"
    "release, marker = pathlib.Path(sys.argv[1]), pathlib.Path(sys.argv[2])\n"
    "original = job.compare\n"
    "def slow(*args, **kwargs):\n"
    "    marker.write_text('comparing')\n"
    "    while not release.exists():\n"
    "        time.sleep(0.05)\n"
    "    return original(*args, **kwargs)\n"
    "job.compare = slow\n"
    "sys.exit(cli.main(sys.argv[3:]))\n"
)


def finished_run(directory: Path) -> Path:
    make_run(pair_rows(40, "base") + pair_rows(40, "cand", lose=8), [config("base"), config("cand")],
             baseline="base", directory=directory)  # fmt: skip
    return directory


def contents(directory: Path) -> dict[str, bytes]:
    return {str(p.relative_to(directory)): p.read_bytes() for p in sorted(directory.rglob("*")) if p.is_file()}


@contextmanager
def held(directory: Path, tmp_path: Path, argv: list[str] = HOLDER_ARGV) -> Iterator[subprocess.Popen[str]]:
    """Another process holding ``directory``'s lock for the block."""
    release = tmp_path / "release"
    proc = subprocess.Popen(
        [sys.executable, "-c", HOLD, str(directory), str(release), json.dumps(argv)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=ENV,
    )  # fmt: skip
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "held", proc.stderr
        yield proc
    finally:
        release.write_text("")
        proc.communicate(timeout=60)
        release.unlink()


def test_compare_is_refused_while_a_run_holds_the_directory(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    run = finished_run(tmp_path / "run")
    before = contents(run)
    with held(run, tmp_path) as holder:
        code = cli.main(["compare", str(run), "--gates", "nightly"])
        during = contents(run)
    err = capsys.readouterr().err
    assert code == 2, err
    assert err.count("\n") == 1 and "in use by another run" in err and f"pid {holder.pid}" in err
    # nothing written beside the run's rows: no compare.json of the old rows next to a new run's
    assert {k: v for k, v in during.items() if not k.startswith(".lock")} == before
    assert cli.main(["compare", str(run), "--gates", "nightly"]) == 1  # the lock released: compared
    assert (run / "compare.json").is_file()


def test_compare_holds_the_directory_so_a_run_into_it_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = finished_run(tmp_path / "run")
    release, marker = tmp_path / "release", tmp_path / "comparing"
    compare = subprocess.Popen(
        [sys.executable, "-c", SLOW_COMPARE, str(release), str(marker), "compare", str(run), "--gates", "nightly"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=ENV,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 60
        while not marker.exists() and compare.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        assert marker.exists(), compare.communicate()
        code = cli.main(["run", str(DEFAULT), "-q", "--milvus-uri", str(tmp_path / "m.db"), "--out", str(run),
                         "--limit", "4"])  # fmt: skip
    finally:
        release.write_text("")
        _, compare_err = compare.communicate(timeout=120)
    err = capsys.readouterr().err
    assert code == 2, err
    assert err.count("\n") == 1 and "in use by another run" in err and f"pid {compare.pid}" in err
    assert "compare" in err.split("pid", 1)[1]  # the holder's command line
    assert not (tmp_path / "m.db").exists()  # refused before it opened anything
    assert compare.returncode == 1, compare_err  # the comparison finished, whole
    assert json.loads((run / "compare.json").read_text())["run"]["dir"] == str(run)


def test_the_lock_records_and_prints_its_holder_without_credentials(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "run"
    with held(out, tmp_path):
        recorded = (out / ".lock.json").read_text()
        code = cli.main(["run", str(DEFAULT), "-q", "--milvus-uri", str(tmp_path / "m.db"), "--out", str(out)])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and "in use by another run" in err
    for secret in SECRETS:
        assert secret not in recorded and secret not in err, secret
    assert "http://db.example:19530" in err and "s3://bucket/p" in err and "--milvus-uri=https://db.example:443/" in err
    assert json.loads(recorded)["argv"][:3] == ["rag-eval", "run", "exp.toml"]


def test_a_holder_recorded_with_credentials_is_printed_without_them(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "run"
    with held(out, tmp_path):
        # as an older rag-eval recorded it: the command line as it was typed
        holder = json.loads((out / ".lock.json").read_text())
        (out / ".lock.json").write_text(json.dumps({**holder, "argv": HOLDER_ARGV}))
        code = cli.main(["run", str(DEFAULT), "-q", "--milvus-uri", str(tmp_path / "m.db"), "--out", str(out)])
    err = capsys.readouterr().err
    assert code == 2 and "db.example" in err and not any(secret in err for secret in SECRETS)


@pytest.mark.parametrize(
    ("argv", "shown"),
    [
        (["--milvus-uri", "http://u:p@h:1"], ["--milvus-uri", "http://h:1"]),
        (["--scheduler=tls://u:p@h:8786"], ["--scheduler=tls://h:8786"]),
        (["--parts", "gs://k@b/x?sig=1#f"], ["--parts", "gs://b/x"]),
        (["--milvus-uri", "u:p@h:19530"], ["--milvus-uri", "h:19530"]),
        (["--out", "reports/a@b"], ["--out", "reports/a@b"]),  # a path with an @ is no credential
        (["run", "x.toml"], ["run", "x.toml"]),
    ],
)
def test_command_lines_are_redacted_argument_by_argument(argv: list[str], shown: list[str]) -> None:
    from rag_eval.redact import redact_argv

    assert redact_argv(argv) == shown


def test_run_into_a_directory_rag_eval_did_not_write_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "report.html").write_text("my own report")
    code = cli.main(["run", str(DEFAULT), "-q", "--milvus-uri", str(tmp_path / "m.db"), "--out", str(mine),
                     "--limit", "4"])  # fmt: skip
    err = capsys.readouterr().err
    assert code == 2, err
    assert err.count("\n") == 1 and "--out" in err and "--force-out" in err and "report.html" in err
    assert contents(mine) == {"report.html": b"my own report"}  # nothing written, nothing overwritten
    assert sorted(p.name for p in tmp_path.iterdir()) == ["mine"]  # no Lite file either


def test_load_into_a_directory_rag_eval_did_not_write_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "notes.txt").write_text("mine")
    # an unreachable server: only a refusal before anything runs can answer at once with exit 2
    code = cli.main(["load", str(DEFAULT), "-q", "--milvus-uri", "http://127.0.0.1:9", "--out", str(mine)])
    err = capsys.readouterr().err
    assert code == 2, err
    assert "--out" in err and "--force-out" in err and contents(mine) == {"notes.txt": b"mine"}


@pytest.mark.parametrize("name", ["/", "home"])
def test_a_foreign_directory_is_named_up_front(tmp_path: Path, name: str) -> None:
    directory = Path(name) if name == "/" else tmp_path / name
    if name != "/":
        directory.mkdir()
        for i in range(12):
            (directory / f"file-{i:02d}.txt").write_text("x")
    with pytest.raises(ConfigError, match=r"--force-out") as caught:
        RunStore(directory).check_out(force=False)
    assert "--out" in str(caught.value) and len(str(caught.value)) < 600
    RunStore(directory).check_out(force=True)  # said otherwise: taken as it is (nothing is written here)


@pytest.mark.parametrize("kind", ["empty", "finished", "unfinished", "missing"])
def test_a_run_directory_new_empty_or_of_rag_eval_is_accepted(tmp_path: Path, kind: str) -> None:
    directory = tmp_path / "run"
    if kind == "empty":
        directory.mkdir()
    elif kind == "finished":
        finished_run(directory)
    elif kind == "unfinished":
        RunStore(directory).begin({"experiment": "x"}, resume=False)
    RunStore(directory).check_out(force=False)


@pytest.mark.milvus_lite
def test_force_out_writes_into_a_directory_of_other_files(tmp_path: Path) -> None:
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "notes.txt").write_text("mine")
    code = cli.main(["run", str(DEFAULT), "-q", "--milvus-uri", str(tmp_path / "m.db"), "--out", str(mine),
                     "--limit", "4", "--force-out"])  # fmt: skip
    assert code in (0, 1)
    assert (mine / "notes.txt").read_text() == "mine" and (mine / "run.complete.json").is_file()


def test_compare_out_naming_a_file_is_bad_input(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    run = finished_run(tmp_path / "run")
    before = contents(run)
    (tmp_path / "afile").write_text("mine")
    code = cli.main(["compare", str(run), "--gates", "nightly", "--out", str(tmp_path / "afile")])
    err = capsys.readouterr().err
    assert code == 2, err
    assert err.count("\n") == 1 and "--out" in err and "is a file" in err and "Traceback" not in err
    assert (tmp_path / "afile").read_text() == "mine"
    assert {k: v for k, v in contents(run).items() if not k.startswith(".lock")} == before


def test_a_comparison_names_its_run_and_a_report_never_shows_it_beside_another(tmp_path: Path) -> None:
    run = synthetic_run(tmp_path / "run", n_queries=12, render=False)
    elsewhere = tmp_path / "cmp"
    assert cli.main(["compare", str(run), "--gates", "default"]) in (0, 1)
    assert cli.main(["compare", str(run), "--gates", "default", "--out", str(elsewhere)]) in (0, 1)
    started = json.loads((run / "manifest.json").read_text())["started"]
    assert json.loads((run / "compare.json").read_text())["run"]["started"] == started
    assert load_run(run).compare is not None
    # the run is written again (another start); its compare.json is newer than its rows, as a comparison
    # that read the old rows and wrote after the new ones would leave it
    manifest = json.loads((run / "manifest.json").read_text())
    (run / "manifest.json").write_text(json.dumps({**manifest, "started": "2030-01-01T00:00:00+00:00"}))
    later = time.time() + 5
    os.utime(run / "compare.json", (later, later))
    assert load_run(run).compare is None  # not this run's comparison: "not compared yet"
    with pytest.raises(ReportInputError, match=r"compared the run started .* compare again"):
        load_run(elsewhere)


def published_copy(source: Path, directory: Path) -> Path:
    """``source``'s run files published into ``directory`` through the run store, as a run publishes them."""
    store = RunStore(directory)
    staging = store.stage()
    for name in ("per_query.parquet", "summary.json", "manifest.json"):
        (staging / name).write_bytes((source / name).read_bytes())
    store.publish()
    return directory


def test_a_run_cut_or_edited_by_hand_is_refused_naming_the_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    run = published_copy(synthetic_run(tmp_path / "src", n_queries=30, render=False), tmp_path / "run")
    marker = json.loads((run / "run.complete.json").read_text())
    assert sorted(marker["sha256"]) == ["manifest.json", "per_query.parquet", "summary.json"]
    assert cli.main(["compare", str(run), "-q"]) in (0, 1)  # as published: compared
    capsys.readouterr()
    rows = pq.read_table(run / "per_query.parquet")
    kept = sorted(set(rows.column("query_id").to_pylist()))[:15]  # 15 of 30 queries left
    pq.write_table(rows.filter(pc.is_in(rows.column("query_id"), value_set=pa.array(kept))), run / "per_query.parquet")
    assert cli.main(["compare", str(run), "-q"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "per_query.parquet is not the file the run published" in err[0]
    assert str(run / "per_query.parquet") in err[0]
    # a summary edited by hand: the same
    other = published_copy(tmp_path / "src", tmp_path / "other")
    summary = json.loads((other / "summary.json").read_text())
    summary["baseline"] = "something else"
    (other / "summary.json").write_text(json.dumps(summary))
    assert cli.main(["compare", str(other), "-q"]) == 2
    assert "summary.json is not the file the run published" in capsys.readouterr().err


def test_an_accepted_copy_keeps_the_digests_and_is_checked_too(tmp_path: Path) -> None:
    from rag_eval.compare.history import accept
    from rag_eval.compare.runs import ComparedRun
    from rag_eval.core.errors import RunDirectoryError

    run = published_copy(synthetic_run(tmp_path / "src", n_queries=30, render=False), tmp_path / "run")
    accepted = accept(run, root=tmp_path / "accepted")
    digests = json.loads((accepted / "run.complete.json").read_text())["sha256"]
    assert digests == json.loads((run / "run.complete.json").read_text())["sha256"]
    (accepted / "manifest.json").write_text("{}")
    with pytest.raises(RunDirectoryError, match=r"manifest\.json is not the file the run published"):
        ComparedRun.from_dir(accepted)
