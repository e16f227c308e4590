"""Gates on latency under load, read from the run's ``load.json`` (``rag-eval load``, or a ``[load]`` table).

Metric names ``load:STAGE:pQ@N`` and ``load:qps@N`` in the one-line grammar of :mod:`rag_eval.compare.gates`.
One window's p99 moves with whatever else the machine does, so a load gate judges its figure against the
spread between rounds (batch means, on a log scale, Bonferroni over the load checks): it fires only on a real
breach, and is ``underpowered``, never a silent pass, when the rounds cannot tell. The rules and their
calibration: docs/deciding.md, "Gates".

>>> parse_load_metric("load:e2e:p99@4")
LoadMetric(name='load:e2e:p99@4', stage='e2e', percentile=99, concurrency=4)
>>> parse_load_metric("load:qps@8").higher_is_better, parse_load_metric("load:e2e:p100@4") is None
(True, True)
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy.special import stdtr, stdtrit  # scipy.stats.t's cdf and ppf

from rag_eval.compare.checks import AbsoluteCheck, GateResult, RelativeCheck, _fmt
from rag_eval.compare.runs import ComparedRun
from rag_eval.compare.stats import Settings
from rag_eval.core.errors import RunDirectoryError, quoted
from rag_eval.loadtest.document import belongs_to, config_hash, entry, measured_on, stages, stale_reason
from rag_eval.rundir.reader import read_load

_NAME = re.compile(r"^load:(?:(?P<stage>search|e2e):p(?P<q>50|95|99)|qps)@(?P<n>[1-9]\d{0,3})$")


@dataclass(frozen=True, slots=True)
class LoadMetric:
    """One figure of ``load.json``: a latency percentile of a stage, or QPS, at N clients."""

    name: str
    stage: str | None  # None: QPS
    percentile: int | None
    concurrency: int

    @property
    def higher_is_better(self) -> bool:
        return self.stage is None

    @property
    def is_latency(self) -> bool:
        return self.stage is not None

    def value(self, result: Mapping[str, Any]) -> float | None:
        """The figure over every lookup of the level (``result``: one entry of ``load.json``)."""
        if self.stage is None:
            return _positive(result.get("qps"))
        return _positive((result.get("latency_us") or {}).get(self.stage, {}).get(f"p{self.percentile}"))

    def rounds(self, result: Mapping[str, Any]) -> dict[int, float]:
        """Round number -> the figure over that round's lookups (rounds without lookups left out)."""
        out: dict[int, float] = {}
        for r in result.get("rounds") or ():
            v = (
                _positive(r.get("qps"))
                if self.stage is None
                else _positive((r.get("latency_us") or {}).get(self.stage, {}).get(f"p{self.percentile}"))
            )
            if v is not None:
                out[int(r.get("round", len(out)))] = v
        return out

    def show(self, value: float) -> str:
        return f"{value / 1e3:.3g} ms" if self.is_latency else f"{value:.4g} QPS"


def _positive(value: Any) -> float | None:
    return float(value) if isinstance(value, int | float) and math.isfinite(value) and value > 0 else None


def is_load_metric(name: str) -> bool:
    return name.startswith("load:")


def parse_load_metric(name: str) -> LoadMetric | None:
    m = _NAME.match(name)
    if m is None:
        return None
    q = int(m["q"]) if m["q"] else None
    return LoadMetric(name=name, stage=m["stage"], percentile=q, concurrency=int(m["n"]))


class LoadSource:
    """The load results a comparison can use from one run: its ``load.json``, when it belongs to it."""

    def __init__(self, run: ComparedRun) -> None:
        self.run = run
        self.doc: Mapping[str, Any] | None = None
        self.missing = ""
        doc = run.load_doc if run.load_doc is not None else (read_load(run.dir) if run.dir is not None else None)
        if doc is None:
            self.missing = f"{run.label} has no load.json: measure it (rag-eval load, or a [load] table)"
        elif not belongs_to(doc, run.manifest):
            self.missing = f"{stale_reason(doc, run.manifest)}: measure it again"
        else:
            self.doc = doc

    def result(self, config: str, metric: LoadMetric) -> tuple[Mapping[str, Any] | None, str]:
        """(the config's result at the metric's level, why there is none)."""
        if self.doc is None:
            return None, self.missing
        if metric.stage is not None and metric.stage not in stages(self.doc):
            return None, (
                f"{metric.name} does not apply to {self.run.label}'s load.json: it measured "
                f"{measured_on(self.doc)} from outside, end to end only (gate load:e2e or load:qps)"
            )
        found = entry(self.doc, config, metric.concurrency)
        if found is None:
            levels = sorted({int(e["concurrency"]) for e in self.doc.get("results", ()) if e.get("config") == config})
            return None, (
                f"no load result for {config!r} with {metric.concurrency} clients in {self.run.label} "
                f"(measured: {levels or 'none'})"
            )
        mine = next((c.get("hash") for c in self.run.configs if c.get("name") == config), None)
        theirs = config_hash(self.doc, config)
        if mine is not None and theirs is not None and mine != theirs:
            return None, f"load.json measured {config!r} with other settings (hash {theirs}, the run's {mine})"
        return found, ""


@dataclass(frozen=True, slots=True, kw_only=True)
class LoadPair:
    """One comparison's two sides in the load measurements: the candidate config in ``run``'s, its baseline
    in ``base``'s (the same source when both are of one run: then paired by round)."""

    candidate: str
    baseline: str
    run: LoadSource
    base: LoadSource


def evaluate(check: AbsoluteCheck | RelativeCheck, pair: LoadPair, *, settings: Settings, family: int) -> GateResult:
    """One load check for one comparison (see the module docstring)."""
    candidate, baseline, run, base = pair.candidate, pair.baseline, pair.run, pair.base
    metric = parse_load_metric(check.metric)
    if metric is None:  # parse_check refuses these; kept for gates built by hand
        raise RunDirectoryError(f"not a load metric: {quoted(check.metric)}", path=check.path)
    alpha = settings.alpha / max(1, family)
    mine, why = run.result(candidate, metric)
    if mine is None:
        return check.result("error", why)
    if isinstance(check, AbsoluteCheck):
        return _absolute(check, metric, mine, alpha)
    theirs, why = base.result(baseline, metric)
    if theirs is None:
        return check.result("error", why)
    return _relative(check, metric, (mine, theirs), paired=run is base, alpha=alpha, power=settings.power)


def _interval(center: float, se: float, df: int, alpha: float) -> tuple[float, float]:
    t = float(stdtrit(df, 1 - alpha / 2))
    return center - t * se, center + t * se


def _absolute(check: AbsoluteCheck, metric: LoadMetric, result: Mapping[str, Any], alpha: float) -> GateResult:
    value = metric.value(result)
    rounds = list(metric.rounds(result).values())
    if value is None or len(rounds) < 2:
        return check.result("error", f"{metric.name}: needs a value and two or more rounds (got {len(rounds)})")
    if check.op in ("==", "!="):
        return check.result("error", f"{metric.name}: a timing is never exactly equal: use <=, <, >= or >")
    logs = np.log(rounds)
    se = float(np.std(logs, ddof=1) / math.sqrt(len(logs)))
    lo, hi = (math.exp(v) for v in _interval(math.log(value), se, len(logs) - 1, alpha))
    limit = check.threshold
    upper_bound = check.op in ("<=", "<")  # the figure must stay below the limit
    holds = value <= limit if check.op == "<=" else value < limit if check.op == "<" else (
        value >= limit if check.op == ">=" else value > limit)  # fmt: skip
    clearly_beyond = lo > limit if upper_bound else hi < limit
    shown = f"{metric.name} = {metric.show(value)} (interval over {len(rounds)} rounds [{metric.show(lo)}, " \
            f"{metric.show(hi)}])"  # fmt: skip
    values = {"value": value, "threshold": limit}
    if holds:
        return check.result("pass", f"{shown}: {check.op} {metric.show(limit)} holds", **values)
    if clearly_beyond:
        return check.result(check.breached(), f"{shown}: {check.op} {metric.show(limit)} does not hold", **values)
    return check.result(
        "underpowered",
        f"{shown}: beyond {metric.show(limit)}, but within the noise between rounds: measure longer or in more "
        "rounds to tell",
        **values,
    )


def _relative(
    check: RelativeCheck,
    metric: LoadMetric,
    sides: tuple[Mapping[str, Any], Mapping[str, Any]],
    *,
    paired: bool,
    alpha: float,
    power: float,
) -> GateResult:
    mine, theirs = sides  # the candidate's result, the baseline's
    c_val, b_val = metric.value(mine), metric.value(theirs)
    c_rounds, b_rounds = metric.rounds(mine), metric.rounds(theirs)
    if c_val is None or b_val is None or len(c_rounds) < 2 or len(b_rounds) < 2:
        return check.result("error", f"{metric.name}: needs values and two or more rounds on both sides")
    sign = 1.0 if metric.is_latency else -1.0  # positive = worse
    if check.relative:  # a ratio: on the log scale
        c_r, b_r = {k: math.log(v) for k, v in c_rounds.items()}, {k: math.log(v) for k, v in b_rounds.items()}
        est = math.log(c_val) - math.log(b_val)
    else:
        c_r, b_r, est = dict(c_rounds), dict(b_rounds), c_val - b_val
    common = sorted(set(c_r) & set(b_r))
    if paired and len(common) >= 2:
        diffs = np.array([c_r[k] - b_r[k] for k in common])
        se, df, how = float(np.std(diffs, ddof=1) / math.sqrt(len(diffs))), len(diffs) - 1, "paired rounds"
    else:
        cv, bv = np.array(list(c_r.values())), np.array(list(b_r.values()))
        se = float(math.sqrt(np.var(cv, ddof=1) / len(cv) + np.var(bv, ddof=1) / len(bv)))
        df, how = min(len(cv), len(bv)) - 1, "unpaired rounds"
    lo, hi = _interval(est, se, df, alpha)
    t_power = float(stdtrit(df, 1 - alpha / 2) + stdtrit(df, power))
    mde = t_power * se
    p_value = 1.0 if se == 0 and est == 0 else (0.0 if se == 0 else float(2 * stdtr(df, -abs(est / se))))

    def worse(x: float) -> float:  # a change on the log or plain scale, as the threshold reads it
        change = sign * x
        return math.expm1(change) if check.relative else change

    change = worse(est)
    ends = sorted((worse(lo), worse(hi)))
    mde_t = math.expm1(mde) if check.relative else mde
    fmt = (lambda v: f"{_fmt(v, pct=True)}%") if check.relative else metric.show
    interval = f"[{fmt(ends[0])}, {fmt(ends[1])}]"
    head = f"{metric.name} {check.direction} {fmt(change)} (interval {interval} over {how}, n = {len(c_r)} rounds)"
    values = {"value": change, "threshold": check.threshold, "mde": mde_t, "p_value": p_value}
    limit = fmt(check.threshold)
    if ends[0] > check.threshold:
        return check.result(check.breached(), f"{head} exceeds the allowed {limit}", **values)
    if ends[1] <= check.threshold:
        return check.result("pass", f"{head} rules out a {check.direction} beyond {limit}", **values)
    if math.isfinite(mde_t) and mde_t <= check.threshold:
        return check.result(
            "pass", f"{head}; a {check.direction} of {limit} would have been seen (smallest detectable "
            f"{fmt(mde_t)})", **values,
        )  # fmt: skip
    return check.result(
        "underpowered",
        f"underpowered: {head}; the rounds cannot tell a {check.direction} of {limit} from noise (smallest "
        f"detectable {fmt(mde_t)}): measure longer or in more rounds",
        **values,
    )
