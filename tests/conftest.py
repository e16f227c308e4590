"""Fixtures shared by every test folder: the repository root and the shared labelled data sets.

The shared data sets are read in place, never copied: from ``RAG_EVAL_SHARED_DATASETS`` when set,
else from ``../shared/datasets`` beside the repository. Tests that need one skip cleanly where it
is absent.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path

import pytest
from hypothesis import settings

# `make mutate` runs with --hypothesis-profile=mutation: the same examples on every run, no example
# database shared between mutants, so a mutant's verdict does not depend on the ones tried before it
settings.register_profile("mutation", derandomize=True, database=None)

ROOT = Path(__file__).resolve().parents[1]
SHIPPED = ROOT / "datasets" / "incident-kb"


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Under a mutant (``make mutate``), run the fastest of the selected tests first.

    mutmut stops at a mutant's first failing test (``-x``), so the order decides only how soon a
    killed mutant is known, never whether it is killed: every selected test still runs on a survivor.
    The durations are the ones mutmut measured on the unmutated code (``mutants/mutmut-stats.json``).
    """
    if "__mutmut_" not in os.environ.get("MUTANT_UNDER_TEST", ""):
        return
    stats = ROOT / "mutmut-stats.json"  # ROOT is mutmut's copy of the repository, mutants/
    try:
        duration = json.loads(stats.read_text())["duration_by_test"]
    except (OSError, ValueError, KeyError):
        return
    items.sort(key=lambda item: duration.get(item.nodeid.removeprefix("mutants/"), float("inf")))


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
