"""``[[configs]]``: the pipeline configs of an experiment file, and which one is the baseline.

Each entry names a config and gives either a production ``.properties`` file (relative to the
experiment file) or an inline ``rag = { ... }`` table, optionally a search ``mode`` and an
evaluation-only ``what_if``; ``baseline = true`` on one entry marks the baseline (or
``[experiment] baseline = NAME``; else the first config is).

>>> from pathlib import Path
>>> problems: list = []
>>> fields = read_configs([{"name": "a"}, {"name": "b", "baseline": True}], base=Path("."), problems=problems,
...                       baseline="")
>>> [c.name for c in fields["configs"]], fields["baseline"], problems
(['a', 'b'], 'b', [])
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from rag_eval.core.config import RagConfig
from rag_eval.core.errors import ConfigError, ConfigProblem, quoted
from rag_eval.core.types import SearchMode
from rag_eval.experiment.checks import SAFE_NAME, name_length_problem
from rag_eval.experiment.model import ConfigSpec
from rag_eval.experiment.section import TableReader
from rag_eval.experiment.tables import Fields
from rag_eval.experiment.whatif import WHAT_IFS


def read_configs(raw: Any, *, base: Path, problems: list[ConfigProblem], baseline: str) -> Fields:
    """The ``configs`` and the ``baseline`` (``baseline`` as ``[experiment]`` names it, or "")."""
    if not isinstance(raw, list):
        problems.append(ConfigProblem("configs", "expected an array of tables ([[configs]])"))
        raw = []
    configs = []
    for i, entry in enumerate(raw):
        if not isinstance(entry, Mapping):
            problems.append(ConfigProblem(f"configs[{i}]", "expected a table"))
        elif (spec := _entry(TableReader(entry, f"configs[{i}]", problems, base=base))) is not None:
            configs.append(spec)
    if not raw:  # entries that were given and refused say why themselves
        problems.append(ConfigProblem("configs", "at least one [[configs]] entry is required"))
    return {"configs": tuple(configs), "baseline": _baseline(raw, baseline, [c.name for c in configs], problems)}


def _baseline(raw: Sequence[Any], given: str, names: Sequence[str], problems: list[ConfigProblem]) -> str:
    flagged = [c.get("name", "?") for c in raw if isinstance(c, Mapping) and c.get("baseline") is True]
    if given and flagged and flagged != [given]:
        problems.append(
            ConfigProblem("experiment.baseline", f"{quoted(given)} disagrees with baseline = true on {flagged}")
        )
    if len(flagged) > 1:
        problems.append(ConfigProblem("configs", f"more than one baseline: {flagged}"))
    return given or (flagged[0] if flagged else (names[0] if names else ""))


def _entry(t: TableReader) -> ConfigSpec | None:
    """One ``[[configs]]`` entry, or None when it has a problem (recorded)."""
    name = t.get("name", str)
    t.get("baseline", bool)
    mode_raw = t.get("mode", str, "dense")
    props = t.path("properties")
    inline = t.get("rag", Mapping)
    what_if = t.get("what_if", str)
    t.finish()
    if not name or not SAFE_NAME.fullmatch(name):
        t.problem("name", f"required; letters, digits, '.', '_', '-' only: {quoted(name)}")
        return None
    if too_long := name_length_problem("config", name):
        t.problem("name", too_long)
        return None
    if props is None and t.table.get("properties") == "":
        t.problem("properties", "expected a .properties file, got ''")
        return None
    prefix = f"configs.{name}"
    try:
        mode = SearchMode(mode_raw)
    except ValueError:
        t.problems.append(ConfigProblem(f"{prefix}.mode", f"{quoted(mode_raw)} is not one of dense, grouped, hybrid"))
        mode = SearchMode.DENSE
    if props is not None and inline is not None:
        t.problems.append(ConfigProblem(prefix, "give either properties = FILE or a rag table, not both"))
        return None
    config = _rag_config(props, inline, prefix, t.problems)
    if config is None or (what_if is not None and not _what_if_fits(what_if, config, prefix, t.problems)):
        return None
    origin = str(props) if props is not None else "inline"
    return ConfigSpec(name=name, config=config, mode=mode, origin=origin, what_if=what_if)


def _rag_config(
    props: Path | None, inline: Mapping[str, Any] | None, prefix: str, problems: list[ConfigProblem]
) -> RagConfig | None:
    try:
        if props is not None:
            return RagConfig.from_properties_file(props)
        return RagConfig.from_toml_table({"rag": inline or {}}, source=None)
    except ConfigError as err:
        if props is not None:
            where = f"{prefix} ({err.path})" if err.path else f"{prefix}"
            problems.extend(ConfigProblem(f"{where}: {p.key}", p.message) for p in err.problems)
        else:  # an inline table: name keys and suggestions as written inside `rag = { ... }`
            problems.extend(
                ConfigProblem(f"{prefix}.rag.{p.key.removeprefix('rag.')}", _inline(p.message)) for p in err.problems
            )
        return None


def _what_if_fits(what_if: str, config: RagConfig, prefix: str, problems: list[ConfigProblem]) -> bool:
    if what_if not in WHAT_IFS:
        known = ", ".join(sorted(WHAT_IFS))
        problems.append(ConfigProblem(f"{prefix}.what_if", f"{quoted(what_if)} is not one of {known}"))
        return False
    if config.pipeline.is_legacy:
        problems.append(ConfigProblem(f"{prefix}.what_if", "applies to the evidence pipeline only"))
        return False
    return True


def _inline(message: str) -> str:
    """A config message as a user of an inline ``rag = { ... }`` table reads it: keys without ``rag.``."""
    return re.sub(r"'rag\.([a-z0-9.-]+)'", r"'\1'", message).replace("rag settings start with 'rag.'", "rag keys")
