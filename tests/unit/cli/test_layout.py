"""The package's size limits, as a newcomer reads them: no module over 500 lines, no function over 80,
and the command line and the jobs that compose it under 350 lines a file."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

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
