"""``rag-eval serve`` refuses what cannot work with exit 2 and one line, before it opens anything."""

from __future__ import annotations

from pathlib import Path

import pytest

from rag_eval.cli import main


def test_without_settings_the_command_names_what_is_required(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["serve"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0
    assert "serve.properties" in err and "milvus.uri" in err and "milvus.collection" in err


def test_a_missing_serve_file_is_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["serve", str(tmp_path / "absent.toml")]) == 2
    assert "absent.toml" in capsys.readouterr().err


def test_a_bad_properties_file_is_exit_2_naming_it(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "bad.properties").write_text("rag.max-chunks-per-document=-1\n")
    (tmp_path / "kb.db").mkdir()
    argv = ["serve", "--properties", str(tmp_path / "bad.properties"), "--milvus-uri", str(tmp_path / "kb.db"),
            "--collection", "kb", "--embedder-provider", "python", "--embedder-callable", "json:dumps"]  # fmt: skip
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "rag.max-chunks-per-document" in err and err.strip().count("\n") == 0
