"""The open-loop scheduler in one process, with in-process callers (no server): pacing, the
achieved rate, late and dropped slots, and the corrected vs uncorrected latency of a stall."""

from __future__ import annotations

import itertools
import threading
import time
from collections.abc import Callable
from typing import Any

import pytest

from rpcmeter.runners.open_loop import Schedule, measure_open
from rpcmeter.runners.recorder import Recorder
from rpcmeter.runners.recording import ThreadStats
from rpcmeter.runners.spec import Pacing
from tests.support.marks import timing_sensitive

pytestmark = pytest.mark.timeout(60)


def run_loops(
    call_for: list[object],
    sched: Schedule,
    stop: threading.Event | None = None,
) -> list[ThreadStats]:
    """Run one open loop per caller against ``sched`` in threads, as a client process does."""
    stats = [ThreadStats() for _ in call_for]
    stop = stop or threading.Event()

    def loop(i: int) -> None:
        measure_open(
            call_for[i],  # type: ignore[arg-type]
            Recorder(stats[i], False, uncorrected=True),
            sched,
            loops=len(call_for),
            fatal=(OSError,),
            stop=stop.is_set,
            publish=lambda done: None,
        )

    threads = [threading.Thread(target=loop, args=(i,)) for i in range(len(call_for))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    return stats


def summary(sched: Schedule, stats: list[ThreadStats]) -> dict[str, float | int]:
    return sched.summary(sum(s.sent for s in stats), max(s.last_send_ns for s in stats))


def test_for_client_splits_rate_and_offsets_phase() -> None:
    p = Pacing(1000.0).for_client(1, 4)
    assert p.rate_rps == 250.0
    assert p.phase == 0.25
    sched = Schedule(p, requests=None, duration_s=2.0)
    assert sched.slots == 500  # ceil(2 * 250 - 0.25)
    start = sched.begin(10_000_000)
    assert start == sched.begin(99_999_999_999)  # the first begin wins
    assert sched.time_of(1) - sched.time_of(0) == 4_000_000
    # the four clients' first slots interleave evenly over one client period
    firsts = []
    for c in range(4):
        s = Schedule(Pacing(1000.0).for_client(c, 4), requests=None, duration_s=1.0)
        firsts.append(s.begin(0))
    assert [b - a for a, b in itertools.pairwise(firsts)] == [1_000_000] * 3


def test_count_mode_sends_every_slot_at_the_rate() -> None:
    sched = Schedule(Pacing(2000.0), requests=1000, duration_s=None)
    # a caller may return anything when its driver reports no server time
    stats = run_loops([lambda: None, lambda: "a reply"], sched)
    s = summary(sched, stats)
    assert s["sent"] == s["scheduled"] == 1000
    assert all(x.server_hist.count == 0 for x in stats)
    assert s["dropped"] == 0
    # a late last send lowers the achieved rate: a busy machine may delay one by milliseconds
    assert s["achieved_rps"] == pytest.approx(2000.0, rel=0.05)
    # wall time is the schedule's length (0.5 s), not as fast as possible
    span = max(x.end_ns for x in stats) - min(x.start_ns for x in stats)
    assert 0.45e9 < span < 1.5e9
    corrected = sum(x.hist.count for x in stats)
    uncorrected = sum(x.uhist.count for x in stats)
    assert corrected == uncorrected == 1000


def test_slow_calls_make_slots_late_and_the_duration_drops_the_rest() -> None:
    # one loop, 2 ms per call, 1000 req/s offered: half the slots cannot go out in time
    sched = Schedule(Pacing(1000.0, late_ms=1.0), requests=None, duration_s=0.5)
    stats = run_loops([lambda: time.sleep(0.002)], sched)
    s = summary(sched, stats)
    assert s["scheduled"] == 500
    assert s["sent"] < 320  # about 250
    assert s["dropped"] == 500 - s["sent"]
    assert s["achieved_rps"] < 650
    assert stats[0].late > 0.8 * s["sent"]
    # corrected latency grows with the backlog (to about 250 ms at the end); uncorrected stays
    # near the call's 2 ms
    assert stats[0].hist.percentile(50) > 50e6
    assert stats[0].uhist.percentile(50) < 25e6


def test_max_lag_drops_slots_instead_of_sending_them_late() -> None:
    sched = Schedule(Pacing(1000.0, max_lag_ms=20.0), requests=300, duration_s=None)
    calls = 0

    def call() -> None:
        nonlocal calls
        calls += 1
        if calls == 20:
            time.sleep(0.1)  # 100 ms stuck: slots more than 20 ms behind are dropped

    stats = run_loops([call], sched)
    s = summary(sched, stats)
    assert 60 <= s["dropped"] <= 110  # about 100 - 20
    assert s["sent"] == calls == 300 - s["dropped"]
    assert stats[0].hist.max < 0.2e9


def test_stop_ends_the_loops() -> None:
    sched = Schedule(Pacing(100.0), requests=10_000, duration_s=None)  # 100 s of schedule
    stop = threading.Event()
    threading.Timer(0.3, stop.set).start()
    t0 = time.monotonic()
    stats = run_loops([lambda: None], sched, stop)
    assert time.monotonic() - t0 < 5
    assert 0 < stats[0].sent < 200


def test_stall_shows_in_corrected_and_hides_in_uncorrected() -> None:
    """At rate R, a stall of S seconds at T delays the requests due in [T, T+S) by up to S,
    linearly decreasing: P(corrected > x) = (S - x) / D for x < S over a run of D seconds."""
    rate, stall_s, duration_s = 1000.0, 0.2, 2.0
    t_stall = [0.0]
    start = time.perf_counter()

    def call() -> None:
        now = time.perf_counter() - start
        if not t_stall[0] and now > 0.8:
            t_stall[0] = now
            time.sleep(stall_s)

    sched = Schedule(Pacing(rate), requests=None, duration_s=duration_s)
    stats = run_loops([call], sched)
    corrected, uncorrected = stats[0].hist, stats[0].uhist
    assert corrected.count == pytest.approx(rate * duration_s, rel=0.02)
    for pct in (99.0, 99.9):
        expected = stall_s - (1 - pct / 100) * duration_s  # seconds
        assert corrected.percentile(pct) / 1e9 == pytest.approx(expected, rel=0.15, abs=0.015)
        assert uncorrected.percentile(pct) / 1e9 < stall_s / 10
    assert uncorrected.max / 1e9 == pytest.approx(stall_s, rel=0.2)
    assert stats[0].late >= rate * stall_s * 0.8


# ---- the same schedule on an event loop (event drivers) ----------------------------------------


def run_event_loop(
    sched: Schedule, loops: int, reply_after_s: Callable[[float], float]
) -> ThreadStats:
    """Open loop on one event loop over ``loops`` fake channels; each reply arrives
    ``reply_after_s(seconds since the start)`` after its request was sent."""
    import asyncio

    from rpcmeter.runners.event_loop import new_event_loop
    from rpcmeter.runners.open_loop import EventLoad, EventPacer
    from rpcmeter.runners.recorder import Recorder

    loop = new_event_loop()
    stats = ThreadStats()
    t0 = time.perf_counter()

    def channel(done: Any) -> None:
        loop.call_later(reply_after_s(time.perf_counter() - t0), done, None, None)

    pacer = EventPacer(
        EventLoad(
            loop,
            sched,
            [channel] * loops,
            Recorder(stats, False, uncorrected=True),
            stats,
            (OSError,),
        )
    )
    try:
        stats.start_ns = sched.begin(time.perf_counter_ns())
        pacer.start()
        loop.run_until_complete(asyncio.wait_for(pacer.finished, 30))
    finally:
        pacer.close()
        loop.close()
    pacer.fold()
    return stats


@timing_sensitive
def test_event_loop_keeps_the_rate_and_counts_late_when_loops_are_busy() -> None:
    sched = Schedule(Pacing(2000.0), requests=None, duration_s=0.5)
    stats = run_event_loop(sched, 4, lambda t: 0.0)
    s = sched.summary(stats.sent, stats.last_send_ns)
    assert s["scheduled"] == 1000
    # a busy machine may hold the last few past the end of the run (dropped, not sent late)
    assert s["sent"] >= 970 and s["dropped"] == 1000 - s["sent"]
    assert s["achieved_rps"] == pytest.approx(2000, rel=0.03)
    assert stats.hist.count == stats.uhist.count == s["sent"]
    # 2 loops, 10 ms per reply: at most 200 req/s for 1000 offered
    busy = Schedule(Pacing(1000.0), requests=None, duration_s=0.5)
    stats = run_event_loop(busy, 2, lambda t: 0.01)
    s = busy.summary(stats.sent, stats.last_send_ns)
    assert s["sent"] < 150 and s["dropped"] == 500 - s["sent"]
    assert stats.late > 0.8 * s["sent"]


@timing_sensitive
def test_event_loop_stall_shows_in_corrected_and_hides_in_uncorrected() -> None:
    rate, stall_s, duration_s, at = 1000.0, 0.2, 2.0, 0.8

    def reply_after(t: float) -> float:  # a request in [at, at + S) is answered at at + S
        return at + stall_s - t if at <= t < at + stall_s else 0.0

    sched = Schedule(Pacing(rate), requests=None, duration_s=duration_s)
    stats = run_event_loop(sched, 1, reply_after)
    corrected, uncorrected = stats.hist, stats.uhist
    assert corrected.count == pytest.approx(rate * duration_s, rel=0.02)
    for pct in (99.0, 99.9):
        expected = stall_s - (1 - pct / 100) * duration_s
        assert corrected.percentile(pct) / 1e9 == pytest.approx(expected, rel=0.15, abs=0.015)
        assert uncorrected.percentile(pct) / 1e9 < stall_s / 10
    assert stats.late >= rate * stall_s * 0.8


@timing_sensitive
def test_event_loop_portable_waker(monkeypatch: pytest.MonkeyPatch) -> None:
    """Where no timerfd exists: event-loop timers, then the loop's own iterations."""
    from rpcmeter.runners import open_loop

    monkeypatch.setattr(open_loop, "new_waker", open_loop.LoopWaker)
    sched = Schedule(Pacing(500.0), requests=None, duration_s=0.5)
    stats = run_event_loop(sched, 2, lambda t: 0.0)
    s = sched.summary(stats.sent, stats.last_send_ns)
    assert s["scheduled"] == 250
    assert s["sent"] >= 240  # a busy machine may hold the last ones past the end (dropped)
    assert s["achieved_rps"] == pytest.approx(500, rel=0.05)
    # never sent before its time: the corrected latency is at least the uncorrected one
    assert stats.hist.min >= stats.uhist.min
