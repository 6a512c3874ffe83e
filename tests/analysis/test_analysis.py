"""Statistics of comparisons: the test, the interval, verdicts, A/A stability, warnings, gating."""

from __future__ import annotations

import math

import numpy as np
import pytest
import scipy.stats

from rpcmeter.analysis import compare as analysis
from rpcmeter.analysis.compare import (
    bootstrap_ratio_ci,
    compare_runs,
    compare_values,
    compare_variants,
    mann_whitney_u,
    regressions,
    verdict_of,
)
from rpcmeter.errors import UsageError
from rpcmeter.reporters.tables import undecided_note, weak_note
from tests.support.synthetic import document, parsed, synthetic_result

MEAN = analysis.METRIC_BY_NAME["mean"]


def test_mann_whitney_matches_scipy_exact_and_with_ties() -> None:
    rng = np.random.default_rng(7)
    for _ in range(200):
        n1, n2 = (int(v) for v in rng.integers(1, 14, 2))
        x, y = rng.normal(0, 1, n1), rng.normal(0.7, 1, n2)
        u, p = mann_whitney_u(list(x), list(y))
        ref = scipy.stats.mannwhitneyu(x, y, alternative="two-sided", method="exact")
        assert u == pytest.approx(ref.statistic)
        assert p == pytest.approx(ref.pvalue, abs=1e-12)
        xt, yt = rng.integers(0, 4, n1 + 5).astype(float), rng.integers(0, 4, n2 + 5).astype(float)
        u, p = mann_whitney_u(list(xt), list(yt))
        ref = scipy.stats.mannwhitneyu(xt, yt, alternative="two-sided", method="asymptotic")
        assert p == pytest.approx(ref.pvalue, abs=1e-9)


def test_mann_whitney_edge_cases() -> None:
    assert mann_whitney_u([], [1.0])[1] == 1.0
    assert mann_whitney_u([2.0, 2.0], [2.0, 2.0])[1] == 1.0
    # five clearly separated repetitions per side: the smallest exact p-value, 2/252
    assert mann_whitney_u([1, 2, 3, 4, 5], [6, 7, 8, 9, 10])[1] == pytest.approx(2 / 252)
    # three per side can never reach 5 %
    assert mann_whitney_u([1, 2, 3], [4, 5, 6])[1] == pytest.approx(0.1)


def test_bootstrap_interval_known_difference_and_none() -> None:
    rng = np.random.default_rng(1)
    base = list(rng.normal(100, 3, 8))
    faster = list(rng.normal(80, 3, 8))
    lo, hi = bootstrap_ratio_ci(base, faster, seed=3)
    assert lo < 0.8 * 1.04 and hi > 0.8 * 0.96  # covers the true ratio
    assert hi < 1  # and excludes 1
    same = list(rng.normal(100, 3, 8))
    lo, hi = bootstrap_ratio_ci(base, same, seed=3)
    assert lo < 1 < hi
    # seeded: the same inputs give the same interval
    assert bootstrap_ratio_ci(base, faster, seed=3) == bootstrap_ratio_ci(base, faster, seed=3)


def test_known_difference_gives_verdicts_both_ways() -> None:
    rng = np.random.default_rng(2)
    base = list(rng.normal(100, 2, 5))
    quicker = list(rng.normal(80, 2, 5))
    row = compare_values(base, quicker, MEAN, seed=1)
    assert row.verdict == "faster"
    assert row.ratio == pytest.approx(0.8, rel=0.05)
    assert row.ci_high is not None and row.p_value is not None
    assert row.ci_high < 1 and row.p_value < 0.05
    # throughput: higher is better, so a lower ratio is slower
    tput = analysis.METRIC_BY_NAME["throughput"]
    assert compare_values(base, quicker, tput, seed=1).verdict == "slower"
    assert compare_values(quicker, base, MEAN, seed=1).verdict == "slower"
    # no difference: same
    row = compare_values(base, list(rng.normal(100, 2, 5)), MEAN, seed=1)
    assert row.verdict == "same"


def test_verdict_needs_interval_and_test_to_agree() -> None:
    assert verdict_of(0.8, 0.7, 0.9, 0.01, False) == "faster"
    assert verdict_of(0.8, 0.7, 0.9, 0.10, False) == "same"  # the test disagrees
    assert verdict_of(0.8, 0.7, 1.01, 0.01, False) == "same"  # the interval holds 1
    assert verdict_of(1.2, 1.1, 1.3, 0.01, True) == "faster"
    assert verdict_of(1.2, math.nan, math.nan, math.nan, False) == "unknown"
    # one repetition per side: nothing to test
    assert compare_values([100.0], [50.0], MEAN).verdict == "unknown"


def test_a_a_comparisons_come_out_same() -> None:
    """A variant against an identical copy of itself, 400 times: 'same' in the large majority."""
    rng = np.random.default_rng(11)
    verdicts = []
    for trial in range(400):
        a = list(rng.lognormal(np.log(100), 0.08, 5))
        b = list(rng.lognormal(np.log(100), 0.08, 5))
        verdicts.append(compare_values(a, b, MEAN, seed=trial).verdict)
    same = verdicts.count("same") / len(verdicts)
    assert same >= 0.95, verdicts
    # the same machinery does see a real 10 % difference at that noise most of the time
    seen = sum(
        compare_values(
            list(rng.lognormal(np.log(100), 0.03, 5)),
            list(rng.lognormal(np.log(110), 0.03, 5)),
            MEAN,
            seed=trial,
        ).verdict
        == "slower"
        for trial in range(100)
    )
    assert seen >= 80


def test_compare_variants_on_a_result() -> None:
    p1, p4 = (("threads", 1),), (("threads", 4),)
    result = synthetic_result(
        {
            ("simple", p1, "default"): [100, 101, 99, 100, 102],
            ("simple", p1, "bind"): [70, 71, 69, 70, 72],
            ("simple", p4, "default"): [200, 201, 199, 200, 202],
            ("simple", p4, "bind"): [200, 199, 202, 201, 200],
        },
        cpu=True,
    )
    doc = compare_variants(result)
    assert doc.kind == "variants" and doc.baseline == "default"
    by = {(r.point["threads"], r.metric): r for r in doc.rows}
    per_request = {m.name for m in analysis.METRICS if not m.path.startswith("command.")}
    assert {m for _, m in by} == per_request  # no whole-command figures here
    assert by[(1, "mean")].verdict == "faster"
    assert by[(1, "throughput")].verdict == "faster"
    assert by[(1, "server_cpu")].verdict == "faster"
    assert by[(4, "mean")].verdict == "same"
    summary = {s.metric: s for s in doc.summary}
    assert summary["mean"].geomean == pytest.approx(math.sqrt(0.7 * 1.0), rel=0.03)
    assert summary["mean"].faster == 1 and summary["mean"].same == 1
    assert doc == compare_variants(result)  # deterministic
    assert doc.warnings == ()


def test_cpu_metrics_absent_are_skipped() -> None:
    result = synthetic_result({("w", (), "a"): [1, 1.1], ("w", (), "b"): [1, 1.1]})
    metrics = {r.metric for r in compare_variants(result).rows}
    assert metrics == {"mean", "p50", "p99", "throughput"}


def test_warnings_for_few_repetitions_and_spread() -> None:
    result = synthetic_result({("w", (), "a"): [100, 150, 80], ("w", (), "b"): [100, 101, 102]})
    warnings = compare_variants(result).warnings
    assert not any("no verdict" in w for w in warnings)  # the table says why (undecided_note)
    assert undecided_note(compare_variants(result).rows).startswith(
        "no verdict with 3 repetitions a side: the test needs at least 4 a side"
    )
    assert {r.verdict for r in compare_variants(result).rows} == {"unknown"}
    four = synthetic_result({("w", (), "a"): [100, 101, 99, 100], ("w", (), "b"): [80] * 4})
    assert any(
        "verdicts rest on as few as 4 repetitions" in w for w in compare_variants(four).warnings
    )
    assert analysis.can_decide(4, 4) and analysis.can_decide(3, 5)
    assert not analysis.can_decide(3, 3) and not analysis.can_decide(1, 20)
    assert not any(r.weak for r in compare_variants(result).rows)  # no verdict to weaken
    # a "same" on spread repetitions: marked in its table (same?), no warning about the run
    noisy = compare_variants(
        synthetic_result({("w", (), "a"): [100, 150, 80, 120], ("w", (), "b"): [100] * 4})
    )
    weak = [r for r in noisy.rows if r.weak]
    assert {r.metric for r in weak} >= {"throughput"} and {r.word for r in weak} == {"same?"}
    assert not any("vary" in w or "weak" in w for w in noisy.warnings)
    note = weak_note(noisy.rows)
    assert note.startswith("same?: the repetitions vary by over 10% (worst: ")
    assert "of a, CV " in note and note.endswith("run more repetitions, or on a quieter machine")
    assert weak_note(compare_variants(four).rows) == ""
    # as spread, but every repetition of one side beyond every one of the other: a verdict the
    # spread did not prevent is not weak
    clear = synthetic_result({("w", (), "a"): [200, 300, 160, 240], ("w", (), "b"): [100] * 4})
    rows = compare_variants(clear).rows
    assert "faster" in {r.verdict for r in rows}
    assert not any(r.weak for r in rows if r.verdict != "same")
    one = synthetic_result({("w", (), "a"): [100], ("w", (), "b"): [90]})
    doc = compare_variants(one)
    assert {r.verdict for r in doc.rows} == {"unknown"}
    assert "no verdict with 1 repetition a side" in undecided_note(doc.rows)
    assert not analysis.has_verdicts(doc)


def test_compare_runs_and_regressions() -> None:
    p = (("threads", 1),)
    old = synthetic_result({("w", p, "x"): [100, 101, 99, 100, 102], ("v", p, "x"): [50] * 5})
    new = synthetic_result(
        {("w", p, "x"): [130, 131, 129, 130, 132], ("v", p, "x"): [50, 51, 49, 50, 50]}, seed=1
    )
    doc = compare_runs(old, new, "run 1", "run 2")
    assert doc.kind == "runs" and doc.against == "run 2"
    rows = {(r.workload, r.metric): r for r in doc.rows}
    assert rows[("w", "mean")].verdict == "slower"
    assert rows[("v", "mean")].verdict == "same"
    assert [r.workload for r in regressions(doc, "mean", 20)] == ["w"]
    assert regressions(doc, "mean", 40) == []  # 30 % slower is within a 40 % allowance
    assert [r.workload for r in regressions(doc, "throughput", 10)] == ["w"]
    with pytest.raises(UsageError, match="unknown metric"):
        regressions(doc, "nonsense", 10)


def test_whole_commands_compare_run_by_run() -> None:
    """A command case holds every run: each run is a repetition, so one case per variant gives
    verdicts on wall time and CPU."""
    result = document(synthetic_result({("flow", (), "1.0"): [100], ("flow", (), "1.1"): [100]}))
    rng = np.random.default_rng(5)
    for case, wall in zip(result["cases"], (1.0, 1.3), strict=True):
        case["runs"] = [
            {"wall_s": w, "user_s": w * 0.5, "sys_s": w * 0.1, "exit_code": 0}
            for w in rng.normal(wall, 0.02, 10)
        ]
        case["runs"].append({"wall_s": 99.0, "user_s": 0, "sys_s": 0, "exit_code": 1})  # failed
        case["command"] = {"user_s": wall * 0.5, "sys_s": wall * 0.1}
    rows = {r.metric: r for r in compare_variants(parsed(result)).rows}
    for name in ("mean", "user_cpu", "sys_cpu"):
        assert rows[name].n == rows[name].n_baseline == 10
        assert rows[name].verdict == "slower"
        assert rows[name].ratio == pytest.approx(1.3, rel=0.05)
    assert rows["p99"].verdict == "unknown"  # one case per side: no repetitions of p99


def test_cpu_verdicts_read_less_and_more_in_every_table() -> None:
    """Stored verdicts stay faster/slower; tables show CPU metrics' as less/more."""
    for m in analysis.METRICS:
        cpu = m.name in ("server_cpu", "client_cpu", "user_cpu", "sys_cpu")
        assert analysis.verdict_word(m.name, "faster") == ("less" if cpu else "faster")
        assert analysis.verdict_word(m.name, "slower") == ("more" if cpu else "slower")
        assert analysis.verdict_word(m.name, "same") == "same"
        assert analysis.verdict_word(m.name, "unknown") == "unknown"
    assert analysis.verdict_word("no such metric", "faster") == "faster"
