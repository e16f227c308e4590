"""The latency timing plan: which queries get their search timed, how the choice is written in an
experiment and on the command line, what a replay records for the others, and the p95's interval."""

from __future__ import annotations

import math
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from rag_eval.core.config import RagConfig
from rag_eval.core.errors import ConfigError
from rag_eval.datasets.chunking import Chunk
from rag_eval.experiment import ConfigSpec, Overrides, load_experiment, with_overrides
from rag_eval.experiment.latency import LatencyMode, ReplayCost, TimingPlan, label_search_timing, latency_note
from rag_eval.ingest.collection import IngestRow
from rag_eval.metrics.measures import latency_stats, quantile_ci
from rag_eval.replay.batches import Replayer, timing_groups
from rag_eval.rundir.directory import RunStore
from rag_eval.rundir.rows import Truth
from rag_eval.search.memory import InMemoryRow, InMemorySearch
from tests.conftest import SHIPPED
from tests.unit.frames import read_parts


def test_the_plan_times_all_a_seeded_sample_or_none() -> None:
    assert TimingPlan(mode=LatencyMode.ALL).timed(5) == frozenset(range(5))
    assert TimingPlan(mode=LatencyMode.OFF).timed(5) == frozenset()
    sample = TimingPlan(sample_size=10, seed=3)
    assert len(sample.timed(1000)) == 10 and sample.timed(1000) == TimingPlan(sample_size=10, seed=3).timed(1000)
    assert sample.timed(1000) != TimingPlan(sample_size=10, seed=4).timed(1000)
    assert sample.timed(7) == frozenset(range(7))  # fewer queries than the sample: every one
    assert TimingPlan().timed(2000) <= frozenset(range(2000)) and len(TimingPlan().timed(2000)) == 1000


@pytest.mark.parametrize(
    ("flag", "expected"),
    [("all", (LatencyMode.ALL, 1000)), ("off", (LatencyMode.OFF, 1000)), ("sample:50", (LatencyMode.SAMPLE, 50))],
)
def test_the_flag_reads_mode_and_size(flag: str, expected: tuple[LatencyMode, int]) -> None:
    plan = TimingPlan.parse(flag)
    assert (plan.mode, plan.sample_size) == expected


@pytest.mark.parametrize("flag", ["sometimes", "sample:0", "sample:x", "all:5", "sample:-3", ""])
def test_a_bad_flag_is_one_clear_error(flag: str) -> None:
    with pytest.raises(ConfigError, match="--latency"):
        TimingPlan.parse(flag)


def write(tmp: Path, timing: str) -> Path:
    path = tmp / "exp.toml"
    path.write_text(
        f"[dataset]\npath = {str(SHIPPED)!r}\n[[configs]]\nname = 'a'\nrag = {{ retrieve-k = 5 }}\n[timing]\n{timing}"
    )
    return path


def test_the_experiment_file_holds_the_plan_and_the_fingerprint_follows_it(tmp_path: Path) -> None:
    exp = load_experiment(write(tmp_path, 'latency = "sample"\nlatency_sample = 40\nlatency_seed = 9\n'))
    assert exp.timing == TimingPlan(mode=LatencyMode.SAMPLE, sample_size=40, seed=9)
    assert exp.as_dict()["timing"] == {"mode": "sample", "sample_size": 40, "seed": 9}
    off = with_overrides(exp, Overrides(latency="off"))
    assert off.timing.mode is LatencyMode.OFF and off.timing.sample_size == 40
    assert off.fingerprint() != exp.fingerprint()  # resume refuses a run timed another way


def test_bad_timing_settings_are_reported_with_their_keys(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as err:
        load_experiment(write(tmp_path, 'latency = "often"\nlatency_sample = 0\n'))
    message = str(err.value)
    assert "timing.latency" in message and "'often'" in message and "timing.latency_sample" in message


def test_cli_bad_latency_flag_exits_2_and_writes_nothing(tmp_path: Path) -> None:
    out = tmp_path / "out"
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "rag_eval.cli",
            "run",
            str(SHIPPED / "experiments" / "default.toml"),
            "--latency",
            "sample:none",
            "--out",
            str(out),
            "-q",
        ],
        capture_output=True,
        text=True,
        cwd=tmp_path,
    )
    assert proc.returncode == 2, proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1 and "--latency" in proc.stderr
    assert not out.exists()


def _port_and_truth() -> tuple[InMemorySearch, Truth]:
    chunks = [Chunk(doc_id="d", chunk_index=i, start=0, end=4, content=f"c{i}", source="kb/d.md") for i in range(3)]
    rows = [IngestRow(vector_id=i, chunk=c, doc_id="d", chunk_index=i, kind="clean") for i, c in enumerate(chunks)]
    mem = [
        InMemoryRow(vector_id=str(i), content=c.content, vector=(1.0, i / 10), doc_id="d", chunk_index=i)
        for i, c in enumerate(chunks)
    ]
    truth = Truth.of_rows(rows, relevance={}, doc_relevance={})
    return InMemorySearch.from_rows(mem, encoder=lambda text: (1.0, 0.0)), truth


def test_untimed_queries_have_no_search_e2e_or_qps_but_keep_their_post_process_times(tmp_path: Path) -> None:
    port, truth = _port_and_truth()
    configs = [
        ConfigSpec(name="a", config=RagConfig.from_mapping({"rag.retrieve-k": 3, "rag.return-n": 2})),
        ConfigSpec(name="b", config=RagConfig.from_mapping({"rag.retrieve-k": 3, "rag.return-n": 1})),
        ConfigSpec(name="c", config=RagConfig.from_mapping({"rag.retrieve-k": 2, "rag.return-n": 1})),
    ]
    store = RunStore(tmp_path / "run")
    store.begin({"experiment": "t"}, resume=False)
    queries = [(f"q{i}", f"question {i}") for i in range(12)]
    replayer = Replayer(port, configs, truth, warmup=1, timing=TimingPlan(sample_size=4, seed=1))
    replayer.run(queries, store, batch_size=5)
    table = read_parts(store).to_pandas()
    timed = sorted(TimingPlan(sample_size=4, seed=1).timed(12))
    for name in ("a", "b", "c"):
        rows = table[table["config"] == name].set_index("query_index")
        assert sorted(rows.index[rows["search_us"].notna()]) == timed
        assert rows.loc[~rows.index.isin(timed), "e2e_us"].isna().all()
        assert rows["postprocess_us"].notna().all() and (rows["postprocess_us"] > 0).all()
    a, b = (table[table["config"] == n].set_index("query_index")["search_us"] for n in ("a", "b"))
    assert a.equals(b)  # one measurement, shared: the same search
    assert replayer.timing_seconds > 0
    groups = timing_groups(configs)
    assert groups["a"] == ("dense, no filter, retrieve-k 3", ["a", "b"]) and groups["c"][1] == ["c"]
    labelled = label_search_timing({"a": {}, "b": {}, "c": {}}, groups)
    assert labelled["a"]["search_latency"]["shared_with"] == ["b"]
    assert labelled["c"]["search_latency"]["shared_with"] == []
    note = latency_note(TimingPlan(sample_size=4, seed=1), backend="x", warmup=1, queries=12,
                        cost=ReplayCost(0.5, 2.0))  # fmt: skip
    assert (note["search"]["timed_queries"], note["search"]["seed"], note["postprocess"]["timed_queries"]) == (4, 1, 12)
    assert (note["search"]["replay_seconds"], note["search"]["timing_share_of_replay"]) == (2.0, 0.25)
    unknown = latency_note(TimingPlan(), backend="x", warmup=1, queries=12, cost=ReplayCost(0.5))
    assert unknown["search"]["timing_share_of_replay"] is None


def test_latency_off_times_nothing(tmp_path: Path) -> None:
    port, truth = _port_and_truth()
    configs = [ConfigSpec(name="a", config=RagConfig.from_mapping({"rag.retrieve-k": 3, "rag.return-n": 2}))]
    store = RunStore(tmp_path / "run")
    store.begin({"experiment": "t"}, resume=False)
    replayer = Replayer(port, configs, truth, timing=TimingPlan(mode=LatencyMode.OFF))
    replayer.run([("q1", "x"), ("q2", "y")], store, batch_size=8)
    table = read_parts(store).to_pandas()
    assert table["search_us"].isna().all() and replayer.timing_seconds == 0
    stats = latency_stats(table["search_us"])
    assert all(math.isnan(v) for v in stats.values())


def test_the_p95_interval_is_the_binomial_one() -> None:
    values = np.arange(1.0, 265.0)  # 264 timed queries, as the shipped set has
    ci = quantile_ci(values)
    assert (ci["timed_queries"], ci["p95_ci_low_us"], ci["p95_ci_high_us"]) == (264, 243.0, 258.0)
    assert 0.95 <= ci["p95_ci_coverage"] < 0.97
    small = quantile_ci([1.0, 2.0, 3.0, math.nan])
    assert small["timed_queries"] == 3 and math.isnan(small["p95_ci_high_us"])  # too few to bound it above
    assert math.isnan(quantile_ci([])["p95_ci_low_us"])


def test_post_processing_takes_each_query_under_every_config_in_turn(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A burst of load during the replay must fall on every config alike, not on one config's loop."""
    from rag_eval.core.lookup import Pipeline

    port, truth = _port_and_truth()
    configs = [
        ConfigSpec(name=n, config=RagConfig.from_mapping({"rag.retrieve-k": 3, "rag.return-n": r}))
        for n, r in (("a", 2), ("b", 1))
    ]
    calls: list[tuple[str, int]] = []
    process = Pipeline.process

    def spy(self: Pipeline, hints, hits, **kw):  # type: ignore[no-untyped-def]
        calls.append((hints.normalized_query, self.config.return_n))
        return process(self, hints, hits, **kw)

    monkeypatch.setattr(Pipeline, "process", spy)
    store = RunStore(tmp_path / "run")
    store.begin({"experiment": "t"}, resume=False)
    replayer = Replayer(port, configs, truth, warmup=0)
    replayer.run([("q1", "one"), ("q2", "two")], store, batch_size=8)
    # each query in rounds (one warm-up, then the timed ones), every config once a round, in an order
    # drawn per query and rotated each round: each config is timed first as often as the other
    warmup, repeats = replayer.timing.rounds
    rounds = warmup + repeats
    assert [q for q, _ in calls] == ["one"] * 2 * rounds + ["two"] * 2 * rounds
    for query in ("one", "two"):
        mine = [n for q, n in calls if q == query]
        per_round = [mine[i : i + 2] for i in range(0, len(mine), 2)]
        assert all(sorted(r) == [1, 2] for r in per_round)
        firsts = [r[0] for r in per_round[warmup:]]
        assert abs(firsts.count(1) - firsts.count(2)) <= 1
    rows = read_parts(store).to_pandas()
    pairs = list(zip(rows["config"], rows["query_id"], strict=True))
    assert pairs == [("a", "q1"), ("a", "q2"), ("b", "q1"), ("b", "q2")]  # rows still by config, then query
