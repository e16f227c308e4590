"""Paired statistics: a randomisation test, a bootstrap interval, power, Holm (scipy their oracle).

Both configs were measured on the same units (a query, or a (query, document) pair), so every procedure here
is paired: an exact randomisation test of the metric's own difference for few units, Student's t interval
for a mean and a bootstrap for any other kind
(:mod:`rag_eval.compare.bootstrap`), and the minimum detectable difference at a given power. Units are passed
as index arrays, so one code path serves every kind of metric (a rate or a percentile resamples whole units
too). Which test and why: docs/deciding.md, "Which test, and why".

>>> rng = np.random.default_rng(0)
>>> a = rng.normal(size=50); b = a + 0.5
>>> r = paired_compare(a, b, Pairing(kind="mean", settings=Settings(resamples=999)), rng=np.random.default_rng(1))
>>> round(r.delta, 3), r.p_value < 0.01, r.ci_low <= 0.5 <= r.ci_high
(0.5, True, True)
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Literal

import numpy as np
from scipy.special import ndtri, stdtr, stdtrit  # scipy.stats.t's cdf and ppf, norm.ppf, without scipy.stats

from rag_eval.compare.bootstrap import BootTest, Interval, intervals, p_value
from rag_eval.compare.catalog import RATIO_KINDS, Kind
from rag_eval.compare.orderstats import percentile_rows

DEFAULT_SEED = 20240601
DEFAULT_RESAMPLES = 4999
MAX_RESAMPLES = 1_000_000  # a comparison draws at most (976,000 took 62 s and 2 GB for the default run's 244 numbers)
MIN_TESTED_UNITS = 2  # a paired test or a bootstrap over fewer units is not defined: no p-value, no interval
Alternative = Literal["two-sided", "less", "greater"]  # of the candidate's difference (or log ratio) from the baseline
# when a relative gate fires: "threshold" (the change is significantly beyond the threshold) or "zero" (the estimate
# is beyond the threshold and the change significantly differs from none); docs/deciding.md, "When a gate fires"
Rule = Literal["threshold", "zero"]
RULES: tuple[Rule, ...] = ("threshold", "zero")
DEFAULT_RULE: Rule = "threshold"


@dataclass(frozen=True, slots=True, kw_only=True)
class Settings:
    """How a comparison tests: significance level, bootstrap and randomisation resamples, seed,
    power for the minimum detectable difference, interval level."""

    alpha: float = 0.05
    resamples: int = DEFAULT_RESAMPLES  # bootstrap resamples
    permutations: int = DEFAULT_RESAMPLES  # randomisation-test resamples (raised when Holm needs a finer p-value)
    seed: int = DEFAULT_SEED
    power: float = 0.8
    confidence: float = 0.95
    rule: Rule = DEFAULT_RULE  # when a relative gate fires


@dataclass(frozen=True, slots=True, kw_only=True)
class Paired:
    """A paired comparison of one metric: values, difference, interval, p-value, standard error.

    For ratio kinds (percentiles, latency) ``ratio`` is candidate / baseline with its own interval,
    and ``se_log_ratio`` the standard error of its logarithm. ``boot`` holds the bootstrap distribution
    of the difference (and ``boot_log_ratio`` of the log ratio), sorted, for bounds at other levels
    (:func:`bound`); ``identical`` says every unit agreed (nothing to test); ``p_mc_error`` is the
    Monte Carlo standard error of a resampled p-value (0 for an exact one).
    """

    n: int
    baseline: float
    candidate: float
    delta: float
    ci_low: float
    ci_high: float
    p_value: float | None
    se: float
    ratio: float | None = None
    ratio_ci_low: float | None = None
    ratio_ci_high: float | None = None
    se_log_ratio: float | None = None
    alternative: Alternative = "two-sided"
    identical: bool = False
    p_mc_error: float | None = None
    boot: np.ndarray = field(default_factory=lambda: np.empty(0), repr=False, compare=False)
    boot_log_ratio: np.ndarray = field(default_factory=lambda: np.empty(0), repr=False, compare=False)
    t_df: int | None = None  # a t interval (a mean of per-unit differences) with these degrees of freedom
    normal: bool = False  # a normal interval of the bootstrap's standard error (many units), not its quantiles


def aggregate(kind: Kind, values: np.ndarray, percentile: float = 50.0) -> Callable[[np.ndarray], np.ndarray]:
    """``f(idx)`` -> the metric over the units ``idx`` (any leading batch shape), from ``values``
    ((units,) or (units, 2) for a rate: numerator, denominator)."""

    def mean(idx: np.ndarray) -> np.ndarray:
        return np.asarray(values[idx].mean(axis=-1))

    def rate(idx: np.ndarray) -> np.ndarray:
        num = values[idx, 0].sum(axis=-1)
        den = values[idx, 1].sum(axis=-1)
        with np.errstate(divide="ignore", invalid="ignore"):
            return np.asarray(np.where(den > 0, num / np.where(den > 0, den, 1.0), np.nan))

    def largest(idx: np.ndarray) -> np.ndarray:
        return np.asarray(values[idx].max(axis=-1))

    def pct(idx: np.ndarray) -> np.ndarray:
        picked = values[idx]  # a copy: sorted in place
        rows = percentile_rows(picked.reshape(-1, picked.shape[-1]), percentile, in_place=True)
        return rows.reshape(picked.shape[:-1])

    return {"mean": mean, "rate": rate, "max": largest, "percentile": pct, "latency": pct}[kind]


@dataclass(frozen=True, slots=True, kw_only=True)
class Pairing:
    """How two configs' per-unit values are compared: the statistic (``kind``, at ``percentile`` for the
    percentile kinds), the settings, whether to test and which way, whether to draw the interval here.

    ``alternative`` is the test's: ``less`` asks whether the candidate's value is lower (a drop),
    ``greater`` whether it is higher (a growth; for ratio kinds the log ratio is above 0). Without
    ``interval`` a bootstrap interval is left to the caller (:func:`bootstrapped`, :func:`with_interval`),
    who draws many metrics' at once."""

    kind: Kind
    settings: Settings
    percentile: float = 50.0
    test: bool = True
    alternative: Alternative = "two-sided"
    interval: bool = True


def paired_compare(
    baseline: np.ndarray, candidate: np.ndarray, pairing: Pairing, *, rng: np.random.Generator
) -> Paired:
    """Compare per-unit ``baseline`` and ``candidate`` values (row i of both is the same unit), as
    ``pairing`` says."""
    kind, settings, percentile = pairing.kind, pairing.settings, pairing.percentile
    test, alternative, interval = pairing.test, pairing.alternative, pairing.interval
    a = np.asarray(baseline, dtype=float)
    b = np.asarray(candidate, dtype=float)
    n = int(a.shape[0])
    values = np.concatenate([a, b], axis=0)
    agg = aggregate(kind, values, percentile)
    ratio_kind = kind in RATIO_KINDS
    units = np.arange(n)
    base = float(agg(units)) if n else math.nan
    cand = float(agg(units + n)) if n else math.nan
    delta = cand - base
    ratio = _ratio(cand, base) if ratio_kind else None

    if n == 0 or not math.isfinite(delta):
        return _undefined(n, base, cand, delta, ratio, ratio_kind)
    if np.array_equal(a, b, equal_nan=True):
        # every unit agrees: every permutation and every resample gives the observed difference
        zero = np.zeros(1)
        return Paired(
            n=n, baseline=base, candidate=cand, delta=0.0, ci_low=0.0, ci_high=0.0, p_value=1.0 if test else None,
            se=0.0, ratio=ratio, ratio_ci_low=ratio, ratio_ci_high=ratio, se_log_ratio=0.0 if ratio_kind else None,
            alternative=alternative, identical=True, p_mc_error=0.0 if test else None, boot=zero,
            boot_log_ratio=zero if ratio_kind else np.empty(0),
        )  # fmt: skip
    if n < MIN_TESTED_UNITS:  # one unit: no test and no interval (too few units to test, never a crash)
        return replace(_undefined(n, base, cand, delta, ratio, ratio_kind), alternative=alternative)

    if kind == "mean":
        # a mean of per-unit differences: Student's t interval and the paired t-test, one statistic, so the
        # test and the interval agree, with no resampling error (a bootstrap's percentile interval covers
        # 92-93% at 264 units)
        se_t = float(np.std(b - a, ddof=1) / math.sqrt(n))
        half = float(stdtrit(n - 1, 1 - (1 - settings.confidence) / 2)) * se_t
        return Paired(
            n=n, baseline=base, candidate=cand, delta=delta, ci_low=delta - half, ci_high=delta + half,
            p_value=t_p_value(delta, se_t, n - 1, alternative) if test else None, se=se_t, alternative=alternative,
            p_mc_error=0.0 if test else None, t_df=n - 1,
        )  # fmt: skip
    # any other kind: the p-value is the bootstrap interval's, inverted (with_interval), so the two agree
    p_value: float | None = None
    mc_error: float | None = None
    nan = math.nan
    pending = Paired(
        n=n, baseline=base, candidate=cand, delta=delta, ci_low=nan, ci_high=nan, p_value=p_value, se=nan,
        ratio=ratio, alternative=alternative, p_mc_error=mc_error, ratio_ci_low=nan if ratio_kind else None,
        ratio_ci_high=nan if ratio_kind else None, se_log_ratio=nan if ratio_kind else None,
    )  # fmt: skip
    if not interval:
        return pending
    test_ = BootTest(kind=kind, baseline=a, candidate=b, percentile=percentile)
    (box,) = intervals([test_], resamples=settings.permutations, confidence=settings.confidence, rng=rng)
    return with_interval(pending, box, kind=kind, test=test)


def bootstrapped(kind: Kind, paired: Paired) -> bool:
    """Whether ``paired``'s interval is a bootstrap one (every kind but a mean, when there is one at all)."""
    return kind != "mean" and paired.n >= MIN_TESTED_UNITS and not paired.identical and math.isfinite(paired.delta)


def with_interval(paired: Paired, box: Interval, *, kind: Kind, test: bool = False) -> Paired:
    """``paired`` with the bootstrap interval ``box`` (:func:`rag_eval.compare.bootstrap.intervals`) and, with
    ``test``, the p-value of no change that interval gives (of the log ratio for a ratio kind, the statistic
    its verdict reads), with its Monte Carlo error."""
    low, high, se, dist = box.lows, box.highs, box.ses, box.distributions
    plain = replace(paired, ci_low=low[0], ci_high=high[0], se=se[0], boot=np.sort(dist[0]), normal=box.normal)
    if test and box.nulls:
        tested = 1 if kind in RATIO_KINDS else 0
        p = p_value(box.nulls[tested], paired.alternative)
        if math.isfinite(p):
            error = box.null_errors[tested] * (2 if paired.alternative == "two-sided" else 1)
            plain = replace(plain, p_value=p, p_mc_error=error)
    if kind not in RATIO_KINDS:
        return plain
    return replace(
        plain, ratio_ci_low=math.exp(low[1]) if math.isfinite(low[1]) else math.nan,
        ratio_ci_high=math.exp(high[1]) if math.isfinite(high[1]) else math.nan, se_log_ratio=se[1],
        boot_log_ratio=np.sort(dist[1]),
    )  # fmt: skip


def t_p_value(delta: float, se: float, df: int, alternative: Alternative) -> float:
    """The paired t-test's p-value of a mean difference ``delta`` with standard error ``se``: the test whose
    inversion is Student's t interval (``scipy.stats.ttest_rel``'s, from the same statistic).

    >>> round(t_p_value(0.5, 0.25, 9, "greater"), 4), round(t_p_value(0.5, 0.25, 9, "two-sided"), 4)
    (0.0383, 0.0766)
    >>> t_p_value(0.1, 0.0, 9, "less"), t_p_value(0.0, 0.0, 9, "two-sided")
    (1.0, 1.0)
    """
    flat = se <= 0 or not math.isfinite(se)  # every unit moved by the same amount: no spread
    t = (math.copysign(math.inf, delta) if delta != 0 else 0.0) if flat else delta / se
    if alternative == "greater":
        return float(stdtr(df, -t))
    if alternative == "less":
        return float(stdtr(df, t))
    return float(min(1.0, 2 * stdtr(df, -abs(t))))


def bound(paired: Paired, *, level: float, upper: bool, log_ratio: bool = False) -> float:
    """A one-sided bound of the difference (or of the log ratio) at confidence ``level``: of the t
    interval for a mean, else from the comparison's own bootstrap distribution (percentile); the upper
    bound with ``upper``, else the lower.

    >>> p = Paired(n=3, baseline=0, candidate=0, delta=0, ci_low=0, ci_high=0, p_value=1, se=0,
    ...            boot=np.linspace(-1, 1, 201))
    >>> round(bound(p, level=0.95, upper=True), 2), round(bound(p, level=0.95, upper=False), 2)
    (0.9, -0.9)
    """
    if paired.t_df is not None and not log_ratio:
        t = float(stdtrit(paired.t_df, level))
        return paired.delta + t * paired.se if upper else paired.delta - t * paired.se
    if paired.normal:  # the normal interval's end at that level (bootstrap.NORMAL_MIN_UNITS)
        if log_ratio:
            if not (paired.ratio and paired.ratio > 0 and paired.se_log_ratio is not None):
                return math.nan
            center, se = math.log(paired.ratio), paired.se_log_ratio
        else:
            center, se = paired.delta, paired.se
        z = float(ndtri(level))
        return center + z * se if upper else center - z * se
    dist = paired.boot_log_ratio if log_ratio else paired.boot
    dist = dist[np.isfinite(dist)]
    if dist.size == 0:
        return math.nan
    return float(np.quantile(dist, level if upper else 1 - level))


def _ratio(cand: float, base: float) -> float:
    if base == 0 or not (math.isfinite(base) and math.isfinite(cand)):
        return math.nan
    return cand / base


def _undefined(n: int, base: float, cand: float, delta: float, ratio: float | None, ratio_kind: bool) -> Paired:
    nan = math.nan
    return Paired(
        n=n, baseline=base, candidate=cand, delta=delta, ci_low=nan, ci_high=nan, p_value=None, se=nan,
        ratio=ratio, ratio_ci_low=nan if ratio_kind else None, ratio_ci_high=nan if ratio_kind else None,
        se_log_ratio=nan if ratio_kind else None,
    )  # fmt: skip


def exact_test(n: int, settings: Settings) -> bool:
    """Whether the test of ``n`` units enumerates every one of the 2**n flips (no more than the resamples)."""
    return n < 63 and 2**n <= settings.permutations


def minimum_detectable(se: float, *, alpha: float, power: float) -> float:
    """The smallest true difference a two-sided test at ``alpha`` detects with ``power``, for a
    statistic with standard error ``se`` (normal approximation).

    >>> round(minimum_detectable(0.01, alpha=0.05, power=0.8), 4)
    0.028
    """
    if not math.isfinite(se):
        return math.nan
    return float((ndtri(1 - alpha / 2) + ndtri(power)) * se)


def holm(p_values: Sequence[float | None]) -> list[float | None]:
    """Holm's step-down adjustment (family-wise error); ``None`` entries are left out of the family.

    >>> holm([0.01, None, 0.04, 0.03])
    [0.03, None, 0.06, 0.06]
    """
    present = [(p, i) for i, p in enumerate(p_values) if p is not None]
    m = len(present)
    out: list[float | None] = [None] * len(p_values)
    running = 0.0
    for rank, (p, i) in enumerate(sorted(present)):
        running = max(running, min(1.0, (m - rank) * p))
        out[i] = running
    return out


def required_resamples(tests: int, alpha: float, floor: int) -> int:
    """Enough resamples for the smallest attainable two-sided p-value (2 / (resamples + 1)) to be
    half of Holm's first threshold (alpha / tests): at least ``floor``.

    >>> required_resamples(100, 0.05, 999)
    7999
    """
    need = math.ceil(4 * tests / alpha) - 1
    return max(floor, need)
