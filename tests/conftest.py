"""Fixtures shared by every test folder: the repository root and the shared labelled data sets.

The shared data sets are read in place, never copied: from ``RAG_EVAL_SHARED_DATASETS`` when set,
else from ``../shared/datasets`` beside the repository. Tests that need one skip cleanly where it
is absent.
"""

from __future__ import annotations

import importlib.util
import json
import math
import os
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path

import pytest
from hypothesis import Phase, settings

# `make mutate` runs with --hypothesis-profile=mutation: the same examples on every run, no example
# database shared between mutants, so a mutant's verdict does not depend on the ones tried before it;
# no shrinking: a mutant is killed by its first failing example, and shrinking it took up to 90 s
settings.register_profile(
    "mutation", derandomize=True, database=None, phases=(Phase.explicit, Phase.reuse, Phase.generate)
)

ROOT = Path(__file__).resolve().parents[1]
SHIPPED = ROOT / "datasets" / "incident-kb"


COSTS = ROOT / "test-costs.json"  # under mutmut, ROOT is its copy of the repository, mutants/
_phase_seconds: dict[str, dict[str, float]] = {}


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    """While mutmut measures the tests on the unmutated code, keep each test's setup, call and teardown."""
    if os.environ.get("MUTANT_UNDER_TEST") == "stats":
        _phase_seconds.setdefault(report.nodeid, {})[report.when] = report.duration


def pytest_sessionfinish(session: pytest.Session) -> None:
    if os.environ.get("MUTANT_UNDER_TEST") == "stats" and _phase_seconds:
        known = json.loads(COSTS.read_text()) if COSTS.is_file() else {}
        COSTS.write_text(json.dumps({**known, **_phase_seconds}))


def pytest_sessionstart(session: pytest.Session) -> None:
    """Under a mutant, a forkserver of this process's own. mutmut forks each mutant's test process from one
    that has run the tests before (its stats and clean runs), so multiprocessing's forkserver, started there
    with that run's environment, is not this process's child: the load driver's client processes failed
    (``ChildProcessError`` from ``waitpid``), which killed every mutant that test reaches, equivalent or not.
    A fresh one is started by this process when first needed, with the mutant under test in its environment."""
    if "__mutmut_" in os.environ.get("MUTANT_UNDER_TEST", ""):
        reset_forkserver()


def reset_forkserver() -> None:
    """Forget the forkserver a parent process started (the module's functions are its bound methods)."""
    import multiprocessing.forkserver as forkserver

    fresh = forkserver.ForkServer()
    forkserver._forkserver = fresh  # type: ignore[attr-defined]
    for name in ("ensure_running", "get_inherited_fds", "connect_to_new_process", "set_forkserver_preload"):
        setattr(forkserver, name, getattr(fresh, name))


SERVER_GROUP = "milvus-server"
SERVER_ENV = "RAG_EVAL_MILVUS_SERVER_URI"


def pytest_configure(config: pytest.Config) -> None:
    """Under pytest-xdist (``make test``), one Milvus server for every worker: only one can run on a machine
    (its etcd port is fixed), so the controller starts it before the workers and they inherit its URI
    (``RAG_EVAL_MILVUS_SERVER_URI``); without xdist the session fixture starts one as it needs it."""
    workers = getattr(config.option, "numprocesses", None)
    if not workers or os.environ.get("PYTEST_XDIST_WORKER") or os.environ.get(SERVER_ENV):
        return
    if config.option.collectonly or importlib.util.find_spec("milvus") is None:
        return
    from tests.integration import milvus_server

    data = Path(tempfile.mkdtemp(prefix="rag-eval-tests-milvus-"))
    server = milvus_server.start(data)
    os.environ[SERVER_ENV] = server.uri

    def stop() -> None:
        milvus_server.stop(server)
        os.environ.pop(SERVER_ENV, None)
        shutil.rmtree(data, ignore_errors=True)

    config.add_cleanup(stop)


def uses_the_server(item: pytest.Item) -> bool:
    """Whether a test talks to the session's Milvus server (marked so, or asks for it by fixture)."""
    if item.get_closest_marker("milvus_server") is not None or "server_uri" in getattr(item, "fixturenames", ()):
        return True
    callspec = getattr(item, "callspec", None)  # a parameter naming the server kind (a message naming one does not)
    return callspec is not None and any(v == "server" for v in callspec.params.values())


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Tests on the Milvus server run one at a time in one worker, an integration module's tests that share a
    module fixture in one worker; under a mutant, the cheapest first."""
    for item in items:  # with pytest-xdist's --dist loadgroup (make test): one server per machine, shared
        if uses_the_server(item):
            join_group(config, item, SERVER_GROUP)
        elif "integration" in item.path.parts and shares_a_module_fixture(item):  # made once, in one worker
            join_group(config, item, f"module:{item.path.name}")
    order_for_mutants(items)


def shares_a_module_fixture(item: pytest.Item) -> bool:
    """Whether ``item`` asks for a fixture its module's tests share (module, class or package scope): those
    tests go to one worker, so the fixture is made once; a module's other tests are scheduled one by one."""
    if not isinstance(item, pytest.Function):
        return False
    defs = item._fixtureinfo.name2fixturedefs.values()
    return any(d.scope in ("module", "class", "package") for chain in defs for d in chain)


def join_group(config: pytest.Config, item: pytest.Item, group: str) -> None:
    """Mark ``item`` as of xdist group ``group`` and, in a worker of ``--dist loadgroup``, give its node id the
    ``@group`` suffix the scheduler groups by.

    pytest-xdist writes that suffix in a collection hook of its own, which runs before this one (so it never
    sees these marks), and as ``item._nodeid``, which pytest 9.2's structured node ids no longer read: without
    the suffix written here, every test of a group was scheduled on its own, the server's tests ran in both
    workers at once and a module fixture was built in each worker."""
    item.add_marker(pytest.mark.xdist_group(group))
    if not config.getoption("loadgroup", default=False):  # set in xdist's workers only
        return
    marks = item.iter_markers("xdist_group")
    nodeid = item.nodeid + "@" + "_".join(sorted({str(m.args[0] if m.args else m.kwargs["name"]) for m in marks}))
    try:
        from _pytest.nodeid import NodeId  # pytest >= 9.2
    except ImportError:  # the suffix goes where older pytest keeps the node id, as xdist writes it
        setattr(item, "_nodeid", nodeid)  # noqa: B010 (a slot of pytest's Node)
    else:
        item._id = NodeId.parse(nodeid)


def order_for_mutants(items: list[pytest.Item]) -> None:
    """Under a mutant (``make mutate``), run the cheapest of the selected tests first.

    mutmut stops at a mutant's first failing test (``-x``), so the order decides only how soon a
    killed mutant is known, never whether it is killed: every selected test still runs on a survivor.
    A test's cost is its setup, call and teardown measured on the unmutated code, plus the dearest
    setup in its module (a module-scoped fixture is paid by whichever of its tests runs first).
    """
    if "__mutmut_" not in os.environ.get("MUTANT_UNDER_TEST", ""):
        return
    try:
        phases: dict[str, dict[str, float]] = json.loads(COSTS.read_text())
    except (OSError, ValueError):
        return
    module_setup: dict[str, float] = {}
    for nodeid, seconds in phases.items():
        module = nodeid.split("::", 1)[0]
        module_setup[module] = max(module_setup.get(module, 0.0), seconds.get("setup", 0.0))

    def cost(item: pytest.Item) -> float:
        nodeid = item.nodeid.removeprefix("mutants/")
        if nodeid not in phases:
            return math.inf
        return sum(phases[nodeid].values()) + module_setup.get(nodeid.split("::", 1)[0], 0.0)

    items.sort(key=cost)


def shared_datasets_dir() -> Path | None:
    for candidate in (os.environ.get("RAG_EVAL_SHARED_DATASETS"), ROOT.parent / "shared" / "datasets"):
        if candidate and Path(candidate).is_dir():
            return Path(candidate)
    return None


@pytest.fixture
def shared_dataset() -> Callable[[str], Path]:
    def find(name: str) -> Path:
        base = shared_datasets_dir()
        if base is None or not (base / name / "corpus.jsonl").is_file():
            pytest.skip(f"shared data set {name!r} is not here (set RAG_EVAL_SHARED_DATASETS)")
        return base / name

    return find
