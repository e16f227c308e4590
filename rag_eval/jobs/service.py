"""A run's ``[service]``: the run's queries (labelled, and a query log's) through a deployed ``lookup_knowledge``
as a black box, its payloads diffed against the pipeline's and measured.

Beside the service, the same queries go through :mod:`rag_eval.core` in this process with the config the
service is meant to run (``[service] config``, else the baseline), against the run's collection: each query's
two payloads are diffed (:func:`~rag_eval.metrics.conformance.first_difference`), ``conformance`` is the
share identical and is gated by ``compare/shipped/service.toml`` (``fail conformance == 1``: exit 1). The
service's measures are read from its payloads alone (:func:`~rag_eval.metrics.conformance.payload_measures`),
and the pipeline's payloads are measured the same way beside them. ``service.json`` holds it all, the
differing queries with both payloads, and ``service.md`` says it in words.

A query log's request may have had a category filter: the tool's input is the query alone, so both sides
search with the config's own filter. The service is asked after the in-process replay closed its Milvus
client: a service started over stdio may open the same Milvus Lite file.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rag_eval.compare.checks import AbsoluteCheck
from rag_eval.compare.gates import parse_check, shipped_path
from rag_eval.core.errors import ConfigError, ConfigProblem
from rag_eval.core.lookup import LookupKnowledge, Pipeline
from rag_eval.core.transform import KnowledgeQueryTransformer
from rag_eval.experiment import Experiment
from rag_eval.experiment.model import ConfigSpec, ServiceSpec
from rag_eval.files import json_safe, write_json, write_text
from rag_eval.ingest.collection import IngestResult
from rag_eval.metrics.conformance import conformance, first_difference, payload_measures
from rag_eval.replay.prepare import Prepared, Progress
from rag_eval.replay.service import Answers, ask_service
from rag_eval.replay.strategies import encoder
from rag_eval.search.milvus import MilvusSearch

SERVICE_JSON = "service.json"
SERVICE_MD = "service.md"
ANSWERS = Path(".service") / "payloads.jsonl"  # the payloads received so far: --resume asks only the others
SHOWN = 20  # differing queries service.md shows (service.json has them all)


@dataclass(frozen=True, slots=True, kw_only=True)
class ServiceResult:
    document: dict[str, Any]
    exit_code: int  # 0, or 1 when a fail gate on conformance fired


def service_config(exp: Experiment, spec: ServiceSpec) -> ConfigSpec:
    """The config the service is meant to run (exit 2 when the experiment has none of that name)."""
    name = spec.config or exp.baseline
    found = next((c for c in exp.configs if c.name == name), None)
    if found is None:
        names = ", ".join(c.name for c in exp.configs)
        raise ConfigError([ConfigProblem("service.config", f"no config {name!r} in the experiment ({names})")])
    return found


def run_queries(exp: Experiment, prep: Prepared) -> list[tuple[str, str]]:
    """The run's queries, (id, text), as the replay asks them: the labelled ones, then a query log's."""
    queries = [(q.id, q.text) for q in prep.dataset.queries.values()]
    if exp.query_limit is not None:
        queries = queries[: exp.query_limit]
    return queries + prep.traffic_queries()


def reference_payloads(
    config: ConfigSpec, prep: Prepared, ingested: IngestResult, queries: list[tuple[str, str]]
) -> dict[str, dict[str, Any]]:
    """The pipeline's payload of every query with ``config``, in this process (the run's query vectors)."""
    with MilvusSearch(ingested.target, encoder(prep.resolver)) as port:
        tool = LookupKnowledge(port, config.config, transformer=KnowledgeQueryTransformer(), mode=config.mode)
        if config.what_if is not None:
            tool.pipeline = Pipeline(config.config, config.postprocessor())
        return {qid: json_safe(tool.lookup_knowledge(text).as_dict()) for qid, text in queries}


def replay_service(
    exp: Experiment, prep: Prepared, ingested: IngestResult, run_dir: Path, *, resume: bool, progress: Progress
) -> ServiceResult:
    """Ask the service, diff, measure and gate; the answers are kept as they arrive (a failure is exit 3 and
    ``--resume`` asks only the queries left)."""
    spec = exp.service
    assert spec is not None
    config = service_config(exp, spec)
    queries = run_queries(exp, prep)
    pipeline = reference_payloads(config, prep, ingested, queries)
    answers = Answers(run_dir / ANSWERS, resume=resume)
    left = sum(1 for qid, _ in queries if qid not in answers.payloads)
    progress.log(f"asking the service at {spec.endpoint} {left:,} of {len(queries):,} queries")
    try:
        ask_service(spec, queries, answers, tick=progress.factory("asking the service", left))
    finally:
        answers.close()
    document = service_document(exp, config, queries, (pipeline, answers.payloads), prep)
    write_json(run_dir / SERVICE_JSON, document)
    write_text(run_dir / SERVICE_MD, service_markdown(document))
    differing = len(document["differing"])
    progress.log(f"service conformance {document['conformance']:.1%}: {differing:,} of {len(queries):,} payloads "
                 f"differ from config {config.name!r}'s ({run_dir / SERVICE_MD})")  # fmt: skip
    return ServiceResult(
        document=document, exit_code=1 if any(g["outcome"] == "fail" for g in document["gates"]) else 0
    )


def service_document(
    exp: Experiment, config: ConfigSpec, queries: list[tuple[str, str]],
    sides: tuple[dict[str, dict[str, Any]], dict[str, dict[str, Any]]], prep: Prepared,
) -> dict[str, Any]:  # fmt: skip
    """What ``service.json`` holds: conformance (all queries, and a query log's apart), the first difference
    and both payloads (``sides``: the pipeline's, the service's) of every differing query, the measures of
    both sides, the gates."""
    pipeline, service = sides
    assert exp.service is not None
    differences = {qid: first_difference(pipeline[qid], service[qid]) for qid, _ in queries}
    traffic = {qid for qid, _ in prep.traffic_queries()}
    relevance, chunk_of = prep.labels.relevance, prep.chunk_of()
    labelled = [qid for qid, _ in queries if qid not in traffic]
    value = conformance(differences)
    text_of = dict(queries)
    return {
        "service": exp.service.as_dict(),
        "config": config.name,
        "queries": len(queries),
        "conformance": value,
        "conformance_labelled": conformance({q: differences[q] for q in labelled}),
        "conformance_traffic": conformance({q: differences[q] for q in traffic}) if traffic else None,
        "measures": {
            side: payload_measures({q: payloads[q] for q in labelled}, relevance, chunk_of.get, exp.cutoffs)
            for side, payloads in (("service", service), ("pipeline", pipeline))
        },
        "differing": [
            {
                "query_id": qid,
                "query": text_of[qid],
                "first_difference": where,
                "pipeline": pipeline[qid],
                "service": service[qid],
            }
            for qid, where in differences.items()
            if where is not None
        ],
        "gates": gate_results(value),
    }


def gate_results(value: float) -> list[dict[str, Any]]:
    """The shipped service gates evaluated on ``conformance``."""
    import tomllib

    path = shipped_path("service")
    checks = tomllib.loads(path.read_text(encoding="utf-8"))["gates"]["checks"]
    out = []
    for line in checks:
        check = parse_check(line, path=str(path))
        assert isinstance(check, AbsoluteCheck)
        result = check.evaluate(value)
        out.append({"check": line, "outcome": result.outcome, "message": result.message})
    return out


def service_markdown(doc: dict[str, Any]) -> str:
    """``service.md``: the conformance, the measures side by side and the differing queries with both payloads."""
    share = f"**Conformance: {doc['conformance']:.1%}** of the payloads are identical to the pipeline's."
    lines = [f"# Service: {doc['service']['endpoint']}", "",
             f"Config it is meant to run: `{doc['config']}`. Queries: {doc['queries']:,}.", "", share, ""]  # fmt: skip
    lines += [f"- {g['outcome']}: `{g['check']}` ({g['message']})" for g in doc["gates"]]
    service, pipeline = doc["measures"]["service"], doc["measures"]["pipeline"]
    lines += ["", "| measure | service | pipeline |", "|---|---:|---:|"]
    lines += [f"| {name} | {_num(service.get(name))} | {_num(pipeline.get(name))} |" for name in pipeline]
    if service.get("unscoped_excerpts"):
        lines += ["", f"{service['unscoped_excerpts']:,} excerpts of the service have a document_id that is not chunk-"
                  "scoped (a legacy service: the source): they deliver no chunk the measures can read."]  # fmt: skip
    differing = doc["differing"]
    lines += ["", f"## Differing queries ({len(differing):,})", ""]
    for d in differing[:SHOWN]:
        lines += [f"### `{d['query_id']}`: first difference at `{d['first_difference']}`", "",
                  f"Query: {d['query']}", "", "Pipeline:", "", "```json", json.dumps(d["pipeline"], indent=1,
                  ensure_ascii=False), "```", "", "Service:", "", "```json", json.dumps(d["service"], indent=1,
                  ensure_ascii=False), "```", ""]  # fmt: skip
    if len(differing) > SHOWN:
        lines.append(f"... and {len(differing) - SHOWN:,} more in {SERVICE_JSON}.")
    return "\n".join(lines) + "\n"


def _num(value: Any) -> str:
    return "" if value is None else f"{value:,}" if isinstance(value, int) else f"{value:.3f}"
