"""A published number reproduces as it is published: the BEIR conventions on a small BEIR-format sample.

The sample has no metadata (the ``clean`` profile by default), titles, and one abstract longer than the
projector's excerpt limit. The shipped example experiment (``examples/beir-scifact/experiment.toml``), pointed
at the sample, must embed ``title + " " + text`` of each whole document, write the data set's rows, search a
FLAT index and say so (no HNSW parameter), deliver the long abstract whole, and write TREC runs whose
scores are the search scores (pytrec_eval reads from them what rag-eval measured). The same experiment
with the payload budget on loses that abstract to the budget, and says so.
"""

from __future__ import annotations

import itertools
import json
import math
import re
import zlib
from collections.abc import Iterator, Sequence
from dataclasses import replace
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest

from rag_eval import jobs
from rag_eval.experiment import Experiment, Overrides, load_experiment, with_overrides
from rag_eval.reports.console import describe_run
from rag_eval.reports.display import budget_note
from tests.conftest import ROOT

pytestmark = pytest.mark.milvus_lite

EXAMPLE = ROOT / "examples" / "beir-scifact" / "experiment.toml"
EMBEDDED: list[str] = []  # every text the sample's embedder was given
LONG = " ".join(f"Sentence {i} about vitamin d receptor signalling in bone." for i in range(60))
DOCS = {
    "d1": ("Vitamin D and bone", "Vitamin D supplements increase bone density in older adults."),
    "d2": ("Sleep", "Short sleep raises the risk of obesity in children."),
    "d3": ("Receptor signalling", LONG),  # longer than the projector's 2,000 characters an excerpt
    "d4": ("Statins", "Statins lower cholesterol and cardiovascular events."),
}
QUERIES = {"q1": "vitamin d bone density", "q2": "sleep obesity children", "q3": "vitamin d receptor signalling"}
QRELS = [("q1", "d1", 1), ("q2", "d2", 1), ("q3", "d3", 1), ("q3", "d1", 1)]


def embed(texts: Sequence[str]) -> list[list[float]]:
    """A bag of words hashed into 64 dimensions: texts sharing words are near (deterministic, no model)."""
    EMBEDDED.extend(texts)
    out = []
    for text in texts:
        vec = np.zeros(64)
        for word in re.findall(r"[a-z0-9]+", text.lower()):
            vec[zlib.crc32(word.encode()) % 64] += 1.0
        out.append((vec + 1e-3).tolist())
    return out


def write_sample(root: Path) -> Path:
    (root / "qrels").mkdir(parents=True)
    with open(root / "corpus.jsonl", "w", encoding="utf-8") as fh:
        for did, (title, text) in DOCS.items():
            fh.write(json.dumps({"_id": did, "title": title, "text": text, "metadata": {}}) + "\n")
    with open(root / "queries.jsonl", "w", encoding="utf-8") as fh:
        for qid, text in QUERIES.items():
            fh.write(json.dumps({"_id": qid, "text": text, "metadata": {}}) + "\n")
    lines = ["query-id\tcorpus-id\tscore", *(f"{q}\t{d}\t{s}" for q, d, s in QRELS)]
    (root / "qrels" / "test.tsv").write_text("\n".join(lines) + "\n")
    return root


def example(tmp: Path, sample: Path, **changes: object) -> Experiment:
    exp = with_overrides(load_experiment(EXAMPLE), Overrides(dataset=str(sample), milvus_uri=str(tmp / "m.db")))
    embedder = replace(exp.embedder, provider="python", callable=f"{__name__}:embed", model="")
    return replace(exp, embedder=embedder, cache_dir=tmp / "cache", **changes)  # type: ignore[arg-type]


@pytest.fixture(scope="module")
def sample(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_sample(tmp_path_factory.mktemp("beir") / "sample")


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory, sample: Path) -> Iterator[tuple[Experiment, Path]]:
    tmp = tmp_path_factory.mktemp("beir-run")
    EMBEDDED.clear()
    exp = example(tmp, sample)
    jobs.run_experiment(exp, tmp / "run")
    yield exp, tmp / "run"


def test_the_example_reads_as_a_benchmark(sample: Path) -> None:
    exp = with_overrides(load_experiment(EXAMPLE), Overrides(dataset=str(sample)))
    assert exp.chunker_spec == "document" and exp.embedder.passage == "title+text"
    assert exp.profile.name == "clean" and exp.index.to_json()["build_params"] == {}
    assert exp.leading_cutoffs == (10,)
    limits = {(c.config.max_blocks, c.config.max_excerpt_chars, c.config.max_total_chars) for c in exp.configs}
    assert limits == {(2**31 - 1,) * 3}
    line = describe_run(exp, Path("out"))
    assert "chunker document" in line and "(title+text)" in line and "payload budget lifted" in line


def test_a_data_set_without_metadata_is_written_clean_unless_a_profile_is_named(sample: Path, tmp_path: Path) -> None:
    (tmp_path / "e.toml").write_text(f'[dataset]\npath = "{sample}"\n[[configs]]\nname = "a"\n')
    chosen = load_experiment(tmp_path / "e.toml")
    assert chosen.profile.name == "clean"
    assert "ingest profile clean (chosen by the data set)" in describe_run(chosen, tmp_path)
    (tmp_path / "e.toml").write_text(f'[dataset]\npath = "{sample}"\n[ingest]\nprofile = "production"\n'
                                     '[[configs]]\nname = "a"\n')  # fmt: skip
    assert load_experiment(tmp_path / "e.toml").profile.name == "production"
    assert load_experiment(ROOT / "datasets" / "incident-kb" / "experiments" / "default.toml").profile.name == (
        "production"
    )


def test_each_document_is_one_chunk_embedded_as_title_space_text(run: tuple[Experiment, Path]) -> None:
    _, out = run
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["dataset"]["chunks"] == len(DOCS)
    assert manifest["milvus"]["collection_manifest"]["rows"] == len(DOCS)  # clean: no copies, every doc id
    assert manifest["experiment"]["ingest_profile"]["name"] == "clean"
    assert manifest["milvus"]["collection_manifest"]["passage"] == "title+text"  # a text-only collection: not reused
    assert {f"{title} {text}" for title, text in DOCS.values()} <= set(EMBEDDED)
    assert not any(text in EMBEDDED for _, text in DOCS.values())  # never the text without its title


def test_provenance_records_the_flat_index_as_it_ran(run: tuple[Experiment, Path]) -> None:
    _, out = run
    milvus = json.loads((out / "manifest.json").read_text())["milvus"]
    flat = {"index_type": "FLAT", "metric": "COSINE", "build_params": {}, "search_params": {}}
    assert milvus["index"] == flat and milvus["collection_manifest"]["index"] == flat
    assert milvus["search"] == {"params": {}}
    assert not {"M", "efConstruction", "ef"} & set(keys(milvus))  # nothing of HNSW's, anywhere


def keys(value: object) -> Iterator[str]:
    """Every key of a JSON document, at any depth."""
    if isinstance(value, dict):
        for key, inner in value.items():
            yield key
            yield from keys(inner)
    elif isinstance(value, list):
        for inner in value:
            yield from keys(inner)


def test_no_relevant_chunk_is_lost_to_the_budget_and_the_long_abstract_is_delivered_whole(
    run: tuple[Experiment, Path],
) -> None:
    _, out = run
    rows = pq.read_table(out / "per_query.parquet").to_pylist()
    assert not [s for r in rows for s in r["lost_stages"] if s.startswith("projector")]
    q3 = next(r for r in rows if r["query_id"] == "q3")
    assert "d3#chunk-0" in q3["delivered_relevant"] and len(LONG) in q3["returned_chars"]
    assert budget_note(json.loads((out / "summary.json").read_text())) is None


def test_trec_runs_carry_the_search_scores_in_delivered_order(run: tuple[Experiment, Path]) -> None:
    _, out = run
    rows = {r["query_id"]: r for r in pq.read_table(out / "per_query.parquet").to_pylist()}
    lines = [line.split() for line in (out / "runs" / "minilm.docs.trec").read_text().splitlines()]
    for qid, row in rows.items():
        mine = [line for line in lines if line[0] == qid]
        assert [line[2] for line in mine] == [c.split("#")[0] for c in row["member_chunks"]]  # delivered order
        scores = [float(line[4]) for line in mine]
        assert all(a > b for a, b in itertools.pairwise(scores))
        hits = dict(zip(row["hit_chunks"], row["hit_scores"], strict=True))
        for line, score in zip(mine, scores, strict=True):  # the search score, or a hair below a tie
            assert math.isclose(score, hits[f"{line[2]}#chunk-0"], rel_tol=0, abs_tol=1e-6)
    pytrec_eval = pytest.importorskip("pytrec_eval")
    run_scores: dict[str, dict[str, float]] = {}
    for qid, _, docno, _, score, _ in lines:
        run_scores.setdefault(qid, {})[docno] = float(score)
    qrels: dict[str, dict[str, int]] = {}
    for q, d, s in QRELS:
        qrels.setdefault(q, {})[d] = s
    measured = pytrec_eval.RelevanceEvaluator(qrels, {"ndcg_cut.10", "recall.10"}).evaluate(run_scores)
    summary = json.loads((out / "summary.json").read_text())["configs"]["minilm"]["doc"]
    assert math.isclose(summary["nDCG@10"], np.mean([m["ndcg_cut_10"] for m in measured.values()]), abs_tol=1e-12)
    assert math.isclose(summary["R@10"], np.mean([m["recall_10"] for m in measured.values()]), abs_tol=1e-12)


def test_with_the_payload_budget_the_long_abstract_is_lost_and_the_run_says_so(tmp_path: Path, sample: Path) -> None:
    exp = example(tmp_path, sample, payload_budget=True)
    production = {"max_excerpt_chars": 2000, "max_total_chars": 12000, "max_blocks": 8}  # the projector's defaults
    exp = replace(exp, configs=tuple(replace(c, config=c.config.with_(**production)) for c in exp.configs))
    jobs.run_experiment(exp, tmp_path / "run")
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert summary["configs"]["minilm"]["stage_losses"].get("projector_excerpt_chars") == 1
    note = budget_note(summary)
    assert note is not None and "minilm: 1 (excerpt chars 1)" in note
    assert note in re.sub(r"\\(.)", r"\1", (tmp_path / "run" / "report.md").read_text())  # Markdown unescaped
    assert "the payload budget changed the measures" in (tmp_path / "run" / "report.html").read_text()


def test_the_report_leads_with_the_cutoffs_the_experiment_names(run: tuple[Experiment, Path]) -> None:
    _, out = run
    report = (out / "report.md").read_text()
    standard = report.split("## Standard measures", 1)[1].split("\n## ", 1)[0]
    rows = [line.split("|")[1].strip() for line in standard.splitlines() if line.startswith("| ") and "@" in line]
    at_10 = [r for r in rows if r.endswith("@10")]
    assert at_10 and rows[: len(at_10)] == at_10  # every @10 measure first, then the others
    assert len(rows) > len(at_10)
