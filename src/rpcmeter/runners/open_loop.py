"""Open-loop load: requests issued on a fixed schedule, latency corrected for coordinated omission.

A closed loop sends its next request when the previous reply arrived, so when the server stalls
the client stops sending and the stall shows up in one sample instead of in every request that
should have gone out meanwhile (coordinated omission). An open loop issues requests at intended
send times ``t_k = start + (k + phase) / rate`` whatever the server does, and measures

- the **corrected** latency, from ``t_k`` to the reply: time spent waiting to be sent counts;
- the **uncorrected** latency, from the actual send to the reply (what a closed loop reports).

The total ``load.rate`` is split evenly over the client processes; each client's slots are offset
by a phase so that the clients interleave. Inside a client, every loop (a thread, or an in-flight
slot of an event loop) takes the next slot of the shared :class:`Schedule` when it is free, waits
until the slot's time and sends. A slot taken after its time is *late* when the send lags by more
than ``late_ms`` (no loop was free: the client or the server is not keeping up), and *dropped*
(never sent) when the lag exceeds ``max_lag_ms`` or the run ended before it went out (``late_ms``
after the end of ``duration_s``, or a stop). ``achieved_rps`` is the rate at which requests actually went out.

Waiting: the loop sleeps until ``SPIN_NS`` before the slot, then yields the CPU in a short loop
until the slot's time (``os.sched_yield`` releases the GIL, so other loops run meanwhile); the
timer slack of waiting threads is set to 1 ns on Linux, which makes ``time.sleep`` wake up within
microseconds instead of ~60 us (``benchmarks/open_loop_pacing.py`` measures both).

The hot path per request is two clock reads (the last one of the wait, and the one after the
reply) and two stores (corrected and uncorrected latency) into preallocated buffers.
"""

from __future__ import annotations

import contextlib
import ctypes
import itertools
import math
import os
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from rpcmeter.drivers.base import Caller
    from rpcmeter.runners.client import Recorder, ThreadStats

SPIN_NS = 30_000  # wake up this long before a slot, then yield until its time
LEAD_NS = 2_000_000  # the first slot is this long after the gate opens (loops are awake by then)
CHUNK_TARGET_NS = 20_000_000  # publish progress / check the stop flag about every 20 ms
MAX_CHUNK = 4096
NEVER = 1 << 62


@dataclass(frozen=True)
class Pacing:
    """Open-loop settings of one run (``rate_rps`` total) or of one client (its share)."""

    rate_rps: float
    late_ms: float = 1.0
    max_lag_ms: float | None = None
    phase: float = 0.0  # offset of this client's slots, in slot intervals

    def for_client(self, index: int, clients: int) -> Pacing:
        """Client ``index``'s share: ``rate / clients``, its slots offset by ``index / clients``."""
        return replace(self, rate_rps=self.rate_rps / clients, phase=index / clients)


class Schedule:
    """The slots of one client: ``slots`` intended send times, ``period_ns`` apart.

    Loops call :meth:`take` for the next slot index (thread-safe: ``itertools.count`` under the
    GIL) and :meth:`time_of` for its intended time. ``begin`` fixes the start once, when the gate
    opens; every loop of the client calls it and gets the same start."""

    def __init__(self, pacing: Pacing, *, requests: int | None, duration_s: float | None) -> None:
        self.pacing = pacing
        self.period_ns = 1e9 / pacing.rate_rps
        if duration_s is not None:
            # every slot whose time falls inside the duration (the phase shifts them all)
            self.slots = max(1, math.ceil(duration_s * pacing.rate_rps - pacing.phase))
            self.duration_ns: int | None = int(duration_s * 1e9)
        else:
            self.slots = requests or 0
            self.duration_ns = None
        self.late_ns = int(pacing.late_ms * 1e6)
        self.max_lag_ns = NEVER if pacing.max_lag_ms is None else int(pacing.max_lag_ms * 1e6)
        self.start_ns = 0
        self.end_ns = NEVER  # no slot is taken after this (duration reached)
        self.take: Callable[[], int] = itertools.count().__next__
        self._lock = threading.Lock()

    def begin(self, now_ns: int) -> int:
        """Fix the start (first call wins) and return it."""
        with self._lock:
            if not self.start_ns:
                self.start_ns = now_ns + LEAD_NS + int(self.pacing.phase * self.period_ns)
                if self.duration_ns is not None:  # a slot may still go out up to late_ns after
                    self.end_ns = now_ns + LEAD_NS + self.duration_ns + self.late_ns
        return self.start_ns

    def time_of(self, k: int) -> int:
        return self.start_ns + int(k * self.period_ns)

    def summary(self, sent: int, last_send_ns: int) -> dict[str, float | int]:
        """Scheduled / sent / dropped and the achieved rate: requests sent per second from the
        first slot to the last send (one period added, so a perfect schedule gives the rate)."""
        span = last_send_ns - self.start_ns + self.period_ns if sent else 0.0
        return {
            "offered_rps": self.pacing.rate_rps,
            "scheduled": self.slots,
            "sent": sent,
            "dropped": max(0, self.slots - sent),
            "achieved_rps": sent / (span / 1e9) if span > 0 else 0.0,
        }


_PR_SET_TIMERSLACK = 29


def fine_timer_slack() -> None:
    """Let this thread's sleeps end within microseconds (Linux; elsewhere a no-op)."""
    if sys.platform.startswith("linux"):
        with contextlib.suppress(OSError, AttributeError):
            ctypes.CDLL(None).prctl(_PR_SET_TIMERSLACK, 1, 0, 0, 0)


def run_open_chunk(
    call: Caller,
    stats: ThreadStats,
    rec: Recorder,
    urec: Recorder,
    sched: Schedule,
    n: int,
    fatal: tuple[type[BaseException], ...],
) -> tuple[int, bool]:
    """Up to ``n`` slots of the schedule; returns (requests sent, schedule finished)."""
    clock = time.perf_counter_ns
    sleep = time.sleep
    yield_cpu = os.sched_yield
    take = sched.take
    slots = sched.slots
    start = sched.start_ns
    period = sched.period_ns
    end = sched.end_ns
    late_ns = sched.late_ns
    max_lag = sched.max_lag_ns
    buf = rec.buf
    ubuf = urec.buf
    sbuf = rec.sbuf
    pos = rec.pos
    sent = 0
    finished = False
    now = 0
    try:
        for _ in range(n):
            k = take()
            if k >= slots:
                finished = True
                break
            due = start + int(k * period)
            now = clock()
            if now < due:
                if due - now > SPIN_NS:
                    sleep((due - now - SPIN_NS) / 1e9)
                now = clock()
                while now < due:
                    yield_cpu()
                    now = clock()
            elif now >= end:
                finished = True  # the duration is over: this slot and the rest are dropped
                break
            elif now - due > late_ns:
                if now - due > max_lag:
                    continue  # dropped: counted as scheduled - sent
                stats.late += 1
            sent += 1
            try:
                server_ns = call()
            except Exception as exc:
                rec.pos = pos
                if rec.error(exc, fatal):
                    finished = True
                    break
                continue
            done = clock()
            buf[pos] = done - due
            ubuf[pos] = done - now
            pos += 1
            if server_ns is not None:
                sbuf[rec.spos] = server_ns  # type: ignore[call-overload]
                rec.spos += 1
    finally:
        rec.pos = urec.pos = pos
        if sent:
            stats.last_send_ns = max(stats.last_send_ns, now)
        stats.sent += sent
    return sent, finished


def measure_open(
    call: Caller,
    stats: ThreadStats,
    sched: Schedule,
    *,
    loops: int,
    server_time: bool,
    fatal: tuple[type[BaseException], ...],
    stop: Callable[[], bool],
    publish: Callable[[int], None],
) -> None:
    """One loop of a client's open-loop load: take slots of ``sched`` until it is exhausted, the
    duration is over or ``stop()``; corrected latencies go to ``stats.hist``, uncorrected ones to
    ``stats.uhist``."""
    from rpcmeter.runners.client import BUFFER, Recorder, ThreadStats

    fine_timer_slack()
    rec = Recorder(stats, server_time)
    urec = Recorder(ThreadStats(hist=stats.uhist), False)  # folds into stats.uhist
    # about CHUNK_TARGET_NS of this loop's share of the schedule per chunk
    chunk = int(min(MAX_CHUNK, max(1, CHUNK_TARGET_NS * loops / sched.period_ns)))
    stats.start_ns = sched.begin(time.perf_counter_ns())
    done = 0
    finished = False
    while not finished:
        if BUFFER - rec.pos < chunk or rec.spos > BUFFER - chunk:
            rec.fold()
            urec.fold()
        made, finished = run_open_chunk(
            call, stats, rec, urec, sched, min(chunk, BUFFER - rec.pos), fatal
        )
        done += made
        publish(done)
        if stats.fatal is not None or stop():
            break
    stats.end_ns = time.perf_counter_ns()
    rec.fold()
    urec.fold()
    publish(done)
