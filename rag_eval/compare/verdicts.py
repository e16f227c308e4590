"""One verdict per number: each compared metric's p-value, Holm adjustment, interval and ``significant``
flag, decided once over one stated family, and read by everything that shows the number.

Two Holm families per comparison set (``gates``: the metrics a relative gate names, one-sided; ``descriptive``:
every other tested metric, two-sided), so a number is never tested twice under two corrections; a star never
sits beside an interval that includes zero, and a p-value near alpha is drawn again with more resamples
(:data:`MC_Z`, :data:`MC_ROUNDS`) so a verdict is not the luck of one seed. The rules: docs/deciding.md,
"Which test, and why" (one verdict per number; not Monte Carlo luck).

>>> round(step_level(0.05, family=4, rank=0), 4), step_level(0.05, family=4, rank=3)
(0.0125, 0.05)
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np

from rag_eval.compare.catalog import RATIO_KINDS, Metric
from rag_eval.compare.stats import Alternative, Paired, bound, holm

Family = Literal["gates", "descriptive"]
MC_Z = 3.0  # a p-value this many Monte Carlo standard errors from the threshold is settled
MC_ROUNDS = 2  # redraws, at most, for a p-value near the threshold: 4x, then 16x the resamples
FAMILY_TEXT = (
    "Holm within two families: the metrics a relative gate names (one-sided, in the gate's direction, over the "
    "relative gates of every comparison) and every other tested metric (two-sided); identical values (p = 1), "
    "invariants and metrics on too few units are in neither; significant = Holm-adjusted p < alpha and the "
    "interval at the Holm step's level (same bootstrap resamples) excludes 0"
)


@dataclass(frozen=True, slots=True, kw_only=True)
class Verdict:
    """The one verdict of a number: its family, Holm-adjusted p, the interval it was held to, the flag."""

    family: Family | None = None
    alternative: Alternative = "two-sided"
    p_holm: float | None = None
    significant: bool = False
    level: float | None = None  # the Holm step's significance level (the interval's is 1 - level)
    ci_low: float = math.nan  # the interval of the tested statistic (difference, or ratio) at that level
    ci_high: float = math.nan
    p_mc_error: float | None = None


def step_level(alpha: float, *, family: int, rank: int) -> float:
    """Holm's level at the (0-based) ``rank`` of a family of ``family`` p-values."""
    return alpha / max(1, family - rank)


def gate_alternative(metric: Metric) -> Alternative:
    """The one-sided question a relative gate asks of ``metric``: a drop if higher is better, else a growth."""
    return "less" if metric.higher_is_better else "greater"


Key = tuple[int, str]  # (comparison index, metric name)
# (keys, round) -> {key: the number drawn again}: interval and p-value together, with 4**round times the resamples
Redraw = Callable[[Sequence[Key], int], Mapping[Key, Paired]]


def decide(
    tested: Mapping[Key, tuple[Metric, Paired]],
    families: Mapping[Key, Family],
    *,
    alpha: float,
    redraw: Redraw,
) -> tuple[dict[Key, Verdict], dict[Key, Paired]]:
    """The verdict of every tested number (by family), and the comparisons with their p-values redrawn
    where they lay near the threshold."""
    papers = {k: p for k, (_, p) in tested.items()}
    verdicts: dict[Key, Verdict] = {}
    for family in ("gates", "descriptive"):
        members = [k for k in tested if families.get(k) == family and _testable(papers[k])]
        for attempt in range(MC_ROUNDS + 1):
            out = _holm_family(members, tested, papers, family=family, alpha=alpha)
            unsettled = [k for k in members if _near(out[k], alpha)] if attempt < MC_ROUNDS else []
            if not unsettled:
                break
            papers.update(redraw(unsettled, attempt + 1))
        verdicts.update(out)
    for k, (_, p) in tested.items():
        if k not in verdicts:
            verdicts[k] = Verdict(alternative=p.alternative, p_holm=p.p_value if p.identical else None)
    return verdicts, papers


def _testable(p: Paired) -> bool:
    return p.p_value is not None and not p.identical


def _near(v: Verdict, alpha: float) -> bool:
    if v.p_holm is None or not v.p_mc_error or v.level is None:
        return False
    return abs(v.p_holm - alpha) < MC_Z * v.p_mc_error  # the verdict's error carries Holm's multiplier already


def _holm_family(
    members: Sequence[Key],
    tested: Mapping[Key, tuple[Metric, Paired]],
    papers: Mapping[Key, Paired],
    *,
    family: Family,
    alpha: float,
) -> dict[Key, Verdict]:
    adjusted = holm([papers[k].p_value for k in members])
    order = sorted(range(len(members)), key=lambda i: (papers[members[i]].p_value or 1.0, i))
    rank = {members[i]: r for r, i in enumerate(order)}
    out = {}
    for k, p_holm in zip(members, adjusted, strict=True):
        metric, p = tested[k][0], papers[k]
        level = step_level(alpha, family=len(members), rank=rank[k])
        low, high = held_interval(metric, p, level=level)
        # the test and the interval are one statistic (a t-test and its t interval; a bootstrap interval
        # inverted), so the Holm-adjusted p decides; the 95% interval shown must exclude no change too
        out[k] = Verdict(
            family=family, alternative=p.alternative, p_holm=p_holm, level=level, ci_low=low, ci_high=high,
            significant=p_holm is not None and p_holm < alpha and _shown_excludes(metric, p),
            p_mc_error=None if p.p_mc_error is None else min(1.0, p.p_mc_error * alpha / level),
        )  # fmt: skip
    return out


def held_interval(metric: Metric, p: Paired, *, level: float) -> tuple[float, float]:
    """The interval of the tested statistic at significance ``level``: two-sided, or one-sided (one end
    infinite) for a one-sided test; of the ratio for ratio kinds (the test's statistic is its log)."""
    log = metric.kind in RATIO_KINDS
    one_sided = p.alternative != "two-sided"
    confidence = 1 - level if one_sided else 1 - level / 2
    low = -math.inf if p.alternative == "less" else bound(p, level=confidence, upper=False, log_ratio=log)
    high = math.inf if p.alternative == "greater" else bound(p, level=confidence, upper=True, log_ratio=log)
    if log:
        return float(np.exp(low)), float(np.exp(high))
    return low, high


def _shown_excludes(metric: Metric, p: Paired) -> bool:
    """The 95% interval the reports show (of the difference, and of the ratio) excludes no-change too."""

    def off(low: float | None, high: float | None, zero: float) -> bool:
        return low is not None and high is not None and (low > zero or high < zero)

    if metric.kind in RATIO_KINDS:
        return off(p.ci_low, p.ci_high, 0.0) and off(p.ratio_ci_low, p.ratio_ci_high, 1.0)
    return off(p.ci_low, p.ci_high, 0.0)
