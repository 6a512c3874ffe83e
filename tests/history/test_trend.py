"""Step detection on synthetic series, and series built from stored runs."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from rpcmeter.analysis.compare import metric
from rpcmeter.history.store import RunInfo, Store
from rpcmeter.history.trend import (
    PENALTY,
    _candidates,
    collect,
    find_steps,
    gated,
    holds_without_any_point,
    noise_sigma,
    trend_metric,
)
from rpcmeter.result.document import Result
from tests.support.synthetic import document, synthetic_result

MEAN = metric("mean")
RPS = trend_metric("rps")


def noisy(rng: np.random.Generator, levels: list[float], cv: float) -> list[float]:
    return [float(v) for v in np.asarray(levels) * np.exp(rng.normal(0, cv, len(levels)))]


def test_a_clean_step_is_found_where_it_happened() -> None:
    steps, drift = find_steps([100.0] * 4 + [130.0] * 6, MEAN)
    assert drift is None
    assert len(steps) == 1
    s = steps[0]
    assert (s.index, s.before, s.after, s.verdict) == (4, 4, 6, "slower")
    assert s.ratio == pytest.approx(1.3)
    assert s.ci_low == pytest.approx(1.3) and s.ci_high == pytest.approx(1.3)
    assert s.p_value < 0.01
    # the same data as throughput: higher is better, so the step is an improvement
    assert find_steps([100.0] * 4 + [130.0] * 6, RPS)[0][0].verdict == "faster"


def test_a_noisy_step_has_an_interval_around_its_size() -> None:
    rng = np.random.default_rng(3)
    values = noisy(rng, [100.0] * 12 + [150.0] * 12, 0.05)
    steps, _ = find_steps(values, MEAN)
    assert [s.index for s in steps] == [12]
    s = steps[0]
    assert s.ci_low < s.ratio < s.ci_high
    assert s.ci_low > 1.3 and s.ci_high < 1.7


def test_noisy_flat_series_show_no_step() -> None:
    """10 % noise between points, some with a single point three times too high: at most a few
    false steps in 200 series (asserted: under 3 %), never one made of the far-off point."""
    false = 0
    for seed in range(200):
        rng = np.random.default_rng(seed)
        values = noisy(rng, [100.0] * 20, 0.10)
        if seed % 2:
            values[int(rng.integers(20))] *= 3
        steps, _ = find_steps(values, MEAN)
        false += bool(steps)
    assert false < 6


def test_one_far_off_point_never_makes_a_step() -> None:
    for where in range(10):
        values = [100.0, 101.0, 99.0, 100.5, 99.5, 100.2, 99.8, 100.1, 99.9, 100.3]
        values[where] = 400.0
        assert find_steps(values, MEAN) == ([], None), where
    # the newest point alone far off: not a step yet; a second run like it makes one
    assert find_steps([100.0, 101, 99, 100, 100.5, 99.5, 100, 101, 140], MEAN)[0] == []
    steps, _ = find_steps([100.0, 101, 99, 100, 100.5, 99.5, 100, 101, 140, 141], MEAN)
    assert [(s.index, s.verdict) for s in steps] == [(8, "slower")]


def test_holds_without_any_point() -> None:
    assert holds_without_any_point([100, 101, 99], [150, 151])
    assert not holds_without_any_point([100, 101, 99], [400, 100])  # one point carries it


def test_a_slow_drift_is_a_drift_not_a_staircase() -> None:
    rng = np.random.default_rng(5)
    values = noisy(rng, [100.0 * 1.02**i for i in range(20)], 0.005)
    steps, drift = find_steps(values, MEAN)
    assert steps == []
    assert drift is not None and drift.verdict == "slower"
    assert drift.low < 1.02 < drift.high and drift.high / drift.low < 1.01
    assert drift.total == pytest.approx(1.02**19, rel=0.05)


def test_two_steps_are_both_found() -> None:
    rng = np.random.default_rng(7)
    values = noisy(rng, [100.0] * 8 + [125.0] * 8 + [90.0] * 8, 0.02)
    steps, drift = find_steps(values, MEAN)
    assert drift is None
    assert [(s.index, s.verdict) for s in steps] == [(8, "slower"), (16, "faster")]
    assert steps[0].ratio == pytest.approx(1.25, rel=0.05)
    assert steps[1].ratio == pytest.approx(0.72, rel=0.05)


def test_candidates_are_ruptures_pelt_candidates() -> None:
    """The PELT search on cumulative sums finds exactly the change points ruptures' PELT finds
    (l2 cost, the same minimum segment), on noisy series with and without steps, and flat ones."""
    import math

    ruptures = pytest.importorskip("ruptures")
    rng = np.random.default_rng(1)
    found = 0
    for trial in range(200):
        n = int(rng.integers(4, 100))
        values = np.exp(rng.normal(0, rng.choice([0.001, 0.01, 0.05]), n)) * 100
        for _ in range(int(rng.integers(0, 3))):
            values[int(rng.integers(1, n)) :] *= rng.choice([0.8, 1.1, 1.5])
        if trial % 10 == 0:
            values[:] = 100.0
        logs = np.log(values)
        sigma = noise_sigma(logs)
        pen = PENALTY * sigma**2 * math.log(n)
        pelt = ruptures.Pelt(model="l2", min_size=2, jump=1).fit(logs.reshape(-1, 1))
        expected = pelt.predict(pen=pen)[:-1]
        assert _candidates(logs, sigma) == expected, (trial, n)
        found += len(expected)
    assert found > 50  # the series had change points to find


def test_too_short_or_unusable_series() -> None:
    assert find_steps([100.0, 200.0, 200.0], MEAN) == ([], None)
    assert find_steps([100.0, 0.0, 200.0, 200.0, 200.0], MEAN) == ([], None)


def _stored(tmp_path: Path, means: list[float], commits: list[str]) -> Path:
    path = tmp_path / "h.db"
    with Store(path) as store:
        for i, (mean, commit) in enumerate(zip(means, commits, strict=True)):
            doc = document(
                synthetic_result(
                    {("w", (("threads", 1),), "a"): [mean, mean * 1.01, mean * 0.99]}, seed=i
                )
            )
            doc["suite"]["git"] = {"commit": commit * 40, "branch": "main", "dirty": False}
            doc["started_at"] = f"2026-01-{1 + i // 2:02d}T03:04:05+00:00"
            store.save(doc)
    return path


def _runs(path: Path) -> list[tuple[RunInfo, Result]]:
    with Store(path) as store:
        return [(info, store.load(info.id)) for info in reversed(store.runs())]


def test_series_from_stored_runs_by_run_revision_and_date(tmp_path: Path) -> None:
    means = [100.0] * 4 + [200.0] * 6
    commits = list("aabbccddee")
    path = _stored(tmp_path, means, commits)
    runs = _runs(path)
    (t,) = collect(runs, [MEAN])
    assert t.label == "synthetic · w · threads=1 · a"
    assert [p.label for p in t.points] == [f"run {i}" for i in range(1, 11)]
    assert [p.revision for p in t.points] == [c * 7 for c in commits]
    assert len(t.points[0].values) == 3
    assert t.points[4].value == pytest.approx(200, rel=0.25)  # synthetic latencies scatter
    assert [(s.index, s.verdict) for s in t.steps] == [(4, "slower")]
    assert gated([t], 1.05) == [(t, t.steps[0])]
    assert gated([t], 3.0) == []  # a 2x step is within a 3x threshold

    (r,) = collect(runs, [MEAN], by="revision")
    assert [p.label for p in r.points] == [c * 7 for c in "abcde"]
    assert [p.runs for p in r.points][:2] == [(1, 2), (3, 4)]
    assert len(r.points[0].values) == 6  # both runs' repetitions
    (d,) = collect(runs, [MEAN], by="date")
    assert [p.label for p in d.points] == [f"2026-01-0{i}" for i in range(1, 6)]

    two = collect(runs, [MEAN, RPS])
    assert [x.metric.name for x in two] == ["mean", "throughput"]
    assert two[1].steps[0].verdict == "slower"  # half the throughput: worse
    assert collect(runs, [MEAN], case_filter="threads=2") == []
    assert len(collect(runs, [MEAN], case_filter="SYNTH*W*")) == 1
