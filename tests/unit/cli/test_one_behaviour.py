"""One behaviour whichever way a run is started: the defaults of an ad-hoc run are the shipped experiments'
defaults; `rag-eval config` knows an experiment file; inline typos are suggested as written; `make
embeddings` leaves unchanged vector files byte-identical."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from rag_eval import jobs
from rag_eval.core.errors import ConfigError
from rag_eval.embed.embedders import EmbedderSpec
from rag_eval.experiment import Overrides, default_experiment, load_experiment, with_overrides
from tests.conftest import SHIPPED

EXPERIMENTS = SHIPPED / "experiments"


def test_an_ad_hoc_run_has_the_shipped_experiments_defaults(tmp_path: Path) -> None:
    shipped = load_experiment(EXPERIMENTS / "default.toml")
    ad_hoc = default_experiment(str(SHIPPED))
    assert ad_hoc.profile == shipped.profile and ad_hoc.profile.name == "production"
    assert ad_hoc.resolved_uri == shipped.resolved_uri == "reports/milvus/incident-kb.db"
    for field in ("split", "chunker_spec", "embedder_model", "index", "cutoffs", "batch_size", "min_overlap_chars"):
        assert getattr(ad_hoc, field) == getattr(shipped, field), field
    # a file that names no profile or URI gets the same defaults as flags
    bare = tmp_path / "bare.toml"
    bare.write_text(f'[dataset]\npath = "{SHIPPED}"\n[[configs]]\nname = "a"\n')
    assert load_experiment(bare).profile == ad_hoc.profile and load_experiment(bare).resolved_uri == ad_hoc.resolved_uri


def test_an_inline_typo_is_suggested_as_written(tmp_path: Path) -> None:
    p = tmp_path / "e.toml"
    p.write_text(
        '[dataset]\npath = "."\n[[configs]]\nname = "a"\nrag = { retreive-k = 20, projector = { max-blok = 3 } }\n'
    )
    with pytest.raises(ConfigError) as err:
        load_experiment(p)
    text = str(err.value)
    assert "did you mean 'retrieve-k'?) @ configs.a.rag.retreive-k" in text
    assert "did you mean 'projector.max-blocks'?) @ configs.a.rag.projector.max-blok" in text
    assert "'rag." not in text


def cli(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "rag_eval.cli", *args], capture_output=True, text=True, cwd=cwd)


def test_config_on_an_experiment_file_says_it_is_one(tmp_path: Path) -> None:
    proc = cli("config", str(EXPERIMENTS / "default.toml"), cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "is an experiment file" in proc.stdout and "[whatif-content-dedup]" in proc.stdout
    assert "rag.pipeline=legacy-first" in proc.stdout


def test_config_refuses_a_width_milvus_cannot_serve(tmp_path: Path) -> None:
    (tmp_path / "big.properties").write_text("rag.top-k=20000\n")
    proc = cli("config", str(tmp_path / "big.properties"), cwd=tmp_path)
    assert proc.returncode == 2 and "rag.top-k" in proc.stderr and "16,384" in proc.stderr


def test_with_overrides_keeps_the_file_defaults() -> None:
    exp = with_overrides(load_experiment(EXPERIMENTS / "cap.toml"), Overrides(query_limit=3))
    assert exp.profile.name == "production" and exp.query_limit == 3


def test_embedding_again_leaves_unchanged_files_byte_identical(tmp_path: Path) -> None:
    ds = tmp_path / "kb"
    shutil.copytree(SHIPPED, ds, ignore=shutil.ignore_patterns("src", "experiments"))
    before = {p.name: p.read_bytes() for p in (ds / "vectors").iterdir()}
    _, _, embedded, written = jobs.embed_dataset(
        ds,
        chunker="sentences:size=3,overlap=0",
        split="test",
        spec=EmbedderSpec(model="sentence-transformers/all-MiniLM-L6-v2", normalize=True),
        cache_dir=tmp_path / "cache",
    )
    assert embedded == 0 and written == []
    assert {p.name: p.read_bytes() for p in (ds / "vectors").iterdir()} == before


@pytest.mark.milvus_lite
def test_runs_without_out_never_overwrite_each_other_and_print_their_settings(tmp_path: Path) -> None:
    evidence = SHIPPED / "experiments" / "configs" / "evidence.properties"
    args = ("run", "--dataset", str(SHIPPED), "--config", f"e={evidence}", "--limit", "3")
    first = cli(*args, cwd=tmp_path)
    assert first.returncode == 0, first.stderr
    assert "ingest profile production" in first.stderr and "reports/milvus/incident-kb.db" in first.stderr
    import time

    time.sleep(1.1)  # directories are named by the second
    assert cli(*args, cwd=tmp_path).returncode == 0
    runs = sorted(p.name for p in (tmp_path / "reports" / "runs").iterdir())
    assert len(runs) == 2 and all(r.startswith("incident-kb-") for r in runs)
    resume = cli(*args, "--resume", cwd=tmp_path)
    assert resume.returncode == 2 and "--resume" in resume.stderr and "--out" in resume.stderr
