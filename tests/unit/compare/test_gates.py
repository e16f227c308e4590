"""Gates: one-line checks, gates files (errors name file, line and check), and what each outcome means."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from rag_eval.cli import main
from rag_eval.compare.catalog import catalog, find_metric
from rag_eval.compare.gates import (
    AbsoluteCheck,
    RelativeCheck,
    experiment_gates,
    gates_from_table,
    load_gates,
    parse_check,
)
from rag_eval.compare.stats import Paired, Settings
from rag_eval.core.errors import GatesError

METRICS = catalog((1, 3, 5, 10))


def metric(name: str):  # type: ignore[no-untyped-def]
    m = find_metric(METRICS, name)
    assert m is not None
    return m


def test_parse_absolute_and_relative_checks() -> None:
    a = parse_check("cap_compliance == 100% for pipeline=evidence", path="g.toml", line=4)
    assert isinstance(a, AbsoluteCheck)
    assert (a.severity, a.metric, a.op, a.threshold, a.selector) == (
        "fail", "cap_compliance", "==", 1.0, (("pipeline", "evidence"),),
    )  # fmt: skip
    r = parse_check("warn  latency:postprocess:p95   growth <= 20%", path="g.toml")
    assert isinstance(r, RelativeCheck)
    assert (r.severity, r.direction, r.threshold, r.relative, r.id) == (
        "warn", "growth", 0.2, True, "latency:postprocess:p95 growth <= 20%",
    )  # fmt: skip
    r = parse_check("duplicate_rate rise <= 0.01 for evidence*", path="g.toml")
    assert isinstance(r, RelativeCheck) and r.direction == "growth" and r.selector == (("name", "evidence*"),)
    assert parse_check("chunk:nDCG@20 drop <= 0.02", path="g.toml").metric == "chunk:nDCG@20"


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("", "non-empty"),
        ("cap_compliance", "expected"),
        ("cap_compliance = 1", "expected"),
        ("cap_compliance == one", "expected"),
        ("fatal cap_compliance == 1", "expected"),
        ("cap_complience == 1", "did you mean 'cap_compliance'"),
        ("same_doc_multi_chunk_recall drop <= -0.02", "must be >= 0"),
        ("cap_compliance == 1 for colour=red", "bad selector"),
        ("cap_compliance == 1 for pipeline=", "bad selector"),
        ("chunk:nDCG@0 drop <= 0.1", "unknown metric"),
        ("cap_compliance == nan", "expected"),
    ],
)
def test_bad_checks_name_file_line_and_check(spec: str, message: str) -> None:
    with pytest.raises(GatesError, match=message) as err:
        parse_check(spec, path="gates.toml", line=7)
    assert str(err.value).startswith("gates.toml:7")
    assert err.value.line == 7 and err.value.path == "gates.toml"


def test_checks_must_match_their_metric() -> None:
    for spec, message in (
        ("duplicate_rate drop <= 0.01", "better lower: its regression is a growth"),
        ("same_doc_multi_chunk_recall growth <= 0.01", "better higher: its regression is a drop"),
        ("max_chunks_per_document growth <= 1", "an invariant"),
    ):
        gates = gates_from_table({"checks": [spec]}, path="g.toml", text=f'checks = ["{spec}"]\n')
        with pytest.raises(GatesError, match=message):
            gates.validate(METRICS)
    with pytest.raises(GatesError, match="unknown metric 'chunk:nDCG@20' for these runs"):
        gates_from_table({"checks": ["chunk:nDCG@20 drop <= 0.02"]}, path="g", text="").validate(catalog((5,)))


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "gates.toml"
    path.write_text(text)
    return path


def test_gates_file_errors_give_the_line(tmp_path: Path) -> None:
    text = '[gates]\nalpha = 0.05\nchecks = [\n    "cap_compliance == 1",\n    "cap_compliance >> 1",\n]\n'
    with pytest.raises(GatesError) as err:
        load_gates(write(tmp_path, text))
    assert err.value.line == 5 and err.value.check == "cap_compliance >> 1"
    assert f"{tmp_path / 'gates.toml'}:5: check 'cap_compliance >> 1'" in str(err.value)

    cases = {
        "[gates]\nalpha = 1.5\n": (2, "alpha must be within"),
        "[gates]\nresamples = 10\n": (2, r"resamples must be within \[99, 1,000,000\], got 10"),
        "[gates]\nresamples = 1000001\n": (2, r"resamples must be within \[99, 1,000,000\]"),
        "[gates]\nresamples = 1000000000000\n": (2, r"resamples must be within \[99, 1,000,000\]"),
        "[gates]\npower = true\n": (2, "power must be a number"),
        "[gates]\ncolour = 1\n": (2, "unknown key 'colour'"),
        "[gates]\nrule = 'estimate'\n": (2, "rule must be one of threshold, zero, got 'estimate'"),
        "[gates]\nrule = 1\n": (2, "rule must be one of threshold, zero"),
        "[gates]\nchecks = 'x'\n": (2, "array of strings"),
        "[gates]\nchecks = [\n  'cap_compliance == 1',\n  'cap_compliance == 1',\n]\n": (4, "already given on line 3"),
        "[gates]\nchecks = [1]\n": (2, "non-empty string"),
        "[other]\n": (1, r"one \[gates\] table"),
        "[gates\n": (1, "not valid TOML"),
        "[gates]\nfile = 'x.toml'\nalpha = 0.1\n": (2, "not both"),
    }
    for text, (line, message) in cases.items():
        with pytest.raises(GatesError, match=message) as err:
            load_gates(write(tmp_path, text))
        assert err.value.line == line, text
    with pytest.raises(GatesError, match="cannot read"):
        load_gates(tmp_path / "missing.toml")


def test_a_comparison_that_would_draw_over_a_million_resamples_is_refused(tmp_path: Path) -> None:
    """Holm's first step needs 2 / (resamples + 1) <= alpha / (2 x tests): a tiny alpha over many tested numbers
    would draw for days; the largest allowed resamples and an alpha that needs no more than that are accepted."""
    assert load_gates(write(tmp_path, "[gates]\nresamples = 1000000\n")).resamples_for(244) == 1_000_000
    gates = load_gates(write(tmp_path, "[gates]\nalpha = 0.001\n"))
    assert gates.resamples_for(244) == 975_999 and gates.resamples_for(250) == 999_999
    with pytest.raises(GatesError) as err:
        gates.resamples_for(251)
    assert str(err.value).startswith(f"{tmp_path / 'gates.toml'}: alpha 0.001 over 251 tested numbers needs 1,003,999")
    assert err.value.exit_code == 2 and "raise alpha" in str(err.value)
    tiny = load_gates(write(tmp_path, "[gates]\nalpha = 1e-9\n"))
    with pytest.raises(GatesError, match="needs 975,999,999,999 resamples"):
        tiny.resamples_for(244)


def test_shipped_gates_and_named_files(tmp_path: Path) -> None:
    default = load_gates("default")
    nightly = load_gates("nightly")
    rollout = load_gates("rollout")
    assert default.source.endswith("default.toml") and nightly.source.endswith("nightly.toml")
    # no gates named: strict (every check fails the run); the rollout gates warn on the relative checks, and say why
    assert {c.severity for c in default.checks} == {"fail"}
    assert {c.severity for c in rollout.checks if isinstance(c, RelativeCheck)} == {"warn"}
    assert {c.severity for c in rollout.checks if not isinstance(c, RelativeCheck)} == {"fail"}
    assert "known finding" in rollout.purpose and default.purpose == ""
    assert {c.severity for c in nightly.checks} == {"fail"}
    # every shipped file decides by the threshold rule; a gates file may choose the rule that tests against none
    assert {g.settings.rule for g in (default, nightly, rollout)} == {"threshold"}
    assert load_gates(write(tmp_path, "[gates]\nrule = 'zero'\n")).settings.rule == "zero"
    # the default holds each config's own cap (D3); the product's per-document budget is opted into (the nightly)
    assert "max_chunks_per_document" not in {c.metric for c in (*default.checks, *rollout.checks)}
    assert {c.metric for c in default.checks} == {c.metric for c in rollout.checks}
    assert {c.metric for c in nightly.checks} == {c.metric for c in default.checks} | {"max_chunks_per_document"}
    for shipped in (default, nightly, rollout):
        shipped.validate(METRICS)
    assert experiment_gates(None, source=None).source == default.source
    exp = tmp_path / "exp.toml"
    exp.write_text('[gates]\nfile = "my-gates.toml"\n')
    (tmp_path / "my-gates.toml").write_text('[gates]\nchecks = ["cap_compliance == 1"]\n')
    named = experiment_gates({"file": "my-gates.toml"}, source=str(exp))
    assert named.source == str(tmp_path / "my-gates.toml") and len(named.checks) == 1
    assert experiment_gates({"file": "nightly"}, source=str(exp)).source == nightly.source
    exp.write_text(
        '[experiment]\nname = "x"\n\n[gates]\nalpha = 0.01\nchecks = [\n  "cap_compliance == 1",\n  "bad",\n]\n'
    )
    with pytest.raises(GatesError) as err:
        experiment_gates({"alpha": 0.01, "checks": ["cap_compliance == 1", "bad"]}, source=str(exp))
    assert (err.value.path, err.value.line) == (str(exp), 8)


def test_bad_gates_file_exits_2_with_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    gates = write(tmp_path, '[gates]\nchecks = [\n  "cap_compliance =< 1",\n]\n')
    code = main(["compare", str(tmp_path / "no-run"), "--gates", str(gates)])
    err = capsys.readouterr().err
    assert code == 2
    assert err.count("\n") == 1 and f"{gates}:3: check 'cap_compliance =< 1'" in err
    assert not list(tmp_path.glob("*.json"))


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("warn traffic:payload_changed <= -5%", "never negative: a threshold of -5% is outside its range"),
        ("fail same_doc_multi_chunk_recall >= 80", "is a score, between 0 and 1 .*: 80 is outside it .did you mean"),
        ("cap_compliance == 101%", "is a share, between 0 and 1 .*: 101% is outside it$"),
        ("cap_compliance >= 1000", "outside it$"),  # no hint: 1000% is no share either
        ("chunk:nDCG@5 > 1.5", "is a score"),
        ("payload:chars_p95 <= -1", "never negative"),
        ("latency:e2e:p95 < -2ms", "never negative: a threshold of -2ms"),
        ("load:qps@4 >= -1", "never negative"),
        ("max_chunks_per_document <= -1", "never negative"),
        ("payload:chunks_delivered_mean != -3", "never negative"),
        ("same_doc_multi_chunk_recall drop <= 150%", "can never exceed 100%"),
        ("chunk:nDCG@5 drop <= 1.5", "can never exceed 1 .all of it.: 1.5"),
    ],
)
def test_a_threshold_the_metric_never_reaches_is_refused(spec: str, message: str) -> None:
    """A gate whose outcome no data could change (a share of -5% or 80 instead of 80%) is bad input, not a
    gate that always fails or always passes."""
    with pytest.raises(GatesError, match=message) as err:
        parse_check(spec, path="gates.toml", line=2)
    assert str(err.value).startswith("gates.toml:2") and "\n" not in str(err.value)


@pytest.mark.parametrize(
    "spec",
    [
        "cap_compliance == 100%", "cap_compliance == 1", "duplicate_rate <= 0", "chunk:nDCG@5 >= 0%",
        "traffic:payload_changed <= 30%", "payload:chars_p95 <= 0", "latency:e2e:p95 <= 0ms",
        "same_doc_multi_chunk_recall drop <= 100%", "chunk:nDCG@5 drop <= 1", "duplicate_rate growth <= 5",
        "latency:postprocess:p95 growth <= 500%", "payload:chars_p50 >= 100000", "load:qps@4 >= 0",
    ],
)
def test_thresholds_at_the_edges_of_a_range_stay_accepted(spec: str) -> None:
    """The edges are thresholds the metric can be on either side of (0 and 100% are values it takes), and a
    growth has no bound above."""
    assert parse_check(spec, path="gates.toml").spec == spec


def test_an_out_of_range_gate_exits_2_naming_the_line_and_writes_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    checks = '  "cap_compliance == 1",\n  "warn traffic:payload_changed <= -5%",\n'
    gates = write(tmp_path, f"[gates]\nchecks = [\n{checks}]\n")
    code = main(["compare", str(tmp_path / "no-run"), "--gates", str(gates)])
    err = capsys.readouterr().err
    assert code == 2
    assert err.count("\n") == 1 and f"{gates}:4: check 'warn traffic:payload_changed <= -5%'" in err
    assert "never negative" in err and not list(tmp_path.glob("*.json"))


# -- outcomes ---------------------------------------------------------------------------------


def paired(**values: float | None) -> Paired:
    base = {"n": 200, "baseline": 0.5, "candidate": 0.5, "delta": 0.0, "ci_low": 0.0, "ci_high": 0.0,
            "p_value": 1.0, "se": 0.0}  # fmt: skip
    base.update(values)
    return Paired(**base)  # type: ignore[arg-type]


def evaluate(spec: str, p: Paired, p_adjusted: float | None, family: int = 1) -> tuple[str, str]:
    check = parse_check(spec, path="g.toml")
    assert isinstance(check, RelativeCheck)
    r = check.evaluate(metric(check.metric), p, p_adjusted=p_adjusted, settings=Settings(), family=family)
    return r.outcome, r.message


def test_relative_check_fires_only_beyond_threshold_and_significant() -> None:
    drop = paired(candidate=0.44, delta=-0.06, ci_low=-0.09, ci_high=-0.03, se=0.015, p_value=0.0002)
    assert evaluate("same_doc_multi_chunk_recall drop <= 0.02", drop, 0.0002)[0] == "fail"
    assert evaluate("warn same_doc_multi_chunk_recall drop <= 0.02", drop, 0.0002)[0] == "warn"
    assert evaluate("same_doc_multi_chunk_recall drop <= 0.1", drop, 0.0002)[0] == "pass"  # within the allowance
    # beyond the threshold but not significant after correction, and too few units to tell: underpowered
    noisy = paired(candidate=0.44, delta=-0.06, ci_low=-0.15, ci_high=0.03, se=0.045, p_value=0.2)
    outcome, message = evaluate("same_doc_multi_chunk_recall drop <= 0.02", noisy, 0.2)
    assert outcome == "underpowered" and "cannot detect a drop of 0.02" in message
    # an improvement whose interval rules out a drop beyond the threshold passes even if underpowered
    up = paired(candidate=0.6, delta=0.1, ci_low=0.01, ci_high=0.19, se=0.045, p_value=0.03)
    outcome, message = evaluate("same_doc_multi_chunk_recall drop <= 0.02", up, 0.03)
    assert outcome == "pass" and "rules out" in message
    # nothing changed at all: every unit agrees
    assert evaluate("same_doc_multi_chunk_recall drop <= 0.02", paired(), 1.0)[0] == "pass"


def test_relative_percent_threshold_is_relative_to_the_baseline() -> None:
    p = paired(baseline=0.5, candidate=0.45, delta=-0.05, ci_low=-0.06, ci_high=-0.04, se=0.005, p_value=0.0001)
    assert evaluate("chunk:nDCG@5 drop <= 5%", p, 0.0001)[0] == "fail"  # 10% of the baseline
    assert evaluate("chunk:nDCG@5 drop <= 15%", p, 0.0001)[0] == "pass"


def test_latency_gate_needs_the_whole_interval_beyond_the_allowance() -> None:
    def lat(ratio: float, low: float, high: float, se_log: float, p: float) -> Paired:
        return paired(
            baseline=100.0, candidate=100.0 * ratio, delta=100.0 * (ratio - 1), ci_low=100.0 * (low - 1),
            ci_high=100 * (high - 1), se=1.0, p_value=p, ratio=ratio, ratio_ci_low=low, ratio_ci_high=high,
            se_log_ratio=se_log,
        )  # fmt: skip

    spec = "latency:postprocess:p95 growth <= 20%"
    # +28% with an interval from +8%: significant, but timing noise between runs can do that
    assert evaluate(spec, lat(1.28, 1.08, 1.65, 0.11, 0.001), 0.001)[0] == "underpowered"
    # +120% with the whole interval above +20%: a regression
    assert evaluate(spec, lat(2.2, 1.7, 3.1, 0.15, 0.0001), 0.0001)[0] == "fail"
    assert evaluate(spec, lat(1.0, 1.0, 1.0, 0.0, 1.0), 1.0)[0] == "pass"
    assert evaluate(spec, lat(0.8, 0.6, 1.1, 0.1, 0.2), 0.2)[0] == "pass"  # rules out +20%


def test_minimum_detectable_difference_uses_the_gate_family() -> None:
    p = paired(candidate=0.49, delta=-0.01, ci_low=-0.02, ci_high=0.0, se=0.006, p_value=0.1)
    check = parse_check("same_doc_multi_chunk_recall drop <= 0.02", path="g")
    assert isinstance(check, RelativeCheck)
    one = check.evaluate(metric(check.metric), p, p_adjusted=0.1, settings=Settings(), family=1)
    four = check.evaluate(metric(check.metric), p, p_adjusted=0.4, settings=Settings(), family=4)
    assert one.mde == pytest.approx(0.006 * 2.801585, rel=1e-5)
    assert four.mde == pytest.approx(0.006 * (2.497705 + 0.841621), rel=1e-5)  # z(1 - 0.05 / 8)
    assert one.outcome == "pass" and four.outcome == "pass"  # 0.0168 and 0.0200 <= 0.02


def test_absolute_checks() -> None:
    check = parse_check("max_chunks_per_document <= 2", path="g")
    assert isinstance(check, AbsoluteCheck)
    assert check.evaluate(2.0).outcome == "pass" and check.evaluate(3.0).outcome == "fail"
    assert check.evaluate(math.nan).outcome == "error"
    warn = parse_check("warn duplicate_rate == 0", path="g")
    assert isinstance(warn, AbsoluteCheck) and warn.evaluate(0.01).outcome == "warn"
    assert warn.evaluate(0.0).outcome == "pass" and warn.evaluate(1e-15).outcome == "pass"
    assert parse_check("cap_compliance > 0.5", path="g").evaluate(0.5).outcome == "fail"  # type: ignore[union-attr]
    sel = parse_check("cap_compliance == 1 for pipeline=evidence,cap=2", path="g")
    assert sel.applies_to({"name": "e", "pipeline": "evidence", "cap": 2})
    assert not sel.applies_to({"name": "e", "pipeline": "evidence", "cap": 5})
    assert not sel.applies_to({"name": "l", "pipeline": "legacy", "cap": 2})


def test_run_refuses_bad_gates_before_anything_runs(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from tests.conftest import SHIPPED

    for checks, where in (('"cap_compliance == 1",\n  "nope"', ":8: check 'nope'"),
                          ('"chunk:nDCG@20 drop <= 0.02"', ":7: check 'chunk:nDCG@20 drop <= 0.02'")):  # fmt: skip
        exp = tmp_path / "exp.toml"
        exp.write_text(
            f'[experiment]\nname = "x"\n[dataset]\npath = "{SHIPPED}"\n[gates]\nchecks = [\n  {checks},\n]\n'
            '[[configs]]\nname = "a"\nrag = { retrieve-k = 20 }\n'
        )
        out = tmp_path / "out"
        assert main(["run", str(exp), "--out", str(out), "--milvus-uri", str(tmp_path / "l.db"), "-q"]) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and f"{exp}{where}" in err, err
        assert not out.exists() and not (tmp_path / "l.db").exists()


def test_an_underpowered_change_near_the_threshold_is_not_called_undetectable() -> None:
    """A precise change just at the threshold (its smallest detectable change well below it) is
    underpowered because its bound straddles the threshold, not because the units cannot detect it."""
    near = paired(candidate=0.479, delta=-0.021, ci_low=-0.026, ci_high=-0.016, se=0.0025, p_value=0.3)
    outcome, message = evaluate("same_doc_multi_chunk_recall drop <= 0.02", near, 0.3)
    assert outcome == "underpowered", message
    assert "cannot detect" not in message and "does not rule out a drop beyond 0.02, nor is one shown" in message
