"""A load measurement of a served endpoint as a step: the data set's queries asked of the endpoint's
``lookup_knowledge`` by N client processes in the closed-loop rounds of :mod:`rag_eval.loadtest.driver`.

Nothing is prepared or ingested here: the server owns its collection (a Milvus Lite file behind it is fine:
the clients speak HTTP only), and the queries are the labelled set's raw texts (``query_limit`` applied). The
results go under the config the service is meant to run (``[service] config``, else the baseline); what was
measured is ``load.json``'s ``target`` (the endpoint, redacted) and its ``stages`` (end to end only).
How: docs/serve.md, "Load-testing a served endpoint".
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from rag_eval.core.errors import ConfigError, ConfigProblem
from rag_eval.datasets.beir import load_beir
from rag_eval.experiment import Experiment
from rag_eval.experiment.load_table import LoadSettings
from rag_eval.experiment.load_target import served_config
from rag_eval.experiment.model import ServiceSpec
from rag_eval.loadtest.driver import LoadResult, measured_result
from rag_eval.loadtest.endpoint import EndpointSetup
from rag_eval.replay.prepare import Progress


def endpoint_target(spec: ServiceSpec) -> dict[str, Any]:
    """``load.json``'s ``target`` for a served endpoint (no credentials in it).

    >>> endpoint_target(ServiceSpec(url="https://bob:pw@rag.example/mcp?key=k"))
    {'kind': 'endpoint', 'protocol': 'mcp', 'endpoint': 'https://rag.example/mcp', 'timeout_s': 30.0}
    """
    return {"kind": "endpoint", "protocol": "mcp" if spec.url else "http", "endpoint": spec.endpoint,
            "timeout_s": spec.timeout}  # fmt: skip


def measure_endpoint_load(
    exp: Experiment,
    spec: ServiceSpec,
    settings: LoadSettings,
    *,
    run: Mapping[str, Any] | None,
    progress: Progress,
) -> LoadResult:
    """Measure the endpoint ``spec`` under load and return what ``load.json`` says (``run``: as
    :func:`rag_eval.loadtest.driver.measure_load`). A failure is a
    :class:`~rag_eval.core.errors.ServiceError` naming the endpoint (exit 3)."""
    assert not spec.command, "a stdio service is refused before (experiment.load_target)"
    dataset = load_beir(exp.dataset_path, exp.split)
    queries = [q.text for q in dataset.queries.values()][: exp.query_limit]
    if not queries:
        raise ConfigError([ConfigProblem("queries", "no queries to ask under load")], path=exp.source)
    name = served_config(exp, spec)
    setup = EndpointSetup(service=spec, config=name, queries=tuple(queries), warmup=settings.warmup)
    progress.phase("load", len(settings.concurrency) * settings.rounds)
    described = {
        "target": endpoint_target(spec),
        "milvus": None,  # behind the endpoint, not seen from here
        "configs": [{"name": name, "hash": None, "served": True}],  # what the service runs is not known here
    }
    return measured_result(exp, setup, settings, run=run, progress=progress, described=described)
