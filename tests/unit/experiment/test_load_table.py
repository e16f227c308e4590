"""The ``[load]`` table and the ``rag-eval load`` flags on top: levels, bounds (each named by its key or
flag), and the configs a measurement covers."""

from __future__ import annotations

from typing import Any

import pytest

from rag_eval.core.errors import ConfigError
from rag_eval.experiment.load_table import (
    LoadFlags,
    LoadSettings,
    bound_problems,
    parse_concurrency,
    settings_from_table,
    with_flags,
)


def problems_of(call: Any, *args: Any, **kwargs: Any) -> list[tuple[str, str]]:
    with pytest.raises(ConfigError) as err:
        call(*args, **kwargs)
    return [(p.key, p.message) for p in err.value.problems]


def test_a_settings_window_and_its_cap() -> None:
    settings = LoadSettings(duration_s=10.0, rounds=4, max_searches=10)
    assert settings.window_s == 2.5 and settings.window_cap() == 3  # ceil(10 / 4)
    assert LoadSettings().window_cap() is None
    assert LoadSettings().as_dict() == {"concurrency": [1, 2, 4, 8], "duration_s": 10.0, "max_searches": None,
                                        "rounds": 5, "window_s": 2.0, "warmup": 5, "configs": []}  # fmt: skip


@pytest.mark.parametrize(
    ("value", "levels"), [("8,1,4", (1, 4, 8)), (" 2 , 1 ", (1, 2)), ([64, 1], (1, 64)), ("1", (1,))]
)
def test_concurrency_levels_sorted(value: Any, levels: tuple[int, ...]) -> None:
    assert parse_concurrency(value, key="k") == levels


@pytest.mark.parametrize(
    ("value", "messages"),
    [
        ("", ["expected comma-separated integers such as 1,2,4,8, got ''"]),
        ("1,,2", ["expected comma-separated integers such as 1,2,4,8, got '1,,2'"]),
        ("1,two", ["expected comma-separated integers such as 1,2,4,8, got '1,two'"]),
        ([], ["expected a non-empty list of integers, got []"]),
        ([1, True], ["expected a non-empty list of integers, got [1, True]"]),
        ("0,65,2,2", ["0 is not within 1..64 client processes", "65 is not within 1..64 client processes",
                      "2 is given twice"]),
        (list(range(1, 14)), ["13 levels: at most 12"]),
    ],
)  # fmt: skip
def test_concurrency_levels_out_of_bounds_or_given_twice_are_each_a_problem(value: Any, messages: list[str]) -> None:
    assert problems_of(parse_concurrency, value, key="--concurrency") == [("--concurrency", m) for m in messages]


def test_the_load_table_read_with_every_problem_named_by_its_key() -> None:
    settings, problems = settings_from_table({"concurrency": [1, 2], "duration": 4, "rounds": 2, "configs": ["a"]})
    assert settings == LoadSettings(concurrency=(1, 2), duration_s=4.0, rounds=2, configs=("a",)) and problems == []
    settings, problems = settings_from_table({"concurrency": 3})
    assert settings.concurrency == (3,) and problems == []
    _, problems = settings_from_table({"duration": "10", "rounds": 2.0, "configs": [], "colour": 1, "concurrency": [0]})
    assert [(p.key, p.message) for p in problems] == [
        ("load.duration", "expected seconds (a number), got '10'"),
        ("load.rounds", "expected an integer, got 2.0"),
        ("load.configs", "expected a non-empty list of config names, got []"),
        ("load.colour", "unknown key (known: concurrency, duration, max_searches, rounds, warmup, configs)"),
        ("load.concurrency", "0 is not within 1..64 client processes"),
    ]
    _, problems = settings_from_table({"duration": True})
    assert [(p.key, p.message) for p in problems] == [("load.duration", "expected seconds (a number), got True")]


@pytest.mark.parametrize(
    ("settings", "n_configs", "expected"),
    [
        (LoadSettings(), 1, []),
        (LoadSettings(duration_s=0.0), 1, [("--duration", "must be > 0 and <= 600 seconds, got 0")]),
        (LoadSettings(duration_s=float("nan")), 1, [("--duration", "must be > 0 and <= 600 seconds, got nan")]),
        (LoadSettings(max_searches=0, rounds=1, warmup=1001), 1, [
            ("--max-searches", "must be within 1..10,000,000, got 0"),
            ("--rounds", "must be within 2..20 (two or more windows give the spread a gate needs), got 1"),
            ("--warmup", "must be within 0..1000, got 1001")]),
        (LoadSettings(duration_s=1.0, rounds=10), 1, [
            ("--duration", "1 s over 10 rounds gives windows of 0.1 s: each must be at least 0.2 s (raise the "
             "duration or lower the rounds)")]),
        (LoadSettings(duration_s=600.0), 2, [
            ("--duration", "4 levels x 2 configs x 600 s = 4800 s is over the 3600 s cap of one load measurement")]),
        (LoadSettings(duration_s=450.0), 2, []),  # 4 x 2 x 450 = 3600: at the cap
    ],
)  # fmt: skip
def test_the_bounds_each_named_by_its_flag(
    settings: LoadSettings, n_configs: int, expected: list[tuple[str, str]]
) -> None:
    assert [(p.key, p.message) for p in bound_problems(settings, n_configs=n_configs)] == expected


def test_the_flags_on_top_of_the_table() -> None:
    base = LoadSettings(concurrency=(1, 2), duration_s=4.0, rounds=2, configs=("a",))
    assert with_flags(base, LoadFlags()) == base
    got = with_flags(base, LoadFlags(concurrency="4", duration=2.0, warmup=0, configs=["b", "c"]),
                     known_configs=["a", "b", "c"])  # fmt: skip
    assert got == LoadSettings(concurrency=(4,), duration_s=2.0, rounds=2, warmup=0, configs=("b", "c"))


def test_flags_that_break_a_bound_or_name_an_unknown_config_are_each_a_problem() -> None:
    base = LoadSettings(configs=("a", "zz"))
    assert problems_of(with_flags, base, LoadFlags(), known_configs=["a", "b"]) == [
        ("load.configs", "not a config of the experiment: 'zz'")
    ]
    assert problems_of(
        with_flags, LoadSettings(), LoadFlags(configs=["b", "b"], concurrency="x", rounds=1), known_configs=["a", "b"]
    ) == [
        ("--concurrency", "expected comma-separated integers such as 1,2,4,8, got 'x'"),
        ("--configs", "given twice: ['b']"),
        ("--rounds", "must be within 2..20 (two or more windows give the spread a gate needs), got 1"),
    ]
    # every config of the experiment counts towards the total when none is chosen: 4 x 3 x 301 = 3612 s
    assert problems_of(with_flags, LoadSettings(duration_s=301.0), LoadFlags(), known_configs=["a", "b", "c"]) == [
        ("--duration", "4 levels x 3 configs x 301 s = 3612 s is over the 3600 s cap of one load measurement")
    ]
    chosen = with_flags(LoadSettings(duration_s=301.0), LoadFlags(configs=["a"]), known_configs=["a", "b", "c"])
    assert chosen.configs == ("a",)  # 4 x 1 x 301 = 1204 s
