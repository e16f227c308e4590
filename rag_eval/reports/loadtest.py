"""The load measurement as people read it: a table row per config and level, ``load.md``, the curve.

Everything here is read from ``load.json`` (:mod:`rag_eval.loadtest.document`); nothing is
measured again. ``scaling`` is the level's QPS over N times the same config's QPS with one client
(1.0 = linear); ``closed loop`` is QPS over N / mean latency (Little's law: near 1.0 means the
clients spent their time in lookups, not around them).

>>> doc = {"results": [{"config": "a", "concurrency": 1, "qps": 100.0, "searches": 200,
...                     "latency_us": {"e2e": {"p99": 12500.0}}},
...                    {"config": "a", "concurrency": 2, "qps": 150.0, "searches": 300,
...                     "latency_us": {"e2e": {"p99": 20000.0}}}]}
>>> [(r["clients"], r["qps"], r["scaling"], r["e2e_p99"]) for r in load_rows(doc)]
[(1, '100.0', '1.00', '12.5'), (2, '150.0', '0.75', '20.0')]
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import jinja2

from rag_eval.loadtest.document import is_endpoint, measured_on
from rag_eval.reports.markdown import md_text
from rag_eval.reports.templating import environment


def _ms(value: Any) -> str:
    return "–" if not isinstance(value, int | float) else f"{value / 1e3:.1f}"


def _share(value: Any) -> str:
    return "–" if not isinstance(value, int | float) else f"{value:.0%}"


def _num(value: Any, digits: int = 1) -> str:
    return "–" if not isinstance(value, int | float) else f"{value:.{digits}f}"


def load_rows(doc: Mapping[str, Any]) -> list[dict[str, Any]]:
    """One row of display strings per (config, level), configs in their order, levels ascending."""
    results = list(doc.get("results") or [])
    order = {name: i for i, name in enumerate(dict.fromkeys(r["config"] for r in results))}
    one = {r["config"]: r.get("qps") for r in results if r.get("concurrency") == 1}
    rows = []
    for r in sorted(results, key=lambda e: (order[e["config"]], e["concurrency"])):
        n, qps, base = int(r["concurrency"]), r.get("qps"), one.get(r["config"])
        lat = r.get("latency_us") or {}
        cpu = r.get("client_cpu") or {}
        rows.append(
            {
                "config": r["config"],
                "clients": n,
                "searches": r.get("searches"),
                "failed": f"{r.get('errors') or 0:,} / {r.get('timeouts') or 0:,}",  # a served endpoint's
                "qps": _num(qps),
                "scaling": _num(qps / (n * base), 2) if qps and base else "–",
                **{f"{s}_p{q}": _ms((lat.get(s) or {}).get(f"p{q}")) for s in ("search", "e2e") for q in (50, 95, 99)},
                "client_cpu": _share(cpu.get("per_process_mean")),
                "client_cpu_max": _share(cpu.get("per_process_max")),
                "machine_busy": _share(r.get("machine_cpu_busy")),
                "closed_loop": _num(r.get("loop_efficiency"), 2),
            }
        )
    return rows


def curve_chart(doc: Mapping[str, Any]) -> str | None:
    """The QPS / latency curve per config (e2e p99 solid, search p99 dashed) and QPS per client count."""
    series: dict[str, list[tuple[int, float, float | None, float | None]]] = {}
    for r in doc.get("results") or []:
        lat = r.get("latency_us") or {}
        if r.get("qps"):
            series.setdefault(r["config"], []).append(
                (int(r["concurrency"]), float(r["qps"]), (lat.get("e2e") or {}).get("p99"),
                 (lat.get("search") or {}).get("p99"))
            )  # fmt: skip
    from rag_eval.reports import charts  # matplotlib: imported only when a curve is drawn

    return charts.load_curve({k: sorted(v) for k, v in series.items()})


def _env() -> jinja2.Environment:
    return environment(html=False, filters={"md": md_text, "share": _share})


def render_load_markdown(doc: Mapping[str, Any]) -> str:
    """``load.md``: the settings, the backend, the machine and its load, and the table of every level."""
    return _env().get_template("load.md.j2").render(
        doc=doc, rows=load_rows(doc), measured=measured_on(doc), served=is_endpoint(doc)
    )
