"""The regression gate's verdicts, from comparisons of synthetic runs."""

from __future__ import annotations

from rpcmeter import analysis, gate
from tests.support.synthetic import CellSpec, synthetic_result

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
