"""Load gates: load:STAGE:pQ@N and load:qps@N read from load.json, judged against the spread between rounds.

The interval is recomputed here from its definition (batch means: the rounds' figures on a log scale,
Student's t at rounds - 1 degrees of freedom), and an A/A simulation with a shared per-round machine
factor checks that a growth gate fires on noise at most as often as its level allows.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from scipy import stats

from rag_eval.compare.comparison import compare
from rag_eval.compare.gates import AbsoluteCheck, GateSet, RelativeCheck, parse_check
from rag_eval.compare.loadtest_gates import LoadPair, LoadSource, evaluate, parse_load_metric
from rag_eval.compare.stats import Settings
from rag_eval.files import write_json
from tests.unit.runs import config, make_run, pair_rows

STARTED = "2026-01-01T00:00:00+00:00"


def level(name: str, n: int, p99_ms: Sequence[float], qps: Sequence[float] | None = None) -> dict[str, Any]:
    """One (config, level) entry: per-round e2e p99 (ms) and QPS; the level's figure is their geometric mean."""
    qps = qps or [100.0 * n] * len(p99_ms)
    rounds = [
        {"round": r, "searches": 100, "wall_s": 1.0, "qps": q,
         "latency_us": {"e2e": {"p50": p * 200, "p95": p * 800, "p99": p * 1e3},
                        "search": {"p50": p * 100, "p95": p * 700, "p99": p * 900}}}
        for r, (p, q) in enumerate(zip(p99_ms, qps, strict=True))
    ]  # fmt: skip
    gm = float(np.exp(np.mean(np.log(p99_ms)))) * 1e3
    return {
        "config": name, "concurrency": n, "searches": 100 * len(rounds), "wall_s": float(len(rounds)),
        "qps": float(np.exp(np.mean(np.log(qps)))),
        "latency_us": {"e2e": {"p50": gm / 5, "p95": gm * 0.8, "p99": gm}, "search": {"p99": gm * 0.9}},
        "rounds": rounds,
    }  # fmt: skip


def doc(*results: Mapping[str, Any], started: str | None = STARTED, hashes: Mapping[str, str] | None = None) -> dict:
    names = sorted({r["config"] for r in results})
    return {
        "schema_version": 1, "experiment": "synthetic", "run": {"started": started},
        "configs": [{"name": n, "hash": (hashes or {}).get(n, f"h-{n}")} for n in names],
        "results": list(results),
    }  # fmt: skip


def run_with(tmp_path: Path, load: Mapping[str, Any] | None, name: str = "run") -> Any:
    rows = pair_rows(10, "base") + pair_rows(10, "cand")
    run = make_run(rows, [config("base"), config("cand")], baseline="base", directory=tmp_path / name)
    if load is not None:
        write_json(tmp_path / name / "load.json", load)
    return run


def judge(spec: str, run: Any, against: Any | None = None, family: int = 1) -> Any:
    check = parse_check(spec, path="g.toml")
    assert isinstance(check, AbsoluteCheck | RelativeCheck)
    mine = LoadSource(run)
    base = mine if against is None else LoadSource(against)
    pair = LoadPair(candidate="cand", baseline="base", run=mine, base=base)
    return evaluate(check, pair, settings=Settings(), family=family)


def test_metric_names() -> None:
    m = parse_load_metric("load:search:p95@16")
    assert m is not None and (m.stage, m.percentile, m.concurrency, m.higher_is_better) == ("search", 95, 16, False)
    for bad in ("load:e2e:p99", "load:e2e:p99@0", "load:e2e@4", "load:qps", "load:transform:p99@4", "load:qps@-1"):
        assert parse_load_metric(bad) is None


def test_absolute_p99_passes_fails_and_says_when_noise_cannot_tell(tmp_path: Path) -> None:
    steady = doc(level("cand", 4, [40, 41, 39, 40, 42]), level("base", 4, [40, 40, 40, 40, 40]))
    run = run_with(tmp_path, steady)
    assert judge("fail load:e2e:p99@4 <= 50ms", run).outcome == "pass"
    failed = judge("fail load:e2e:p99@4 <= 30ms", run)
    assert failed.outcome == "fail" and "does not hold" in failed.message
    assert failed.value == pytest.approx(40_380, 1e-3)
    assert judge("warn load:e2e:p99@4 <= 30ms", run).outcome == "warn"
    assert judge("fail load:e2e:p99@4 <= 30000", run).outcome == "fail"  # a bare number is microseconds
    noisy = run_with(tmp_path, doc(level("cand", 4, [20, 80, 30, 70, 40]), level("base", 4, [40] * 5)), "noisy")
    unsure = judge("fail load:e2e:p99@4 <= 40ms", noisy)  # measured 42 ms, the rounds spread 20-80 ms
    assert unsure.outcome == "underpowered" and "noise" in unsure.message
    assert judge("fail load:qps@4 >= 350", run).outcome == "pass"
    assert judge("fail load:qps@4 >= 500", run).outcome == "fail"


def test_absolute_interval_is_the_batch_means_t_interval(tmp_path: Path) -> None:
    rounds = [30.0, 36.0, 33.0, 45.0]
    run = run_with(tmp_path, doc(level("cand", 2, rounds), level("base", 2, rounds)))
    logs = np.log(rounds)
    value = float(np.exp(logs.mean())) * 1e3
    half = stats.t.ppf(0.975, 3) * logs.std(ddof=1) / 2
    lo, hi = value * math.exp(-half), value * math.exp(half)
    assert judge(f"fail load:e2e:p99@2 <= {lo * 0.999:.3f}", run).outcome == "fail"  # whole interval above
    assert judge(f"fail load:e2e:p99@2 <= {lo * 1.001:.3f}", run).outcome == "underpowered"
    assert judge(f"fail load:e2e:p99@2 <= {value * 1.001:.3f}", run).outcome == "pass"
    assert hi > value  # and with two such checks (Bonferroni) the interval widens: no longer clearly above
    assert judge(f"fail load:e2e:p99@2 <= {lo * 0.999:.3f}", run, family=2).outcome == "underpowered"


def test_relative_growth_fires_on_a_real_slowdown_and_not_on_a_twin(tmp_path: Path) -> None:
    base = [40, 44, 38, 42, 41]
    slow = doc(level("base", 4, base), level("cand", 4, [b * 1.6 for b in base]))
    result = judge("fail load:e2e:p99@4 growth <= 20%", run_with(tmp_path, slow))
    assert result.outcome == "fail" and result.value == pytest.approx(0.6, abs=1e-9) and result.p_value < 0.01
    twin = doc(level("base", 4, base), level("cand", 4, [b * f for b, f in zip(base, [1.02, 0.97, 1.01, 0.99, 1.0],
                                                                                strict=True)]))  # fmt: skip
    assert judge("fail load:e2e:p99@4 growth <= 20%", run_with(tmp_path, twin, "twin")).outcome == "pass"
    drop = doc(level("base", 4, base, qps=[500.0] * 5), level("cand", 4, base, qps=[300.0, 310, 290, 305, 295]))
    assert judge("fail load:qps@4 drop <= 10%", run_with(tmp_path, drop, "drop")).outcome == "fail"
    assert judge("fail load:e2e:p99@4 growth <= 5ms", run_with(tmp_path, slow, "abs")).outcome == "fail"


def test_paired_rounds_see_through_machine_noise_that_unpaired_rounds_cannot(tmp_path: Path) -> None:
    machine = [1.0, 3.0, 0.6, 2.0, 1.4]  # the whole machine slows down in some rounds, both configs alike
    base = [40 * f for f in machine]
    cand = [40 * 1.5 * f for f in machine]
    paired = judge("fail load:e2e:p99@4 growth <= 20%", run_with(tmp_path, doc(level("base", 4, base),
                                                                                level("cand", 4, cand))))  # fmt: skip
    assert paired.outcome == "fail"
    other = run_with(tmp_path, doc(level("base", 4, base), level("cand", 4, base)), "other")
    mine = run_with(tmp_path, doc(level("base", 4, base), level("cand", 4, cand)), "mine")
    unpaired = judge("fail load:e2e:p99@4 growth <= 20%", mine, against=other)
    assert unpaired.outcome == "underpowered" and "unpaired" in unpaired.message


def test_a_and_a_rounds_fire_at_most_alpha() -> None:
    """Two configs with the same latency, each round scaled by a shared machine factor plus its own noise:
    a growth check at 0% (the most trigger-happy threshold) fires in at most alpha of 400 trials."""
    rng = np.random.default_rng(20240611)
    fired = {0.0: 0, 0.2: 0}
    trials = 400
    run = make_run(pair_rows(2, "base") + pair_rows(2, "cand"), [config("base"), config("cand")], baseline="base")
    for _ in range(trials):
        machine = rng.lognormal(0, 0.5, size=5)
        base = 40 * machine * rng.lognormal(0, 0.15, size=5)
        cand = 40 * machine * rng.lognormal(0, 0.15, size=5)
        load = doc(level("base", 4, list(base)), level("cand", 4, list(cand)))
        run.load_doc = load
        for threshold in fired:
            check = parse_check(f"fail load:e2e:p99@4 growth <= {threshold * 100:g}%", path="g")
            assert isinstance(check, RelativeCheck)
            src = LoadSource(run)
            pair = LoadPair(candidate="cand", baseline="base", run=src, base=src)
            result = evaluate(check, pair, settings=Settings(), family=1)
            fired[threshold] += result.outcome == "fail"
    assert 0 < fired[0.0] / trials <= 0.05  # one-sided: about alpha / 2 expected (and not never: it can fire)
    assert fired[0.2] == 0


def test_missing_stale_or_other_results_are_errors(tmp_path: Path) -> None:
    good = doc(level("cand", 4, [40] * 3), level("base", 4, [40] * 3))
    none = judge("fail load:e2e:p99@4 <= 50ms", run_with(tmp_path, None, "none"))
    assert none.outcome == "error" and "no load.json" in none.message
    other_level = judge("fail load:e2e:p99@8 <= 50ms", run_with(tmp_path, good, "good"))
    assert other_level.outcome == "error" and "with 8 clients" in other_level.message and "[4]" in other_level.message
    stale = judge("fail load:e2e:p99@4 <= 50ms", run_with(tmp_path, {**good, "run": {"started": "2025"}}, "stale"))
    assert stale.outcome == "error" and "another run" in stale.message
    alone = judge("fail load:e2e:p99@4 <= 50ms", run_with(tmp_path, {**good, "run": {"started": None}}, "alone"))
    assert alone.outcome == "error" and "on its own" in alone.message
    changed = judge("fail load:e2e:p99@4 <= 50ms", run_with(tmp_path, doc(*good["results"], hashes={"cand": "h-x"}),
                                                             "changed"))  # fmt: skip
    assert changed.outcome == "error" and "other settings" in changed.message
    one_round = judge("fail load:e2e:p99@4 <= 50ms", run_with(tmp_path, doc(level("cand", 4, [40])), "one"))
    assert one_round.outcome == "error" and "two or more rounds" in one_round.message


def test_compare_applies_load_gates_with_the_exit_codes(tmp_path: Path) -> None:
    run = run_with(tmp_path, doc(level("cand", 4, [40, 42, 41]), level("base", 4, [40, 41, 40])))
    gates = GateSet(source="g.toml", checks=(
        parse_check("fail load:e2e:p99@4 <= 50ms", path="g.toml"),
        parse_check("warn load:e2e:p99@4 growth <= 20%", path="g.toml"),
    ))  # fmt: skip
    result = compare(run, None, gates)
    outcomes = [g["outcome"] for g in result.document["comparisons"][0]["gates"]]
    assert outcomes == ["pass", "pass"] and result.exit_code == 0
    strict = GateSet(source="g.toml", checks=(parse_check("fail load:e2e:p99@4 <= 10ms", path="g.toml"),))
    assert compare(run, None, strict).exit_code == 1
    missing = GateSet(source="g.toml", checks=(parse_check("fail load:e2e:p99@2 <= 50ms", path="g.toml"),))
    assert compare(run, None, missing).exit_code == 2
    warn_missing = GateSet(source="g.toml", checks=(parse_check("warn load:e2e:p99@2 <= 50ms", path="g.toml"),))
    assert compare(run, None, warn_missing).exit_code == 0


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("fail load:e2e:p99@4 drop <= 20%", "its regression is a growth"),
        ("fail load:qps@4 growth <= 20%", "its regression is a drop"),
        ("fail load:e2e:p99@0 <= 50ms", "unknown load metric"),
        ("fail load:e2e:p98@4 <= 50ms", "unknown load metric"),
        ("fail load:e2e:p99@4 <= 20%", "% is for a growth"),
        ("fail load:qps@4 >= 3ms", "is not a latency"),
        ("fail cap_compliance == 1ms", "is not a latency"),
    ],
)
def test_bad_load_checks_name_the_check(spec: str, message: str) -> None:
    from rag_eval.core.errors import GatesError

    with pytest.raises(GatesError, match=message) as err:
        parse_check(spec, path="g.toml", line=7)
    assert "g.toml:7" in str(err.value) and spec in str(err.value)


def test_an_accepted_baseline_keeps_its_load_measurement(tmp_path: Path) -> None:
    from rag_eval.compare.history import accept
    from rag_eval.compare.runs import ComparedRun

    base = [40.0, 41.0, 39.0, 40.0]
    run = run_with(tmp_path, doc(level("base", 4, base), level("cand", 4, base)))
    target = accept(tmp_path / "run", root=tmp_path / "accepted")
    assert (target / "load.json").is_file()
    slower = run_with(tmp_path, doc(level("base", 4, base), level("cand", 4, [b * 2 for b in base])), "later")
    result = judge("fail load:e2e:p99@4 growth <= 20%", slower, against=ComparedRun.from_dir(target))
    assert result.outcome == "fail" and "unpaired" in result.message
    assert judge("fail load:e2e:p99@4 growth <= 20%", run, against=ComparedRun.from_dir(target)).outcome == "pass"


def test_a_served_endpoints_load_json_is_gated_end_to_end_and_says_which_gates_do_not_apply(tmp_path: Path) -> None:
    """A measurement of a served endpoint (rag-eval load --service) has no search stage and no config hash: its
    end-to-end and QPS gates read it as any other; a search gate is an error that says why."""
    served = doc(level("cand", 2, [40, 41, 39]))
    served["configs"] = [{"name": "cand", "hash": None, "served": True}]
    served["target"] = {"kind": "endpoint", "protocol": "mcp", "endpoint": "http://127.0.0.1:8000/mcp"}
    served["stages"] = ["e2e"]
    run = run_with(tmp_path, served)
    assert judge("fail load:e2e:p99@2 <= 50ms", run).outcome == "pass"
    assert judge("fail load:qps@2 >= 100", run).outcome == "pass"
    search = judge("fail load:search:p99@2 <= 50ms", run)
    assert search.outcome == "error" and "does not apply" in search.message
    assert "the served endpoint http://127.0.0.1:8000/mcp (MCP)" in search.message
    assert "end to end only" in search.message
