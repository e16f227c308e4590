"""rag_eval.core stays the pure pipeline: stdlib only, nothing of the project outside core."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import ROOT

HEAVY = (
    *("pymilvus", "milvus_lite", "pandas", "pyarrow", "jinja2", "numpy", "scipy", "grpc", "javaproperties"),
    *("opentelemetry", "openinference", "google"),  # the trace extra's (rag_eval.serve) and protobuf
)


def test_importing_core_loads_no_heavy_library_and_nothing_outside_core() -> None:
    code = "import sys, json; import rag_eval.core; print(json.dumps(sorted(m for m in sys.modules)))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT)
    loaded = json.loads(out.stdout)
    heavy = [m for m in loaded if m.split(".")[0] in HEAVY]
    outside = [m for m in loaded if m.startswith("rag_eval.") and not m.startswith("rag_eval.core")]
    assert heavy == [] and outside == []
    assert "rag_eval.core.lookup" in loaded  # the check itself sees the package


MILVUS_CLIENT = ("pymilvus", "milvus_lite", "grpc")
HELP = "from rag_eval.cli import main\ntry:\n    main(['--help'])\nexcept SystemExit:\n    pass\n"


@pytest.mark.parametrize(
    ("code", "module"),
    [
        ("import rag_eval.search.milvus.schema", "rag_eval.search.milvus.schema"),
        ("import rag_eval.search.milvus", "rag_eval.search.milvus.search"),
        (HELP, "rag_eval.cli"),
    ],
    ids=["the schema module", "the adapter package", "rag-eval --help"],
)
def test_the_milvus_client_is_loaded_only_when_a_client_connects(code: str, module: str) -> None:
    """pymilvus (and gRPC under it) are imported lazily: the schema's value types, the adapter package
    itself and the command line's help load neither."""
    probe = code + "\nimport sys, json\nprint('\\n' + json.dumps(sorted(sys.modules)))"
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True, cwd=ROOT)
    loaded = json.loads(out.stdout.strip().splitlines()[-1])
    assert [m for m in loaded if m.split(".")[0] in MILVUS_CLIENT] == []
    assert module in loaded  # the check itself sees what it imported


def test_import_linter_contracts_hold() -> None:
    exe = shutil.which("lint-imports", path=str(Path(sys.executable).parent))
    if exe is None:
        pytest.skip("import-linter is not installed (pip install -e '.[dev]')")
    out = subprocess.run([exe, "--no-cache"], capture_output=True, text=True, cwd=ROOT)
    assert out.returncode == 0, out.stdout + out.stderr
