"""The report's charts, drawn with matplotlib as inline SVG (no script, no font files, no images).

SVG text stays text (``svg.fonttype = none``) so the charts are small and searchable; mathtext
is off so a ``$`` in a config name is printed as it is; the output is deterministic (fixed
hash salt, no date). Each function returns the ``<svg>`` element as a string, or None when
the run holds nothing to draw.

>>> svg = bar_with_intervals([("a", 0.4, 0.3, 0.5), ("b", 0.5, 0.45, 0.55)], title="t", xlabel="x")
>>> svg.startswith("<svg") and "<script" not in svg
True
"""

from __future__ import annotations

import io
import math
import re
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd
from matplotlib import rc_context
from matplotlib.figure import Figure
from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter

from rag_eval.metrics.registry import LATENCY_STAGES
from rag_eval.reports.display import loss_label, loss_order

_RC: dict[Any, Any] = {
    "svg.fonttype": "none",
    "text.parse_math": False,
    "font.size": 9,
    "axes.titlesize": 10,
    "axes.spines.top": False,
    "axes.spines.right": False,
    "figure.dpi": 96,
}
_STAGE_TITLE = {"postprocess": "post-process", "e2e": "end to end"}


def _svg(fig: Figure, salt: str) -> str:
    buf = io.StringIO()
    salted: dict[Any, Any] = {"svg.hashsalt": f"rag-eval-{salt}"}
    with rc_context(salted):
        fig.savefig(buf, format="svg", bbox_inches="tight", metadata={"Date": None, "Creator": None})
    text = buf.getvalue()
    # the <svg> element alone: no XML prolog, and no RDF metadata block (it names vocabulary URLs)
    svg = text[text.find("<svg") :].strip()
    return re.sub(r"\s*<metadata>.*?</metadata>", "", svg, count=1, flags=re.S)


def _us(value: float, _pos: Any = None) -> str:
    if value >= 1e6:
        return f"{value / 1e6:g} s"
    if value >= 1e3:
        return f"{value / 1e3:g} ms"
    return f"{value:g} µs"


def _figure(width: float, height: float, *, hspace: float = 0.2, wspace: float = 0.2) -> Figure:
    # fixed spacing and a tight bounding box at save time: a layout engine would draw each chart twice more
    fig = Figure(figsize=(width, height))
    fig.subplots_adjust(hspace=hspace, wspace=wspace)
    return fig


def bar_with_intervals(
    bars: Sequence[tuple[str, float, float, float]], *, title: str, xlabel: str, highlight: str | None = None
) -> str | None:
    """Horizontal bars, one per config, with their intervals (NaN values are left out)."""
    rows = [(n, v, lo, hi) for n, v, lo, hi in bars if not math.isnan(v)]
    if not rows:
        return None
    with rc_context(_RC):
        fig = _figure(6.4, 0.45 * len(rows) + 0.9)
        ax = fig.add_subplot()
        y = np.arange(len(rows))[::-1]
        vals = np.array([r[1] for r in rows])
        err = np.array([[max(0.0, r[1] - r[2]) for r in rows], [max(0.0, r[3] - r[1]) for r in rows]])
        colors = ["#888888" if r[0] == highlight else "#1f77b4" for r in rows]
        ax.barh(y, vals, xerr=err, color=colors, capsize=3, height=0.6)
        ax.set_yticks(y, [r[0] for r in rows])
        ax.set_xlim(0, max(1.0, float(np.nanmax([r[3] for r in rows])) * 1.05))
        for yi, r in zip(y, rows, strict=True):
            ax.text(r[3] + 0.01, yi, f"{r[1]:.3f} [{r[2]:.3f}, {r[3]:.3f}]", va="center", fontsize=8)
        ax.set_xlabel(xlabel)
        ax.set_title(title, loc="left", fontsize=9)
        return _svg(fig, "bars")


def grouped_bars(
    labels: Sequence[str], series: Mapping[str, Sequence[float]], *, title: str, ylabel: str
) -> str | None:
    """Vertical bars, a group per label and a bar per series in it (a histogram per config, side by side)."""
    if not labels or not series:
        return None
    with rc_context(_RC):
        fig = _figure(6.4, 2.8)
        ax = fig.add_subplot()
        x = np.arange(len(labels))
        width = 0.8 / len(series)
        for i, (name, values) in enumerate(series.items()):
            ax.bar(x + (i - (len(series) - 1) / 2) * width, list(values), width=width, label=name, color=f"C{i}")
        ax.set_xticks(x, list(labels), rotation=45, ha="right")
        ax.set_ylabel(ylabel)
        ax.set_title(title, loc="left")
        ax.legend(loc="upper left", fontsize=8, frameon=False)
        return _svg(fig, "grouped")


def sweep(
    key: str,
    xs: Sequence[float],
    series: Mapping[str, Sequence[float]],
    *,
    reference: Mapping[str, float] | None = None,
    reference_name: str = "",
) -> str | None:
    """Measures (lines) against one config key that the experiment varies (x axis)."""
    if len(xs) < 2 or not series:
        return None
    with rc_context(_RC):
        fig = _figure(6.4, 3.2)
        ax = fig.add_subplot()
        for i, (label, ys) in enumerate(series.items()):
            color = f"C{i}"
            ax.plot(xs, ys, marker="o", color=color, label=label)
            if reference and label in reference and not math.isnan(reference[label]):
                ax.axhline(reference[label], color=color, linestyle="--", linewidth=1)
        ax.set_xticks(list(xs))
        ax.set_xlabel(key)
        ax.set_ylim(0, 1)
        ax.set_title(f"Sweep over {key}" + (f" (dashed: {reference_name})" if reference else ""), loc="left")
        ax.legend(loc="best", fontsize=8, frameon=False)
        return _svg(fig, "sweep")


def latency(per_query: pd.DataFrame, names: Sequence[str]) -> str | None:
    """Per stage, a box per config (5th to 95th percentile whiskers, median line), log scale. Queries
    whose search was not timed (NaN) are left out; a stage nobody timed is not drawn."""
    stages = [s for s in LATENCY_STAGES if f"{s}_us" in per_query.columns and per_query[f"{s}_us"].notna().any()]
    if not stages or per_query.empty:
        return None
    groups = {n: g for n, g in per_query.groupby("config", sort=False)}
    present = [n for n in names if n in groups]
    with rc_context(_RC):
        fig = _figure(6.4, len(stages) * (0.28 * len(present) + 0.75), hspace=0.55)
        axes = fig.subplots(len(stages), 1, squeeze=False)[:, 0]
        for ax, stage in zip(axes, stages, strict=True):
            values = [groups[n][f"{stage}_us"].to_numpy(dtype=float) for n in present]
            data = [np.clip(v[~np.isnan(v)], 0.1, None) for v in values]
            ax.boxplot(data, orientation="horizontal", whis=(5, 95), showfliers=False, widths=0.6)
            ax.set_yticks(range(1, len(present) + 1), present)
            ax.invert_yaxis()
            ax.set_xscale("log")
            ax.xaxis.set_major_formatter(FuncFormatter(_us))
            low, high = ax.get_xlim()
            # a narrow range shows no power of ten: label 2x and 5x ticks then
            narrow = high / max(low, 1e-9) < 30
            ax.xaxis.set_minor_locator(LogLocator(subs=(2.0, 5.0)))
            ax.xaxis.set_minor_formatter(FuncFormatter(_us) if narrow else NullFormatter())
            ax.set_title(_STAGE_TITLE.get(stage, stage), loc="left")
        axes[-1].set_xlabel("log scale; box: p25-p75, line: median, whiskers: p5-p95")
        return _svg(fig, "latency")


def waterfall(names: Sequence[str], relevant: Mapping[str, int], losses: Mapping[str, Mapping[str, int]]) -> str | None:
    """Relevant chunks -> each loss stage, in pipeline order -> delivered, one panel per config."""
    if not names or not any(relevant.values()):
        return None
    stages = sorted({s for n in names for s in losses.get(n, {})}, key=lambda s: (loss_order(s), s))
    steps = ["relevant", *(loss_label(s) for s in stages), "delivered"]
    with rc_context(_RC):
        fig = _figure(max(6.4, 2.2 * len(names)), 0.32 * len(steps) + 1.0, wspace=0.35)
        axes = fig.subplots(1, len(names), squeeze=False, sharey=True)[0]
        y = np.arange(len(steps))[::-1]
        for ax, name in zip(axes, names, strict=True):
            total = int(relevant.get(name, 0))
            left, widths, colors = [0], [total], ["#1f77b4"]
            level = total
            for s in stages:
                lost = int(losses.get(name, {}).get(s, 0))
                level -= lost
                left.append(level)
                widths.append(lost)
                colors.append("#d62728")
            left.append(0)
            widths.append(level)
            colors.append("#2ca02c")
            ax.barh(y, widths, left=left, color=colors, height=0.6)
            for yi, lo, w in zip(y, left, widths, strict=True):
                ax.text(lo + w, yi, f" {w}", va="center", fontsize=7)
            ax.set_title(name, loc="left", fontsize=9)
            ax.set_xlim(0, max(total, 1) * 1.25)
        axes[0].set_yticks(y, steps)
        fig.supxlabel("relevant chunks (summed over queries)", fontsize=8)
        return _svg(fig, "waterfall")


def history_chart(history: pd.DataFrame, time_column: str, measures: Sequence[tuple[str, str]]) -> str | None:
    """Nightly history: one panel per measure (key, label), a line per config."""
    present = [(k, label) for k, label in measures if k in history.columns]
    if not present or history.empty:
        return None
    frame = history.copy()
    frame[time_column] = pd.to_datetime(frame[time_column], utc=True, errors="coerce")
    frame = frame.dropna(subset=[time_column]).sort_values(time_column)
    if frame.empty:
        return None
    with rc_context(_RC):
        fig = _figure(6.4, 2.0 * len(present) + 0.4, hspace=0.45)
        axes = fig.subplots(len(present), 1, squeeze=False, sharex=True)[:, 0]
        for ax, (key, label) in zip(axes, present, strict=True):
            for i, (name, g) in enumerate(frame.groupby("config", sort=True)):
                ax.plot(g[time_column], g[key].astype(float), marker="o", markersize=3, color=f"C{i}", label=str(name))
            ax.set_title(label, loc="left")
        axes[0].legend(loc="best", fontsize=8, frameon=False)
        fig.autofmt_xdate()
        return _svg(fig, "trend")


def as_float(value: Any) -> float:
    return math.nan if value is None else float(value)


def load_curve(series: Mapping[str, Sequence[tuple[int, float, Any, Any]]]) -> str | None:
    """Latency under load, per config: p99 against QPS (end to end solid, search dashed; each point
    labelled with its client count) and QPS against the client count (dotted: linear scaling from one
    client). ``series``: config -> (clients, QPS, e2e p99 µs, search p99 µs), clients ascending."""
    if not series or not any(series.values()):
        return None
    with rc_context(_RC):
        fig = _figure(7.6, 3.2, wspace=0.35)
        left, right = fig.subplots(1, 2)
        for i, (name, points) in enumerate(series.items()):
            color = f"C{i}"
            clients = [p[0] for p in points]
            qps = [p[1] for p in points]
            e2e = [math.nan if p[2] is None else p[2] for p in points]
            search = [math.nan if p[3] is None else p[3] for p in points]
            left.plot(qps, e2e, marker="o", color=color, label=name)
            left.plot(qps, search, marker=".", linestyle="--", color=color, linewidth=1)
            for x, y, n in zip(qps, e2e, clients, strict=True):
                left.annotate(str(n), (x, y), textcoords="offset points", xytext=(3, 3), fontsize=7)
            right.plot(clients, qps, marker="o", color=color, label=name)
            one = next((q for c, q in zip(clients, qps, strict=True) if c == 1), None)
            if one is not None:
                right.plot(clients, [one * c for c in clients], linestyle=":", color=color, linewidth=1)
        left.set_yscale("log")
        left.yaxis.set_major_formatter(FuncFormatter(_us))
        low, high = left.get_ylim()
        # a narrow range shows no power of ten: label 2x and 5x ticks then (as the latency chart does)
        left.yaxis.set_minor_locator(LogLocator(subs=(2.0, 5.0)))
        left.yaxis.set_minor_formatter(FuncFormatter(_us) if high / max(low, 1e-9) < 30 else NullFormatter())
        left.set_ylabel("p99 latency (log scale)")
        left.set_xlabel("queries per second")
        left.set_title("p99 against throughput (solid: end to end; dashed: search)", loc="left")
        left.legend(loc="best", fontsize=8, frameon=False)
        top = max(p[1] for points in series.values() for p in points)
        right.set_ylim(0, top * 1.6)  # the measured curve stays readable; linear scaling runs off the top
        right.set_xlabel("client processes")
        right.set_ylabel("queries per second")
        right.set_xticks(sorted({p[0] for points in series.values() for p in points}))
        right.set_title("throughput (dotted: linear)", loc="left")
        return _svg(fig, "load")
