"""The package's shape, as a newcomer reads it: no module over 500 lines, no function over 80, the command
line and the jobs that compose it under 350 lines a file, no room (top-level package) over 3,500 lines, no
function over 6 named parameters, and one reader of a run directory's files."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from tests.budget import MUTATION

# under `make mutate` the package is mutmut's copy, every function with its trampolines: not the code as written
pytestmark = pytest.mark.skipif(MUTATION, reason="mutmut's copy of the package is not the code as written")

PACKAGE = Path(__file__).resolve().parents[3] / "rag_eval"
MODULES = sorted(PACKAGE.rglob("*.py"))


def _lines(path: Path) -> int:
    return len(path.read_text(encoding="utf-8").splitlines())


def _functions(path: Path) -> list[tuple[str, int]]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    return [
        (node.name, node.end_lineno - node.lineno + 1)
        for node in ast.walk(tree)
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.end_lineno is not None
    ]


ROOMS = sorted(p for p in PACKAGE.iterdir() if p.is_dir() and (p / "__init__.py").is_file())
MAX_PARAMETERS = 6
# the rooms that read what a run wrote: only through rag_eval.rundir.reader
READERS = ("compare", "reports", "loadtest", "jobs", "metrics", "replay")
OWN_FILES = {"compare/history.py": "the nightly history file (history.parquet), not a run directory",
             "replay/service.py": "a service's answers: JSON from the network, kept as they arrive for --resume"}
READ_CALLS = {("json", "load"), ("json", "loads"), ("pq", "read_table"), ("pq", "ParquetFile"), ("pq", "read_schema")}


def _parameters(path: Path) -> list[tuple[str, int]]:
    """(function, named parameters) of every function: ``self``/``cls`` and ``*args``/``**kwargs`` (passed
    on as they are) not counted."""
    out = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            a = node.args
            names = [x.arg for x in (*a.posonlyargs, *a.args, *a.kwonlyargs)]
            out.append((node.name, len(names[1:] if names[:1] in (["self"], ["cls"]) else names)))
    return out


def _read_calls(path: Path) -> list[str]:
    """The calls in ``path`` that read a JSON or Parquet file (``json.loads``, ``pq.read_table``, ...)."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            owner = node.func.value
            if isinstance(owner, ast.Name) and (owner.id, node.func.attr) in READ_CALLS:
                found.append(f"{owner.id}.{node.func.attr} (line {node.lineno})")
    return found


def test_the_package_is_found() -> None:
    assert len(MODULES) > 50 and PACKAGE / "cli.py" in MODULES


@pytest.mark.parametrize("path", MODULES, ids=lambda p: str(p.relative_to(PACKAGE)))
def test_no_module_over_500_lines_and_no_function_over_80(path: Path) -> None:
    assert _lines(path) <= 500
    assert [(name, n) for name, n in _functions(path) if n > 80] == []


@pytest.mark.parametrize(
    "path", [PACKAGE / "cli.py", *sorted((PACKAGE / "jobs").glob("*.py"))], ids=lambda p: str(p.relative_to(PACKAGE))
)
def test_the_command_line_and_the_jobs_stay_under_350_lines(path: Path) -> None:
    assert _lines(path) <= 350


def test_the_measures_are_counted_as_written(tmp_path: Path) -> None:
    source = tmp_path / "m.py"
    source.write_text("def f():\n" + "    x = 1\n" * 80 + "\n\nclass C:\n    def g(self):\n        pass\n")
    assert _lines(source) == 86
    assert _functions(source) == [("f", 81), ("g", 2)]


@pytest.mark.parametrize("room", ROOMS, ids=lambda p: p.name)
def test_no_room_over_3500_lines(room: Path) -> None:
    assert sum(_lines(p) for p in room.rglob("*.py")) <= 3500


@pytest.mark.parametrize("path", MODULES, ids=lambda p: str(p.relative_to(PACKAGE)))
def test_no_function_over_six_named_parameters(path: Path) -> None:
    assert [(name, n) for name, n in _parameters(path) if n > MAX_PARAMETERS] == []


@pytest.mark.parametrize(
    "path", [p for room in READERS for p in sorted((PACKAGE / room).rglob("*.py"))],
    ids=lambda p: str(p.relative_to(PACKAGE)),
)  # fmt: skip
def test_a_run_directory_is_read_by_its_one_reader(path: Path) -> None:
    if str(path.relative_to(PACKAGE)) in OWN_FILES:
        return
    assert _read_calls(path) == []


def test_the_shape_is_measured_as_written(tmp_path: Path) -> None:
    source = tmp_path / "m.py"
    source.write_text(
        "import json\nimport pyarrow.parquet as pq\n"
        "def f(a, b, c, d, e, f, g):\n    return json.loads(a)\n"
        "class C:\n    def g(self, a, *args, b, **kwargs):\n        return pq.read_table(a)\n"
    )
    assert _parameters(source) == [("f", 7), ("g", 2)]
    assert _read_calls(source) == ["json.loads (line 4)", "pq.read_table (line 7)"]
