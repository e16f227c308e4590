"""What a comparison's numbers cannot say, said beside them: latency on Milvus Lite, cap-aware recall
across caps.

**Latency gates on Milvus Lite are advisory**: their outcome is shown, never a failure.
Milvus Lite is a Python re-implementation inside the process, about ten times slower than a server: its
search and end-to-end figures are functional only (docs/harness.md, "Milvus"). A latency check of a
comparison in which either side ran on Lite is therefore judged as a ``warn`` check whatever its
severity (a breach is ``warn``, an undefined figure is no exit 2) and its message says why, so a night
on Lite never fails on latency. On a server the check keeps the severity its gates file gave it.

**Cap-aware recall is not comparable across caps**: its denominator is min(cap, relevant chunks), so it
falls when the cap rises although more is delivered; a comparison of configs with different caps says so
in its notes (:func:`cap_aware_note`) and points to the plain same-document recall.

>>> from rag_eval.compare.checks import GateResult
>>> r = GateResult(id="latency:e2e:p50 growth <= 20%", spec="fail latency:e2e:p50 growth <= 20%",
...                metric="latency:e2e:p50", severity="fail", outcome="fail", message="grew 31%")
>>> a = advisory(r, backends=("lite", "lite"))
>>> a.severity, a.outcome, a.message.startswith("advisory on Milvus Lite")
('warn', 'warn', True)
>>> advisory(r, backends=("server", "server")) is r
True
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import replace
from typing import Any

from rag_eval.compare.checks import GateResult

__all__ = ["ADVISORY", "advisory", "backends", "cap_aware_note", "is_latency_gate"]

ADVISORY = "advisory on Milvus Lite (its latency is functional only, never a failure: gate latency on a Milvus server)"


def is_latency_gate(metric: str) -> bool:
    """A check on a timed figure of the replay (``latency:STAGE:pQ``).

    >>> is_latency_gate("latency:e2e:p95"), is_latency_gate("load:e2e:p99@4"), is_latency_gate("chunk:RR")
    (True, False, False)
    """
    return metric.startswith("latency:")


def backends(*manifests: Mapping[str, Any] | None) -> tuple[str, ...]:
    """The Milvus backend each run's manifest records (``lite``, ``server``; ``""`` when it says none).

    >>> backends({"milvus": {"backend": "lite"}}, None, {})
    ('lite', '', '')
    """
    out = []
    for manifest in manifests:
        milvus = (manifest or {}).get("milvus") or {}
        out.append(str(milvus.get("backend") or "") if isinstance(milvus, Mapping) else "")
    return tuple(out)


def advisory(result: GateResult, *, backends: Iterable[str]) -> GateResult:
    """``result`` as an advisory ``warn`` check when it gates latency and either side ran on Milvus Lite."""
    if not is_latency_gate(result.metric) or "lite" not in set(backends):
        return result
    outcome = "warn" if result.outcome == "fail" else result.outcome
    return replace(result, severity="warn", outcome=outcome, message=f"{ADVISORY}: {result.message}")


def cap_aware_note(pairs: Iterable[tuple[tuple[str, Any], tuple[str, Any]]]) -> str | None:
    """A note when some compared pair, ``((baseline, its cap), (candidate, its cap))``, has two different
    caps (None: no cap, as for a legacy pipeline).

    >>> cap_aware_note([(("cap2", 2), ("cap2-twin", 2))]) is None
    True
    >>> cap_aware_note([(("cap2", 2), ("cap3", 3)), (("cap2", 2), ("cap1", 1))]).split(": ")[1]
    'cap1 (cap 1) and cap3 (cap 3) against cap2 (cap 2); compare the plain same-document recall across caps'
    """
    differ = [(b, c) for b, c in pairs if b[1] != c[1]]
    if not differ:
        return None

    def named(config: tuple[str, Any]) -> str:
        return f"{config[0]} (cap {config[1]})" if config[1] is not None else f"{config[0]} (no cap)"

    against: dict[str, list[str]] = {}
    for base, cand in differ:
        against.setdefault(named(base), []).append(named(cand))
    pairs_text = "; ".join(f"{' and '.join(sorted(c))} against {b}" for b, c in against.items())
    return (
        "same-document multi-chunk recall, cap-aware, is not comparable across caps (its denominator is "
        f"min(cap, relevant chunks), so it falls when the cap rises): {pairs_text}; compare the plain "
        "same-document recall across caps"
    )
