"""Reading an experiment file: each table by its reader, then the values checked, all problems at once.

>>> exp = experiment_from_table({"dataset": {"path": "kb"}, "configs": [{"name": "evidence"}]},
...                             base=Path("/data"), source=None)
>>> exp.dataset_path, exp.baseline
(PosixPath('/data/kb'), 'evidence')
>>> experiment_from_table({"dataset": {"path": "kb"}, "configs": [{"name": "a"}], "colour": {}},
...                       base=Path("/data"), source="exp.toml")  # doctest: +ELLIPSIS
Traceback (most recent call last):
rag_eval.core.errors.ConfigError: exp.toml: 1 configuration problem: unknown table (known: ...) @ colour
"""

from __future__ import annotations

import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from rag_eval.core.config import RagConfig
from rag_eval.core.errors import ConfigError, ConfigProblem, as_written
from rag_eval.core.parsing import check_regular, parse_toml
from rag_eval.experiment.checks import check_experiment, path_problem, raise_problems, retrieve_k_problem
from rag_eval.experiment.configs_table import read_configs
from rag_eval.experiment.model import Experiment, default_profile
from rag_eval.experiment.section import TableReader
from rag_eval.experiment.tables import SHAPES, TABLES, Fields

TOP_KEYS = frozenset({*TABLES, "configs"})


def load_experiment(path: str | Path) -> Experiment:
    """The experiment of a TOML file (its relative input paths start at the file's directory)."""
    p = Path(path)
    if why := path_problem(str(p)):
        raise ConfigError([ConfigProblem("(file)", f"cannot read: {why}")], path=repr(str(p)))
    try:
        check_regular(p)
        text = p.read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError([ConfigProblem("(file)", f"cannot read: {exc.strerror}")], path=str(p)) from exc
    except UnicodeDecodeError as exc:
        raise ConfigError([ConfigProblem("(file)", _not_utf8(exc))], path=str(p)) from exc
    try:
        table = parse_toml(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError([ConfigProblem("(file)", f"not valid TOML: {exc}")], path=str(p)) from exc
    return experiment_from_table(table, base=p.parent, source=str(p))


def experiment_from_table(table: Mapping[str, Any], *, base: Path, source: str | None) -> Experiment:
    """The experiment of a parsed TOML document; ``base`` is where its relative paths start."""
    known = ", ".join(sorted(TOP_KEYS))
    problems = [
        ConfigProblem(as_written(key), f"unknown table (known: {known})") for key in table if key not in TOP_KEYS
    ]
    fields: Fields = {"source": source}
    for name, read in TABLES.items():
        section = _section(table, name, base, problems)
        fields |= read(section)
        section.finish()
    if "collection" in table:  # replayed as it is: nothing of ours is chunked or ingested
        problems.extend(
            ConfigProblem(name, "a [collection] experiment replays that collection as it is: remove this table")
            for name in ("chunker", "ingest")
            if name in table
        )
        if isinstance(table.get("milvus"), Mapping) and "collection" in table["milvus"]:
            problems.append(ConfigProblem("milvus.collection", "the collection is [collection] name: remove this"))
    fields |= read_configs(table.get("configs", []), base=base, problems=problems, baseline=fields.pop("baseline"))
    if not fields["profile_named"] and "collection" not in table:  # the data set chooses (default_profile)
        fields["profile"] = default_profile(fields["dataset_path"])
    exp = Experiment(**fields)
    raise_problems([*problems, *check_experiment(exp)], source)
    return exp


def _section(table: Mapping[str, Any], name: str, base: Path, problems: list[ConfigProblem]) -> TableReader:
    value = table.get(name)
    if isinstance(value, Mapping):
        return TableReader(value, name, problems, base=base)
    if value is not None:
        problems.append(ConfigProblem(name, SHAPES.get(name, "expected a table")))
    return TableReader({}, name, problems, base=base, present=False)


def read_settings(path: Path) -> Experiment | RagConfig:
    """What ``rag-eval config FILE`` shows: the experiment of an experiment file (a TOML file with
    ``[experiment]``, ``[dataset]`` or ``[[configs]]``), else the RagConfig of a ``.properties`` file or of a
    TOML file's ``[rag]`` table, refused as a run would refuse it (a retrieve-k past Milvus's limit)."""
    if path.suffix == ".toml":
        text = _read_text(path)
        if is_experiment_text(text):
            return load_experiment(path)
        config = RagConfig.from_toml_text(text, source=str(path))
    else:
        config = RagConfig.from_properties_file(path)
        text = _read_text(path, strict=False)
    if why := retrieve_k_problem(config):
        key = "rag.retrieve-k" if "rag.retrieve-k" in text else "rag.top-k"
        raise ConfigError([ConfigProblem(key, why)], path=str(path))
    return config


def is_experiment_text(text: str) -> bool:
    r"""A TOML text with experiment tables (``[experiment]``, ``[dataset]`` or ``[[configs]]``).

    >>> is_experiment_text("[dataset]\npath = 'kb'"), is_experiment_text("[rag]\ntop-k = 5"), is_experiment_text("[")
    (True, False, False)
    """
    try:
        table = parse_toml(text)
    except tomllib.TOMLDecodeError:
        return False
    return bool({"experiment", "dataset", "configs"} & set(table))


def _read_text(path: Path, *, strict: bool = True) -> str:
    """The file's text; ``strict=False``: undecodable bytes replaced, an unreadable file read as empty."""
    try:
        check_regular(path)
        return path.read_text(encoding="utf-8", errors="strict" if strict else "replace")
    except OSError as exc:
        if not strict:
            return ""
        raise ConfigError([ConfigProblem("(file)", f"cannot read: {exc.strerror}")], path=str(path)) from exc
    except UnicodeDecodeError as exc:  # strict only
        raise ConfigError([ConfigProblem("(file)", _not_utf8(exc))], path=str(path)) from exc


def _not_utf8(exc: UnicodeDecodeError) -> str:
    return f"not UTF-8 ({exc.reason} at byte {exc.start:,})"
