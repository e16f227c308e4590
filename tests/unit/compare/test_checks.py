"""The checks of a gates file and their outcomes, worked by hand: an absolute check on a config's own
value, and a relative check that fires, passes, is underpowered (too few units, too noisy, or too near
its threshold) or cannot be evaluated. Every relative example uses a t interval (``t_df``), whose
one-sided bound is ``delta +- t(df, 0.95) * se`` with t(9, 0.95) = 1.833113, and the minimum detectable
change (z(0.975) + z(0.8)) * se = 2.801585 * se."""

from __future__ import annotations

import math
from typing import Any

import pytest

from rag_eval.compare.catalog import Metric
from rag_eval.compare.checks import AbsoluteCheck, RelativeCheck, min_units
from rag_eval.compare.stats import Paired, Settings
from rag_eval.core.errors import GatesError

RECALL = Metric(name="recall", label="Recall", group="chunk", higher_is_better=True, kind="mean", column="recall")
P99 = Metric(name="p99", label="p99", group="latency", higher_is_better=False, kind="latency", column="e2e_us")
SETTINGS = Settings(rule="zero")  # the examples before "the threshold rule" below: the rule that tests against none
THRESHOLD = Settings(rule="threshold")


def absolute(spec: str, op: str, threshold: float, severity: Any = "fail", **more: Any) -> AbsoluteCheck:
    return AbsoluteCheck(spec=spec, severity=severity, metric="cap_compliance", threshold=threshold, op=op, **more)


def drop(threshold: float = 0.05, *, severity: Any = "fail", relative: bool = False) -> RelativeCheck:
    return RelativeCheck(
        spec=f"{severity} recall drop <= {threshold}", severity=severity, metric="recall", threshold=threshold,
        direction="drop", relative=relative,
    )  # fmt: skip


def paired(n: int, delta: float, ci: tuple[float, float], se: float, baseline: float = 0.8) -> Paired:
    return Paired(
        n=n, baseline=baseline, candidate=baseline + delta, delta=delta, ci_low=ci[0], ci_high=ci[1], p_value=None,
        se=se, t_df=n - 1,
    )  # fmt: skip


# what every check has ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("spec", "id_"),
    [
        ("fail cap_compliance == 1", "cap_compliance == 1"),
        ("  warn   recall   drop <= 2%  ", "recall drop <= 2%"),
        ("cap_compliance == 1", "cap_compliance == 1"),
        ("failure == 1", "failure == 1"),  # a metric that starts like a severity keeps its name
    ],
)
def test_a_checks_id_is_its_text_without_the_severity(spec: str, id_: str) -> None:
    assert absolute(spec, "==", 1.0).id == id_


def test_a_check_applies_to_the_configs_its_selector_matches() -> None:
    check = absolute("x == 1", "==", 1.0, selector=(("pipeline", "evidence*"), ("name", "?-new")))
    assert check.applies_to({"pipeline": "evidence", "name": "a-new"})
    assert check.applies_to({"pipeline": "evidence-x", "name": "b-new"})
    assert not check.applies_to({"pipeline": "Evidence", "name": "a-new"})  # case matters
    assert not check.applies_to({"pipeline": "evidence", "name": "ab-new"})
    assert not check.applies_to({"name": "a-new"})  # a key the config lacks matches nothing but "*"
    assert absolute("x == 1", "==", 1.0).applies_to({})  # no selector: every config


def test_a_checks_error_names_the_file_the_line_and_the_check() -> None:
    err = absolute("fail cap_compliance == 1", "==", 1.0, path="gates.toml", line=7).error("unknown metric")
    assert isinstance(err, GatesError) and err.exit_code == 2
    assert str(err) == "gates.toml:7: check 'fail cap_compliance == 1': unknown metric"
    assert str(absolute("x == 1", "==", 1.0, path="g.toml").error("bad")) == "g.toml: check 'x == 1': bad"


# absolute checks --------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("op", "threshold", "value", "holds"),
    [
        ("==", 1.0, 1.0, True), ("==", 1.0, 1.0 - 1e-13, True), ("==", 1.0, 1.0 - 1e-11, False),
        ("!=", 0.0, 1e-13, False), ("!=", 0.0, 1e-11, True),
        ("<=", 0.5, 0.5 + 1e-13, True), ("<=", 0.5, 0.5 + 1e-11, False),
        (">=", 0.5, 0.5 - 1e-13, True), (">=", 0.5, 0.5 - 1e-11, False),
        ("<", 0.5, 0.5, False), ("<", 0.5, 0.4999, True), (">", 0.5, 0.5, False), (">", 0.5, 0.5001, True),
    ],
)  # fmt: skip
def test_an_absolute_check_holds_within_a_tolerance_of_1e12_for_the_non_strict_operators(
    op: str, threshold: float, value: float, holds: bool
) -> None:
    assert absolute("x", op, threshold).evaluate(value).outcome == ("pass" if holds else "fail")


def test_an_absolute_checks_result_and_message() -> None:
    result = absolute("fail cap_compliance >= 0.99", ">=", 0.99).evaluate(0.123456)
    assert (result.outcome, result.message) == ("fail", "cap_compliance = 0.1235: >= 0.99 does not hold")
    assert (result.id, result.metric, result.kind, result.value, result.threshold) == (
        "cap_compliance >= 0.99", "cap_compliance", "absolute", 0.123456, 0.99,
    )  # fmt: skip
    assert absolute("x", "==", 0.0).evaluate(-0.0).message == "cap_compliance = 0: == 0 holds"  # no "-0"
    assert absolute("x", "<=", 0.0, severity="warn").evaluate(2.0).outcome == "warn"


@pytest.mark.parametrize("value", [math.nan, math.inf, -math.inf])
def test_an_absolute_check_of_an_undefined_value_is_an_error_not_a_breach(value: float) -> None:
    result = absolute("x", "<=", 1.0).evaluate(value)
    assert result.outcome == "error" and result.value is None
    assert result.message == "cap_compliance is not defined for this config (no units to measure it on)"


# relative checks --------------------------------------------------------------------------------------------


def test_a_drop_beyond_the_threshold_that_is_significant_fails() -> None:
    # change = 0.1 (interval [0.05, 0.15]) > 0.05, p 0.001 < alpha
    result = drop().evaluate(RECALL, paired(10, -0.1, (-0.15, -0.05), 0.02), p_adjusted=0.001, settings=SETTINGS,
                             family=1)  # fmt: skip
    assert result.outcome == "fail" and result.kind == "relative"
    assert result.message == (
        "recall drop 0.1 (interval [0.05, 0.15], one-sided p = 0.001 Holm-adjusted, n = 10) exceeds the allowed 0.05"
    )
    assert result.value == pytest.approx(0.1) and result.threshold == 0.05 and result.p_value == 0.001
    assert result.mde == pytest.approx(2.801585 * 0.02, rel=1e-6)
    warned = drop(severity="warn").evaluate(
        RECALL, paired(10, -0.1, (-0.15, -0.05), 0.02), p_adjusted=0.001, settings=SETTINGS, family=1
    )
    assert warned.outcome == "warn"


def test_a_drop_beyond_the_threshold_that_is_not_significant_does_not_fail() -> None:
    data = paired(10, -0.1, (-0.15, -0.05), 0.02)
    assert drop().evaluate(RECALL, data, p_adjusted=0.2, settings=SETTINGS, family=1).outcome == "underpowered"
    # the number's own verdict overrides the p-value
    flagged = drop().evaluate(RECALL, data, p_adjusted=0.001, settings=SETTINGS, family=1, significant=False)
    assert flagged.outcome == "underpowered"


def test_a_drop_ruled_out_by_its_one_sided_bound_passes() -> None:
    # change 0.01, bound = 0.01 + 1.833113 * 0.01 = 0.028331 <= 0.05, on 10 >= 5 units
    result = drop().evaluate(RECALL, paired(10, -0.01, (-0.03, 0.01), 0.01), p_adjusted=0.5, settings=SETTINGS,
                             family=1)  # fmt: skip
    assert result.outcome == "pass"
    assert result.message == (
        "recall drop 0.01 (interval [-0.01, 0.03], one-sided p = 0.5 Holm-adjusted): its one-sided 95% bound "
        "0.02833 rules out a drop beyond 0.05"
    )


def test_too_few_units_are_underpowered_even_when_identical() -> None:
    # min_units(0.05) = 5
    few = drop().evaluate(RECALL, paired(4, 0.0, (0.0, 0.0), 0.0), p_adjusted=1.0, settings=SETTINGS, family=1)
    assert few.message == (
        "underpowered: 4 units are too few to test at alpha 0.05 (at least 5); observed 0, interval [0, 0]"
    )
    one = drop().evaluate(RECALL, paired(1, 0.0, (0.0, 0.0), 0.0), p_adjusted=None, settings=SETTINGS, family=1)
    assert one.outcome == "underpowered" and "1 unit is too few" in one.message
    # a family of 4 relative checks: alpha 0.0125 each, min_units(0.0125) = 7
    four = drop().evaluate(RECALL, paired(6, -0.01, (-0.03, 0.01), 0.001), p_adjusted=0.5, settings=SETTINGS,
                           family=4)  # fmt: skip
    assert four.message.startswith("underpowered: 6 units are too few to test at alpha 0.0125 (at least 7)")


def test_a_noisy_comparison_that_cannot_detect_the_threshold_is_underpowered() -> None:
    # mde = 2.801585 * 0.05 = 0.1401 > 0.05; bound = 0.01 + 1.833113 * 0.05 = 0.1017 > 0.05
    result = drop().evaluate(RECALL, paired(10, -0.01, (-0.03, 0.01), 0.05), p_adjusted=0.5, settings=SETTINGS,
                             family=1)  # fmt: skip
    assert result.message == (
        "underpowered: 10 units cannot detect a drop of 0.05 at alpha 0.05 and 80% power (smallest detectable "
        "0.1401), and the one-sided 95% bound 0.1017 does not rule one out; about 123 units would decide it if the "
        "change stays 0.01; observed 0.01, interval [-0.01, 0.03]"
    )
    # the gap to decide is 0.05 - 0.01 = 0.04: 10 * (0.140079 / 0.04) ** 2 = 122.6 -> 123 units
    assert result.units_needed == 123


def test_a_change_too_near_the_threshold_is_underpowered_though_detectable() -> None:
    # mde = 0.02802 <= 0.05; change 0.04, bound = 0.04 + 0.01833 = 0.05833 > 0.05
    result = drop().evaluate(RECALL, paired(10, -0.04, (-0.06, -0.02), 0.01), p_adjusted=0.3, settings=SETTINGS,
                             family=1)  # fmt: skip
    assert result.message == (
        "underpowered: the one-sided 95% bound 0.05833 does not rule out a drop beyond 0.05, nor is one shown "
        "(smallest detectable at 80% power: 0.02802); about 79 units would decide it if the change stays 0.04; "
        "observed 0.04, interval [0.02, 0.06]"
    )
    assert result.units_needed == 79  # 10 * (0.028016 / (0.05 - 0.04)) ** 2 = 78.5 -> 79


def test_a_relative_threshold_is_a_share_of_the_baseline() -> None:
    # baseline 0.8, delta -0.1 (interval [-0.16, -0.04]): a drop of 12.5% (interval [5%, 20%]) > 5%
    result = drop(relative=True).evaluate(RECALL, paired(10, -0.1, (-0.16, -0.04), 0.02), p_adjusted=0.001,
                                          settings=SETTINGS, family=1)  # fmt: skip
    assert result.outcome == "fail"
    assert result.message == (
        "recall drop 12.5% (interval [5.0, 20.0]%, one-sided p = 0.001 Holm-adjusted, n = 10) exceeds the allowed 5.0%"
    )
    zero = drop(relative=True).evaluate(RECALL, paired(10, -0.1, (-0.15, -0.05), 0.02, baseline=0.0),
                                        p_adjusted=0.001, settings=SETTINGS, family=1)  # fmt: skip
    assert (zero.outcome, zero.message) == ("error", "recall: the change is not defined (n = 10)")


def test_a_latency_growth_must_clear_timing_noise_with_its_whole_interval() -> None:
    def growth(threshold: float) -> RelativeCheck:
        return RelativeCheck(spec=f"fail p99 growth <= {threshold}%", severity="fail", metric="p99",
                             threshold=threshold, direction="growth", relative=True)  # fmt: skip

    data = Paired(
        n=20, baseline=1000.0, candidate=1200.0, delta=200.0, ci_low=100.0, ci_high=300.0, p_value=None, se=50.0,
        ratio=1.2, ratio_ci_low=1.05, ratio_ci_high=1.3, se_log_ratio=0.04,
    )  # fmt: skip
    fired = growth(0.04).evaluate(P99, data, p_adjusted=0.001, settings=SETTINGS, family=1)
    assert fired.outcome == "fail"
    assert fired.message == (
        "p99 growth 20.0% (interval [5.0, 30.0]%, one-sided p = 0.001 Holm-adjusted, n = 20) exceeds the allowed 4.0%"
    )
    # change 20% > 10%, significant, but the interval's better end (5%) does not clear 10%: not fired
    assert growth(0.1).evaluate(P99, data, p_adjusted=0.001, settings=SETTINGS, family=1).outcome == "underpowered"


def test_a_metric_not_measured_on_both_sides_is_an_error_naming_the_remedy() -> None:
    nothing = Paired(n=0, baseline=math.nan, candidate=0.5, delta=math.nan, ci_low=math.nan, ci_high=math.nan,
                     p_value=None, se=math.nan)  # fmt: skip
    result = drop().evaluate(RECALL, nothing, p_adjusted=None, settings=SETTINGS, family=1)
    assert (result.outcome, result.message) == (
        "error",
        "recall is not measured on both sides (n = 0): compare with a run that records it (accept a new baseline)",
    )


# the threshold rule: fail only when significantly beyond the threshold -----------------------------------------


def test_the_threshold_rule_fails_a_drop_whose_lower_bound_is_beyond_the_threshold() -> None:
    # change 0.1, se 0.02, n 10: lower bound 0.1 - 1.833113 * 0.02 = 0.063338 > 0.05
    result = drop().evaluate(RECALL, paired(10, -0.1, (-0.15, -0.05), 0.02), p_adjusted=0.001, settings=THRESHOLD,
                             family=1)  # fmt: skip
    assert result.outcome == "fail"
    assert result.message == (
        "recall drop 0.1 (interval [0.05, 0.15], n = 10): its one-sided 0.95 lower bound 0.06334 is beyond the "
        "allowed 0.05"
    )
    # a family of 4: the bound at 1 - 0.05 / 4, t(9, 0.9875) = 2.685011: 0.1 - 0.053700 = 0.046300 < 0.05
    four = drop().evaluate(RECALL, paired(10, -0.1, (-0.15, -0.05), 0.02), p_adjusted=0.004, settings=THRESHOLD,
                           family=4)  # fmt: skip
    assert four.outcome == "underpowered"


def test_the_threshold_rule_does_not_fail_a_significant_change_that_may_be_within_the_threshold() -> None:
    # change 0.06 (interval [0.04, 0.08]), significant against none (p 0.001): the zero rule fails it, but its
    # lower bound 0.06 - 1.833113 * 0.01 = 0.041669 is within 0.05 and its upper bound 0.078331 beyond it
    data = paired(10, -0.06, (-0.08, -0.04), 0.01)
    assert drop().evaluate(RECALL, data, p_adjusted=0.001, settings=SETTINGS, family=1).outcome == "fail"
    result = drop().evaluate(RECALL, data, p_adjusted=0.001, settings=THRESHOLD, family=1)
    assert result.outcome == "underpowered"
    assert "does not rule out a drop beyond 0.05, nor is one shown" in result.message


def test_the_threshold_rule_passes_as_the_zero_rule_does() -> None:
    data = paired(10, -0.01, (-0.03, 0.01), 0.01)  # upper bound 0.028331 <= 0.05
    assert drop().evaluate(RECALL, data, p_adjusted=0.5, settings=THRESHOLD, family=1).outcome == "pass"


def test_under_the_threshold_rule_a_latency_growth_still_needs_its_whole_interval_beyond_the_threshold() -> None:
    growth = RelativeCheck(spec="fail p99 growth <= 10%", severity="fail", metric="p99", threshold=0.1,
                           direction="growth", relative=True)  # fmt: skip
    data = Paired(
        n=20, baseline=1000.0, candidate=1200.0, delta=200.0, ci_low=100.0, ci_high=300.0, p_value=None, se=50.0,
        ratio=1.2, ratio_ci_low=1.05, ratio_ci_high=1.3, se_log_ratio=0.04,
    )  # fmt: skip
    # no bootstrap distribution here: the lower bound is 0.2 - 1.644854 * 0.04 = 0.134 > 0.1, but the interval's
    # better end (5%) is within 10%
    assert growth.evaluate(P99, data, p_adjusted=0.001, settings=THRESHOLD, family=1).outcome == "underpowered"
    wide = Paired(
        n=20, baseline=1000.0, candidate=1200.0, delta=200.0, ci_low=150.0, ci_high=300.0, p_value=None, se=50.0,
        ratio=1.2, ratio_ci_low=1.15, ratio_ci_high=1.3, se_log_ratio=0.04,
    )  # fmt: skip
    assert growth.evaluate(P99, wide, p_adjusted=0.001, settings=THRESHOLD, family=1).outcome == "fail"


@pytest.mark.parametrize(
    ("alpha", "units"), [(0.05, 5), (0.0125, 7), (1 / 32, 5), (0.03, 6), (0.25, 2), (0.5, 2), (0.9, 2)]
)
def test_the_fewest_units_a_sign_flip_test_can_reach_alpha_on(alpha: float, units: int) -> None:
    assert min_units(alpha) == units
    if units > 2:
        assert 2.0**-units <= alpha < 2.0 ** -(units - 1)  # the oracle: 2**-n <= alpha, and no fewer
