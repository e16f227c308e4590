"""The unit tests mirror the rooms: every module of a room (a top-level package of rag_eval) has a test
file of its own, ``tests/unit/<room>/test_<module>.py``, or is covered by a named test of its room whose
file imports it (``COVERED_BY``). A module with neither is named here, so that a new module comes with
its tests."""

from __future__ import annotations

import ast
from collections.abc import Collection, Mapping
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
ROOMS = ("compare", "experiment", "rundir", "ingest", "existing", "cluster", "replay", "loadtest", "serve", "traffic")

# module (relative to rag_eval/) -> the named test of its room that covers it (its file imports the module)
COVERED_BY: dict[str, str] = {
    "compare/catalog.py": "tests/unit/compare/test_gates.py::test_checks_must_match_their_metric",
    "compare/comparison.py": "tests/unit/compare/test_compare_runs.py::test_compare_json_shape_and_values",
    "compare/history.py": "tests/unit/compare/test_compare_runs.py::test_history_appends_and_reads_a_trend",
    "compare/loadtest_gates.py": "tests/unit/compare/test_load_gates.py::test_a_and_a_rounds_fire_at_most_alpha",
    "compare/orderstats.py": (
        "tests/unit/compare/test_stats_vectorised.py::test_the_percentile_of_sorted_rows_is_numpys"
    ),
    "compare/runs.py": (
        "tests/unit/compare/test_compare_runs.py::test_accept_keeps_a_copy_and_replaces_the_previous_one"
    ),
    "experiment/checks.py": (
        "tests/unit/experiment/test_experiment_checks.py::test_an_experiment_built_in_code_is_checked_by_the_same_function"
    ),
    "experiment/model.py": (
        "tests/unit/experiment/test_experiment_checks.py::test_an_experiment_built_in_code_is_checked_by_the_same_function"
    ),
    "experiment/overrides.py": (
        "tests/unit/experiment/test_experiment_checks.py::test_configs_given_twice_read_the_same_from_a_file_and_from_flags"
    ),
    "experiment/reader.py": (
        "tests/unit/experiment/test_experiment_checks.py::test_configs_given_twice_read_the_same_from_a_file_and_from_flags"
    ),
    "rundir/directory.py": "tests/unit/rundir/test_run_directories.py::test_a_foreign_directory_is_named_up_front",
    "rundir/rows.py": "tests/unit/rundir/test_streaming.py::test_the_store_reads_only_the_columns_asked_for",
    "replay/batches.py": "tests/unit/replay/test_timing_plan.py::test_latency_off_times_nothing",
    "replay/prepare.py": (  # its Progress, as the replay strategies report to it
        "tests/unit/replay/test_replay_strategies.py::test_no_cluster_picks_the_serial_strategy_which_gives_the_replayers_rows"
    ),
    "replay/strategies.py": (
        "tests/unit/replay/test_replay_strategies.py::test_the_batches_a_resumed_run_has_are_not_replayed_again"
    ),
    "loadtest/driver.py": (
        "tests/unit/loadtest/test_load_units.py::test_a_level_summary_from_its_windows_worked_by_hand"
    ),
    "loadtest/worker.py": (
        "tests/unit/loadtest/test_load_units.py::test_a_worker_sends_the_projects_error_without_its_unpicklable_cause"
    ),
}

# modules no unit test of their room covers yet: named, so that the list only shrinks
UNCOVERED: frozenset[str] = frozenset()


def modules(package: Path, rooms: Collection[str]) -> list[str]:
    """Every module of ``rooms`` under ``package`` (``room/module.py``, sub-packages included), no ``__init__``."""
    return sorted(
        path.relative_to(package).as_posix()
        for room in rooms
        for path in (package / room).rglob("*.py")
        if path.name != "__init__.py"
    )


def exported(package: Path, room: str) -> dict[str, str]:
    """The names ``rag_eval.<room>`` re-exports, by the module (its dotted name) each comes from."""
    init = package / room / "__init__.py"
    out: dict[str, str] = {}
    if not init.is_file():
        return out
    for node in ast.walk(ast.parse(init.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith(f"rag_eval.{room}."):
            out.update({alias.asname or alias.name: node.module for alias in node.names})
    return out


def imports_module(source: str, module: str, exports: Mapping[str, str]) -> bool:
    """True when ``source`` imports ``module`` (dotted): ``import M``, ``from M import x``, ``from P import m``
    (``M`` = ``P.m``), or ``from P import x`` where the package ``P`` re-exports ``x`` from ``M``."""
    package, _, name = module.rpartition(".")
    for node in ast.walk(ast.parse(source)):
        names = [a.name for a in node.names] if isinstance(node, ast.Import) else []
        if any(n == module or n.startswith(f"{module}.") for n in names):
            return True
        if isinstance(node, ast.ImportFrom) and node.module is not None and node.level == 0:
            if node.module == module or node.module.startswith(f"{module}."):
                return True
            if node.module == package and any(a.name == name or exports.get(a.name) == module for a in node.names):
                return True
    return False


def defines_test(source: str, name: str) -> bool:
    tree = ast.parse(source)
    return any(isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef) and n.name == name for n in ast.walk(tree))


def own_test(tests: Path, module: str) -> Path:
    """``tests/unit/<room>/test_<module>.py`` (a sub-package's module: ``<room>/<sub>/test_<module>.py``)."""
    rel = Path(module)
    return tests / rel.parent / f"test_{rel.stem}.py"


def problems(root: Path, rooms: Collection[str], covered_by: Mapping[str, str]) -> dict[str, str]:
    """Each module of ``rooms`` with neither its own test file nor a valid ``covered_by`` entry, with why;
    and each entry of ``covered_by`` that names no module, or one that has its own test file."""
    package, tests = root / "rag_eval", root / "tests" / "unit"
    found = modules(package, rooms)
    out: dict[str, str] = {}
    for module in found:
        if own_test(tests, module).is_file():
            if module in covered_by:
                out[module] = f"has {own_test(tests, module).relative_to(root)}: drop its COVERED_BY entry"
            continue
        if module not in covered_by:
            out[module] = f"no {own_test(tests, module).relative_to(root)} and no COVERED_BY entry"
            continue
        file, sep, test = covered_by[module].partition("::")
        room = module.split("/", 1)[0]
        path = root / file
        dotted = "rag_eval." + module.removesuffix(".py").replace("/", ".")
        if not sep or not file.startswith(f"tests/unit/{room}/"):
            out[module] = f"{covered_by[module]!r} is not a test of tests/unit/{room}/ (FILE::TEST)"
        elif not path.is_file():
            out[module] = f"{file} does not exist"
        elif not defines_test(path.read_text(encoding="utf-8"), test):
            out[module] = f"{file} defines no {test}"
        elif not imports_module(path.read_text(encoding="utf-8"), dotted, exported(package, room)):
            out[module] = f"{file} does not import {dotted}"
    for module in sorted(set(covered_by) - set(found)):
        out[module] = "COVERED_BY names a module that does not exist"
    return out


def test_every_module_of_a_room_has_its_own_test_file_or_a_named_test() -> None:
    assert len(modules(ROOT / "rag_eval", ROOMS)) > 40
    assert set(problems(ROOT, ROOMS, COVERED_BY)) == UNCOVERED, problems(ROOT, ROOMS, COVERED_BY)


def _tree(root: Path, files: Mapping[str, str]) -> Path:
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text, encoding="utf-8")
    return root


def test_the_checker_names_a_module_with_neither_and_each_bad_entry(tmp_path: Path) -> None:
    root = _tree(
        tmp_path,
        {
            "rag_eval/__init__.py": "",
            "rag_eval/box/__init__.py": "from rag_eval.box.shown import Shown\n",
            "rag_eval/box/own.py": "",
            "rag_eval/box/bare.py": "",
            "rag_eval/box/named.py": "",
            "rag_eval/box/shown.py": "",
            "rag_eval/box/missing_test.py": "",
            "rag_eval/box/no_import.py": "",
            "rag_eval/box/elsewhere.py": "",
            "tests/unit/box/test_own.py": "def test_x(): pass\n",
            "tests/unit/box/test_many.py": (
                "from rag_eval.box import named\nfrom rag_eval.box import Shown\n"
                "def test_named(): pass\ndef test_shown(): pass\n"
            ),
            "tests/unit/other/test_far.py": "import rag_eval.box.elsewhere\ndef test_far(): pass\n",
        },
    )
    covered = {
        "box/named.py": "tests/unit/box/test_many.py::test_named",
        "box/shown.py": "tests/unit/box/test_many.py::test_shown",  # re-exported by the package
        "box/missing_test.py": "tests/unit/box/test_many.py::test_gone",
        "box/no_import.py": "tests/unit/box/test_many.py::test_named",
        "box/elsewhere.py": "tests/unit/other/test_far.py::test_far",  # not a test of its room
        "box/own.py": "tests/unit/box/test_many.py::test_named",  # has its own file
        "box/gone.py": "tests/unit/box/test_many.py::test_named",
    }
    assert problems(root, ["box"], covered) == {
        "box/bare.py": "no tests/unit/box/test_bare.py and no COVERED_BY entry",
        "box/missing_test.py": "tests/unit/box/test_many.py defines no test_gone",
        "box/no_import.py": "tests/unit/box/test_many.py does not import rag_eval.box.no_import",
        "box/elsewhere.py": "'tests/unit/other/test_far.py::test_far' is not a test of tests/unit/box/ (FILE::TEST)",
        "box/own.py": "has tests/unit/box/test_own.py: drop its COVERED_BY entry",
        "box/gone.py": "COVERED_BY names a module that does not exist",
    }


def test_an_import_is_read_in_each_of_its_forms() -> None:
    module, exports = "rag_eval.box.mod", {"Thing": "rag_eval.box.mod", "Other": "rag_eval.box.other"}
    assert imports_module("import rag_eval.box.mod as m", module, exports)
    assert imports_module("from rag_eval.box.mod import f", module, exports)
    assert imports_module("from rag_eval.box import (\n    mod,\n)", module, exports)
    assert imports_module("def f():\n    from rag_eval.box import Thing", module, exports)
    assert not imports_module("from rag_eval.box import Other", module, exports)
    assert not imports_module("import rag_eval.box.model", module, exports)
    assert not imports_module("# from rag_eval.box import mod\nx = 'rag_eval.box.mod'", module, exports)
