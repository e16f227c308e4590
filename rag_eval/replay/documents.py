"""What a run says about itself around its measures: each config as the manifest lists it, the manifest,
and ``summary.json``'s document (the measures per config are handed in: the metrics compute them).

>>> from rag_eval.core.config import RagConfig
>>> spec = ConfigSpec(name="evidence", config=RagConfig.from_mapping({"rag.retrieve-k": 20, "rag.return-n": 5}))
>>> pipeline_note(spec)
'D1-D5: chunk-scoped evidence keys, dedup by key, per-document cap, retrieve-k/return-n'
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from rag_eval.core.config import PipelineKind
from rag_eval.experiment import ConfigSpec, Experiment
from rag_eval.experiment.latency import label_search_timing, latency_note
from rag_eval.experiment.whatif import WHAT_IF_NOTES
from rag_eval.files import json_safe
from rag_eval.replay import provenance
from rag_eval.replay.batches import timing_groups
from rag_eval.replay.prepare import Prepared
from rag_eval.replay.step import Replayed
from rag_eval.traffic.logs import Traffic

PIPELINE_NOTES = {
    PipelineKind.EVIDENCE: "D1-D5: chunk-scoped evidence keys, dedup by key, per-document cap, retrieve-k/return-n",
    PipelineKind.LEGACY_MERGE: "legacy that merges every retrieved chunk of a source into one block (no cap)",
    PipelineKind.LEGACY_FIRST: "legacy that keeps a source's top-scored chunk and drops its other chunks as duplicates",
}
LABEL_NOTES = {
    "span": "chunk relevance from span overlap",
    "document": "no span qrels: every chunk of a relevant document counts as relevant (document-level fallback)",
}


def pipeline_note(spec: ConfigSpec) -> str:
    """One line saying which behaviour a config models."""
    if spec.what_if is not None:
        return WHAT_IF_NOTES[spec.what_if]
    return PIPELINE_NOTES[spec.config.pipeline]


def config_rows(exp: Experiment) -> list[dict[str, Any]]:
    """Every config of ``exp`` as the manifest lists it and the measures read it (its caps, widths, hash)."""
    out = []
    for spec in exp.configs:
        c = spec.config
        cap, cap_source = exp.checked_cap(spec)
        out.append(
            {
                "name": spec.name,
                "baseline": spec.name == exp.baseline,
                "mode": spec.mode.value,
                "pipeline": c.pipeline.value,
                "models": pipeline_note(spec),
                "what_if": spec.what_if,
                "retrieve_k": c.retrieve_k,
                "return_n": c.return_n,
                "cap": cap,
                "cap_source": cap_source,
                "cap_aware": None if c.pipeline.is_legacy else c.max_chunks_per_document,
                "hash": spec.config_hash(),
                "origin": spec.origin,
                "rag": c.as_properties(),
            }
        )
    return out


def data_identity(exp: Experiment, prep: Prepared) -> dict[str, Any]:
    """What must be equal for this run to be paired by query id with an earlier one (as
    :meth:`rag_eval.compare.runs.ComparedRun.data_identity` reads it from a run directory)."""
    return {
        "data set checksum": prep.dataset.checksum,
        "split": prep.dataset.split,
        "chunker": exp.chunker_spec,
        "labels": (prep.labels.level, exp.min_overlap_chars),
    }


def run_manifest(
    exp: Experiment, prep: Prepared, replayed: Replayed, *, configs: list[dict[str, Any]], clock: provenance.Clock
) -> dict[str, Any]:
    """``manifest.json``: the provenance of the run (:func:`rag_eval.replay.provenance.manifest`)."""
    return provenance.manifest(exp, prep, replayed, configs=configs, clock=clock)


def run_summary(
    exp: Experiment,
    prep: Prepared,
    replayed: Replayed,
    *,
    manifest: Mapping[str, Any],
    measured: dict[str, Any],
) -> dict[str, Any]:
    """``summary.json``: the measures per config (``measured``) with what they were measured on, the
    labels, the latency note and where the replay ran."""
    backend = replayed.backend
    return json_safe(  # type: ignore[no-any-return]
        {
            "provenance": provenance.short(manifest),
            "experiment": exp.name,
            "baseline": exp.baseline,
            "label_level": prep.labels.level,
            "label_note": LABEL_NOTES["span" if prep.labels.level == "span" else "document"],
            "queries": replayed.queries - len(prep.traffic_queries()),
            "judged_queries": measured[exp.baseline]["judged_queries"],
            "cutoffs": list(exp.cutoffs),
            "backend": backend.kind,
            "latency": latency_note(
                exp.timing,
                backend=f"Milvus {'Lite' if backend.kind == 'lite' else 'server'} {backend.server_version}",
                warmup=exp.warmup,
                queries=replayed.queries,
                cost=replayed.cost,
            ),
            "configs": label_search_timing(measured, timing_groups(exp.configs)),
            "execution": replayed.execution,
            **(
                {"collection": prep.existing.provenance(), "resolution": prep.existing.report()}
                if prep.existing is not None
                else {}
            ),
            **({"traffic": traffic_document(prep.traffic)} if prep.traffic is not None else {}),
        }
    )


def traffic_document(traffic: Traffic) -> dict[str, Any]:
    """The summary's ``traffic``: what was read of the query log (no query text), as the reports name it."""
    doc = traffic.document()
    named = {"file": Path(doc["path"]).name, "requests": doc["occurrences"], "show_text": traffic.spec.show_text}
    return {**doc, **named}
