"""How the gates and the reports look into ``load.json``: whether it belongs to the run beside it (and why
not), one config's result at one concurrency, and a config's hash."""

from __future__ import annotations

from typing import Any

import pytest

from rag_eval.loadtest.document import belongs_to, config_hash, entry, stale_reason

DOC: dict[str, Any] = {
    "run": {"started": "2026-01-01T00:00:00+00:00"},
    "results": [
        {"config": "a", "concurrency": 1, "n": 1},
        {"config": "a", "concurrency": 4, "n": 2},
        {"config": "b", "concurrency": 4, "n": 3},
        {"config": "a", "concurrency": 4, "n": 4},  # a second entry: the first is the one read
    ],
    "configs": [{"name": "a", "hash": "ha"}, {"name": "b", "hash": 17}, {"name": "a", "hash": "later"}],
}
MANIFEST = {"started": "2026-01-01T00:00:00+00:00"}


@pytest.mark.parametrize(
    ("doc", "manifest", "belongs"),
    [
        (DOC, MANIFEST, True),
        (DOC, {"started": "2026-01-02T00:00:00+00:00"}, False),
        (DOC, {}, False),
        ({"results": []}, MANIFEST, False),  # measured on its own
        ({"run": None}, MANIFEST, False),
        ({"run": {"started": ""}}, {"started": ""}, False),  # an empty start is no start
        ({"run": {"started": None}}, {"started": None}, False),
    ],
)
def test_a_load_measurement_belongs_to_the_run_of_the_same_start(
    doc: dict[str, Any], manifest: dict[str, Any], belongs: bool
) -> None:
    assert belongs_to(doc, manifest) is belongs


def test_the_stale_reason_names_both_starts_or_says_it_was_measured_on_its_own() -> None:
    assert stale_reason(DOC, {"started": "t2"}) == (
        "load.json belongs to another run in this directory (started 2026-01-01T00:00:00+00:00; this run started t2)"
    )
    assert stale_reason(DOC, {}) == (
        "load.json belongs to another run in this directory (started 2026-01-01T00:00:00+00:00; this run started None)"
    )
    assert stale_reason({}, MANIFEST) == "load.json was measured on its own, not for this run"
    assert stale_reason({"run": {"started": ""}}, MANIFEST) == "load.json was measured on its own, not for this run"


def test_the_entry_of_a_config_at_a_concurrency_is_the_first_that_matches_both() -> None:
    assert entry(DOC, "a", 4) == {"config": "a", "concurrency": 4, "n": 2}
    assert entry(DOC, "a", 1) == {"config": "a", "concurrency": 1, "n": 1}
    assert entry(DOC, "b", 4) == {"config": "b", "concurrency": 4, "n": 3}
    assert entry(DOC, "b", 1) is None
    assert entry(DOC, "c", 4) is None
    assert entry({}, "a", 4) is None


def test_a_configs_hash_is_its_first_entrys_as_text() -> None:
    assert config_hash(DOC, "a") == "ha"
    assert config_hash(DOC, "b") == "17"
    assert config_hash(DOC, "c") is None
    assert config_hash({}, "a") is None
