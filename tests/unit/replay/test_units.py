"""Harness pieces without Milvus: experiments, ingest plans, per-query rows and stage losses, measures."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from rag_eval.core.config import RagConfig
from rag_eval.core.errors import ConfigError
from rag_eval.datasets.chunking import Chunk
from rag_eval.datasets.labels import ChunkedCorpus
from rag_eval.experiment import PROFILES, ConfigSpec, IngestProfile, load_experiment
from rag_eval.files import write_text
from rag_eval.ingest.collection import IngestRow, plan_rows
from rag_eval.metrics.measures import (
    chunk_ranking,
    doc_ranking,
    query_values,
    same_doc_pairs_of_row,
    summarize,
    summary_frame,
)
from rag_eval.replay.batches import Replayer
from rag_eval.rundir.directory import RunStore
from rag_eval.rundir.rows import LATENCY_COLUMNS, Truth, rows_to_table
from rag_eval.search.memory import InMemoryRow, InMemorySearch
from tests.conftest import ROOT, SHIPPED
from tests.unit.frames import per_query_frame, read_parts
from tests.unit.rowwise_measures import content_duplicate_breakdown, row_identity, standard_measures


def write(tmp: Path, text: str) -> Path:
    p = tmp / "exp.toml"
    p.write_text(text)
    return p


def test_shipped_experiments_parse() -> None:
    for path in sorted((SHIPPED / "experiments").glob("*.toml")):
        exp = load_experiment(path)
        assert exp.configs and exp.baseline in {c.name for c in exp.configs}
        assert exp.dataset_path == SHIPPED.resolve()
    default = load_experiment(SHIPPED / "experiments" / "default.toml")
    legacy = next(c for c in default.configs if c.name == default.baseline).config
    assert (legacy.pipeline.value, legacy.retrieve_k, legacy.return_n) == ("legacy-merge", 5, 5)
    assert load_experiment(ROOT / "tests" / "experiments" / "clapnq.toml").split == "dev"


def test_experiment_problems_are_all_reported_with_their_keys(tmp_path: Path) -> None:
    (tmp_path / "bad.properties").write_text("rag.retrieve-k=zero\n")
    text = """
[experiment]
name = "x"
colour = "red"

[dataset]
split = 3

[chunker]
spec = "sentences:size=0"

[[configs]]
name = "a"
properties = "bad.properties"

[[configs]]
name = "b"
mode = "sparse"
rag = { return-n = 50, retrieve-k = 10 }

[[configs]]
name = "b"
"""
    with pytest.raises(ConfigError) as err:
        load_experiment(write(tmp_path, text))
    keys = " | ".join(p.key for p in err.value.problems)
    for expected in (
        "experiment.colour",
        "dataset.split",
        "dataset.path",
        "chunker.spec",
        "configs.a",
        "configs.b.mode",
        "configs.b",
        "configs",
    ):
        assert expected in keys
    assert err.value.path and err.value.path.endswith("exp.toml")
    assert "\n" not in str(err.value)


def test_cli_bad_experiment_exits_2_with_one_line_and_writes_nothing(tmp_path: Path) -> None:
    bad = write(tmp_path, "[dataset]\npath = 'nowhere'\n[[configs]]\nname = 'a'\nrag = { top-k = -1 }\n")
    out = tmp_path / "out"
    proc = subprocess.run(
        [sys.executable, "-m", "rag_eval.cli", "run", str(bad), "--out", str(out), "-q"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
    )
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "exp.toml" in lines[0] and "rag.top-k" in lines[0]
    assert not out.exists() and not (tmp_path / "reports").exists()


def test_cli_bad_dataset_exits_2_naming_file_and_line(tmp_path: Path) -> None:
    ds = tmp_path / "ds"
    (ds / "qrels").mkdir(parents=True)
    (ds / "corpus.jsonl").write_text('{"_id": "d1", "text": "a"}\n{"_id": "d2", "text": 7}\n')
    (ds / "queries.jsonl").write_text('{"_id": "q1", "text": "a"}\n')
    (ds / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\nq1\td1\t1\n")
    out = tmp_path / "out"
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "rag_eval.cli",
            "run",
            "--dataset",
            str(ds),
            "--config",
            f"a={SHIPPED / 'experiments' / 'configs' / 'evidence.properties'}",
            "--out",
            str(out),
            "-q",
            "--milvus-uri",
            str(tmp_path / "m.db"),
        ],
        capture_output=True,
        text=True,
        cwd=tmp_path,
    )
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.count("\n") == 1
    assert "corpus.jsonl:2: field 'text'" in proc.stderr
    assert not out.exists() and not (tmp_path / "m.db").exists()


def _corpus(n_docs: int = 30, per_doc: int = 10) -> ChunkedCorpus:
    chunks = tuple(
        Chunk(doc_id=f"d{d}", chunk_index=i, start=0, end=1, content=f"doc {d} chunk {i}", source=f"kb/d{d}.md")
        for d in range(n_docs)
        for i in range(per_doc)
    )
    return ChunkedCorpus(chunker_spec="test", chunks=chunks)


def test_ingest_plan_follows_the_profile_deterministically() -> None:
    corpus = _corpus()
    clean = plan_rows(corpus, PROFILES["clean"])
    assert [r.vector_id for r in clean] == list(range(1, 301)) and {r.kind for r in clean} == {"clean"}
    prod = plan_rows(corpus, IngestProfile(legacy_share=0.2, missing_doc_share=0.1, duplicate_share=0.15, seed=3))
    assert prod == plan_rows(
        corpus, IngestProfile(legacy_share=0.2, missing_doc_share=0.1, duplicate_share=0.15, seed=3)
    )
    kinds = pd.Series([r.kind for r in prod]).value_counts()
    assert 40 <= kinds["legacy"] <= 80 and 15 <= kinds["missing_doc"] <= 45 and 25 <= kinds["duplicate"] <= 70
    assert all(r.chunk_index is None for r in prod if r.kind == "legacy")
    assert all(r.doc_id is None for r in prod if r.kind == "missing_doc")
    by_id = {r.vector_id: r for r in prod}
    for dup in (r for r in prod if r.kind == "duplicate"):
        original = by_id[dup.copy_of or 0]
        assert (dup.chunk, dup.doc_id, dup.chunk_index) == (original.chunk, original.doc_id, original.chunk_index)
        assert dup.vector_id > 300


def _replay(tmp: Path, configs: list[ConfigSpec], relevance: dict[str, dict[str, int]]) -> pd.DataFrame:
    """Three documents; d0 has chunks 0-3, the query vector is closest to d0's chunks in order."""
    rows: list[IngestRow] = []
    mem: list[InMemoryRow] = []
    vid = 0
    for d, vecs in enumerate([[1.0, 0.98, 0.96, 0.94], [0.95, 0.5], [0.2]]):
        for i, sim in enumerate(vecs):
            vid += 1
            chunk = Chunk(
                doc_id=f"d{d}", chunk_index=i, start=0, end=10, content=f"doc {d} chunk {i} text", source=f"kb/d{d}.md"
            )
            rows.append(IngestRow(vector_id=vid, chunk=chunk, doc_id=chunk.doc_id, chunk_index=i, kind="clean"))
            mem.append(
                InMemoryRow(
                    vector_id=str(vid),
                    content=chunk.content,
                    vector=(sim, math.sqrt(1 - sim * sim)),
                    doc_id=chunk.doc_id,
                    chunk_index=i,
                    source=chunk.source,
                )
            )
    port = InMemorySearch.from_rows(mem, encoder=lambda text: (1.0, 0.0))
    truth = Truth.of_rows(
        rows,
        relevance=relevance,
        doc_relevance={q: {k.split("#")[0]: 1 for k in v} for q, v in relevance.items()},
    )
    store = RunStore(tmp / "run")
    store.begin({"fingerprint": "fp"}, resume=False)
    Replayer(port, configs, truth, warmup=1).run([("q1", "what")], store, batch_size=8)
    return read_parts(store).to_pandas()


def test_stage_losses_name_the_stage_that_lost_each_relevant_chunk(tmp_path: Path) -> None:
    relevant = {"q1": {"d0#chunk-0": 1, "d0#chunk-2": 1, "d0#chunk-3": 1, "d1#chunk-1": 1, "d2#chunk-0": 1}}
    configs = [
        ConfigSpec(name="cap2", config=RagConfig.from_mapping({"rag.retrieve-k": 6, "rag.return-n": 3})),
        ConfigSpec(name="narrow", config=RagConfig.from_mapping({"rag.retrieve-k": 2, "rag.return-n": 2})),
        ConfigSpec(
            name="budget",
            config=RagConfig.from_mapping({"rag.retrieve-k": 6, "rag.return-n": 5, "rag.projector.max-blocks": 1}),
        ),
        ConfigSpec(name="legacy", config=RagConfig.from_mapping({"rag.pipeline": "legacy", "rag.top-k": 3})),
        ConfigSpec(name="first", config=RagConfig.from_mapping({"rag.pipeline": "legacy-first", "rag.top-k": 3})),
    ]
    table = _replay(tmp_path, configs, relevant).set_index("config")
    losses = {c: dict(zip(table.loc[c, "lost_chunks"], table.loc[c, "lost_stages"], strict=True)) for c in table.index}
    # order by score: d0#0, d0#1, d0#2, d1#0, d0#3, d1#1, d2#0
    assert losses["cap2"] == {
        "d0#chunk-2": "cap",
        "d0#chunk-3": "cap",
        "d1#chunk-1": "return_n",
        "d2#chunk-0": "not_retrieved",
    }
    assert losses["narrow"]["d0#chunk-2"] == "not_retrieved"
    assert losses["budget"]["d1#chunk-1"] == "projector_blocks"
    # legacy: top-k 3 retrieves three chunks of d0 and delivers them merged in one document block
    assert list(table.loc["legacy", "member_chunks"]) == ["d0#chunk-0", "d0#chunk-1", "d0#chunk-2"]
    assert list(table.loc["legacy", "returned_keys"]) == ["kb/d0.md"]
    assert table.loc["legacy", "guard_violations"] == 3 and table.loc["cap2", "guard_violations"] == 0
    # legacy-first: the same three hits, one block with d0's top chunk; the others are document duplicates
    assert list(table.loc["first", "member_chunks"]) == ["d0#chunk-0"]
    assert losses["first"] == {
        "d0#chunk-2": "document_dedup",
        "d0#chunk-3": "not_retrieved",
        "d1#chunk-1": "not_retrieved",
        "d2#chunk-0": "not_retrieved",
    }


def test_summary_measures_on_a_worked_example(tmp_path: Path) -> None:
    relevant = {"q1": {"d0#chunk-0": 2, "d0#chunk-2": 1, "d1#chunk-0": 1}}
    configs = [ConfigSpec(name="c", config=RagConfig.from_mapping({"rag.retrieve-k": 6, "rag.return-n": 3}))]
    table = _replay(tmp_path, configs, relevant)
    # delivered: d0#0, d0#1, d1#0 (d0#2 capped)
    assert list(table.loc[0, "member_chunks"]) == ["d0#chunk-0", "d0#chunk-1", "d1#chunk-0"]
    summary, frame = summarize(table, configs=[{"name": "c", "cap": 2, "cap_aware": 2, "return_n": 3}], cutoffs=[3])
    c = summary["c"]
    assert c["chunk"]["P@3"] == pytest.approx(2 / 3) and c["chunk"]["R@3"] == pytest.approx(2 / 3)
    dcg = 2 + 1 / math.log2(4)
    idcg = 2 + 1 / math.log2(3) + 1 / math.log2(4)
    assert c["chunk"]["nDCG@3"] == pytest.approx(dcg / idcg)
    assert c["chunk"]["RR"] == 1.0
    assert c["same_doc_pairs"] == 1 and c["same_doc_multi_chunk_recall"] == pytest.approx(0.5)
    assert c["same_doc_multi_chunk_recall_cap_aware"] == pytest.approx(0.5)
    assert c["duplicate_rate"] == 0 and c["cap_compliance"] == 1.0 and c["return_n_compliance"] == 1.0
    assert c["stage_losses"] == {"cap": 1}
    assert len(frame) == 1
    assert rows_to_table(table.to_dict("records")).num_rows == 1
    wide = summary_frame(summary)
    assert wide.loc["c", "chunk:P@3"] == pytest.approx(2 / 3) and wide.loc["c", "lost:cap"] == 1
    assert "latency:search:p95" in wide.columns and "cap_violations" not in wide.columns


def test_standard_measures_edge_cases() -> None:
    assert standard_measures([], {"a": 1}, [5]) == {"P@5": 0.0, "R@5": 0.0, "Success@5": 0.0, "nDCG@5": 0.0, "RR": 0.0}
    m = standard_measures(["x", "a"], {"a": 1, "z": 0}, [1, 2])
    assert (m["P@1"], m["P@2"], m["R@2"], m["RR"]) == (0.0, 0.5, 1.0, 0.5)
    # nothing relevant (grade 0 only): recall and nDCG are 0, not undefined and not 1
    none = standard_measures(["a", "b"], {"a": 0}, [1, 2])
    assert none == {f"{m}@{k}": 0.0 for m in ("P", "R", "Success", "nDCG") for k in (1, 2)} | {"RR": 0.0}
    # a negative grade (judged non-relevant) gains nothing: DCG@2 = 1/log2(3), the ideal DCG 1
    neg = standard_measures(["a", "b"], {"a": -1, "b": 1}, [2])
    assert neg["nDCG@2"] == 1 / math.log2(3) and neg["RR"] == 0.5 and neg["R@2"] == 1.0


def test_same_document_pairs_of_one_row() -> None:
    # d: three relevant chunks, one delivered; e: one relevant chunk (no pair); f: two, both delivered
    row = {
        "relevant_chunks": ["d#chunk-0", "d#chunk-1", "d#chunk-2", "e#chunk-0", "f#chunk-0", "f#chunk-3"],
        "delivered_relevant": ["d#chunk-2", "e#chunk-0", "f#chunk-0", "f#chunk-3"],
    }
    assert same_doc_pairs_of_row(row, None) == [("d", 3, 1, 1 / 3, 1 / 3), ("f", 2, 2, 1.0, 1.0)]
    assert same_doc_pairs_of_row(row, 2) == [("d", 3, 1, 1 / 3, 1 / 2), ("f", 2, 2, 1.0, 1.0)]  # 1 of min(2, 3)
    assert same_doc_pairs_of_row(row, 1) == [("d", 3, 1, 1 / 3, 1.0), ("f", 2, 2, 1.0, 1.0)]  # 2 of min(1, 2): clipped


def _dup_row() -> dict[str, object]:
    """Six delivered chunks: a key repeated (a merged block carrying one row twice), a re-ingested
    copy under a vector key (row without chunk_index), the same text in another chunk (a row without
    doc_id), and a copy under a rank key (no identity at all)."""
    return {
        "query_id": "q",
        "config": "c",
        "judged": False,
        "relevant_chunks": [],
        "relevant_grades": [],
        "relevant_docs": [],
        "relevant_doc_grades": [],
        "delivered_relevant": [],
        "member_keys": ["a#chunk-0", "a#chunk-0", "vector:9", "b#chunk-1", "vector:12", "rank:7"],
        "member_chunks": ["a#chunk-0", "a#chunk-0", "a#chunk-0", "b#chunk-1", "c#chunk-3", "a#chunk-0"],
        "member_doc_ids": ["a", "a", "a", "b", "", ""],
        "member_content_sha": ["s1", "s1", "s1", "s2", "s2", "s1"],
        "hit_keys": ["a#chunk-0", "vector:9"],
        "hit_content_sha": ["s1", "s1"],
    }


def test_duplicates_by_key_and_by_content() -> None:
    table = pd.DataFrame([_dup_row()])
    frame = per_query_frame(table, [5], {"c": 2}, {"c": 3})
    assert (frame.loc[0, "dup_keys"], frame.loc[0, "dup_content"]) == (1, 3)
    assert (frame.loc[0, "dup_content_copy"], frame.loc[0, "dup_content_same_text"]) == (2, 1)
    assert (frame.loc[0, "raw_dup_keys"], frame.loc[0, "raw_dup_content"]) == (0, 1)
    # stored doc ids: a x3 (within cap 3); true documents: a x4 (the doc-less copy counts for a)
    assert (frame.loc[0, "cap_ok"], frame.loc[0, "cap_ok_true"]) == (1.0, 0.0)
    assert content_duplicate_breakdown(_dup_row()) == [
        {"cause": "re-ingested copy", "key_kind": "vector", "row_identity": "no chunk_index"},
        {"cause": "same text, other chunk", "key_kind": "vector", "row_identity": "no doc_id"},
        {"cause": "re-ingested copy", "key_kind": "rank", "row_identity": "no identity"},
    ]


def test_the_identity_of_the_row_behind_a_content_duplicate() -> None:
    assert row_identity("b#chunk-2", "b") == "doc_id and chunk_index"
    assert row_identity("b#chunk-2", "") == "doc_id and chunk_index"  # the key says it was written with both
    assert row_identity("vector:12", "b") == "no chunk_index"
    assert row_identity("vector:12", "") == "no doc_id"
    assert row_identity("rank:7", "") == row_identity("rank:7", "b") == "no identity"
    # a clean row holding text already delivered under another chunk
    row = {**_dup_row(), "member_keys": ["a#chunk-0", "b#chunk-1"], "member_chunks": ["a#chunk-0", "b#chunk-1"]}
    row |= {"member_doc_ids": ["a", "b"], "member_content_sha": ["s1", "s1"]}
    assert content_duplicate_breakdown(row) == [
        {"cause": "same text, other chunk", "key_kind": "chunk", "row_identity": "doc_id and chunk_index"}
    ]
    # keys and hashes are written together: a row where they do not pair is refused, not cut short
    with pytest.raises(ValueError, match="zip"):
        content_duplicate_breakdown({**row, "member_content_sha": ["s1", "s1", "s1"]})


def test_the_rankings_of_the_trec_runs() -> None:
    row = {"member_chunks": ["d#chunk-1", "unknown:7", "e#chunk-0", "d#chunk-1", "d#chunk-0", "unknown:8"]}
    assert chunk_ranking(row) == ["d#chunk-1", "unknown:7", "e#chunk-0", "d#chunk-0", "unknown:8"]
    assert doc_ranking(row) == ["d", "e"]  # an unknown chunk is no document


def test_cap_compliance_by_stored_and_true_document() -> None:
    table = pd.DataFrame([{**_dup_row(), **_latency_and_counts()}])
    cfg = {"name": "c", "cap": 3, "cap_source": "config", "cap_aware": 3, "return_n": 8}
    out, _ = summarize(table, configs=[cfg], cutoffs=[5])
    c = out["c"]
    assert (c["cap_compliance"], c["cap_compliance_true"]) == (1.0, 0.0)
    assert c["true_cap_violations"] == [{"query_id": "q", "doc_id": "a", "chunks": 4, "cap": 3}]
    assert c["content_duplicates"] == {
        "total": 3,
        "by_cause": {"re-ingested copy": 2, "same text, other chunk": 1},
        "by_key_kind": {"rank": 1, "vector": 2},
        "by_row_identity": {"no chunk_index": 1, "no doc_id": 1, "no identity": 1},
    }
    assert (c["content_duplicate_rate_copies"], c["content_duplicate_rate_same_text"]) == (2 / 6, 1 / 6)
    # no cap to check against (a legacy config without a production cap): not measured, never 100%
    out, _ = summarize(table, configs=[{**cfg, "cap": None}], cutoffs=[5])
    assert math.isnan(out["c"]["cap_compliance"]) and math.isnan(out["c"]["cap_compliance_true"])


def test_the_values_a_comparison_pairs_on() -> None:
    first = {**_dup_row(), **_latency_and_counts()}  # six blocks, return-n six: within it
    docless = {**first, "query_id": "q2", "n_blocks": 7, "guard_violations": 1, "member_doc_ids": [""] * 6}
    empty = {**first, "query_id": "q3", "n_blocks": 0, "guard_references": 0, "payload_chars": 0}
    empty |= {k: [] for k in ("member_keys", "member_chunks", "member_doc_ids", "member_content_sha")}
    cfg = {"name": "c", "cap": 3, "cap_source": "config", "cap_aware": 3, "return_n": 6}
    values = query_values(pd.DataFrame([first, docless, empty]), configs=[cfg], cutoffs=[5])
    assert values["query_id"].tolist() == ["q", "q2", "q3"]
    frame = per_query_frame(pd.DataFrame([first, docless, empty]), [5], {"c": 3}, {"c": 3})
    pd.testing.assert_frame_equal(values[frame.columns], frame)
    extra = ["max_doc_chunks", "return_n_ok", "guard_refs", "guard_ok", "payload_chars", "n_blocks"]
    assert list(values.columns) == [*frame.columns, *extra, *LATENCY_COLUMNS]
    assert values["return_n_ok"].tolist() == [1.0, 0.0, 1.0]
    assert values["guard_refs"].tolist() == [4.0, 4.0, 0.0] and values["guard_ok"].tolist() == [4.0, 3.0, 0.0]
    # stored doc ids a x3 (b once); doc-less chunks are buckets of their own: 1; nothing delivered: 0
    assert values["max_doc_chunks"].tolist() == [3.0, 1.0, 0.0]
    assert values["cap_ok"].tolist() == [1.0, 1.0, 1.0] and values["cap_ok_true"].tolist() == [0.0, 0.0, 1.0]
    assert values["payload_chars"].tolist() == [600.0, 600.0, 0.0] and values["n_blocks"].tolist() == [6.0, 7.0, 0.0]
    assert values["e2e_us"].tolist() == [1.0, 1.0, 1.0]


def _latency_and_counts() -> dict[str, object]:
    return {
        "lost_stages": [],
        "guard_references": 4,
        "guard_violations": 0,
        "n_blocks": 6,
        "payload_chars": 600,
        **{col: 1.0 for col in LATENCY_COLUMNS},
    }


def test_a_publish_removes_only_files_the_previous_run_published(tmp_path: Path) -> None:
    run = tmp_path / "run"
    (run / "runs").mkdir(parents=True)
    for name in ("mine.trec", "notes.trec", "old.trec", "old.docs.trec"):  # a user's files beside an old run's
        (run / "runs" / name).write_text("kept?")
    (run / "run.complete.json").write_text('{"files": ["runs/old.trec", "runs/old.docs.trec", "summary.json"]}')
    store = RunStore(run)
    with store.locked():
        store.stage()
        write_text(store.target / "runs" / "evidence.v2.trec", "q Q0 a 1 1 t\n")
        store.write_json("summary.json", {})
        assert not (run / "runs" / "evidence.v2.trec").exists()  # staged, not yet published
        assert store.publish() == ["runs/evidence.v2.trec", "summary.json"]
    assert sorted(p.name for p in (run / "runs").iterdir()) == ["evidence.v2.trec", "mine.trec", "notes.trec"]
    assert json.loads((run / "run.complete.json").read_text())["files"] == ["runs/evidence.v2.trec", "summary.json"]
    assert not (run / ".staging").exists()


def test_config_names_must_be_safe_file_names(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"configs\[0\]\.name"):
        load_experiment(write(tmp_path, "[dataset]\npath = '.'\n[[configs]]\nname = '../x'\n"))
