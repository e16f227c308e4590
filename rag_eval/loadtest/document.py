"""``load.json``: what a load measurement wrote, read back for the gates and the reports.

The file is read and checked by the run directory's one reader (:func:`rag_eval.rundir.reader.read_load`);
this module is how the gates and the reports look into it, so neither knows the file's layout. A
``load.json`` beside a run belongs to it only when its ``run.started`` is the run's own start (a later run
into the same directory makes it stale: the gates then say so, the report leaves it out). The fields:
docs/performance.md, "Latency under load".

>>> doc = {"run": {"started": "t1"}, "results": [{"config": "a", "concurrency": 4}],
...        "configs": [{"name": "a", "hash": "h"}]}
>>> belongs_to(doc, {"started": "t1"}), entry(doc, "a", 4) is not None, config_hash(doc, "a")
(True, True, 'h')

A measurement of a served endpoint (``rag-eval load --service``) names it in ``target`` and holds end-to-end
latencies only (``stages``); one written before ``target`` existed measured Milvus:

>>> served = {"target": {"kind": "endpoint", "protocol": "mcp", "endpoint": "http://h:8000/mcp"}, "stages": ["e2e"]}
>>> measured_on(served), stages(served), stages(doc)
('the served endpoint http://h:8000/mcp (MCP)', ('e2e',), ('search', 'e2e'))
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


def belongs_to(doc: Mapping[str, Any], manifest: Mapping[str, Any]) -> bool:
    """True when the load measurement was made for the run of ``manifest`` (same start)."""
    run = doc.get("run") or {}
    return bool(run.get("started")) and run.get("started") == manifest.get("started")


def stale_reason(doc: Mapping[str, Any], manifest: Mapping[str, Any]) -> str:
    run = doc.get("run") or {}
    if not run.get("started"):
        return "load.json was measured on its own, not for this run"
    return (
        f"load.json belongs to another run in this directory (started {run.get('started')}; this run started "
        f"{manifest.get('started')})"
    )


def entry(doc: Mapping[str, Any], config: str, concurrency: int) -> Mapping[str, Any] | None:
    """The result of ``config`` at ``concurrency`` clients, or None."""
    return next(
        (e for e in doc.get("results", ()) if e.get("config") == config and e.get("concurrency") == concurrency),
        None,
    )


def config_hash(doc: Mapping[str, Any], config: str) -> str | None:
    """The hash of ``config`` as measured, None when unknown (a served endpoint's config is not seen)."""
    found = next((c.get("hash") for c in doc.get("configs", ()) if c.get("name") == config), None)
    return None if found is None else str(found)


def stages(doc: Mapping[str, Any]) -> tuple[str, ...]:
    """The stages whose latencies the measurement could see (a served endpoint: end to end only)."""
    return tuple(doc.get("stages") or ("search", "e2e"))


def is_endpoint(doc: Mapping[str, Any]) -> bool:
    return (doc.get("target") or {}).get("kind") == "endpoint"


def measured_on(doc: Mapping[str, Any]) -> str:
    """What was measured, in a few words for titles and reports (no credentials: the document has none)."""
    target = doc.get("target") or {}
    if is_endpoint(doc):
        return f"the served endpoint {target.get('endpoint')} ({str(target.get('protocol', '')).upper()})"
    m = doc.get("milvus") or {}
    return f"Milvus {m.get('backend', '')} {m.get('server_version', '')} at {m.get('uri', target.get('uri', ''))}"
