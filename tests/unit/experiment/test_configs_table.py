"""``[[configs]]`` read on its own: each entry's name, properties file or inline table, mode and what-if,
the baseline (named, flagged, or the first), and each problem named by its entry."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from rag_eval.core.config import PipelineKind
from rag_eval.core.errors import ConfigProblem
from rag_eval.core.types import SearchMode
from rag_eval.experiment.configs_table import read_configs
from tests.conftest import SHIPPED

EXPERIMENTS = SHIPPED / "experiments"


def read(raw: Any, baseline: str = "", base: Path = EXPERIMENTS) -> tuple[dict[str, Any], list[tuple[str, str]]]:
    problems: list[ConfigProblem] = []
    fields = read_configs(raw, base=base, problems=problems, baseline=baseline)
    return fields, [(p.key, p.message) for p in problems]


def test_entries_from_a_properties_file_or_an_inline_table() -> None:
    fields, problems = read([
        {"name": "old", "properties": "configs/legacy.properties"},
        {"name": "new", "rag": {"retrieve-k": 30, "return-n": 4}, "mode": "hybrid"},
        {"name": "what", "rag": {}, "what_if": "content-dedup"},
    ])  # fmt: skip
    assert problems == []
    old, new, what = fields["configs"]
    assert (old.name, old.config.pipeline, old.origin) == (
        "old", PipelineKind.LEGACY_MERGE, str(EXPERIMENTS / "configs" / "legacy.properties"),
    )  # fmt: skip
    assert (new.config.retrieve_k, new.config.return_n, new.mode, new.origin) == (30, 4, SearchMode.HYBRID, "inline")
    assert (what.what_if, what.config.pipeline) == ("content-dedup", PipelineKind.EVIDENCE)
    assert fields["baseline"] == "old"  # none named or flagged: the first


def test_the_baseline_named_or_flagged() -> None:
    entries = [{"name": "a", "rag": {}}, {"name": "b", "rag": {}, "baseline": True}]
    assert read(entries)[0]["baseline"] == "b"
    assert read(entries, baseline="b") == (read(entries)[0], [])
    assert read([{"name": "a", "rag": {}}], baseline="a")[0]["baseline"] == "a"
    _, problems = read(entries, baseline="a")
    assert problems == [("experiment.baseline", "'a' disagrees with baseline = true on ['b']")]
    _, problems = read([{**e, "baseline": True} for e in entries])
    assert problems == [("configs", "more than one baseline: ['a', 'b']")]


def test_a_configs_that_is_no_array_or_empty_is_refused() -> None:
    fields, problems = read({"name": "a"})
    assert fields == {"configs": (), "baseline": ""}
    assert problems == [("configs", "expected an array of tables ([[configs]])"),
                        ("configs", "at least one [[configs]] entry is required")]  # fmt: skip
    assert read([])[1] == [("configs", "at least one [[configs]] entry is required")]
    fields, problems = read([3, {"name": "a", "rag": {}}])
    assert [c.name for c in fields["configs"]] == ["a"] and problems == [("configs[0]", "expected a table")]


def test_each_entrys_problem_is_named_by_the_entry() -> None:
    cases: list[tuple[dict[str, Any], tuple[str, str]]] = [
        ({"rag": {}}, ("configs[0].name", "required; letters, digits, '.', '_', '-' only: None")),
        ({"name": "a b", "rag": {}}, ("configs[0].name", "required; letters, digits, '.', '_', '-' only: 'a b'")),
        ({"name": "a", "properties": ""}, ("configs[0].properties", "expected a .properties file, got ''")),
        ({"name": "a", "rag": {}, "properties": "configs/legacy.properties"},
         ("configs.a", "give either properties = FILE or a rag table, not both")),
        ({"name": "a", "rag": {}, "what_if": "nope"}, ("configs.a.what_if", "'nope' is not one of content-dedup")),
        ({"name": "a", "rag": {"pipeline": "legacy"}, "what_if": "content-dedup"},
         ("configs.a.what_if", "applies to the evidence pipeline only")),
        ({"name": "a", "rag": {}, "colour": 1}, ("configs[0].colour", "unknown key")),
    ]  # fmt: skip
    for entry, problem in cases:
        fields, problems = read([entry])
        assert problems == [problem], entry
        if problem[1] != "unknown key":
            assert fields["configs"] == (), entry


def test_an_unknown_mode_is_named_and_read_as_dense() -> None:
    fields, problems = read([{"name": "a", "rag": {}, "mode": "sparse"}])
    assert problems == [("configs.a.mode", "'sparse' is not one of dense, grouped, hybrid")]
    assert fields["configs"][0].mode is SearchMode.DENSE


def test_a_bad_inline_rag_key_is_named_inside_the_rag_table() -> None:
    _, problems = read([{"name": "a", "rag": {"retrieve-k": "many"}}])
    assert [key for key, _ in problems] == ["configs.a.rag.retrieve-k"]
    assert "rag." not in problems[0][1]
    _, problems = read([{"name": "a", "properties": "configs/none.properties"}])
    assert len(problems) == 1 and problems[0][0].startswith("configs.a")
