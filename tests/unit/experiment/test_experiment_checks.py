"""One check of an experiment's values, whichever way the experiment was made: a file names a
problem by its key, a flag by the flag, and the message is the same."""

from __future__ import annotations

import tomllib
from dataclasses import replace
from typing import Any

import pytest

from rag_eval.core.config import RagConfig
from rag_eval.core.errors import ConfigError
from rag_eval.experiment import (
    ConfigSpec,
    Keys,
    Overrides,
    check_experiment,
    experiment_from_table,
    load_experiment,
    with_overrides,
)
from tests.conftest import SHIPPED

EXPERIMENTS = SHIPPED / "experiments"


def from_file(**tables: dict[str, Any]) -> str:
    table = tomllib.loads((EXPERIMENTS / "default.toml").read_text())
    for name, values in tables.items():
        table[name] = {**table.get(name, {}), **values}
    with pytest.raises(ConfigError) as err:
        experiment_from_table(table, base=EXPERIMENTS, source="exp.toml")
    return str(err.value)


def from_flags(**flags: Any) -> str:
    with pytest.raises(ConfigError) as err:
        with_overrides(load_experiment(EXPERIMENTS / "default.toml"), Overrides(**flags))
    return str(err.value)


@pytest.mark.parametrize(
    ("tables", "flags", "message", "file_key", "flag_key"),
    [
        ({"milvus": {"uri": "db:19530"}}, {"milvus_uri": "db:19530"}, "write http://db:19530", "milvus.uri",
         "--milvus-uri"),
        ({"timing": {"query_limit": 0}}, {"query_limit": 0}, "must be >= 1, got 0", "timing.query_limit", "--limit"),
        ({"chunker": {"spec": "sentences:size=0"}}, {"chunker": "sentences:size=0"}, "must be > 0, got 0",
         "chunker.spec (chunker.size)", "--chunker (chunker.size)"),
        ({"experiment": {"baseline": "nope"}}, {"baseline": "nope"}, "'nope' is not a config name (legacy-merge, ",
         "experiment.baseline", "--baseline"),
    ],
)  # fmt: skip
def test_a_file_and_a_flag_are_checked_alike(
    tables: dict[str, dict[str, Any]], flags: dict[str, Any], message: str, file_key: str, flag_key: str
) -> None:
    in_file, by_flag = from_file(**tables), from_flags(**flags)
    assert message in in_file and f"@ {file_key}" in in_file and flag_key not in in_file
    assert message in by_flag and f"@ {flag_key}" in by_flag


def test_configs_given_twice_read_the_same_from_a_file_and_from_flags() -> None:
    spec = with_overrides(load_experiment(EXPERIMENTS / "default.toml")).configs[2]
    assert "config name 'evidence' is given more than once @ --config" in from_flags(configs=[spec, spec])
    table = tomllib.loads((EXPERIMENTS / "default.toml").read_text())
    table["configs"].append(dict(table["configs"][2]))
    with pytest.raises(ConfigError, match="config name 'evidence' is given more than once @ configs"):
        experiment_from_table(table, base=EXPERIMENTS, source="exp.toml")


def test_flags_that_drop_a_config_the_load_table_names_are_refused() -> None:
    exp = load_experiment(EXPERIMENTS / "default.toml")
    table = tomllib.loads((EXPERIMENTS / "default.toml").read_text())
    table["load"] = {"concurrency": [1], "configs": ["evidence"]}
    with_load = experiment_from_table(table, base=EXPERIMENTS, source="exp.toml")
    only_legacy = [exp.configs[0]]
    with pytest.raises(ConfigError, match=r"'evidence' is not a config name \(legacy-merge\) @ load\.configs"):
        with_overrides(with_load, Overrides(configs=only_legacy))
    assert with_overrides(exp, Overrides(configs=only_legacy)).configs == tuple(only_legacy)


def test_an_experiment_built_in_code_is_checked_by_the_same_function() -> None:
    exp = load_experiment(EXPERIMENTS / "default.toml")
    assert check_experiment(exp) == []
    wide = ConfigSpec(name="wide", config=RagConfig.from_toml_table({"rag": {"retrieve-k": 20000}}, source=None))
    bad = replace(exp, configs=(*exp.configs, wide), timeout=0.0, batch_size=0)
    found = {str(p) for p in check_experiment(bad, Keys())}
    assert found == {
        "retrieve-k 20,000 is over Milvus's limit of 16,384 hits @ configs.wide",
        "must be > 0 and <= 3600 seconds, got 0 @ milvus.timeout",
        "must be >= 1 @ timing.batch_size",
    }


def test_config_names_that_differ_only_by_case_are_refused() -> None:
    spec = with_overrides(load_experiment(EXPERIMENTS / "default.toml")).configs[2]
    upper = replace(spec, name="Evidence")
    message = from_flags(configs=[spec, upper])
    assert "config names 'evidence' and 'Evidence' differ only by case" in message and "@ --config" in message
    table = tomllib.loads((EXPERIMENTS / "default.toml").read_text())
    table["configs"].append({**table["configs"][2], "name": "EVIDENCE"})
    with pytest.raises(ConfigError, match=r"'evidence' and 'EVIDENCE' differ only by case.* @ configs"):
        experiment_from_table(table, base=EXPERIMENTS, source="exp.toml")
    assert with_overrides(load_experiment(EXPERIMENTS / "default.toml"), Overrides(configs=[spec])).configs == (spec,)
