"""The checks of a gates file and their outcomes: an absolute check on a config's own value, a relative
check against the baseline (see :class:`RelativeCheck` for when it fires, passes or is underpowered).

>>> c = AbsoluteCheck(spec="fail cap_compliance == 1", severity="fail", metric="cap_compliance", threshold=1.0,
...                   op="==")
>>> c.evaluate(1.0).outcome, c.id
('pass', 'cap_compliance == 1')
"""

from __future__ import annotations

import fnmatch
import math
import operator
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

from scipy.special import ndtri  # scipy.stats.norm.ppf

from rag_eval.compare.catalog import RATIO_KINDS, Metric
from rag_eval.compare.stats import Paired, Rule, Settings, bound, minimum_detectable
from rag_eval.core.errors import GatesError

Severity = Literal["fail", "warn"]
Outcome = Literal["pass", "warn", "fail", "underpowered", "error"]

_OPS: Mapping[str, Callable[[float, float], bool]] = {
    "==": lambda a, b: math.isclose(a, b, rel_tol=0.0, abs_tol=1e-12),
    "!=": lambda a, b: not math.isclose(a, b, rel_tol=0.0, abs_tol=1e-12),
    "<=": lambda a, b: a <= b + 1e-12,
    ">=": lambda a, b: a >= b - 1e-12,
    "<": operator.lt,
    ">": operator.gt,
}

# what a relative gate's outcome means under each fire rule (compare.json's ``rule_meaning``; the reports say it)
RULE_MEANING: Mapping[Rule, Mapping[str, str]] = {
    "threshold": {
        "fail": "the change is shown to be beyond the allowed one (its one-sided bound at the gate's level is past "
        "the threshold: a change of exactly the allowed size fails in at most alpha of runs)",
        "pass": "the change is shown to be within the allowed one (its one-sided bound is within the threshold)",
        "underpowered": "neither is shown: the change is too near the threshold for these queries; measure more",
    },
    "zero": {
        "fail": "the change differs from none (significant) and its estimate is past the threshold (a change of "
        "exactly the allowed size fails in about half of runs)",
        "pass": "the change is shown to be within the allowed one (its one-sided bound is within the threshold)",
        "underpowered": "neither: the change is too near the threshold for these queries; measure more",
    },
}


@dataclass(frozen=True, slots=True, kw_only=True)
class GateResult:
    """The outcome of one check on one comparison (the ``gates`` entries of compare.json)."""

    id: str
    spec: str
    metric: str
    severity: Severity
    outcome: Outcome
    message: str
    value: float | None = None
    threshold: float | None = None
    mde: float | None = None
    p_value: float | None = None  # the relative check's p-value, Holm-adjusted over the relative checks
    kind: Literal["absolute", "relative"] = "absolute"
    units_needed: int | None = None  # an underpowered check: the units that would decide it at this change


@dataclass(frozen=True, slots=True, kw_only=True)
class Check:
    """What every check has: its text, where it was written, whom it applies to."""

    spec: str
    severity: Severity
    metric: str
    threshold: float
    selector: tuple[tuple[str, str], ...] = ()
    path: str = ""
    line: int | None = None

    @property
    def id(self) -> str:
        text = " ".join(self.spec.split())
        return text.split(" ", 1)[1] if text.startswith(("fail ", "warn ")) else text

    def applies_to(self, config: Mapping[str, Any]) -> bool:
        return all(fnmatch.fnmatchcase(str(config.get(key, "")), glob) for key, glob in self.selector)

    def error(self, message: str) -> GatesError:
        return GatesError(message, path=self.path, line=self.line, check=self.spec)

    def result(self, outcome: Outcome, message: str, **values: Any) -> GateResult:
        kind: Literal["absolute", "relative"] = "relative" if isinstance(self, RelativeCheck) else "absolute"
        return GateResult(
            id=self.id, spec=self.spec, metric=self.metric, severity=self.severity, outcome=outcome,
            message=message, kind=kind, **values,
        )  # fmt: skip

    def breached(self) -> Outcome:
        return "fail" if self.severity == "fail" else "warn"


@dataclass(frozen=True, slots=True, kw_only=True)
class AbsoluteCheck(Check):
    """``METRIC OP NUMBER`` on the candidate's own value.

    >>> c = AbsoluteCheck(spec="cap_compliance == 1", severity="fail", metric="cap_compliance", threshold=1.0, op="==")
    >>> c.evaluate(0.5).outcome, c.evaluate(1.0).outcome
    ('fail', 'pass')
    """

    op: str

    def evaluate(self, value: float) -> GateResult:
        if not math.isfinite(value):
            return self.result("error", f"{self.metric} is not defined for this config (no units to measure it on)")
        held = _OPS[self.op](value, self.threshold)
        verdict = "holds" if held else "does not hold"
        message = f"{self.metric} = {_fmt(value)}: {self.op} {_fmt(self.threshold)} {verdict}"
        return self.result("pass" if held else self.breached(), message, value=value, threshold=self.threshold)


@dataclass(frozen=True, slots=True, kw_only=True)
class RelativeCheck(Check):
    """``METRIC drop|growth <= NUMBER[%]`` against the baseline.

    When it fires is the settings' ``rule``. ``threshold`` (the default): the change is significantly
    beyond the threshold, its one-sided lower bound at the gate's level (``1 - alpha / family``, Holm's
    first step) past it. ``zero``: the change in the bad direction exceeds the threshold *and* the
    metric's one verdict is significant (a one-sided paired test against no change, Holm-adjusted over
    every relative check of the comparison set: see :mod:`rag_eval.compare.verdicts`); a change of
    exactly the threshold then fails about half the time. A latency check must also clear timing noise
    under either rule: the whole interval of the change lies beyond the threshold. It passes only when the
    data rule out a change beyond the threshold: the one-sided bound of the change at the gate's level
    (``1 - alpha``, from the same bootstrap resamples) is within it, on at least :func:`min_units` units
    (an equivalence-style test). Otherwise it is ``underpowered``, never a silent pass: identical values
    on too few units included.
    """

    direction: Literal["drop", "growth"]
    relative: bool  # threshold given in % of the baseline

    def evaluate(
        self, metric: Metric, paired: Paired, *, p_adjusted: float | None, settings: Settings, family: int,
        significant: bool | None = None,
    ) -> GateResult:
        """The outcome; ``significant`` is the number's verdict (default: ``p_adjusted < alpha``)."""
        change, worst, best, se = self._change(metric, paired)
        unit = "%" if self.relative else ""
        if not math.isfinite(change):
            if paired.n == 0:  # e.g. a baseline run written before this measure was recorded
                return self.result("error", f"{self.metric} is not measured on both sides (n = 0): compare with a "
                                   "run that records it (accept a new baseline)")  # fmt: skip
            return self.result("error", f"{self.metric}: the change is not defined (n = {paired.n})")
        alpha_each = settings.alpha / max(1, family)  # Holm's first step: a bound for every step
        mde = minimum_detectable(se, alpha=alpha_each, power=settings.power)
        if self.relative and metric.kind in RATIO_KINDS and math.isfinite(mde):
            mde = math.expm1(mde)
        if significant is None:
            significant = p_adjusted is not None and p_adjusted < settings.alpha
        beyond_noise = metric.kind != "latency" or best > self.threshold
        upper = self._bound(metric, paired, level=1 - settings.alpha)
        pct = self.relative

        def f(v: float) -> str:
            return f"{_fmt(v, pct=pct)}{unit}"

        shown, limit, interval = f(change), f(self.threshold), f"[{_fmt(best, pct=pct)}, {_fmt(worst, pct=pct)}]{unit}"
        p_text = "n/a" if p_adjusted is None else f"{p_adjusted:.4g}"
        values = {"value": change, "threshold": self.threshold, "mde": mde, "p_value": p_adjusted}
        enough = paired.n >= min_units(alpha_each)
        if settings.rule == "threshold":  # significantly beyond the threshold, at the gate's level
            lower = self._bound(metric, paired, level=1 - alpha_each, worse=False)
            if enough and beyond_noise and math.isfinite(lower) and lower > self.threshold:
                message = (
                    f"{self.metric} {self.direction} {shown} (interval {interval}, n = {paired.n}): its one-sided "
                    f"{1 - alpha_each:.4g} lower bound {f(lower)} is beyond the allowed {limit}"
                )
                return self.result(self.breached(), message, **values)
        elif change > self.threshold and significant and beyond_noise:
            message = (
                f"{self.metric} {self.direction} {shown} (interval {interval}, one-sided p = {p_text} "
                f"Holm-adjusted, n = {paired.n}) exceeds the allowed {limit}"
            )
            return self.result(self.breached(), message, **values)
        if enough and math.isfinite(upper) and upper <= self.threshold + 1e-12:
            message = (
                f"{self.metric} {self.direction} {shown} (interval {interval}, one-sided p = {p_text} Holm-adjusted): "
                f"its one-sided {1 - settings.alpha:.0%} bound {f(upper)} rules out a {self.direction} beyond {limit}"
            )
            return self.result("pass", message, **values)
        if not enough:
            fewest = min_units(alpha_each)
            units = "1 unit is" if paired.n == 1 else f"{paired.n} units are"
            reason = f"{units} too few to test at alpha {alpha_each:.3g} (at least {fewest})"
        elif not math.isfinite(mde) or mde > self.threshold:
            reason = (
                f"{paired.n} units cannot detect a {self.direction} of {limit} at alpha {alpha_each:.3g} and "
                f"{settings.power:.0%} power (smallest detectable {f(mde)}), and the one-sided "
                f"{1 - settings.alpha:.0%} bound {f(upper)} does not rule one out"
            )
        else:  # detectable in principle; this change sits too near the threshold to be ruled out or in
            reason = (
                f"the one-sided {1 - settings.alpha:.0%} bound {f(upper)} does not rule out a {self.direction} "
                f"beyond {limit}, nor is one shown (smallest detectable at {settings.power:.0%} power: {f(mde)})"
            )
        needed = units_needed(paired.n, mde=mde, change=change, threshold=self.threshold)
        if needed is not None:
            reason += f"; about {needed:,} units would decide it if the change stays {shown}"
        message = f"underpowered: {reason}; observed {shown}, interval {interval}"
        return self.result("underpowered", message, units_needed=needed, **values)

    def _bound(self, metric: Metric, p: Paired, *, level: float, worse: bool = True) -> float:
        """The one-sided bound, at ``level``, of the change in the bad direction (the threshold's unit): its
        upper bound (``worse``) or its lower bound; of the t interval for a mean, else from the bootstrap
        resamples; from the normal approximation when there are none, else the two-sided interval's end."""
        change, worst_end, best_end, se = self._change(metric, p)
        worst = worst_end if worse else best_end
        growth = self.direction == "growth"
        upper = growth == worse  # a drop's upper bound is the lower bound of the difference
        if self.relative and metric.kind in RATIO_KINDS:
            log = bound(p, level=level, upper=upper, log_ratio=True)
            if math.isfinite(log):
                return math.expm1(log) if growth else -math.expm1(log)
        else:
            scale = abs(p.baseline) if self.relative else 1.0
            d = bound(p, level=level, upper=upper)
            if math.isfinite(d) and scale > 0:
                return (d if growth else -d) / scale
        if math.isfinite(se) and math.isfinite(change):
            z = float(ndtri(level)) * se  # se of the log ratio: about that of the ratio
            return change + z if worse else change - z
        return worst  # the end of the two-sided interval on that side: a wider bound

    def _change(self, metric: Metric, p: Paired) -> tuple[float, float, float, float]:
        """(change, worst end, best end of its interval, standard error), positive = worse."""
        sign = -1.0 if self.direction == "drop" else 1.0
        if self.relative and metric.kind in RATIO_KINDS:
            ratio, low, high = p.ratio or math.nan, p.ratio_ci_low or math.nan, p.ratio_ci_high or math.nan
            if sign > 0:
                return ratio - 1, high - 1, low - 1, p.se_log_ratio or math.nan
            return 1 - ratio, 1 - low, 1 - high, p.se_log_ratio or math.nan
        scale = abs(p.baseline) if self.relative else 1.0
        if scale == 0 or not math.isfinite(scale):
            return math.nan, math.nan, math.nan, math.nan
        ends = sorted((sign * p.ci_low / scale, sign * p.ci_high / scale))
        return sign * p.delta / scale, ends[1], ends[0], p.se / scale


def units_needed(n: int, *, mde: float, change: float, threshold: float) -> int | None:
    """How many units (queries, for a per-query measure) a check that is underpowered on ``n`` would need to
    be decided, if the change stays what it is: the smallest detectable change falls as 1/sqrt(n), and the
    gap to decide is the distance between the change and the threshold (normal approximation, the power of
    the gates file). None when it cannot be said (no spread measured, or the change sits on the threshold).

    >>> units_needed(264, mde=0.03, change=0.0, threshold=0.02)
    594
    >>> units_needed(264, mde=0.03, change=0.02, threshold=0.02) is None
    True
    """
    gap = abs(threshold - change)
    if n <= 0 or gap <= 1e-12 or not math.isfinite(mde) or mde <= 0:
        return None
    return max(n, math.ceil(n * (mde / gap) ** 2))


def min_units(alpha: float) -> int:
    """The fewest units on which a paired sign-flip test can reach ``alpha`` one-sided (2**-n <= alpha):
    fewer, and no data can show a change is ruled out or real.

    >>> min_units(0.05), min_units(0.0125)
    (5, 7)
    """
    return max(2, math.ceil(math.log2(1 / alpha) - 1e-9))


def _fmt(value: float | None, *, pct: bool = False) -> str:
    if value is None or not math.isfinite(value):
        return "n/a"
    value += 0.0  # no "-0"
    if pct:
        return f"{value * 100:.1f}"
    return f"{value:.4g}"
