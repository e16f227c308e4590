"""The gates on real runs of the shipped knowledge base (Milvus Lite): they must not cry wolf, and they
must fire on real regressions.

- a config compared with itself, and an identical config under another name, pass every gate (p = 1
  on every quality metric);
- A/A: 200 random swaps of the two values of each unit of real paired data (legacy against D1-D5,
  whose true difference is far from zero) make each relative gate fire in at most alpha of them;
- ``rag.return-n=1`` against ``evidence`` fails the same-document recall gate (exit 1, a JUnit
  failure naming it); ``rag.max-chunks-per-document=5`` fails the per-document gate.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
from junitparser import Failure, JUnitXml

from rag_eval import jobs
from rag_eval.cli import main
from rag_eval.compare.catalog import catalog, find_metric
from rag_eval.compare.comparison import compare
from rag_eval.compare.gates import RelativeCheck, gates_from_table, load_gates, parse_check
from rag_eval.compare.history import read_history
from rag_eval.compare.runs import ComparedRun
from rag_eval.compare.stats import Pairing, Settings, aggregate, paired_compare
from rag_eval.compare.verdicts import gate_alternative
from rag_eval.experiment import Overrides, load_experiment, with_overrides
from tests.conftest import SHIPPED

pytestmark = [pytest.mark.milvus_lite, pytest.mark.slow]

CONFIGS = """
[[configs]]
name = "evidence"
properties = "{shipped}/experiments/configs/evidence.properties"

[[configs]]
name = "evidence-twin"
properties = "{shipped}/experiments/configs/evidence.properties"

[[configs]]
name = "evidence-twin-2"
properties = "{shipped}/experiments/configs/evidence.properties"

[[configs]]
name = "return-n-1"
rag = {{ retrieve-k = 20, return-n = 1, max-chunks-per-document = 2 }}

[[configs]]
name = "cap5"
rag = {{ retrieve-k = 20, return-n = 5, max-chunks-per-document = 5 }}

[[configs]]
name = "legacy"
properties = "{shipped}/experiments/configs/legacy.properties"
"""


def experiment_file(tmp: Path, name: str, baseline: str, configs: str, gates: str = "") -> Path:
    path = tmp / f"{name}.toml"
    path.write_text(
        f'[experiment]\nname = "{name}"\nbaseline = "{baseline}"\nproduction_cap = 2\n\n'
        f'[dataset]\npath = "{SHIPPED}"\n\n'
        f'[ingest]\nprofile = "production"\n\n{configs.format(shipped=SHIPPED)}\n{gates}'
    )
    return path


@pytest.fixture(scope="module")
def calibration(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[int, Path]]:
    """One run, baseline ``evidence``, under the strict nightly gates, through the command line."""
    tmp = tmp_path_factory.mktemp("calibration")
    exp = experiment_file(tmp, "calibration", "evidence", CONFIGS)
    out = tmp / "run"
    code = main(["run", str(exp), "--gates", "nightly", "--milvus-uri", str(tmp / "lite.db"), "--out", str(out), "-q"])
    yield code, out


def test_real_regressions_fail_with_exit_1_and_junit_failures(calibration: tuple[int, Path]) -> None:
    code, out = calibration
    assert code == 1
    suites = {s.name: s for s in JUnitXml.fromfile(str(out / "junit.xml"))}
    assert set(suites) == {"evidence-twin", "evidence-twin-2", "return-n-1", "cap5", "legacy"}

    def failures(suite: str) -> dict[str, str]:
        return {c.name: r.message for c in suites[suite] for r in c.result if isinstance(r, Failure)}

    recall = failures("return-n-1")
    assert "same_doc_multi_chunk_recall drop <= 0.02" in recall
    assert "is beyond the allowed 0.02" in recall["same_doc_multi_chunk_recall drop <= 0.02"]  # its lower bound
    assert "max_chunks_per_document <= 2 for pipeline=evidence" in failures("cap5")
    assert "max_chunks_per_document <= 2 for pipeline=evidence" not in recall  # return-n 1 keeps one chunk
    doc = json.loads((out / "compare.json").read_text())
    by_config = {c["candidate"]: {g["id"]: g for g in c["gates"]} for c in doc["comparisons"]}
    assert by_config["cap5"]["max_chunks_per_document <= 2 for pipeline=evidence"]["value"] > 2
    assert by_config["cap5"]["cap_compliance == 1 for pipeline=evidence"]["outcome"] == "pass"  # its own cap
    assert "(fail)" in (out / "summary.md").read_text() and "FAIL" in (out / "summary.md").read_text()


def test_an_identical_config_under_another_name_passes(calibration: tuple[int, Path]) -> None:
    _, out = calibration
    doc = json.loads((out / "compare.json").read_text())
    twins = [c for c in doc["comparisons"] if c["candidate"].startswith("evidence-twin")]
    assert len(twins) == 2  # one config under three names: timed in rounds, in a rotated order per query
    for twin in twins:
        _twin_passes(twin)


def _twin_passes(twin: dict[str, Any]) -> None:
    for m in twin["metrics"]:
        if m["group"] != "latency":
            assert m["delta"] == 0 and m["p_value"] in (1.0, None), m["metric"]
    outcomes = {g["id"]: g["outcome"] for g in twin["gates"]}
    assert all(o == "pass" for gid, o in outcomes.items() if not gid.startswith("latency"))
    # timed in the same run, in rounds interleaved in a rotated order per query: the twin passes
    assert outcomes["latency:postsearch_cpu:p95 <= 1ms"] == "pass"
    assert outcomes["latency:e2e:p50 growth <= 20%"] == "pass"  # the search shared, post-process interleaved
    # No difference of a size that matters: every ratio interval reaches within 5% of 1. Not "no significant
    # difference": e2e shares the search, so its interval is a few hundredths of a percent wide and a real
    # order effect of that size can exclude 1 (the false-alarm rate itself is the A/A simulation's to check).
    latency = [m for m in twin["metrics"] if m["group"] == "latency" and m["metric"].split(":")[1] != "search"]
    assert latency
    for m in latency:
        assert m["ratio_ci_low"] <= 1.05 and m["ratio_ci_high"] >= 0.95, (m["metric"], m["ratio"])


def test_a_run_compared_with_itself_passes_every_gate(calibration: tuple[int, Path], tmp_path: Path) -> None:
    _, out = calibration
    code = main(["compare", str(out), "--against", str(out), "--gates", "nightly", "--out", str(tmp_path)])
    doc = json.loads((tmp_path / "compare.json").read_text())
    assert len(doc["comparisons"]) == 6
    for c in doc["comparisons"]:
        assert c["baseline"] == c["candidate"]
        assert all(m["p_value"] in (1.0, None) and m["delta"] == 0 for m in c["metrics"])
        assert all(g["outcome"] == "pass" for g in c["gates"] if g["kind"] == "relative")
    failed = [(c["candidate"], g["id"]) for c in doc["comparisons"] for g in c["gates"] if g["outcome"] != "pass"]
    # the one config that breaks an invariant on its own still does when compared with itself
    assert failed == [("cap5", "max_chunks_per_document <= 2 for pipeline=evidence")] and code == 1


def test_catalog_values_equal_the_summary(calibration: tuple[int, Path]) -> None:
    _, out = calibration
    run = ComparedRun.from_dir(out)
    # the values compared are the measures themselves, which no resampling changes: the fewest resamples will do
    doc = compare(run, None, gates_from_table({"checks": [], "resamples": 99}, path="-", text="")).document
    summary = run.summary["configs"]
    checked = 0
    for c in doc["comparisons"]:
        for m in c["metrics"]:
            for side in ("baseline", "candidate"):
                config = summary[c[side]]
                name = m["metric"]
                group, _, rest = name.partition(":")
                if group in ("chunk", "doc"):
                    expected = config[group][rest]
                elif group == "payload":
                    expected = config["payload"][rest]
                elif group == "latency":
                    stage, stat = rest.split(":")
                    expected = config["latency_us"][stage][stat]
                elif name in config:
                    expected = config[name]
                else:
                    continue
                assert m[side] == pytest.approx(expected, rel=1e-9, abs=1e-12), (c[side], name)
                checked += 1
    assert checked >= 4 * 2 * 50


def _units(run: ComparedRun, metric_name: str, a: str, b: str) -> tuple[np.ndarray, np.ndarray]:
    metric = find_metric(catalog(run.cutoffs), metric_name)
    assert metric is not None
    frame, key = (run.pairs, ["query_id", "doc_id"]) if metric.unit == "pair" else (run.values, ["query_id"])
    left = frame[frame["config"] == a].set_index(key)[list(metric.columns)]
    right = frame[frame["config"] == b].set_index(key)[list(metric.columns)]
    both = pd.concat([left, right], axis=1, keys=["a", "b"], join="inner").dropna()
    return both["a"].to_numpy(dtype=float).ravel(), both["b"].to_numpy(dtype=float).ravel()


def at_most_alpha(rate: float, simulations: int, alpha: float = 0.05) -> bool:
    """A simulated fire rate is no higher than ``alpha`` beyond its own Monte Carlo error (two standard errors
    of a binomial share: an exact test's rate is alpha or under, and 400 simulations of it spread by 0.011)."""
    return rate <= alpha + 2 * math.sqrt(alpha * (1 - alpha) / simulations)


def aa_fire_rate(run: ComparedRun, spec: str, a: str, b: str, *, simulations: int = 200, seed: int = 0) -> float:
    """Share of simulations with no true effect (each unit's two values swapped at random) in which
    the relative check fires."""
    check = parse_check(spec, path="(test)")
    assert isinstance(check, RelativeCheck)
    metric = find_metric(catalog(run.cutoffs), check.metric)
    assert metric is not None
    base, cand = _units(run, check.metric, a, b)
    assert len(base) > 100 and not np.array_equal(base, cand)  # real, different paired data
    settings = Settings(resamples=499, permutations=999)
    rng = np.random.default_rng(seed)
    fired = 0
    for _ in range(simulations):
        swap = rng.random(len(base)) < 0.5
        x, y = np.where(swap, cand, base), np.where(swap, base, cand)
        one_sided = Pairing(  # as the gate asks
            kind=metric.kind, settings=settings, percentile=metric.percentile, alternative=gate_alternative(metric)
        )
        p = paired_compare(x, y, one_sided, rng=rng)
        result = check.evaluate(metric, p, p_adjusted=p.p_value, settings=settings, family=1)
        fired += result.outcome == "fail"
    return fired / simulations


@pytest.mark.parametrize(
    "spec",
    [
        "same_doc_multi_chunk_recall drop <= 0.02",
        "chunk:nDCG@5 drop <= 0.02",
        "latency:postprocess:p95 growth <= 20%",
        "latency:postsearch_cpu:p50 growth <= 20%",
    ],
)
def test_aa_simulation_fires_in_at_most_alpha(calibration: tuple[int, Path], spec: str) -> None:
    _, out = calibration
    rate = aa_fire_rate(ComparedRun.from_dir(out), spec, "legacy", "evidence", simulations=200)
    assert at_most_alpha(rate, 200)


def test_make_eval_exits_0_and_writes_the_comparison(tmp_path: Path) -> None:
    out = tmp_path / "latest"
    default = SHIPPED / "experiments" / "default.toml"
    assert main(["run", str(default), "--milvus-uri", str(tmp_path / "lite.db"), "--out", str(out), "-q"]) == 0
    for name in ("compare.json", "junit.xml", "summary.md", "report.md"):
        assert (out / name).is_file()
    doc = json.loads((out / "compare.json").read_text())
    # the experiment names the rollout gates: the known loss against the merge legacy warns, and says why
    assert doc["exit_code"] == 0 and doc["gates_file"].endswith("rollout.toml")
    assert "known finding" in doc["gates_purpose"]
    assert "These gates: a rollout comparison" in (out / "summary.md").read_text()
    for c in doc["comparisons"]:  # the invariants D1-D5 promise hold for both evidence configs
        assert all(g["outcome"] == "pass" for g in c["gates"] if g["kind"] == "absolute")
        assert {g["severity"] for g in c["gates"] if g["kind"] == "relative"} == {"warn"}
    warned = {(c["candidate"], g["id"]) for c in doc["comparisons"] for g in c["gates"] if g["outcome"] == "warn"}
    assert ("legacy-first", "same_doc_multi_chunk_recall drop <= 0.02") in warned  # shown beyond the allowance
    # D1-D5's loss of about 0.05 is significant, but not shown to be beyond 0.02 on 264 queries: undecided
    outcome = {(c["candidate"], g["id"]): g["outcome"] for c in doc["comparisons"] for g in c["gates"]}
    assert outcome[("evidence", "same_doc_multi_chunk_recall drop <= 0.02")] in ("warn", "underpowered")
    assert "Relative gates decide by the threshold rule" in (out / "summary.md").read_text()


def test_nightly_twice_pairs_the_second_night_with_the_first(tmp_path: Path) -> None:
    nightly_toml = load_experiment(SHIPPED / "experiments" / "nightly.toml")
    exp = with_overrides(nightly_toml, Overrides(milvus_uri=str(tmp_path / "l.db")))
    nightly = load_gates("nightly")
    # pairing and history are what this test is about; timing noise is calibrated above
    gates = gates_from_table(
        {"checks": [c.spec for c in nightly.checks if not c.metric.startswith("latency")]}, path="(test)", text=""
    )
    root, accepted, history = tmp_path / "nightly", tmp_path / "accepted", tmp_path / "history.parquet"
    first = jobs.nightly(exp, jobs.NightFolders(root=root, accepted_root=accepted, history=history), gates=gates)
    assert first.first and first.exit_code == 0
    doc = json.loads((first.dir / "compare.json").read_text())
    assert "first night" in doc["notes"][0] and doc["against"]["dir"] == str(first.dir)
    second = jobs.nightly(exp, jobs.NightFolders(root=root, accepted_root=accepted, history=history), gates=gates)
    assert not second.first and second.exit_code == 0 and second.dir != first.dir
    doc = json.loads((second.dir / "compare.json").read_text())
    assert doc["against"]["dir"] == str(first.accepted)
    assert [(c["baseline"], c["candidate"]) for c in doc["comparisons"]] == [
        ("legacy", "legacy"),
        ("evidence", "evidence"),
    ]
    assert all(g["outcome"] == "pass" for c in doc["comparisons"] for g in c["gates"])
    for name in ("report.md", "junit.xml", "summary.md", "per_query.parquet"):
        assert (second.dir / name).is_file()
    rows = read_history(history)
    assert len(rows) == 4 and rows["git_commit"].notna().all() and set(rows["exit_code"]) == {0}
    # the third night, through the command line, with the experiment's own (strict) gates
    code = main([
        "nightly", str(SHIPPED / "experiments" / "nightly.toml"), "--milvus-uri", str(tmp_path / "l.db"),
        "--root", str(root), "--accepted-dir", str(accepted), "--history", str(history), "-q",
    ])  # fmt: skip
    assert code == 0  # on Milvus Lite the latency checks are advisory: a slower machine warns, never fails
    assert len(read_history(history)) == 6


@pytest.mark.parametrize("units", [264, 600])
@pytest.mark.parametrize("name", ["same_doc_multi_chunk_recall", "chunk:nDCG@5"])
def test_mean_intervals_cover_at_their_level_on_real_pairs(
    calibration: tuple[int, Path], name: str, units: int
) -> None:
    """Centred null of real paired data (legacy against D1-D5): ``units`` units drawn from the real ones,
    the t interval of the mean difference covers the real difference in 95% of draws (within a binomial
    interval), where the bootstrap's percentile and BCa intervals covered 0.918-0.933 at 264."""
    _, out = calibration
    base, cand = _units(ComparedRun.from_dir(out), name, "legacy", "evidence")
    truth = float((cand - base).mean())
    rng = np.random.default_rng(264 + units)
    draws = 1000
    covered = 0
    for _ in range(draws):
        idx = rng.integers(0, len(base), units)
        p = paired_compare(base[idx], cand[idx], Pairing(kind="mean", settings=Settings(), test=False), rng=rng)
        covered += p.ci_low <= truth <= p.ci_high
    assert abs(covered / draws - 0.95) <= 2 * math.sqrt(0.95 * 0.05 / draws) + 0.005


@pytest.mark.parametrize(
    ("name", "kind", "q"),
    [("raw_duplicate_rate", "rate", 50.0), ("payload:chars_p95", "percentile", 95.0),
     ("latency:postprocess:p50", "latency", 50.0)],
)  # fmt: skip
def test_bootstrap_intervals_cover_near_their_level_on_real_pairs(
    calibration: tuple[int, Path], name: str, kind: str, q: float
) -> None:
    """Real paired data (legacy against D1-D5), 264 units drawn from the real ones: the bootstrap interval
    of a share (BCa) and of a percentile's difference (the percentile interval) covers the real difference near
    95% (a share 0.94; percentiles and latencies 0.95-1.00 over four runs, docs/deciding.md). BCa, which
    percentiles had before, covered a run's post-process p50 0.74-0.94: its jackknife fails for quantiles, and
    a latency's values change with each run (0.81 in one CI run, which failed here); an interval that ignored a
    side's spread, or took the wrong quantiles, would fall far below."""
    _, out = calibration
    base, cand = _units(ComparedRun.from_dir(out), name, "legacy", "evidence")
    if kind == "rate":
        base, cand = base.reshape(-1, 2), cand.reshape(-1, 2)
    whole = np.arange(len(base))
    truth = float(aggregate(kind, cand, q)(whole)) - float(aggregate(kind, base, q)(whole))  # type: ignore[arg-type]
    rng = np.random.default_rng(95)
    draws, covered = 300, 0
    for _ in range(draws):
        idx = rng.integers(0, len(base), 264)
        p = paired_compare(
            base[idx],
            cand[idx],
            Pairing(kind=kind, settings=Settings(resamples=1999), test=False, percentile=q),
            rng=rng,
        )
        covered += p.ci_low <= truth <= p.ci_high
    assert covered / draws >= 0.95 - 0.06, covered / draws
