"""How a replay measures search latency: the timing plan.

The retrieval pass searches in batches, which says nothing about the latency of one lookup, so a config's
search is also timed as production issues it, serially, one query per call; that costs one more search per
timed query, so the plan chooses which (``all``, a seeded ``sample``, ``off``). Post-process and projection
are timed for every query, the configs in a per-query order rotated each round so none pays for cold caches
more often. The rules: docs/harness.md, "Latency: which queries are timed" and "Replay".

>>> plan = TimingPlan(mode=LatencyMode.SAMPLE, sample_size=3, seed=1)
>>> sorted(plan.timed(10)), sorted(plan.timed(10)) == sorted(TimingPlan(sample_size=3, seed=1).timed(10))
([1, 2, 4], True)
>>> TimingPlan.parse("sample:500").sample_size, TimingPlan.parse("off").timed(10)
(500, frozenset())
>>> TimingPlan(seed=1).config_orders(3, query_index=7, rounds=4)
[[1, 2, 0], [2, 0, 1], [0, 1, 2], [1, 2, 0]]
>>> TimingPlan(seed=1).config_orders(1, query_index=7, rounds=2), TimingPlan().config_orders(0, query_index=0, rounds=1)
([[0], [0]], [[]])
"""

from __future__ import annotations

import enum
import random
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

from rag_eval.core.errors import ConfigError, ConfigProblem, quoted
from rag_eval.core.parsing import ascii_int

DEFAULT_SAMPLE = 1000
DEFAULT_POSTPROCESS_REPEATS = 5


class LatencyMode(enum.StrEnum):
    ALL = "all"
    SAMPLE = "sample"
    OFF = "off"


@dataclass(frozen=True, slots=True, kw_only=True)
class TimingPlan:
    """Which queries get their search timed."""

    mode: LatencyMode = LatencyMode.SAMPLE
    sample_size: int = DEFAULT_SAMPLE
    seed: int = 0  # the sample's, and the order configs are post-processed in per query
    postprocess_repeats: int = DEFAULT_POSTPROCESS_REPEATS

    def timed(self, n_queries: int) -> frozenset[int]:
        """Indices (0-based, in query order) of the queries whose search is timed."""
        if self.mode is LatencyMode.OFF:
            return frozenset()
        if self.mode is LatencyMode.ALL or n_queries <= self.sample_size:
            return frozenset(range(n_queries))
        return frozenset(random.Random(self.seed).sample(range(n_queries), self.sample_size))

    @property
    def rounds(self) -> tuple[int, int]:
        """(warm-up rounds, timed rounds) of each query's post-processing: one round each with latency off."""
        if self.mode is LatencyMode.OFF:
            return 0, 1
        return 1, self.postprocess_repeats

    def config_orders(self, configs: int, *, query_index: int, rounds: int) -> list[list[int]]:
        """The orders the ``configs`` are post-processed in for one query, round by round: a permutation
        drawn from (seed, query index) (:func:`_permutation`), so a batch gives the same orders wherever and
        whenever it runs, rotated by one place each round."""
        order = _permutation(configs, self.seed, query_index)
        return [order[r % configs :] + order[: r % configs] if configs else [] for r in range(rounds)]

    def as_dict(self) -> dict[str, Any]:
        return {"mode": self.mode.value, "sample_size": self.sample_size, "seed": self.seed}

    @classmethod
    def parse(cls, text: str, base: TimingPlan | None = None) -> TimingPlan:
        """``all``, ``off``, ``sample`` or ``sample:N`` (the ``--latency`` flag), on top of ``base``."""
        start = base or cls()
        mode, _, size = text.strip().partition(":")
        try:
            plan = replace(start, mode=LatencyMode(mode))
        except ValueError:
            raise ConfigError(
                [ConfigProblem("--latency", f"expected all, off, sample or sample:N, got {quoted(text)}")]
            ) from None
        if size:
            n = ascii_int(size)
            if plan.mode is not LatencyMode.SAMPLE or n is None or n < 1:
                raise ConfigError([ConfigProblem("--latency", f"expected sample:N with N >= 1, got {quoted(text)}")])
            plan = replace(plan, sample_size=n)
        return plan


SEARCH_METHOD = (
    "serial: one query per call, perf_counter_ns around the call, after warm-up searches that are not recorded"
)
POSTPROCESS_METHOD = (
    "in the retrieval pass, every query: perf_counter_ns around everything after the search up to the "
    "blocks (post-process) and around the projection, thread_time_ns around both; every config in turn, in "
    "an order drawn per query from the seed and rotated by one place each round, after one warm-up round; "
    "the median of the rounds"
)


@dataclass(frozen=True, slots=True)
class ReplayCost:
    """What a session's replay cost: the wall time of its timing searches (warm-up included; a resumed run's
    earlier sessions are not counted), of the whole replay (timing included; 0: unknown), and the CPU time this
    process spent in that replay (all its threads)."""

    timing_seconds: float
    replay_seconds: float = 0.0
    replay_cpu_seconds: float = 0.0


def latency_note(plan: TimingPlan, *, backend: str, warmup: int, queries: int, cost: ReplayCost) -> dict[str, Any]:
    """How the run's latency figures were measured, for ``summary.json`` and the report.

    ``cost.timing_seconds`` is the measurement's own cost, also given as its share of the whole replay's
    ``replay_seconds`` (None when unknown). ``replay_cpu_seconds`` is also given as a share of the replay's
    wall time: near 1 or above, the replay is bound by its own work; well below 1, it mostly waits (on a Milvus
    server, or on workers that replay the batches).
    """
    replay_seconds = cost.replay_seconds
    share = round(cost.timing_seconds / replay_seconds, 4) if replay_seconds > 0 else None
    cpu_share = round(cost.replay_cpu_seconds / replay_seconds, 4) if replay_seconds > 0 else None
    return {
        "backend": backend,
        "search": {
            **plan.as_dict(),
            "timed_queries": len(plan.timed(queries)),
            "queries": queries,
            "warmup": warmup,
            "method": SEARCH_METHOD,
            "timing_seconds": round(cost.timing_seconds, 3),
            "replay_seconds": round(replay_seconds, 3),
            "timing_share_of_replay": share,
            "replay_cpu_seconds": round(cost.replay_cpu_seconds, 3),
            "replay_cpu_share": cpu_share,
        },
        "postprocess": {
            "method": POSTPROCESS_METHOD,
            "timed_queries": queries,
            "warmup_rounds": plan.rounds[0],
            "repeats": plan.rounds[1],
            "order_seed": plan.seed,
        },
    }


def label_search_timing(summary_configs: dict[str, Any], groups: Mapping[str, tuple[str, list[str]]]) -> dict[str, Any]:
    """Add to each config's ``search_latency`` the search it timed and the configs sharing that measurement."""
    for name, cfg in summary_configs.items():
        label, members = groups[name]
        cfg.setdefault("search_latency", {}).update(timed_search=label, shared_with=[m for m in members if m != name])
    return summary_configs


_MASK = (1 << 64) - 1
_GOLDEN = 0x9E3779B97F4A7C15  # splitmix64's increment: 2**64 / the golden ratio


def _permutation(n: int, seed: int, index: int) -> list[int]:
    """``range(n)`` shuffled (Fisher-Yates) by splitmix64 (Steele, Lea and Flood, "Fast splittable pseudorandom
    number generators", OOPSLA 2014) started from (``seed``, ``index``): every permutation about equally likely,
    the same on every machine and Python, and under 1 us for two configs (a seeded ``random.Random`` costs
    6 us to seed, once per query of a replay).

    >>> _permutation(3, 0, 7) == _permutation(3, 0, 7), sorted(_permutation(5, 1, 2)), _permutation(1, 0, 0)
    (True, [0, 1, 2, 3, 4], [0])
    """
    order = list(range(n))
    state = ((seed & _MASK) * _GOLDEN + index) & _MASK
    for i in range(n - 1, 0, -1):
        state = (state + _GOLDEN) & _MASK
        z = ((state ^ (state >> 30)) * 0xBF58476D1CE4E5B9) & _MASK
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & _MASK
        j = (z ^ (z >> 31)) % (i + 1)
        order[i], order[j] = order[j], order[i]
    return order
