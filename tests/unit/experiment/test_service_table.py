"""The ``[service]`` table: one endpoint of three kinds, its limits, every problem named."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from rag_eval.core.errors import ConfigProblem
from rag_eval.experiment.model import ServiceSpec
from rag_eval.experiment.section import TableReader
from rag_eval.experiment.tables import read_service


def _read(table: dict[str, Any]) -> tuple[Any, list[str]]:
    problems: list[ConfigProblem] = []
    reader = TableReader(table, "service", problems, base=Path("."))
    fields = read_service(reader)
    reader.finish()
    return fields["service"], [str(p) for p in problems]


def test_each_kind_of_endpoint() -> None:
    spec, problems = _read({"url": "http://u:pw@kb.internal:8765/mcp", "config": "evidence", "timeout": 5})
    assert problems == [] and spec.endpoint == "http://kb.internal:8765/mcp" and spec.as_dict()["kind"] == "mcp"
    spec, problems = _read({"command": ["rag-eval", "serve", "serve.toml"], "concurrency": 2})
    assert (
        problems == [] and spec.command == ("rag-eval", "serve", "serve.toml") and spec.as_dict()["kind"] == "mcp-stdio"
    )
    spec, problems = _read({"http": "https://kb.internal/lookup"})
    assert problems == [] and spec == ServiceSpec(http="https://kb.internal/lookup")


@pytest.mark.parametrize(
    ("table", "said"),
    [({}, "give one of url, command or http (given: none) @ service.url"),
     ({"url": "http://a/mcp", "http": "http://a/x"}, "(given: url, http)"),
     ({"url": "kb.internal:8765"}, "expected an http(s):// URL"),
     ({"command": ["rag-eval", 3]}, "expected a list of strings"),
     ({"http": "http://a/x", "timeout": 0}, "must be > 0 and <= 3600 seconds, got 0 @ service.timeout"),
     ({"http": "http://a/x", "concurrency": 0}, "1 to 256 queries in flight at once, got 0 @ service.concurrency"),
     ({"http": "http://a/x", "concurrency": -4}, "got -4 @ service.concurrency"),
     ({"http": "http://a/x", "concurrency": 100000}, "1 to 256 queries in flight at once, got 100000 @ service."),
     ({"http": "http://a/x", "colour": "red"}, "unknown key @ service.colour")],
)  # fmt: skip
def test_problems_are_named(table: dict[str, Any], said: str) -> None:
    _, problems = _read(table)
    assert any(said in p for p in problems), problems


def test_concurrency_at_its_bounds_is_accepted_and_each_problem_names_its_own_key() -> None:
    for n in (1, 256):
        assert _read({"http": "http://a/x", "concurrency": n}) == (ServiceSpec(http="http://a/x", concurrency=n), [])
    _, problems = _read({"http": "http://a/x", "concurrency": 257, "timeout": 3601})
    assert [p.rsplit(" @ ", 1)[1] for p in problems] == ["service.timeout", "service.concurrency"]


def test_an_absent_table_is_no_service() -> None:
    problems: list[ConfigProblem] = []
    assert read_service(TableReader({}, "service", problems, base=Path("."), present=False)) == {"service": None}


def test_an_experiment_file_with_a_service_and_a_config_it_does_not_have(tmp_path: Path) -> None:
    from rag_eval.core.errors import ConfigError
    from rag_eval.experiment import load_experiment
    from tests.conftest import SHIPPED

    text = (SHIPPED / "experiments" / "default.toml").read_text()
    configs = f'properties = "{SHIPPED}/experiments/configs/'
    text = text.replace('path = ".."', f'path = "{SHIPPED}"').replace('properties = "configs/', configs)
    good = tmp_path / "good.toml"
    good.write_text(text + '\n[service]\ncommand = ["rag-eval", "serve", "s.toml"]\nconfig = "evidence"\n')
    exp = load_experiment(good)
    assert exp.service == ServiceSpec(command=("rag-eval", "serve", "s.toml"), config="evidence")
    assert exp.as_dict()["service"]["kind"] == "mcp-stdio"
    bad = tmp_path / "bad.toml"
    bad.write_text(text + '\n[service]\nurl = "http://kb:8765/mcp"\nconfig = "evidense"\n')
    with pytest.raises(ConfigError, match=r"'evidense' is not a config name .* @ service.config"):
        load_experiment(bad)
