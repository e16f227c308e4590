"""Inputs refused before anything is written: exit 2, one line naming the file or flag and the field, no
artifact left behind, no credential repeated."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from rag_eval.core.errors import ConfigError
from rag_eval.experiment import load_experiment
from rag_eval.search.milvus.schema import redact_uri, uri_problem
from tests.conftest import SHIPPED

EVIDENCE = SHIPPED / "experiments" / "configs" / "evidence.properties"


def cli(tmp: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "rag_eval.cli", *args], capture_output=True, text=True, cwd=tmp, timeout=120
    )


def assert_refused(proc: subprocess.CompletedProcess[str], *needles: str, tmp: Path) -> None:
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.count("\n") == 1, proc.stderr
    for needle in needles:
        assert needle in proc.stderr, (needle, proc.stderr)
    left = sorted(p.name for p in tmp.iterdir())
    assert left == [], left  # nothing written: no run directory, no Lite file, no reports/


@pytest.mark.parametrize(
    ("uri", "needle"),
    [
        ("127.0.0.1:19530", "write http://127.0.0.1:19530"),
        ("localhost:19530", "write http://localhost:19530"),
        ("user:hunter2@db.example:19530", "write http://db.example:19530"),
        ("grpc://127.0.0.1:19530", "scheme 'grpc'"),
        ("http://127.0.0.1:99999", "port"),
        ("http://127.0.0.1:port", "port"),
        ("http://:19530", "names no host"),
        ("", "blank"),
        (" ", "blank"),
    ],
)
def test_uris_that_are_neither_a_server_nor_plainly_a_file(tmp_path: Path, uri: str, needle: str) -> None:
    proc = cli(tmp_path, "run", "--dataset", str(SHIPPED), "--config", f"a={EVIDENCE}", "--milvus-uri", uri, "-q")
    assert_refused(proc, "--milvus-uri", needle, tmp=tmp_path)
    assert "hunter2" not in proc.stderr


@pytest.mark.parametrize("uri", ["reports/m.db", "m.db", "./m.db", "/tmp/x/m.db", "https://u:p@h.example:443"])
def test_good_uris(uri: str) -> None:
    assert uri_problem(uri) is None
    assert "u:p" not in redact_uri(uri)


@pytest.mark.parametrize(
    ("flags", "needles"),
    [
        (["--limit", "0"], ["--limit", "must be >= 1"]),
        (["--limit", "-5"], ["--limit", "must be >= 1"]),
        (["--config", f"a={EVIDENCE}"], ["--config", "'a' is given more than once"]),
    ],
)
def test_flags_checked_up_front(tmp_path: Path, flags: list[str], needles: list[str]) -> None:
    proc = cli(
        tmp_path,
        "run",
        "--dataset",
        str(SHIPPED),
        "--config",
        f"a={EVIDENCE}",
        *flags,
        "--milvus-uri",
        str(tmp_path / "m.db"),
        "-q",
    )
    assert_refused(proc, *needles, tmp=tmp_path)


EXPERIMENT = """
[experiment]
name = {name}
[dataset]
path = "{dataset}"
[milvus]
uri = "{uri}"
timeout = {timeout}
index = {{ type = "{index}", metric = "{metric}" }}
[timing]
query_limit = {limit}
[[configs]]
name = "a"
rag = {{ retrieve-k = {k} }}
"""


def experiment(tmp: Path, **over: object) -> Path:
    values: dict[str, object] = {
        "name": '"ok"',
        "dataset": SHIPPED,
        "uri": tmp / "m.db",
        "timeout": 10,
        "index": "HNSW",
        "metric": "COSINE",
        "limit": 5,
        "k": 20,
    }
    values.update(over)
    p = tmp / "exp.toml"
    p.write_text(EXPERIMENT.format(**values))
    return p


@pytest.mark.parametrize(
    ("over", "key"),
    [
        ({"name": '"../escape"'}, "experiment.name"),
        ({"name": '"/abs/path"'}, "experiment.name"),
        ({"name": '".."'}, "experiment.name"),
        ({"name": '"a b"'}, "experiment.name"),
        ({"name": '"' + "x" * 101 + '"'}, "experiment.name"),
        ({"uri": "127.0.0.1:19530"}, "milvus.uri"),
        ({"timeout": 0}, "milvus.timeout"),
        ({"timeout": -1}, "milvus.timeout"),
        ({"index": "HNSWX"}, "milvus.index.type"),
        ({"metric": "HAMMING"}, "milvus.index.metric"),
        ({"limit": 0}, "timing.query_limit"),
        ({"k": 20000}, "configs.a"),
    ],
)
def test_experiment_values_checked_before_anything_runs(tmp_path: Path, over: dict[str, object], key: str) -> None:
    path = experiment(tmp_path, **over)
    with pytest.raises(ConfigError) as err:
        load_experiment(path)
    assert key in str(err.value)
    proc = cli(tmp_path, "run", str(path), "--out", str(tmp_path / "out"), "-q")
    assert proc.returncode == 2 and "exp.toml" in proc.stderr and key in proc.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["exp.toml"]


def test_a_good_experiment_loads(tmp_path: Path) -> None:
    assert load_experiment(experiment(tmp_path)).name == "ok"
