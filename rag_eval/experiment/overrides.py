"""The command line's part of an experiment: flags on top of a file, or an experiment of flags alone.

The flags change fields of an :class:`Experiment`; the result is checked by the same
:func:`~rag_eval.experiment.checks.check_experiment` as a file, a problem named by the flag
that set the field (``--milvus-uri``), or by the file's key when the file set it.

>>> exp = default_experiment("datasets/incident-kb")
>>> with_overrides(exp, Overrides(query_limit=0, require_configs=False))
Traceback (most recent call last):
rag_eval.core.errors.ConfigError: 1 configuration problem: must be >= 1, got 0 @ --limit
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from rag_eval.core.config import RagConfig
from rag_eval.core.errors import ConfigError, ConfigProblem, quoted
from rag_eval.core.types import SearchMode
from rag_eval.experiment.checks import (
    SAFE_NAME,
    Keys,
    check_experiment,
    name_length_problem,
    path_problem,
    raise_problems,
)
from rag_eval.experiment.latency import TimingPlan
from rag_eval.experiment.model import PROFILES, ConfigSpec, Experiment, default_profile, slug_name
from rag_eval.traffic.logs import TrafficSpec

# The flag that sets each field (a problem with the field is then named by the flag)
FLAGS: Mapping[str, str] = {
    "dataset_path": "--dataset",
    "split": "--split",
    "milvus_uri": "--milvus-uri",
    "collection": "--collection",
    "chunker_spec": "--chunker",
    "profile": "--profile",
    "configs": "--config",
    "baseline": "--baseline",
    "query_limit": "--limit",
    "timing": "--latency",
    "traffic": "--traffic",
    "lead_cutoffs": "--cutoffs",
    "cutoffs": "--cutoffs",  # a cutoff --cutoffs adds is measured too
}


def parse_config_flag(value: str, *, base: Path = Path()) -> ConfigSpec:
    """``NAME=FILE.properties`` or ``NAME=FILE.properties:MODE`` from the command line."""
    name, eq, rest = value.partition("=")
    if not eq or not SAFE_NAME.fullmatch(name) or not rest:
        raise ConfigError([ConfigProblem("--config", f"expected NAME=FILE[.properties][:MODE], got {quoted(value)}")])
    if too_long := name_length_problem("config", name):
        raise ConfigError([ConfigProblem("--config", too_long)])
    path, _, mode_raw = rest.partition(":") if not Path(rest).exists() else (rest, "", "")
    if why := path_problem(path):
        raise ConfigError([ConfigProblem("--config", why)])
    try:
        mode = SearchMode(mode_raw or "dense")
    except ValueError as exc:
        raise ConfigError([ConfigProblem("--config", f"unknown mode {quoted(mode_raw)} in {quoted(value)}")]) from exc
    config = RagConfig.from_properties_file(base / path)
    return ConfigSpec(name=name, config=config, mode=mode, origin=str(base / path))


@dataclass(frozen=True, slots=True, kw_only=True)
class Overrides:
    """What the command line changes in an experiment (None, or no configs: not given)."""

    dataset: str | None = None
    split: str | None = None
    milvus_uri: str | None = None
    collection: str | None = None
    chunker: str | None = None
    profile: str | None = None
    configs: Sequence[ConfigSpec] = ()
    baseline: str | None = None
    query_limit: int | None = None
    latency: str | None = None
    traffic: str | None = None  # a query log in place of [traffic]'s path (a [traffic] table of defaults if none)
    cutoffs: tuple[int, ...] = ()  # --cutoffs: the cutoffs the console and the report lead with (measured too)
    require_configs: bool = True  # an experiment without configs is refused


def with_overrides(exp: Experiment, overrides: Overrides | None = None) -> Experiment:
    """Apply CLI flags on top of a file (or of the defaults), then check the result as a file is checked."""
    o = overrides or Overrides()
    problems: list[ConfigProblem] = []
    changes: dict[str, Any] = {
        field: value
        for field, value in (
            ("split", o.split), ("milvus_uri", o.milvus_uri), ("collection", o.collection),
            ("chunker_spec", o.chunker), ("query_limit", o.query_limit),
        )
        if value is not None
    }  # fmt: skip
    if o.collection is not None and exp.existing is not None:  # the collection built elsewhere to replay
        changes.pop("collection")
        changes["existing"] = replace(exp.existing, name=o.collection)
    if o.dataset is not None and (why := path_problem(o.dataset)):
        problems.append(ConfigProblem("--dataset", why))
    elif o.dataset is not None:
        changes["dataset_path"] = Path(o.dataset).resolve()
        if exp.source is None:
            changes["name"] = slug_name(Path(o.dataset).resolve().name)
        if not exp.profile_named and o.profile is None:  # another data set: it chooses again
            changes["profile"] = default_profile(changes["dataset_path"])
    if o.profile is not None:
        if o.profile not in PROFILES:
            known = ", ".join(PROFILES)
            problems.append(ConfigProblem("--profile", f"unknown profile {quoted(o.profile)} (known: {known})"))
        else:
            changes["profile"], changes["profile_named"] = PROFILES[o.profile], True
    if o.cutoffs:
        changes["lead_cutoffs"] = tuple(o.cutoffs)
        changes["cutoffs"] = tuple(sorted({*exp.cutoffs, *o.cutoffs}))
    if o.configs:
        changes["configs"] = tuple(o.configs)
        changes["baseline"] = o.baseline or o.configs[0].name
    elif o.baseline is not None:
        changes["baseline"] = o.baseline
    if o.traffic is not None and (why := path_problem(o.traffic)):
        problems.append(ConfigProblem("--traffic", why))
    elif o.traffic is not None:
        path = Path(o.traffic).resolve()
        changes["traffic"] = replace(exp.traffic, path=path) if exp.traffic is not None else TrafficSpec(path=path)
    if o.latency is not None:
        try:
            changes["timing"] = TimingPlan.parse(o.latency, exp.timing)
        except ConfigError as err:
            problems.extend(err.problems)
    new = replace(exp, **changes)
    if not new.configs and o.require_configs:
        problems.append(ConfigProblem("--config", "no configs: give an experiment file or --config NAME=FILE"))
    problems += check_experiment(new, Keys(flags={f: FLAGS[f] for f in changes if f in FLAGS}))
    raise_problems(problems, exp.source)
    return new


def default_experiment(dataset: str, split: str = "test") -> Experiment:
    """An experiment made from flags only (no file): defaults everywhere."""
    if why := path_problem(dataset):
        raise ConfigError([ConfigProblem("--dataset", why)])
    path = Path(dataset).resolve()
    return Experiment(name=slug_name(path.name), source=None, dataset_path=path, split=split,
                      profile=default_profile(path), profile_named=False)  # fmt: skip
