"""The example nightly workflows keep what the nights need: two nights and an accept, then the night after,
each in a fresh working copy that starts with only the paths the workflow restores from its cache or
downloads as the night's artifact (GitHub Actions and GitLab CI), on a small experiment on Milvus Lite.

The nights run the command `make nightly` runs; the accept runs the accept job's own shell lines (with a
``.venv/bin/rag-eval`` that runs this tree), so a workflow that stops caching the accepted baseline or the
history, or uploads a night without its per-query table, fails here.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
import yaml

from rag_eval.cli import main
from tests.conftest import ROOT, SHIPPED

pytestmark = [pytest.mark.milvus_lite, pytest.mark.slow]

CI = ROOT / "examples" / "ci"
NAME = "tiny-nightly"
EXPERIMENT = f"""
[experiment]
name = "{NAME}"
baseline = "legacy"

[dataset]
path = "{SHIPPED.as_posix()}"
split = "test"

[milvus]
uri = "../reports/milvus/kb.db"

[timing]
query_limit = 24
latency_sample = 8

[[configs]]
name = "legacy"
rag = {{ pipeline = "legacy", top-k = 5 }}

[[configs]]
name = "evidence"
rag = {{ retrieve-k = 20, return-n = 5, max-chunks-per-document = 2 }}

[gates]
file = "nightly"
"""


@dataclass(frozen=True)
class Keeps:
    """What a workflow keeps between jobs: the cached paths, where the night's artifact is taken from and
    where the accept job puts it, the accept job's shell lines, and its variables."""

    cached: tuple[str, ...]
    uploaded: str
    downloaded: str
    accept: str
    env: dict[str, str]


def _paths(text: str | list[str]) -> tuple[str, ...]:
    items = text if isinstance(text, list) else str(text).split()
    return tuple(sorted(p.rstrip("/") for p in items))


def github() -> Keeps:
    data = yaml.safe_load((CI / "github-actions-nightly.yml").read_text())
    jobs = data["jobs"]

    def cached(job: str) -> set[tuple[str, ...]]:
        steps = [s for s in jobs[job]["steps"] if str(s.get("uses", "")).startswith("actions/cache")]
        return {_paths(s["with"]["path"]) for s in steps if s["with"]["path"] != ".venv"}

    (state,) = cached("nightly")
    assert cached("accept") == {state}  # restored and saved under the same paths (else the entry is not found)
    saves = [s for s in jobs["nightly"]["steps"] if str(s.get("uses", "")).startswith("actions/cache/save")]
    assert saves and saves[0]["if"] == "always()"  # a failed night is kept too
    (upload,) = [s for s in jobs["nightly"]["steps"] if str(s.get("uses", "")).startswith("actions/upload-artifact")]
    (download,) = [s for s in jobs["accept"]["steps"] if str(s.get("uses", "")).startswith("actions/download-artifact")]
    assert download["with"]["run-id"] == "${{ inputs.accept_run }}"
    assert download["with"]["name"] == upload["with"]["name"].replace("github.run_id", "inputs.accept_run")
    (accept,) = [s["run"] for s in jobs["accept"]["steps"] if "rag-eval accept" in str(s.get("run", ""))]
    accept = re.sub(r"\$\{\{[^}]*\}\}", "", accept)  # `--force` only when asked for
    return Keeps(cached=state, uploaded=upload["with"]["path"], downloaded=download["with"]["path"], accept=accept,
                 env={k: str(v) for k, v in data["env"].items()})  # fmt: skip


def gitlab() -> Keeps:
    data = yaml.safe_load((CI / "gitlab-ci-nightly.yml").read_text())
    (state,) = [c for c in data[".rag-eval"]["cache"] if c["key"] == "nightly-state"]
    assert state["when"] == "always"  # a failed night is kept too
    assert data["nightly"]["extends"] == data["accept"]["extends"] == ".rag-eval"
    artifacts = data["nightly"]["artifacts"]
    assert artifacts["when"] == "always"
    (uploaded,) = artifacts["paths"]
    script = data["accept"]["script"]
    assert any("/jobs/$ACCEPT_JOB/artifacts" in line for line in script)
    assert any("zipfile -e night.zip ." in line for line in script)  # a GitLab artifact keeps its paths
    accept = "\n".join(line for line in script if line.startswith("night=") or "rag-eval accept" in line)
    return Keeps(cached=_paths(state["paths"]), uploaded=uploaded, downloaded=uploaded, accept=accept,
                 env={k: str(v) for k, v in data["variables"].items()})  # fmt: skip


def _copy(src: Path, dst: Path) -> None:
    if src.is_dir():
        shutil.copytree(src, dst, dirs_exist_ok=True)
    elif src.exists():
        dst.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(src, dst)


class Runner:
    """Fresh working copies; a cache store (each save replaces it, as a new key does) and artifacts."""

    def __init__(self, base: Path, keeps: Keeps) -> None:
        self.base, self.keeps, self.jobs = base, keeps, 0
        self.cache = base / "cache"
        self.artifacts: dict[int, Path] = {}

    def fresh(self) -> Path:
        self.jobs += 1
        copy = self.base / f"job{self.jobs}"
        (copy / "exp").mkdir(parents=True)
        (copy / "exp" / "nightly.toml").write_text(EXPERIMENT)  # the checkout's part the nights read
        for kept in self.keeps.cached:
            _copy(self.cache / kept, copy / kept)
        return copy

    def save(self, copy: Path) -> None:
        shutil.rmtree(self.cache, ignore_errors=True)
        self.cache.mkdir()
        for kept in self.keeps.cached:
            _copy(copy / kept, self.cache / kept)

    def night(self, monkeypatch: pytest.MonkeyPatch) -> tuple[int, Path, int]:
        copy = self.fresh()
        monkeypatch.chdir(copy)
        code = main(["nightly", "exp/nightly.toml", "--quiet"])  # what `make nightly` runs
        self.save(copy)
        self.artifacts[self.jobs] = copy / self.keeps.uploaded
        latest = copy / "reports" / "nightly" / NAME / "LATEST"
        return code, copy / "reports" / "nightly" / NAME / latest.read_text().strip(), self.jobs

    def accept(self, job: int) -> tuple[subprocess.CompletedProcess[str], Path]:
        copy = self.fresh()
        _copy(self.artifacts[job], copy / self.keeps.downloaded)  # the artifact, downloaded
        shim = copy / ".venv" / "bin" / "rag-eval"
        shim.parent.mkdir(parents=True)
        shim.write_text(
            f'#!/bin/sh\nPYTHONPATH="{ROOT}" exec "{sys.executable}" -c '
            '"import sys; from rag_eval.cli import main; sys.exit(main(sys.argv[1:]))" "$@"\n'
        )
        shim.chmod(0o755)
        env = {**os.environ, **self.keeps.env, "EXPERIMENT_NAME": NAME}
        done = subprocess.run(["bash", "-ec", self.keeps.accept], cwd=copy, env=env, capture_output=True, text=True)
        self.save(copy)
        return done, copy


def _started(run_dir: Path) -> Any:
    return json.loads((run_dir / "manifest.json").read_text())["started"]


@pytest.mark.parametrize("workflow", [github, gitlab], ids=["github-actions", "gitlab-ci"])
def test_two_nights_and_an_accept_survive_fresh_runners(
    workflow: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    keeps = workflow()
    assert {"reports/accepted", "reports/history.parquet"} <= set(keeps.cached)
    named = tomllib.loads((ROOT / keeps.env["NIGHTLY_EXPERIMENT"]).read_text())["experiment"]["name"]
    assert keeps.env["EXPERIMENT_NAME"] == named  # the variable the jobs find the nights by
    runner = Runner(tmp_path, keeps)

    code, first, _ = runner.night(monkeypatch)
    assert code == 0 and (first / "per_query.parquet").is_file()
    code, second, second_job = runner.night(monkeypatch)
    assert code == 0
    doc = json.loads((second / "compare.json").read_text())
    assert doc["against"] is not None and _started(runner.cache / "reports" / "accepted" / NAME) == _started(first)

    done, copy = runner.accept(second_job)
    assert done.returncode == 0, done.stderr
    assert _started(copy / "reports" / "accepted" / NAME) == _started(second)  # the second night is accepted

    code, third, _ = runner.night(monkeypatch)  # the next runner pairs with it
    assert code == 0
    against = json.loads((third / "compare.json").read_text())["against"]
    assert against["dir"] == f"reports/accepted/{NAME}"
    assert _started(third.parents[3] / against["dir"]) == _started(second)  # what this runner restored
    history = pd.read_parquet(runner.cache / "reports" / "history.parquet")
    assert len(history) == 3 * 2  # three nights of two configs, across three runners
