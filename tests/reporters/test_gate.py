"""The regression gate's verdicts, from comparisons of synthetic runs."""

from __future__ import annotations

from rpcmeter.analysis import compare as analysis
from rpcmeter.reporters import gate as gate
from rpcmeter.suite.model import Gate
from tests.support.synthetic import CellSpec, comparison_document, synthetic_result

BASE = [100.0, 101, 99, 100, 102, 98]


def verdict(slower: list[float], pct: float = 10) -> gate.Verdict:
    spec: CellSpec = {("w", (), "base"): BASE, ("w", (), "new"): slower}
    return gate.judge(analysis.compare_variants(synthetic_result(spec)), "mean", pct)


def test_a_significant_regression_beyond_the_threshold_fails() -> None:
    v = verdict([150.0, 151, 149, 150, 152, 148])
    assert v.status == gate.REGRESSED
    assert v.lines[0].startswith("gate: 1 case(s) mean latency worse than the baseline by more")


def test_no_regression_passes() -> None:
    v = verdict([100.0, 100, 101, 99, 100, 101])
    assert v.status == gate.PASSED and "1 cases judged" in v.lines[0]


def test_too_few_repetitions_cannot_be_settled() -> None:
    spec: CellSpec = {("w", (), "base"): [100.0, 101], ("w", (), "new"): [150.0, 151]}
    v = gate.judge(analysis.compare_variants(synthetic_result(spec)), "mean", 10)
    assert v.status == gate.UNDECIDED and "cannot tell" in v.lines[0]


def test_nothing_measured_on_both_sides_cannot_be_settled() -> None:
    spec: CellSpec = {("w", (), "base"): BASE}
    v = gate.judge(analysis.compare_variants(synthetic_result(spec)), "mean", 10)
    assert v.status == gate.UNDECIDED and "nothing to gate on" in v.lines[0]


# ---- a suite's own criterion ([gate]) -------------------------------------------------------

STUDY = Gate(where={"long_input": True}, better=["sys_cpu"], not_worse=["mean"])


def rows_of(*rows: dict[str, object]) -> analysis.Comparison:
    """Rows of ``fix`` against ``spin`` at long_input=True (unless a row says otherwise)."""
    cell = {"variant": "fix", "baseline": "spin", "point": {"long_input": True}, "n": 5}
    doc = comparison_document([{**cell, "n_baseline": 5, **row} for row in rows])
    return analysis.Comparison.model_validate(doc)


def sys_row(verdict: str, ratio: float = 0.1, **more: object) -> dict[str, object]:
    return {
        "metric": "sys_cpu",
        "unit": "s",
        "ratio": ratio,
        "ci_low": ratio * 0.9,
        "ci_high": ratio * 1.1,
        "p_value": 0.008,
        "verdict": verdict,
        **more,
    }


def wall_row(verdict: str, ratio: float = 1.0, **more: object) -> dict[str, object]:
    return {
        "metric": "mean",
        "ratio": ratio,
        "ci_low": ratio * 0.95,
        "ci_high": ratio * 1.05,
        "p_value": 0.5,
        "verdict": verdict,
        **more,
    }


def test_the_suite_gate_passes_when_system_time_is_down_and_wall_time_not_worse() -> None:
    v = gate.check(rows_of(sys_row("faster"), wall_row("same")), STUDY)
    assert v.status == gate.PASSED
    assert v.lines == [
        "gate (system CPU per run better; wall time per run not worse; long_input=True): "
        "passed in 1 case(s)"
    ]


def test_the_suite_gate_fails_when_system_time_is_not_down() -> None:
    v = gate.check(rows_of(sys_row("same", 0.97), wall_row("same")), STUDY)
    assert v.status == gate.REGRESSED
    assert v.lines[1] == (
        "  w · long_input=True · fix: system CPU per run 0.97x [0.87-1.07] same of spin "
        "(5 and 5 repetitions, p=0.008): not significantly better"
    )
    v = gate.check(rows_of(sys_row("slower", 9.0), wall_row("faster", 0.9)), STUDY)
    assert v.status == gate.REGRESSED and v.lines[1].endswith(
        "more of spin (5 and 5 repetitions, p=0.008): worse"
    )


def test_the_suite_gate_fails_when_wall_time_is_worse() -> None:
    v = gate.check(rows_of(sys_row("faster"), wall_row("slower", 1.2, p_value=0.01)), STUDY)
    assert v.status == gate.REGRESSED
    assert "wall time per run 1.20x [1.14-1.26] slower of spin" in v.lines[1]


def test_the_suite_gate_judges_only_the_cases_it_selects() -> None:
    fast_input = {"point": {"long_input": False}}
    doc = rows_of(sys_row("faster"), wall_row("same"), sys_row("same", 1.0, **fast_input))
    assert gate.check(doc, STUDY).status == gate.PASSED
    assert gate.check(doc, Gate(better=["sys_cpu"])).status == gate.REGRESSED
    other = rows_of(sys_row("faster"), sys_row("same", variant="0.21"))
    assert gate.check(other, Gate(better=["sys_cpu"], variants=["fix"])).status == gate.PASSED
    v = gate.check(other, Gate(better=["sys_cpu"], variants=["0.22"]))
    assert v.status == gate.UNDECIDED and "no case of 0.22 was measured" in v.lines[0]


def test_the_suite_gate_cannot_tell_with_too_few_runs_or_nothing_compared() -> None:
    few = {"n": 3, "n_baseline": 3}
    v = gate.check(rows_of(sys_row("unknown", **few), wall_row("unknown", **few)), STUDY)
    assert v.status == gate.UNDECIDED and "cannot tell for 2 comparison(s)" in v.lines[0]
    assert (
        v.lines[-1] == "  a gate needs at least 4 repetitions per side (for a whole command, runs)"
    )
    v = gate.check(rows_of(), STUDY)
    assert v.status == gate.UNDECIDED and "nothing to judge" in v.lines[0]


def test_two_gates_together_give_the_worst_status() -> None:
    assert gate.worst(gate.PASSED, gate.UNDECIDED) == gate.UNDECIDED
    assert gate.worst(gate.REGRESSED, gate.UNDECIDED) == gate.REGRESSED
    assert gate.worst(gate.PASSED, gate.PASSED) == gate.PASSED
