"""Load that changes within a case: the arithmetic of stages, intervals and rate ramps, and
staged cases run end to end against real servers (each stage measured apart, the time series
adding up to the case, Ctrl-C keeping the finished stages)."""

from __future__ import annotations

import json
import math
from typing import Any

import numpy as np
import pytest

from rpcmeter import model
from rpcmeter.metrics.histogram import Histogram
from rpcmeter.plan.cases import Case
from rpcmeter.plan.load import build_suite
from rpcmeter.run.events import RunEvents, RunListener
from rpcmeter.run.execute import RunOptions, run_suite
from rpcmeter.runners import windows
from rpcmeter.runners.recording import Window
from rpcmeter.runners.stages import LoadStage, RateProfile, WindowClock, active_spans, loops_in

pytestmark = pytest.mark.timeout(120)


# ---- arithmetic -------------------------------------------------------------------------------


def test_a_ramp_sends_its_requests_at_the_rising_rate() -> None:
    # 1 s at 100/s, then 2 s from 100/s to 300/s: 100 + 400 requests
    profile = RateProfile([(100.0, 100.0, 1.0), (100.0, 300.0, 2.0)])
    assert profile.slots == 500
    times = np.array([profile.time_of(k) for k in range(profile.slots)]) / 1e9
    assert np.all(np.diff(times) > 0) and times[-1] < 3.0
    assert times[100] == pytest.approx(1.0, abs=1e-6)  # the ramp starts with the stage
    # sends per half second of the ramp follow the rate's integral
    counts, _ = np.histogram(times, bins=[1.0, 1.5, 2.0, 2.5, 3.0])
    assert list(counts) == pytest.approx([62.5, 87.5, 112.5, 137.5], abs=1.01)
    assert profile.rate_at(2.0e9) == pytest.approx(200.0)
    assert profile.count_at(2.0e9) == pytest.approx(100 + 150)  # 100, then 1 s from 100 to 200
    assert profile.count_at(9e9) == pytest.approx(500)
    assert [profile.due_in(0), profile.due_in(1)] == [100, 400]


def test_clients_share_a_rate_and_a_concurrency() -> None:
    assert [loops_in(10, 3, c) for c in range(3)] == [4, 3, 3]
    stages = [
        LoadStage(1.0, concurrency=1),
        LoadStage(1.0, concurrency=4),
        LoadStage(1.0, concurrency=1),
    ]
    # loop 0 runs throughout; loop 2 only in the second stage, parked before and after
    assert active_spans(stages, 1, 0, 0) == [(0, 3_000_000_000)]
    assert active_spans(stages, 1, 0, 2) == [(1_000_000_000, 2_000_000_000)]
    assert active_spans(stages, 2, 1, 1) == [(1_000_000_000, 2_000_000_000)]
    assert active_spans(stages, 2, 1, 2) == []


def test_intervals_restart_at_every_stage() -> None:
    assert WindowClock(400_000_000, [1_000_000_000, 400_000_000]).windows == 4
    clock = WindowClock(400_000_000, [1_000_000_000, 600_000_000])
    assert clock.windows == 5  # 0-0.4-0.8-1.0 | 1.0-1.4-1.6: 3 + 2
    assert [clock.start(i) for i in range(5)] == [0, 4e8, 8e8, 1e9, 1.4e9]
    assert [clock.stage_of(i) for i in range(5)] == [0, 0, 0, 1, 1]
    assert clock.index_at(999_999_999) == 2 and clock.index_at(1_000_000_000) == 3
    assert clock.index_at(10**12) == 4  # after the stages: the last window
    assert list(clock.stage_windows(1)) == [3, 4]
    plain = WindowClock(1_000_000_000)
    assert plain.windows is None and plain.index_at(2_500_000_000) == 2


def test_a_coarsened_histogram_keeps_count_and_percentiles_within_its_buckets() -> None:
    rng = np.random.default_rng(1)
    values = rng.lognormal(12, 1.0, 50_000).astype(np.int64)
    h = Histogram()
    h.record_array(values)
    c = h.coarsened(6)
    assert (c.count, c.min, c.max, c.sum) == (h.count, h.min, h.max, h.sum)
    assert len(c.nonzero()[0]) < len(h.nonzero()[0]) / 10
    for q in (50, 90, 99):
        assert c.percentile(q) == pytest.approx(h.percentile(q), rel=1 / 32)


# ---- staged cases, end to end ------------------------------------------------------------------


def _suite(target: dict[str, Any], workload: dict[str, Any], load: dict[str, Any]) -> Any:
    return build_suite(
        {
            "name": "stages",
            "target": target,
            "workloads": {"simple": workload},
            "load": load,
            "placement": {"server_cpus": "none", "client_cpus": "none"},
            "resources": {"idle_s": 0},
            "timeseries": {"interval_s": 0.25},
        }
    )


def _sums_hold(case: model.Case) -> None:
    """The stages and the intervals add up to the whole case."""
    assert case.series is not None and case.stages
    assert sum(i.requests for i in case.series.intervals) == case.requests
    assert sum(s.requests for s in case.stages) == case.requests
    merged = Histogram.merged(i.decoded() for i in case.series.intervals)
    assert merged.count == case.latency_histogram().count


def test_open_loop_ramp_is_paced_stage_by_stage() -> None:
    stages = [
        {"duration_s": 0.5, "rate": 200},
        {"duration_s": 1.0, "rate": 600, "ramp": True},
        {"duration_s": 0.5, "rate": 100, "name": "cool"},
    ]
    suite = _suite(
        {"driver": "rpyc", "transport": "unix"},
        {},
        {"clients": 2, "concurrency": 8, "warmup": 5, "stages": stages},
    )
    (case,) = run_suite(suite).cases
    assert case.status == "ok", case.reason
    _sums_hold(case)
    assert case.stages is not None and [s.label() for s in case.stages] == ["1", "2", "cool"]
    assert [s.load() for s in case.stages] == ["200/s", "200->600/s", "100/s"]
    for stage, offered in zip(case.stages, (100, 400, 50), strict=True):
        assert stage.complete and stage.sent is not None
        assert stage.sent == pytest.approx(offered, abs=offered * 0.1 + 3)
        assert stage.latency is not None and stage.latency_uncorrected is not None
        # corrected latency counts from the intended send time: never below the actual one
        assert stage.latency.max_us >= stage.latency_uncorrected.max_us - 1  # type: ignore[operator]
    assert case.series is not None and case.series.interval_s == 0.25
    starts = [i.start_s for i in case.series.intervals]
    assert starts == pytest.approx([0, 0.25, 0.5, 0.75, 1.0, 1.25, 1.5, 1.75])
    assert [i.stage for i in case.series.intervals] == [0, 0, 1, 1, 1, 1, 2, 2]
    # the ramp's intervals rise with its rate (62.5, 87.5, 112.5, 137.5 a quarter second)
    ramp = [i.sent or 0 for i in case.series.intervals[2:6]]
    assert ramp[3] > ramp[0] * 1.6


def test_closed_loop_stages_start_and_park_loops() -> None:
    stages = [
        {"duration_s": 0.6, "concurrency": 1},
        {"duration_s": 0.6, "concurrency": 4},
        {"duration_s": 0.6, "concurrency": 1},
    ]
    suite = _suite(
        {"driver": "http", "transport": "tcp"},
        {"kind": "sleep", "ms": 20},
        {"connections": 4, "warmup": 2, "stages": stages},
    )
    (case,) = run_suite(suite).cases
    assert case.status == "ok", case.reason
    _sums_hold(case)
    assert case.stages is not None
    low1, high, low2 = (s.throughput_rps or 0 for s in case.stages)
    # 20 ms a request: one loop makes at most 50/s, four about 200/s; the third stage also
    # gets the replies of the three parked loops' last requests (in flight at its start)
    assert low1 <= 52 and low2 <= 52 + 3 / 0.6
    assert high > 2.5 * max(low1, low2)
    assert [s.load() for s in case.stages] == ["1 loop", "4 loops", "1 loop"]


def test_each_stage_carries_the_servers_cpu() -> None:
    # the built-in HTTP server at 200 then 2,000 requests/s: its CPU marked at the boundary
    stages = [{"duration_s": 1.0, "rate": 200}, {"duration_s": 1.0, "rate": 2000}]
    suite = _suite(
        {"driver": "http", "transport": "tcp"},
        {"kind": "echo"},
        {"concurrency": 8, "warmup": 5, "stages": stages},
    )
    (case,) = run_suite(suite).cases
    assert case.status == "ok", case.reason
    assert case.stages is not None and case.cpu is not None
    low, high = case.stages
    for s in case.stages:
        assert s.server_cpu_s is not None and s.server_cpu_s > 0
        assert s.server_us_per_request == pytest.approx(s.server_cpu_s * 1e6 / s.requests)
        assert s.server_util_pct is not None and 0 < s.server_util_pct < 100
    assert high.server_cpu_s > low.server_cpu_s  # type: ignore[operator]
    # the stages cover the case's measured interval but for the moment before the first
    total = (case.cpu.server_user_s or 0) + (case.cpu.server_sys_s or 0)
    spent = sum(s.server_cpu_s or 0 for s in case.stages)
    assert total * 0.8 - 0.02 <= spent <= total + 1e-6
    # and they are in the result document as in the per-stage table
    doc: Any = json.loads(json.dumps(case.dump()))
    assert [d["server_cpu_s"] for d in doc["stages"]] == [low.server_cpu_s, high.server_cpu_s]


class _CtrlC(RunListener):
    """Ctrl-C once the case has run ``after_s`` seconds."""

    def __init__(self, after_s: float) -> None:
        self.after_s = after_s

    def progress(self, case: Case, total: int, done: int, seconds: float) -> None:
        if seconds > self.after_s:
            raise KeyboardInterrupt


def test_ctrl_c_keeps_the_finished_stages(tmp_path: Any) -> None:
    stages = [{"duration_s": 0.5, "rate": 100}, {"duration_s": 30, "rate": 100}]
    suite = _suite({"driver": "rpyc", "transport": "unix"}, {}, {"warmup": 2, "stages": stages})
    out = tmp_path / "r.json"
    with pytest.raises(KeyboardInterrupt):
        run_suite(suite, RunOptions(output=out, events=RunEvents(_CtrlC(1.2))))
    doc = model.Result.model_validate_json(out.read_text())
    assert doc.status == "interrupted"
    (case,) = doc.cases
    assert case.status == "incomplete" and "stages 1 measured whole" in (case.reason or "")
    assert case.stages is not None
    first = case.stages[0]
    assert first.complete and first.sent == pytest.approx(50, abs=3)
    assert all(not s.complete for s in case.stages[1:])
    # the server's CPU of the finished stage is kept; the one cut short has none
    assert first.server_cpu_s is not None and first.server_us_per_request is not None
    assert all(s.server_cpu_s is None for s in case.stages[1:])
    assert case.requests == sum(s.requests for s in case.stages) > first.requests
    assert not math.isnan(case.latency.p99_us or math.nan)  # type: ignore[union-attr]


def test_a_long_series_halves_its_resolution_and_keeps_every_request(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(windows, "MAX_WINDOWS", 16)
    seen: list[windows.WindowEvent] = []
    timeline = windows.Timeline(WindowClock(1_000_000_000), 1, seen.append)
    rng = np.random.default_rng(2)
    for i in range(100):
        piece = Window()
        piece.hist.record_array(rng.integers(100_000, 200_000, 10 + i))
        piece.ok = 10 + i
        timeline.add(0, {i: piece}, i + 1, (0.01 * i, 0.0))
    timeline.finish(0, {}, (1.0, 0.0))
    series = timeline.series()
    kept = series.intervals
    assert len(kept) <= 16 and len(seen) == 100  # the listeners saw every interval
    assert [k.start_ns for k in kept[1:]] == [k.end_ns for k in kept[:-1]]  # contiguous
    assert kept[0].start_ns == 0 and kept[-1].last == 99
    assert sum(k.requests for k in kept) == sum(range(10, 110)) == series.total.tally.ok
    assert sum(k.decoded().count for k in kept) == series.total.tally.hist.count
