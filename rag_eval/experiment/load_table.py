"""Settings of a load measurement: concurrency levels, time and count bounds, rounds.

Every setting comes from the CLI (``rag-eval load --concurrency 1,2,4,8 --duration 10``) or from an
experiment's ``[load]`` table (the flags win). Everything is bounded before anything runs (:data:`MAX_CONCURRENCY`,
:data:`MAX_LEVELS`, :data:`MAX_DURATION_S`, :data:`MAX_TOTAL_S`, :data:`MIN_WINDOW_S`); a bad value is one
:class:`~rag_eval.core.errors.ConfigError` naming the flag or the key. The table and the bounds:
docs/performance.md, "Latency under load"; the measurement: :mod:`rag_eval.loadtest.driver`.

>>> parse_concurrency("8, 1,2 ,4", key="--concurrency")
(1, 2, 4, 8)
>>> parse_concurrency("1,1", key="--concurrency")
Traceback (most recent call last):
rag_eval.core.errors.ConfigError: 1 configuration problem: 1 is given twice @ --concurrency
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from rag_eval.core.errors import ConfigError, ConfigProblem, as_written, quoted

MAX_CONCURRENCY = 64  # client processes in one level: more measures the client machine, not Milvus
MAX_LEVELS = 12
MAX_DURATION_S = 600.0
MAX_TOTAL_S = 3600.0  # levels x configs x duration: the whole measurement
MAX_SEARCHES = 10_000_000
MAX_ROUNDS = 20
MIN_WINDOW_S = 0.2  # a shorter window measures process start-up and the barrier, not steady load
DEFAULT_CONCURRENCY = (1, 2, 4, 8)
DEFAULT_DURATION_S = 10.0
DEFAULT_ROUNDS = 5
LOAD_KEYS = ("concurrency", "duration", "max_searches", "rounds", "warmup", "configs")


@dataclass(frozen=True, slots=True, kw_only=True)
class LoadSettings:
    """What a load measurement does (see the module docstring).

    >>> LoadSettings(concurrency=(1, 2), duration_s=2.0, rounds=2).window_s
    1.0
    """

    concurrency: tuple[int, ...] = DEFAULT_CONCURRENCY
    duration_s: float = DEFAULT_DURATION_S
    max_searches: int | None = None
    rounds: int = DEFAULT_ROUNDS
    warmup: int = 5  # unrecorded lookups per client process and config before the first window
    configs: tuple[str, ...] = ()  # empty: every config of the experiment

    @property
    def window_s(self) -> float:
        """Seconds of one window (one config, one round, one level)."""
        return self.duration_s / self.rounds

    def window_cap(self) -> int | None:
        """Lookups allowed in one window (``max_searches`` spread over the rounds), None without a cap."""
        return None if self.max_searches is None else math.ceil(self.max_searches / self.rounds)

    def as_dict(self) -> dict[str, Any]:
        return {
            "concurrency": list(self.concurrency),
            "duration_s": self.duration_s,
            "max_searches": self.max_searches,
            "rounds": self.rounds,
            "window_s": self.window_s,
            "warmup": self.warmup,
            "configs": list(self.configs),
        }


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def parse_concurrency(value: str | Sequence[Any], *, key: str) -> tuple[int, ...]:
    """Concurrency levels from ``"1,2,4,8"`` or a list, sorted; each in 1..MAX_CONCURRENCY, none twice."""
    items: list[Any]
    if isinstance(value, str):
        items = [part.strip() for part in value.split(",")]
        if not value.strip() or any(not part for part in items):
            raise ConfigError(
                [ConfigProblem(key, f"expected comma-separated integers such as 1,2,4,8, got {quoted(value)}")]
            )
        try:
            items = [int(part) for part in items]
        except ValueError:
            raise ConfigError(
                [ConfigProblem(key, f"expected comma-separated integers such as 1,2,4,8, got {quoted(value)}")]
            ) from None
    else:
        items = list(value)
        if not items or not all(_is_int(v) for v in items):
            raise ConfigError([ConfigProblem(key, f"expected a non-empty list of integers, got {quoted(value)}")])
    problems = [
        ConfigProblem(key, f"{v} is not within 1..{MAX_CONCURRENCY} client processes")
        for v in items
        if not 1 <= v <= MAX_CONCURRENCY
    ]
    problems += [ConfigProblem(key, f"{v} is given twice") for v in sorted({v for v in items if items.count(v) > 1})]
    if len(set(items)) > MAX_LEVELS:
        problems.append(ConfigProblem(key, f"{len(set(items))} levels: at most {MAX_LEVELS}"))
    if problems:
        raise ConfigError(problems)
    return tuple(sorted(items))


def settings_from_table(table: Mapping[str, Any], *, prefix: str = "load") -> tuple[LoadSettings, list[ConfigProblem]]:
    """An experiment's ``[load]`` table: the settings and every problem found (keys named ``load.KEY``)."""
    problems: list[ConfigProblem] = []
    changes: dict[str, Any] = {}
    for key, value in table.items():
        where = f"{prefix}.{key}"
        if key not in LOAD_KEYS:
            problems.append(ConfigProblem(as_written(where), f"unknown key (known: {', '.join(LOAD_KEYS)})"))
        elif key == "concurrency":
            try:
                changes["concurrency"] = parse_concurrency(value if isinstance(value, list) else [value], key=where)
            except ConfigError as err:
                problems.extend(err.problems)
        elif key == "duration":
            if isinstance(value, bool) or not isinstance(value, int | float):
                problems.append(ConfigProblem(where, f"expected seconds (a number), got {quoted(value)}"))
            else:
                changes["duration_s"] = float(value)
        elif key == "configs":
            if not isinstance(value, list) or not value or not all(isinstance(v, str) and v for v in value):
                problems.append(ConfigProblem(where, f"expected a non-empty list of config names, got {quoted(value)}"))
            else:
                changes["configs"] = tuple(value)
        elif not _is_int(value):
            problems.append(ConfigProblem(where, f"expected an integer, got {quoted(value)}"))
        else:
            changes[key] = value
    settings = replace(LoadSettings(), **changes)
    problems += bound_problems(settings, n_configs=max(1, len(settings.configs)), keys=_table_keys(prefix))
    return settings, problems


def _table_keys(prefix: str) -> dict[str, str]:
    return {
        "concurrency": f"{prefix}.concurrency",
        "duration_s": f"{prefix}.duration",
        "max_searches": f"{prefix}.max_searches",
        "rounds": f"{prefix}.rounds",
        "warmup": f"{prefix}.warmup",
    }


FLAG_KEYS = {
    "concurrency": "--concurrency",
    "duration_s": "--duration",
    "max_searches": "--max-searches",
    "rounds": "--rounds",
    "warmup": "--warmup",
}


def bound_problems(
    settings: LoadSettings, *, n_configs: int, keys: Mapping[str, str] = FLAG_KEYS
) -> list[ConfigProblem]:
    """Every bound the settings break, each named by its flag or key (``keys``)."""
    out: list[ConfigProblem] = []
    d = settings.duration_s
    if not math.isfinite(d) or not 0 < d <= MAX_DURATION_S:
        out.append(ConfigProblem(keys["duration_s"], f"must be > 0 and <= {MAX_DURATION_S:g} seconds, got {d:g}"))
    if settings.max_searches is not None and not 1 <= settings.max_searches <= MAX_SEARCHES:
        out.append(
            ConfigProblem(keys["max_searches"], f"must be within 1..{MAX_SEARCHES:,}, got {settings.max_searches}")
        )
    if not 2 <= settings.rounds <= MAX_ROUNDS:
        out.append(
            ConfigProblem(
                keys["rounds"],
                f"must be within 2..{MAX_ROUNDS} (two or more windows give the spread a gate needs), "
                f"got {settings.rounds}",
            )
        )
    if not 0 <= settings.warmup <= 1000:
        out.append(ConfigProblem(keys["warmup"], f"must be within 0..1000, got {settings.warmup}"))
    if out:
        return out
    if settings.window_s < MIN_WINDOW_S:
        out.append(
            ConfigProblem(
                keys["duration_s"],
                f"{d:g} s over {settings.rounds} rounds gives windows of {settings.window_s:.3g} s: each must be at "
                f"least {MIN_WINDOW_S:g} s (raise the duration or lower the rounds)",
            )
        )
    total = d * len(settings.concurrency) * n_configs
    if total > MAX_TOTAL_S:
        out.append(
            ConfigProblem(
                keys["duration_s"],
                f"{len(settings.concurrency)} levels x {n_configs} configs x {d:g} s = {total:g} s is over the "
                f"{MAX_TOTAL_S:g} s cap of one load measurement",
            )
        )
    return out


@dataclass(frozen=True, slots=True, kw_only=True)
class LoadFlags:
    """The ``rag-eval load`` flags a user gave (None: not given)."""

    concurrency: str | None = None
    duration: float | None = None
    max_searches: int | None = None
    rounds: int | None = None
    warmup: int | None = None
    configs: Sequence[str] | None = None


def with_flags(base: LoadSettings, flags: LoadFlags, *, known_configs: Sequence[str] = ()) -> LoadSettings:
    """``base`` (an experiment's ``[load]``, or the defaults) with the CLI flags on top, checked.

    >>> with_flags(LoadSettings(), LoadFlags(duration=0.0))
    Traceback (most recent call last):
    rag_eval.core.errors.ConfigError: 1 configuration problem: must be > 0 and <= 600 seconds, got 0 @ --duration
    """
    concurrency, duration, max_searches = flags.concurrency, flags.duration, flags.max_searches
    rounds, warmup, configs = flags.rounds, flags.warmup, flags.configs
    changes: dict[str, Any] = {}
    problems: list[ConfigProblem] = []
    if concurrency is not None:
        try:
            changes["concurrency"] = parse_concurrency(concurrency, key="--concurrency")
        except ConfigError as err:
            problems.extend(err.problems)
    for name, value in (("duration_s", duration), ("max_searches", max_searches), ("rounds", rounds),
                        ("warmup", warmup)):  # fmt: skip
        if value is not None:
            changes[name] = value
    if configs:
        changes["configs"] = tuple(configs)
    settings = replace(base, **changes)
    chosen = settings.configs or tuple(known_configs)
    unknown = [c for c in settings.configs if known_configs and c not in known_configs]
    if unknown:
        key = "--configs" if configs else "load.configs"
        problems.append(ConfigProblem(key, f"not a config of the experiment: {', '.join(map(repr, unknown))}"))
    dupes = sorted({c for c in settings.configs if settings.configs.count(c) > 1})
    if dupes:
        problems.append(ConfigProblem("--configs" if configs else "load.configs", f"given twice: {dupes}"))
    problems += bound_problems(settings, n_configs=max(1, len(chosen)))
    if problems:
        raise ConfigError(problems)
    return settings
