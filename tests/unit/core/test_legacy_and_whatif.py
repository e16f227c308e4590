"""The two legacy pipelines (merge, first), the content-dedup what-if, the production cap for legacy
configs, and the total order adapters give hits in."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from rag_eval.core.config import PipelineKind, RagConfig
from rag_eval.core.errors import ConfigError
from rag_eval.core.lookup import Pipeline
from rag_eval.core.postprocess import LegacyFirstPostProcessor, Stage
from rag_eval.core.transform import KnowledgeQueryTransformer
from rag_eval.core.types import KnowledgeSearchHit, hit_order, to_candidates
from rag_eval.experiment import load_experiment
from rag_eval.experiment.whatif import ContentDedupPostProcessor

from ..helpers import hit

HINTS = KnowledgeQueryTransformer().transform("why is the replica behind")


def test_pipeline_names_and_the_legacy_alias() -> None:
    assert RagConfig.from_properties_text("rag.pipeline=legacy").pipeline is PipelineKind.LEGACY_MERGE
    assert RagConfig.from_properties_text("rag.pipeline=legacy-merge").pipeline is PipelineKind.LEGACY_MERGE
    first = RagConfig.from_properties_text("rag.pipeline=legacy-first\nrag.top-k=4")
    assert (first.pipeline, first.retrieve_k, first.return_n) == (PipelineKind.LEGACY_FIRST, 4, 4)
    assert first.as_properties()["rag.pipeline"] == "legacy-first"
    with pytest.raises(ConfigError, match=r"not used by rag\.pipeline=legacy-first"):
        RagConfig.from_properties_text("rag.pipeline=legacy-first\nrag.max-chunks-per-document=3")
    with pytest.raises(ConfigError, match="'legacy-last' is not one of evidence, legacy-merge, legacy-first, legacy"):
        RagConfig.from_properties_text("rag.pipeline=legacy-last")


def test_legacy_first_keeps_each_documents_top_chunk_in_score_order() -> None:
    # port order differs from score order; d has three chunks (one a doc-less copy), e two, f one
    hits = [
        hit("1", 0.70, "d", 2, source="kb/d.md"),
        hit("2", 0.95, "e", 0, source="kb/e.md"),
        hit("3", 0.90, "d", 0, source="kb/d.md"),
        hit("4", 0.90, "e", 1, source="kb/e.md"),
        hit("5", 0.80, None, None, source="kb/d.md"),  # no doc_id, same source: the same document for legacy
        hit("6", 0.60, "f", 0, source="kb/f.md"),
    ]
    out = LegacyFirstPostProcessor(top_k=2)(to_candidates(hits))
    assert [(s.key, s.primary.key) for s in out.selected] == [("kb/e.md", "e#chunk-0"), ("kb/d.md", "d#chunk-0")]
    assert [len(s.hit_reasons) for s in out.selected] == [2, 3]  # the dropped chunks' reasons are merged
    stages = {e.key: e.stage for e in out.trace}
    assert stages == {
        "d#chunk-2": Stage.DOCUMENT_DEDUP,
        "e#chunk-0": Stage.RETURNED,
        "d#chunk-0": Stage.RETURNED,
        "e#chunk-1": Stage.DOCUMENT_DEDUP,
        "vector:5": Stage.DOCUMENT_DEDUP,
        "f#chunk-0": Stage.TRUNCATION,
    }
    assert [e.original_rank for e in out.trace] == [1, 2, 3, 4, 5, 6]


def test_legacy_first_payload_is_one_chunk_per_source() -> None:
    config = RagConfig.from_properties_text("rag.pipeline=legacy-first\nrag.top-k=5")
    hits = [hit("1", 0.9, "d", 0), hit("2", 0.8, "d", 1), hit("3", 0.7, "e", 0)]
    record = Pipeline(config).process(HINTS, hits)
    payload = record.payload
    assert payload.document_ids == ("kb/d.md", "kb/e.md")
    assert [e.content for e in payload.excerpts] == ["text of 1", "text of 3"]
    assert [e.delivered_members for e in payload.excerpts] == [("d#chunk-0",), ("e#chunk-0",)]


def test_a_legacy_block_carries_its_top_chunk_fields_and_every_members_reasons() -> None:
    # port order unlike score order: d's top-scored chunk is the second hit
    hits = [
        KnowledgeSearchHit(
            id="1",
            content="one",
            score=0.7,
            doc_id="d",
            chunk_index=1,
            vector_id="1",
            source="kb/d.md",
            title="D old",
            category="db",
            metadata={"lang": "en"},
        ),
        KnowledgeSearchHit(
            id="2",
            content="two",
            score=0.9,
            doc_id="d",
            chunk_index=0,
            vector_id="2",
            source="kb/d.md",
            title="D",
            category="ops",
            metadata={"lang": "fr"},
        ),
    ]
    for pipeline in ("legacy-merge", "legacy-first"):
        config = RagConfig.from_properties_text(f"rag.pipeline={pipeline}\nrag.top-k=5")
        (block,) = Pipeline(config).process(HINTS, hits).result.blocks
        assert (block.key, block.position, block.score) == ("kb/d.md", 1, 0.9)
        assert (block.doc_id, block.source, block.title, block.category) == ("d", "kb/d.md", "D", "ops")
        assert block.metadata == {"lang": "fr"}
        assert [(r.original_rank, r.vector_id) for r in block.hit_reasons] == [(2, "2"), (1, "1")]
        merged = pipeline == "legacy-merge"
        assert block.content == ("two\n\none" if merged else "two")
        assert [m.key for m in block.members] == (["d#chunk-0", "d#chunk-1"] if merged else ["d#chunk-0"])


def test_content_dedup_what_if_drops_same_text_after_key_dedup_before_the_cap() -> None:
    same = "Restart the SQL thread."
    hits = [
        hit("1", 0.9, "d", None, content=same),  # legacy row: vector:1
        hit("2", 0.9, "d", None, content="restart the  sql THREAD."),  # its re-ingested copy: vector:2
        hit("3", 0.8, "d", 1),
        hit("4", 0.7, "d", 2),
        hit("3", 0.6, "d", 1),  # a true duplicate of d#chunk-1 (same key)
    ]
    out = ContentDedupPostProcessor(return_n=5, max_chunks_per_document=2)(to_candidates(hits))
    assert [s.key for s in out.selected] == ["vector:1", "d#chunk-1"]
    stages = [(e.key, e.stage) for e in out.trace]
    assert stages == [
        ("vector:1", Stage.RETURNED),
        ("vector:2", Stage.CONTENT_DEDUP),
        ("d#chunk-1", Stage.RETURNED),
        ("d#chunk-2", Stage.CAP),  # the copy no longer takes a cap slot
        ("d#chunk-1", Stage.DEDUP),
    ]
    assert len(out.selected[0].hit_reasons) == 2
    # the production D2 keeps both copies, and the copy takes the second cap slot
    production = Pipeline(RagConfig()).postprocessor(to_candidates(hits))
    assert [s.key for s in production.selected] == ["vector:1", "vector:2"]


def test_hit_order_is_score_then_numeric_id_with_nan_last() -> None:
    hits = [
        KnowledgeSearchHit(id=i, content="", score=s, vector_id=i)
        for i, s in (("10", 0.5), ("9", 0.5), ("b", 0.5), ("a", 0.5), ("3", math.nan), ("2", 0.7))
    ]
    assert [h.id for h in sorted(hits, key=hit_order)] == ["2", "9", "10", "a", "b", "3"]


EXPERIMENT = """
[experiment]
name = "x"
{extra}
[dataset]
path = "."
[[configs]]
name = "old"
rag = {{ pipeline = "legacy-first", top-k = 5 }}
{configs}
"""


def _exp(tmp: Path, configs: str, extra: str = "") -> Path:
    p = tmp / "exp.toml"
    p.write_text(EXPERIMENT.format(configs=configs, extra=extra))
    return p


def test_legacy_is_checked_against_the_production_cap_never_an_implicit_default(tmp_path: Path) -> None:
    one = '[[configs]]\nname = "new"\nrag = { max-chunks-per-document = 3 }\n'
    exp = load_experiment(_exp(tmp_path, one))
    assert exp.checked_cap(exp.configs[0]) == (3, "the evidence configs' cap")
    assert exp.checked_cap(exp.configs[1]) == (3, "config")
    alone = load_experiment(_exp(tmp_path, ""))
    cap, why = alone.checked_cap(alone.configs[0])
    assert cap is None and "no cap to check against" in why
    named = load_experiment(_exp(tmp_path, "", extra="production_cap = 4"))
    assert named.checked_cap(named.configs[0]) == (4, "experiment.production_cap")
    two = one + '[[configs]]\nname = "wide"\nrag = { max-chunks-per-document = 5 }\n'
    with pytest.raises(ConfigError, match=r"experiment\.production_cap"):
        load_experiment(_exp(tmp_path, two))
    assert load_experiment(_exp(tmp_path, two, extra="production_cap = 3")).production_cap == 3
    with pytest.raises(ConfigError, match="must be >= 1"):
        load_experiment(_exp(tmp_path, one, extra="production_cap = 0"))


def test_what_if_is_validated(tmp_path: Path) -> None:
    good = '[[configs]]\nname = "w"\nwhat_if = "content-dedup"\n'
    exp = load_experiment(_exp(tmp_path, good))
    assert exp.configs[1].what_if == "content-dedup"
    assert (
        exp.configs[1].config_hash()
        != load_experiment(_exp(tmp_path, '[[configs]]\nname = "w"\n')).configs[1].config_hash()
    )
    with pytest.raises(ConfigError, match="'nope' is not one of content-dedup"):
        load_experiment(_exp(tmp_path, '[[configs]]\nname = "w"\nwhat_if = "nope"\n'))
    with pytest.raises(ConfigError, match="evidence pipeline only"):
        load_experiment(
            _exp(tmp_path, '[[configs]]\nname = "w"\nwhat_if = "content-dedup"\nrag = { pipeline = "legacy" }\n')
        )
