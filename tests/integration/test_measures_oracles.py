"""Every standard measure of every shipped experiment equals ir_measures (and pytrec_eval) on the exported
TREC files, per query and as the summary mean, at chunk and document level; queries with more relevant
chunks than a cutoff are among those checked. And every bounded measure of those runs lies in [0, 1].

The default experiment is checked on all its queries; the others, which differ from it in their configs and
search modes, on the first :data:`SAMPLE` (the run is the cost, not the check)."""

from __future__ import annotations

import json
import math
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

from rag_eval import jobs
from rag_eval.experiment import Experiment, Overrides, load_experiment, with_overrides
from tests.conftest import SHIPPED
from tests.integration.test_existing_runs import example_collection
from tests.integration.test_harness_lite import check_against_pytrec_eval, read_trec_qrels, read_trec_run
from tests.unit.frames import per_query_frame
from tests.unit.measures_equivalence import assert_same_measures

pytestmark = [pytest.mark.milvus_lite, pytest.mark.slow]
ir_measures = pytest.importorskip("ir_measures")

EXPERIMENTS = sorted(p.stem for p in (SHIPPED / "experiments").glob("*.toml"))
SAMPLE = 120  # labelled queries of every shipped experiment but the default one (of 264)


@pytest.fixture(scope="module")
def lite(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("oracles")


@pytest.fixture(scope="module", params=EXPERIMENTS)
def shipped_run(request: pytest.FixtureRequest, lite: Path) -> Iterator[tuple[Experiment, Path]]:
    shipped = load_experiment(SHIPPED / "experiments" / f"{request.param}.toml")
    limit = None if request.param == "default" else SAMPLE
    exp = with_overrides(shipped, Overrides(milvus_uri=str(lite / "milvus.db"), query_limit=limit))
    exp = replace(exp, cache_dir=lite / "cache")
    if exp.existing is not None:  # replayed as another team built it: build that collection first
        example_collection(str(lite / "milvus.db"), exp.existing.name)
    out = lite / request.param
    jobs.run_experiment(exp, out)
    yield exp, out


def test_standard_measures_equal_ir_measures_and_pytrec_eval(shipped_run: tuple[Experiment, Path]) -> None:
    exp, out = shipped_run
    assert check_against_pytrec_eval(out, exp.split, exp) > 0
    table = pq.read_table(out / "per_query.parquet").to_pandas()
    frame = per_query_frame(table, exp.cutoffs, {c["name"]: c["cap_aware"] for c in jobs.config_rows(exp)})
    summary = json.loads((out / "summary.json").read_text())
    names = {"P": ir_measures.P, "R": ir_measures.R, "nDCG": ir_measures.nDCG, "Success": ir_measures.Success}
    measures = [m @ k for m in names.values() for k in exp.cutoffs] + [ir_measures.RR]
    over_cutoff = 0
    for level, suffix in (("chunk", ""), ("doc", ".docs")):
        qrels = read_trec_qrels(out / "qrels" / f"{exp.split}.{'chunks' if level == 'chunk' else 'docs'}.trec")
        over_cutoff += sum(1 for q in qrels.values() if sum(g >= 1 for g in q.values()) > min(exp.cutoffs))
        for spec in exp.configs:
            run = read_trec_run(out / "runs" / f"{spec.name}{suffix}.trec")
            theirs: dict[tuple[str, str], float] = {
                (m.query_id, str(m.measure)): m.value for m in ir_measures.iter_calc(measures, qrels, run)
            }
            mine = frame[(frame["config"] == spec.name) & frame[f"{level}:RR"].notna()].set_index("query_id")
            for measure in measures:
                name = str(measure)
                ours = mine[f"{level}:{name}"]
                # ir_measures leaves out judged queries the run does not mention: they score 0
                expected = {q: theirs.get((q, name), 0.0) for q in mine.index}
                for q, value in ours.items():
                    assert value == pytest.approx(expected[q], abs=1e-9), (spec.name, level, name, q)
                assert summary["configs"][spec.name][level][name] == pytest.approx(
                    sum(expected.values()) / len(expected)
                )
    assert over_cutoff > 0


def test_column_wise_measures_equal_the_row_by_row_definitions(shipped_run: tuple[Experiment, Path]) -> None:
    exp, out = shipped_run
    table = pq.read_table(out / "per_query.parquet")
    index = table.schema.get_field_index("origin")
    for origin in ("labelled", "traffic"):  # a query log's rows are measured apart, by the same definitions
        part = table.filter(pc.equal(table.column("origin"), origin))
        if part.num_rows:
            as_labelled = part.set_column(index, "origin", pa.array(["labelled"] * part.num_rows))
            assert_same_measures(as_labelled, jobs.config_rows(exp), exp.cutoffs)


def test_bounded_measures_stay_in_the_unit_interval(shipped_run: tuple[Experiment, Path]) -> None:
    _, out = shipped_run
    summary = json.loads((out / "summary.json").read_text())
    bounded = (
        "same_doc_multi_chunk_recall",
        "same_doc_multi_chunk_recall_cap_aware",
        "duplicate_rate",
        "content_duplicate_rate",
        "content_duplicate_rate_copies",
        "content_duplicate_rate_same_text",
        "raw_duplicate_rate",
        "raw_content_duplicate_rate",
        "cap_compliance",
        "cap_compliance_true",
        "evidence_guard_1to1",
        "return_n_compliance",
    )
    for name, c in summary["configs"].items():
        for key in bounded:
            value = c[key]
            assert value is None or 0.0 <= value <= 1.0, (name, key, value)
        for level in ("chunk", "doc"):
            assert all(v is None or 0.0 <= v <= 1.0 for v in c[level].values()), (name, level)
        dup = c["content_duplicates"]
        assert sum(dup["by_cause"].values()) == sum(dup["by_key_kind"].values()) == dup["total"]
        rate = c["content_duplicate_rate"] or 0.0
        parts = (c["content_duplicate_rate_copies"] or 0.0) + (c["content_duplicate_rate_same_text"] or 0.0)
        assert math.isclose(rate, parts, abs_tol=1e-12)
