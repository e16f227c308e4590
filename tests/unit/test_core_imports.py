"""rag_eval.core stays the pure pipeline: stdlib only, nothing of the project outside core."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
HEAVY = ("pymilvus", "milvus_lite", "pandas", "pyarrow", "jinja2", "numpy", "scipy", "grpc", "javaproperties")


def test_importing_core_loads_no_heavy_library_and_nothing_outside_core() -> None:
    code = "import sys, json; import rag_eval.core; print(json.dumps(sorted(m for m in sys.modules)))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT)
    loaded = json.loads(out.stdout)
    heavy = [m for m in loaded if m.split(".")[0] in HEAVY]
    outside = [m for m in loaded if m.startswith("rag_eval.") and not m.startswith("rag_eval.core")]
    assert heavy == [] and outside == []
    assert "rag_eval.core.lookup" in loaded  # the check itself sees the package


def test_import_linter_contracts_hold() -> None:
    exe = shutil.which("lint-imports", path=str(Path(sys.executable).parent))
    if exe is None:
        pytest.skip("import-linter is not installed (pip install -e '.[dev]')")
    out = subprocess.run([exe, "--no-cache"], capture_output=True, text=True, cwd=ROOT)
    assert out.returncode == 0, out.stdout + out.stderr
