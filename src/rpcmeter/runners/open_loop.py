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
after the end of ``duration_s``, or a stop). ``achieved_rps`` is the rate at which requests
actually went out.

Waiting: the loop sleeps until ``SPIN_NS`` before the slot, then yields the CPU in a short loop
until the slot's time (``os.sched_yield`` releases the GIL, so other loops run meanwhile); the
timer slack of waiting threads is set to 1 ns on Linux, which makes ``time.sleep`` wake up within
microseconds instead of ~60 us (``benchmarks/open_loop_pacing.py`` measures both).

The hot path per request is two clock reads (the last one of the wait, and the one after the
reply) and two stores (corrected and uncorrected latency) into preallocated buffers.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import itertools
import math
import os
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from rpcmeter.drivers.base import Caller, Channel, Done
from rpcmeter.protocols.timing import ServerTime
from rpcmeter.runners.recorder import Recorder, tagging
from rpcmeter.runners.recording import BUFFER, CHUNK_TARGET_NS, MAX_CHUNK, ThreadStats, mix_of
from rpcmeter.runners.spec import LoadSpec, Pacing
from rpcmeter.runners.spin import Spin, waking
from rpcmeter.runners.stages import LoadStage, RateProfile
from rpcmeter.runners.windows import Windows

SPIN_NS = 30_000  # wake up this long before a slot, then yield until its time
LEAD_NS = 2_000_000  # the first slot is this long after the gate opens (loops are awake by then)
NEVER = 1 << 62
SEND, LATE, DROP, END = 0, 1, 2, 3  # Schedule.admit


class Schedule:
    """The slots of one client: ``slots`` intended send times, ``period_ns`` apart, or along the
    client's :class:`~rpcmeter.runners.stages.RateProfile` over rate stages (``profile``; its
    ``period_ns`` then the mean).

    Loops call :meth:`take` for the next slot index (thread-safe: ``itertools.count`` under the
    GIL) and :meth:`time_of` for its intended time. ``begin`` fixes the start once, when the gate
    opens; every loop of the client calls it and gets the same start."""

    def __init__(
        self,
        pacing: Pacing,
        *,
        requests: int | None,
        duration_s: float | None,
        profile: RateProfile | None = None,
    ) -> None:
        self.pacing = pacing
        self.period_ns = 1e9 / pacing.rate_rps
        self.profile = profile
        self.duration_ns: int | None
        if profile is not None:
            self.slots = profile.slots
            self.duration_ns = int(profile.duration_ns)
        elif duration_s is not None:
            # every slot whose time falls inside the duration (the phase shifts them all)
            self.slots = max(1, math.ceil(duration_s * pacing.rate_rps - pacing.phase))
            self.duration_ns = int(duration_s * 1e9)
        else:
            self.slots = requests or 0
            self.duration_ns = None
        self.late_ns = int(pacing.late_ms * 1e6)
        self.max_lag_ns = NEVER if pacing.max_lag_ms is None else int(pacing.max_lag_ms * 1e6)
        self.start_ns = 0
        self.end_ns = NEVER  # no slot is taken after this (duration reached)
        self.take: Callable[[], int] = itertools.count().__next__
        self._lock = threading.Lock()

    def begin(self, base_ns: int) -> int:
        """Fix the start on the case's start ``base_ns`` (first call wins) and return it: the
        first slot's time (the case's start shifted by the client's phase; with a rate profile,
        the case's start: the profile holds the phase)."""
        with self._lock:
            if not self.start_ns:
                shift = 0 if self.profile else int(self.pacing.phase * self.period_ns)
                self.start_ns = base_ns + shift
                if self.duration_ns is not None:  # a slot may still go out up to late_ns after
                    self.end_ns = base_ns + self.duration_ns + self.late_ns
        return self.start_ns

    def time_of(self, k: int) -> int:
        if self.profile is not None:
            return self.start_ns + self.profile.time_of(k)
        return self.start_ns + int(k * self.period_ns)

    def chunk(self, loops: int, now_ns: int, until_ns: int = 1 << 62) -> int:
        """Slots a loop takes per batch: about ``CHUNK_TARGET_NS`` of its share of the schedule
        at the rate it runs at ``now_ns``, and no more than its share of the slots due before
        ``until_ns`` (the end of the interval it is in: the batch ends about there; none when
        its share is used up)."""
        period, profile = self.period_ns, self.profile
        if profile is not None:
            period = 1e9 / max(profile.rate_at(now_ns - self.start_ns), 1e-9)
        n = min(MAX_CHUNK, max(1, CHUNK_TARGET_NS * loops / period))
        if until_ns < 1 << 61:  # 0: the loop's next slot is due after ``until_ns``
            if profile is not None:
                due = profile.count_at(until_ns - self.start_ns)
                due -= profile.count_at(now_ns - self.start_ns)
            else:
                due = (until_ns - now_ns) / period
            n = min(n, max(0, due / loops))
        return int(n)

    def admit(self, due: int, now: int) -> int:
        """The rule for a slot due at ``due`` that a loop could send at ``now`` (``now >= due``):
        ``SEND``, ``LATE`` (send, counted late), ``DROP`` (skip it) or ``END`` (the run is over)."""
        if now >= self.end_ns:
            return END
        lag = now - due
        if lag <= self.late_ns:
            return SEND
        return DROP if lag > self.max_lag_ns else LATE

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
    profiled = sched.profile is not None
    time_of = sched.time_of
    admit = sched.admit
    buf = rec.buf
    ubuf = rec.ubuf
    served = rec.served
    server_time = (
        len(rec.sbuf) > 0
    )  # the driver reports server time (others' callers may return anything)
    pos = rec.pos
    sent = 0
    finished = False
    now = last_send = 0
    try:
        for _ in range(n):
            k = take()
            if k >= slots:
                finished = True
                break
            due = time_of(k) if profiled else start + int(k * period)
            now = clock()
            if now < due:
                if due - now > SPIN_NS:
                    sleep((due - now - SPIN_NS) / 1e9)
                now = clock()
                while now < due:
                    yield_cpu()
                    now = clock()
            else:
                verdict = admit(due, now)
                if verdict:
                    if verdict == END:  # this slot and the rest are dropped
                        finished = True
                        break
                    if verdict == DROP:
                        continue  # counted as scheduled - sent
                    stats.late += 1
            sent += 1
            last_send = now
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
            ubuf[pos] = latency = done - now
            pos += 1
            if server_time and server_ns is not None:
                served(latency, server_ns)  # type: ignore[arg-type]
    finally:
        rec.pos = pos
        if sent:
            stats.last_send_ns = max(stats.last_send_ns, last_send)
        stats.sent += sent
    return sent, finished


def measure_open(
    call: Caller,
    rec: Recorder,
    sched: Schedule,
    *,
    loops: int,
    fatal: tuple[type[BaseException], ...],
    stop: Callable[[], bool],
    publish: Callable[[int], None],
    windows: Windows | None = None,
    base_ns: int | None = None,
) -> None:
    """One loop of a client's open-loop load: take slots of ``sched`` until it is exhausted, the
    duration is over or ``stop()``; corrected latencies go to the recorder's ``buf``, uncorrected
    ones to its ``ubuf``. The schedule starts at ``base_ns`` (the case's start on this client's
    clock; by default ``LEAD_NS`` from now). Between batches the loop closes the interval it is
    in once a batch ended past its end (as :func:`rpcmeter.runners.client.measure` does)."""
    fine_timer_slack()
    stats = rec.stats
    clock = time.perf_counter_ns
    if base_ns is None:
        base_ns = windows.base_ns if windows is not None else clock() + LEAD_NS
    stats.start_ns = sched.begin(base_ns)
    cut = windows.end_of(rec.index) if windows is not None else 1 << 62
    done = 0
    finished = False
    while not finished:
        chunk = sched.chunk(loops, now := clock(), cut)
        if not chunk:  # its next slot is due after the interval's end: the interval ends here
            rec.fold()
            rec.close(windows.index_at(cut) if windows is not None else 0)
            cut = windows.end_of(rec.index) if windows is not None else 1 << 62
            chunk = max(1, sched.chunk(loops, now, cut))
        if BUFFER - rec.pos < chunk or rec.spos > BUFFER - chunk:
            rec.fold()
        made, finished = run_open_chunk(
            call, stats, rec, sched, min(chunk, BUFFER - rec.pos), fatal
        )
        done += made
        publish(done)
        if windows is not None and (now := clock()) >= cut:
            rec.fold()
            rec.close(windows.index_at(now))
            cut = windows.end_of(rec.index)
        if stats.fatal is not None or stop():
            break
    stats.end_ns = clock()
    rec.finish()
    publish(done)


def client_schedule(spec: LoadSpec) -> Schedule | None:
    """The schedule of a client process (None for a closed loop): ``requests`` per loop, or
    ``duration_s`` seconds of slots, or the client's share of the rate stages."""
    if spec.pacing is None:
        return None
    profile = None
    if spec.stages and spec.stages[0].rate is not None:
        profile = rate_profile(spec.stages, spec.clients, spec.pacing.phase)
    requests = spec.requests * spec.ctx.threads if spec.requests else None
    return Schedule(spec.pacing, requests=requests, duration_s=spec.duration_s, profile=profile)


def rate_profile(stages: tuple[LoadStage, ...], clients: int, phase: float) -> RateProfile:
    """One client's share of the rate stages (``1 / clients`` of each rate, slots shifted by
    ``phase``)."""
    return RateProfile(
        [(s.rates[0] / clients, s.rates[1] / clients, s.duration_s) for s in stages], phase
    )


class _Timespec(ctypes.Structure):
    _fields_ = (("tv_sec", ctypes.c_long), ("tv_nsec", ctypes.c_long))


class _Itimerspec(ctypes.Structure):
    _fields_ = (("it_interval", _Timespec), ("it_value", _Timespec))


class TimerFdWaker:
    """Wakes an event loop at an absolute ``perf_counter_ns`` time within microseconds: a Linux
    timerfd on CLOCK_MONOTONIC (``perf_counter``'s clock) watched by the loop. Event-loop timers
    (``call_later``) have millisecond resolution; this costs two system calls per wake-up
    instead of polling the loop for the last millisecond (``benchmarks/open_loop_pacing.py``)."""

    _CLOCK_MONOTONIC = 1
    _TFD_NONBLOCK = 0o4000
    _TFD_CLOEXEC = 0o2000000
    _TFD_TIMER_ABSTIME = 1

    def __init__(self, loop: asyncio.AbstractEventLoop, callback: Callable[[], None]) -> None:
        libc = ctypes.CDLL(None, use_errno=True)
        self.fd = libc.timerfd_create(self._CLOCK_MONOTONIC, self._TFD_NONBLOCK | self._TFD_CLOEXEC)
        if self.fd < 0:
            raise OSError(ctypes.get_errno(), "timerfd_create failed")
        self._settime = libc.timerfd_settime
        self._spec = _Itimerspec()
        self._ref = ctypes.byref(self._spec)
        self.loop = loop
        self.callback = callback
        loop.add_reader(self.fd, self._fired)

    def arm(self, at_ns: int) -> None:
        if at_ns - time.perf_counter_ns() <= SPIN_NS:  # about as close as a wake-up gets
            self.loop.call_soon(self.callback)
            return
        value = self._spec.it_value
        value.tv_sec, value.tv_nsec = divmod(max(at_ns, 1), 1_000_000_000)
        self._settime(self.fd, self._TFD_TIMER_ABSTIME, self._ref, None)

    def _fired(self) -> None:
        with contextlib.suppress(BlockingIOError):
            os.read(self.fd, 8)
        self.callback()

    def close(self) -> None:
        self.loop.remove_reader(self.fd)
        os.close(self.fd)


class LoopWaker:
    """The portable fallback: an event-loop timer to within ``SPIN_NS`` of the time (millisecond
    resolution), then the loop's own iterations until it."""

    SPIN_NS = 1_200_000

    def __init__(self, loop: asyncio.AbstractEventLoop, callback: Callable[[], None]) -> None:
        self.loop = loop
        self.callback = callback

    def arm(self, at_ns: int) -> None:
        wait = at_ns - time.perf_counter_ns()
        if wait > self.SPIN_NS:
            self.loop.call_later((wait - self.SPIN_NS) / 1e9, self.callback)
        else:
            self.loop.call_soon(self.callback)

    def close(self) -> None:
        pass


def new_waker(
    loop: asyncio.AbstractEventLoop, callback: Callable[[], None]
) -> TimerFdWaker | LoopWaker:
    if (
        sys.platform.startswith("linux")
        and time.get_clock_info("perf_counter").implementation == "clock_gettime(CLOCK_MONOTONIC)"
    ):
        fine_timer_slack()
        with contextlib.suppress(OSError, AttributeError):
            return TimerFdWaker(loop, callback)
    return LoopWaker(loop, callback)


@dataclass(frozen=True)
class EventLoad:
    """What the open loop of an event loop works with: the running event ``loop``, the client's
    ``sched``, one channel per loop, the recorder of corrected latencies and the tally it folds
    into, the exceptions that mean a connection is gone (``fatal``) and the client's
    :class:`~rpcmeter.runners.spin.Spin` (``load.wait = "spin"``; a bounded one is woken at
    every send and reply)."""

    loop: asyncio.AbstractEventLoop
    sched: Schedule
    channels: list[Channel]
    rec: Recorder
    stats: ThreadStats
    fatal: tuple[type[BaseException], ...]
    spin: Spin | None = None


class EventPacer:
    """Open loop on an event loop: the client's ``loops`` (one per channel) take slots of the
    same :class:`Schedule` with the same rule as the thread loops. A waker (:func:`new_waker`)
    wakes the pacer at each slot; it sends on a free loop's channel, or, when every loop has a
    request in flight, the slot waits for the next reply (and is late when that is more than
    ``late_ms`` after its time). Channels pipeline, so a loop is an in-flight request here."""

    def __init__(self, load: EventLoad) -> None:
        self.loop = loop = load.loop
        self.sched = load.sched
        self.channels = channels = load.channels
        self.rec = load.rec  # with the uncorrected latencies' buffer (ubuf)
        self.stats = load.stats
        self.fatal = load.fatal
        self.free = list(range(len(channels)))[::-1]
        self.due = [0] * len(channels)
        self.sent_at = [0] * len(channels)
        self.dones = [waking(load.spin, self._done_for(i)) for i in range(len(channels))]
        for i, ch in enumerate(channels):
            mix = mix_of(ch)
            if mix is not None:  # a mix: each reply kept for its call too
                self.dones[i] = tagging(mix, self.rec, self.dones[i])
        spin = load.spin
        self.wake = spin.wake if spin is not None and spin.budget_ns is not None else None
        self.next_due = -1  # the slot taken but not sent yet (-1: none)
        self.armed = False  # a wake-up of the pacer is pending
        self.waker = new_waker(loop, self.pace)
        self.over = False  # no more slots will be sent
        self.finished: asyncio.Future[None] = loop.create_future()

    def start(self) -> None:
        self.pace()

    def stop(self) -> None:
        self.over = True
        self._maybe_finish()

    def close(self) -> None:
        self.waker.close()

    def fold(self) -> None:
        self.rec.fold()

    def pace(self) -> None:
        """Send every slot that is due while a loop is free, then wait for the next one."""
        self.armed = False
        sched = self.sched
        clock = time.perf_counter_ns
        now = clock()
        while self.free and not self.over:
            if self.next_due < 0:
                k = sched.take()
                if k >= sched.slots:
                    self.over = True
                    break
                self.next_due = sched.time_of(k)
            due = self.next_due
            if due > now:
                break
            verdict = sched.admit(due, now) if now > due else SEND
            if verdict == END:
                self.over = True
                break
            self.next_due = -1
            if verdict == DROP:
                continue
            if verdict == LATE:
                self.stats.late += 1
            i = self.free.pop()
            self.due[i] = due
            self.sent_at[i] = now
            self.stats.sent += 1
            self.stats.last_send_ns = now
            if self.wake is not None:
                self.wake()
            self.channels[i](self.dones[i])
            now = clock()
        if self.over:
            self._maybe_finish()
        elif self.free and not self.armed:
            self.armed = True
            self.waker.arm(self.next_due)

    def _done_for(self, i: int) -> Done:
        clock = time.perf_counter_ns
        rec = self.rec
        buf = rec.buf
        ubuf = rec.ubuf
        served = rec.served
        server_time = len(rec.sbuf) > 0

        def done(server_ns: ServerTime | None, err: BaseException | None) -> None:
            t1 = clock()
            if err is None:
                pos = rec.pos
                buf[pos] = t1 - self.due[i]
                ubuf[pos] = latency = t1 - self.sent_at[i]
                if server_time and server_ns is not None:
                    served(latency, server_ns)
                rec.pos = pos = pos + 1
                if pos >= BUFFER:
                    self.fold()
            elif rec.error(err, self.fatal):
                self.over = True
            self.free.append(i)
            if self.over:
                self._maybe_finish()
            elif not self.armed:
                self.pace()

        return done

    def _maybe_finish(self) -> None:
        if len(self.free) == len(self.channels) and not self.finished.done():
            self.finished.set_result(None)
