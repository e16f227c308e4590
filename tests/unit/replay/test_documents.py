"""What a run says about itself: the line saying which behaviour a config models, each config as the
manifest lists it (its cap and where the cap comes from), what pairs two runs, and summary.json."""

from __future__ import annotations

import math
from dataclasses import replace
from types import SimpleNamespace
from typing import Any, cast

import pytest

from rag_eval.core.config import RagConfig
from rag_eval.experiment import ConfigSpec, load_experiment
from rag_eval.experiment.latency import ReplayCost
from rag_eval.replay.documents import LABEL_NOTES, config_rows, data_identity, pipeline_note, run_summary
from tests.conftest import SHIPPED

EXP = load_experiment(SHIPPED / "experiments" / "default.toml")
CONFIGS = SHIPPED / "experiments" / "configs"


def spec(name: str, what_if: str | None = None, **rag: Any) -> ConfigSpec:
    return ConfigSpec(
        name=name, config=RagConfig.from_mapping({f"rag.{k}": v for k, v in rag.items()}), what_if=what_if
    )


@pytest.mark.parametrize(
    ("config", "note"),
    [
        (spec("e", **{"retrieve-k": 20}), "D1-D5: chunk-scoped evidence keys, dedup by key, per-document cap, "
         "retrieve-k/return-n"),
        (spec("m", pipeline="legacy"), "legacy that merges every retrieved chunk of a source into one block (no cap)"),
        (spec("m", pipeline="legacy-merge"), "legacy that merges every retrieved chunk of a source into one block "
         "(no cap)"),
        (spec("f", pipeline="legacy-first"), "legacy that keeps a source's top-scored chunk and drops its other "
         "chunks as duplicates"),
        (spec("w", what_if="content-dedup"), "what if: D2, then dedup by normalised content, then D3/D4 (evaluation "
         "only, not production)"),
    ],
)  # fmt: skip
def test_the_note_of_what_a_config_models(config: ConfigSpec, note: str) -> None:
    assert pipeline_note(config) == note


def test_each_config_as_the_manifest_lists_it() -> None:
    rows = {r["name"]: r for r in config_rows(EXP)}
    assert list(rows) == ["legacy-merge", "legacy-first", "evidence", "evidence-top-k-only", "whatif-content-dedup"]
    assert [r["baseline"] for r in rows.values()] == [True, False, False, False, False]
    evidence = rows["evidence"]
    assert {k: evidence[k] for k in ("mode", "pipeline", "what_if", "retrieve_k", "return_n", "cap", "cap_source",
                                     "cap_aware")} == {
        "mode": "dense", "pipeline": "evidence", "what_if": None, "retrieve_k": 20, "return_n": 5, "cap": 2,
        "cap_source": "config", "cap_aware": 2,
    }  # fmt: skip
    assert evidence["origin"] == str(CONFIGS / "evidence.properties")
    assert evidence["rag"]["rag.retrieve-k"] == "20" and evidence["rag"]["rag.max-chunks-per-document"] == "2"
    merge = rows["legacy-merge"]
    assert (merge["pipeline"], merge["cap"], merge["cap_source"], merge["cap_aware"]) == (
        "legacy-merge", 2, "the evidence configs' cap", None,
    )  # fmt: skip
    assert merge["models"] == pipeline_note(EXP.configs[0])
    whatif = rows["whatif-content-dedup"]
    assert whatif["what_if"] == "content-dedup" and whatif["models"].startswith("what if: ")
    assert (
        whatif["rag"] == evidence["rag"] and whatif["hash"] != evidence["hash"]
    )  # the same properties, not one config
    assert len({r["hash"] for r in rows.values()}) == 5


def test_a_legacy_configs_cap_when_the_evidence_configs_disagree_or_the_experiment_names_one() -> None:
    configs = (
        spec("old", pipeline="legacy", **{"top-k": 5}),
        spec("two", **{"max-chunks-per-document": 2}),
        spec("three", **{"max-chunks-per-document": 3}),
    )
    rows = config_rows(replace(EXP, configs=configs, baseline="old"))
    assert (rows[0]["cap"], rows[0]["cap_source"]) == (None, "the evidence configs use caps [2, 3]: set "
                                                       "experiment.production_cap")  # fmt: skip
    assert [(r["cap"], r["cap_source"]) for r in rows[1:]] == [(2, "config"), (3, "config")]
    named = config_rows(replace(EXP, configs=configs, baseline="old", production_cap=4))
    assert (named[0]["cap"], named[0]["cap_source"]) == (4, "experiment.production_cap")
    alone = config_rows(replace(EXP, configs=configs[:1], baseline="old"))
    assert (alone[0]["cap"], alone[0]["cap_source"]) == (
        None, "no cap to check against (no evidence config, no experiment.production_cap)",
    )  # fmt: skip
    assert [r["origin"] for r in rows] == ["inline"] * 3


def prepared(level: str) -> Any:
    dataset = SimpleNamespace(checksum="sum", split="dev")
    return cast(
        Any,
        SimpleNamespace(
            dataset=dataset, labels=SimpleNamespace(level=level), existing=None, traffic=None, traffic_queries=list
        ),
    )


def test_what_pairs_a_run_with_an_earlier_one() -> None:
    assert data_identity(EXP, prepared("span")) == {
        "data set checksum": "sum", "split": "dev", "chunker": "sentences:size=3,overlap=0", "labels": ("span", 1),
    }  # fmt: skip


def test_the_summary_document_of_a_run() -> None:
    replayed = cast(Any, SimpleNamespace(
        backend=SimpleNamespace(kind="lite", server_version="2.4.0"), queries=40, cost=ReplayCost(1.0, 4.0, 3.0),
        execution={"replay": "serial"},
    ))  # fmt: skip
    measured = {spec.name: {"judged_queries": 30 + i, "recall@5": math.nan} for i, spec in enumerate(EXP.configs)}
    manifest = {
        "git": {"commit": None, "dirty": None}, "fingerprint": "fp", "dataset": {"checksum": "sum"},
        "configs": [{"name": "legacy-merge", "hash": "h"}], "started": "t0",
    }  # fmt: skip
    got = run_summary(EXP, prepared("document"), replayed, manifest=manifest, measured=measured)
    assert got["provenance"] == {
        "git": {"commit": None, "dirty": None}, "fingerprint": "fp", "dataset_checksum": "sum",
        "config_hashes": {"legacy-merge": "h"}, "started": "t0",
    }  # fmt: skip
    assert (got["experiment"], got["baseline"], got["queries"], got["judged_queries"]) == (
        "incident-kb-legacy-vs-evidence", "legacy-merge", 40, 30,
    )  # fmt: skip
    assert (got["label_level"], got["label_note"]) == ("document", LABEL_NOTES["document"])
    assert got["label_note"].startswith("no span qrels: ")
    assert (got["backend"], got["latency"]["backend"]) == ("lite", "Milvus Lite 2.4.0")
    assert (got["latency"]["search"]["replay_cpu_seconds"], got["latency"]["search"]["replay_cpu_share"]) == (3.0, 0.75)
    assert got["cutoffs"] == list(EXP.cutoffs) and got["execution"] == {"replay": "serial"}
    assert got["configs"]["evidence"]["recall@5"] is None  # NaN is written as null
    assert "whatif-content-dedup" in got["configs"]["evidence"]["search_latency"]["shared_with"]
    assert "collection" not in got and "resolution" not in got  # no existing collection replayed
    span = run_summary(EXP, prepared("span"), replayed, manifest=manifest, measured=measured)
    assert span["label_note"] == "chunk relevance from span overlap"
