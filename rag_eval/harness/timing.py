"""How a replay measures search latency: the timing plan.

The retrieval pass searches in batches (many queries per call), which says nothing about the latency
of one lookup; so a config's search is also timed as production issues it: serially, one query per
call, ``perf_counter_ns`` around the call, after warm-up searches that are not recorded. That costs one
more search per timed query, so the plan chooses which queries are timed:

``all``     every query
``sample``  a fixed-size random sample of the queries (the default: 1,000, seed 0), the same queries
            for every config and on every run with the same seed; with no more queries than that,
            every query
``off``     none: search latency is not measured (its columns are empty, and so are e2e and QPS)

Configs whose searches are identical (same mode, filter, group size and retrieve-k) share one
measurement. Post-processing and projection are timed in the retrieval pass, for every query.

>>> plan = TimingPlan(mode=LatencyMode.SAMPLE, sample_size=3, seed=1)
>>> sorted(plan.timed(10)), sorted(plan.timed(10)) == sorted(TimingPlan(sample_size=3, seed=1).timed(10))
([1, 2, 4], True)
>>> TimingPlan.parse("sample:500").sample_size, TimingPlan.parse("off").timed(10)
(500, frozenset())
"""

from __future__ import annotations

import enum
import random
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

from rag_eval.core.errors import ConfigError, ConfigProblem, quoted

DEFAULT_SAMPLE = 1000


class LatencyMode(enum.StrEnum):
    ALL = "all"
    SAMPLE = "sample"
    OFF = "off"


@dataclass(frozen=True, slots=True, kw_only=True)
class TimingPlan:
    """Which queries get their search timed."""

    mode: LatencyMode = LatencyMode.SAMPLE
    sample_size: int = DEFAULT_SAMPLE
    seed: int = 0

    def timed(self, n_queries: int) -> frozenset[int]:
        """Indices (0-based, in query order) of the queries whose search is timed."""
        if self.mode is LatencyMode.OFF:
            return frozenset()
        if self.mode is LatencyMode.ALL or n_queries <= self.sample_size:
            return frozenset(range(n_queries))
        return frozenset(random.Random(self.seed).sample(range(n_queries), self.sample_size))

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
            if plan.mode is not LatencyMode.SAMPLE or not size.isdigit() or int(size) < 1:
                raise ConfigError([ConfigProblem("--latency", f"expected sample:N with N >= 1, got {quoted(text)}")])
            plan = replace(plan, sample_size=int(size))
        return plan


SEARCH_METHOD = (
    "serial: one query per call, perf_counter_ns around the call, after warm-up searches that are not recorded"
)
POSTPROCESS_METHOD = (
    "in the retrieval pass, every query: perf_counter_ns around everything after the search up to the "
    "blocks (post-process), and around the projection"
)


def latency_note(
    plan: TimingPlan, *, backend: str, warmup: int, queries: int, timing_seconds: float, replay_seconds: float = 0.0
) -> dict[str, Any]:
    """How the run's latency figures were measured, for ``summary.json`` and the report.

    ``timing_seconds`` is the wall time the timing searches took in this session (warm-up
    included; a resumed run's earlier sessions are not counted): the measurement's own cost, also
    given as its share of the whole replay's ``replay_seconds`` (timing included; None when unknown).
    """
    share = round(timing_seconds / replay_seconds, 4) if replay_seconds > 0 else None
    return {
        "backend": backend,
        "search": {
            **plan.as_dict(),
            "timed_queries": len(plan.timed(queries)),
            "queries": queries,
            "warmup": warmup,
            "method": SEARCH_METHOD,
            "timing_seconds": round(timing_seconds, 3),
            "replay_seconds": round(replay_seconds, 3),
            "timing_share_of_replay": share,
        },
        "postprocess": {"method": POSTPROCESS_METHOD, "timed_queries": queries},
    }


def label_search_timing(
    summary_configs: dict[str, Any], groups: Mapping[str, tuple[str, list[str]]]
) -> dict[str, Any]:
    """Add to each config's ``search_latency`` the search it timed and the configs sharing that measurement."""
    for name, cfg in summary_configs.items():
        label, members = groups[name]
        cfg.setdefault("search_latency", {}).update(
            timed_search=label, shared_with=[m for m in members if m != name]
        )
    return summary_configs
