"""Closed loops inside one event loop: how a client process runs an event driver.

Every closed loop of the client (``load.concurrency`` or ``load.threads`` of them) is a chain of
callbacks on one event loop (uvloop when installed; target option ``event_loop = "asyncio"`` picks
the standard loop): read the clock, ``channel(done)``; in ``done`` read the clock again, store the
latency (and the server-reported time) into the client's :class:`Recorder`, and send the next
request. Warmup, the start gate, ``requests`` per loop or ``duration_s``, the stop flag, progress
and error accounting follow the thread loops of :mod:`rpcmeter.runners.client` exactly; the result
goes back to the parent in the same shape (one :class:`ThreadStats` for the whole event loop).

A timer every ``TICK_S`` publishes progress, checks the stop flag and folds the buffers into
histograms when they fill up, so the per-request path stays two clock reads and a store.

With ``load.wait = "spin"`` a :class:`Spin` keeps a callback ready from the first request to the
last: the loop then polls its sockets with a zero timeout instead of sleeping in the kernel until
a reply comes, so no reply waits for the client to wake up. With ``load.spin_us`` the polling stops
``spin_us`` after the last reply or send and the loop sleeps until the next event. With
``"block"`` (the default) no :class:`Spin` exists and nothing runs on the hot path. The client
reports the polls (counter ``polls``, measured requests only).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from functools import partial
from typing import Any

from rpcmeter.drivers.base import Channel, Done, EventDriver, Ownership
from rpcmeter.errors import describe
from rpcmeter.protocols.timing import ServerTime
from rpcmeter.runners.open_loop import EventLoad, EventPacer, client_schedule
from rpcmeter.runners.recorder import Recorder, tagging
from rpcmeter.runners.recording import (
    BUFFER,
    MAX_CHUNK,
    Gate,
    LoadReport,
    ThreadStats,
    Window,
    call_names,
    is_fatal,
    mix_of,
)
from rpcmeter.runners.spec import NO_END, LoadSpec
from rpcmeter.runners.spin import Spin, waking
from rpcmeter.runners.windows import Shipper, Windows, start_windows, stop_quietly

TICK_S = 0.02


def new_event_loop(kind: str = "uvloop") -> asyncio.AbstractEventLoop:
    """A uvloop event loop (the fast path) unless ``kind`` is ``asyncio`` or uvloop is missing."""
    if kind != "asyncio":
        try:
            import uvloop

            loop: asyncio.AbstractEventLoop = uvloop.new_event_loop()
            return loop
        except ImportError:
            pass
    return asyncio.new_event_loop()


class Phase:
    """The loops of one phase (warmup or measurement); ``finished`` resolves when all stopped.
    A loop parked until its next stage (closed-loop stages) waits on a timer in ``parked``;
    :meth:`stop` ends the phase's parked loops at once."""

    __slots__ = ("active", "finished", "loop", "parked", "stopping")

    def __init__(self, loop: asyncio.AbstractEventLoop, loops: int) -> None:
        self.loop = loop
        self.active = loops
        self.finished: asyncio.Future[None] = loop.create_future()
        self.stopping = False
        self.parked: dict[int, asyncio.TimerHandle] = {}
        if loops == 0:
            self.finished.set_result(None)

    def loop_done(self) -> None:
        self.active -= 1
        if self.active == 0 and not self.finished.done():
            self.finished.set_result(None)

    def stop(self) -> None:
        """Stop: loops sending stop after their reply, parked ones now."""
        self.stopping = True
        parked, self.parked = self.parked, {}
        for handle in parked.values():
            handle.cancel()
            self.loop_done()


def warm_loop(
    channel: Channel,
    n: int,
    stats: ThreadStats,
    fatal: tuple[type[BaseException], ...],
    phase: Phase,
    spin: Spin | None = None,
) -> None:
    """Start one loop of ``n`` untimed requests; a fatal error stops it and marks the client."""
    left = n

    def done(server_ns: ServerTime | None, err: BaseException | None) -> None:
        nonlocal left
        if err is not None and is_fatal(err, fatal):
            if stats.fatal is None:
                stats.fatal = f"during warmup: {describe(err)}"[:300]
            phase.loop_done()
            return
        left -= 1
        if left <= 0 or phase.stopping:
            phase.loop_done()
            return
        channel(on_reply)

    on_reply = waking(spin, done)
    if n <= 0:
        phase.loop_done()
    else:
        channel(on_reply)


def closed_loop(
    channel: Channel,
    rec: Recorder,
    phase: Phase,
    requests: int | None,
    deadline_ns: int,
    fatal: tuple[type[BaseException], ...],
    spin: Spin | None = None,
    spans: list[tuple[int, int]] | None = None,
) -> Done:
    """Start one timed closed loop; returns its completion callback (for tests).

    It runs until ``deadline_ns``, or, with ``spans`` (its (start, end) times on this client's
    clock: a closed-loop staged case), over each span, parked between them (on a timer,
    ``phase.parked``) and started at the first.

    When the channel can hand its connection to this loop alone (``channel.own``, see
    :mod:`rpcmeter.drivers.base`), the loop sends through the returned C-level writer and
    releases the connection when it ends; otherwise it sends with ``channel(done)``."""
    clock = time.perf_counter_ns
    buf = rec.buf
    full = BUFFER  # (a local: compiled, another module's global is a dict lookup each read)
    served = rec.served
    left = requests if requests is not None else -1
    t0 = 0
    later = list(spans or [(0, deadline_ns)])
    deadline_ns = later.pop(0)[1]

    def done(server_ns: ServerTime | None, err: BaseException | None) -> None:
        nonlocal t0, left
        t1 = clock()
        if err is None:
            latency = t1 - t0
            pos = rec.pos
            buf[pos] = latency
            if server_ns is not None:
                served(latency, server_ns)
            rec.pos = pos = pos + 1
            if pos >= full:
                rec.fold()
        elif rec.error(err, fatal):
            end()
            return
        left -= 1
        if left == 0 or t1 >= deadline_ns or phase.stopping:
            if later and left != 0 and not phase.stopping:
                park()
            else:
                end()
            return
        t0 = clock()
        send()

    on_reply = waking(spin, done)
    mix = mix_of(channel)
    if mix is not None:  # a mix: each reply kept for its call too
        on_reply = tagging(mix, rec, on_reply)
    send: Callable[[], object] = partial(channel, on_reply)

    def moved(new_send: Callable[[], object]) -> None:  # the owned connection was replaced
        nonlocal send
        send = new_send

    own = getattr(channel, "own", None)
    owned: Ownership | None = None

    def acquire() -> None:
        """Own the connection (where the channel lets this loop alone use it) while the loop
        sends: a parked loop owns none, so that a server closing an idle connection is no
        request of this loop's lost."""
        nonlocal owned, send
        owned = own(on_reply, moved) if own is not None else None
        send = owned.send if owned else partial(channel, on_reply)

    def release() -> None:
        nonlocal owned
        if owned:
            owned.release()
            owned = None

    def end() -> None:
        release()
        phase.loop_done()

    def park() -> None:
        """Wait for the next span."""
        release()
        begin = later[0][0]
        phase.parked[key] = phase.loop.call_later(max(0.0, (begin - clock()) / 1e9), resume)

    def resume() -> None:
        nonlocal t0, deadline_ns
        phase.parked.pop(key, None)
        deadline_ns = later.pop(0)[1]
        acquire()
        t0 = clock()
        send()

    key = id(done)
    if spans is not None and not spans:  # a loop no stage runs
        end()
    elif spans and spans[0][0] > clock():  # parked until its first stage
        later.insert(0, spans[0])
        deadline_ns = 0
        park()
    else:
        acquire()
        t0 = clock()
        send()
    return done


def open_event_load(
    load: EventLoad, stop: Any, progress: Any, slot: int, base_ns: int
) -> dict[str, float]:
    """The open loop of an event driver (:class:`~rpcmeter.runners.open_loop.EventPacer`) from
    the case's start ``base_ns``; returns the schedule's totals."""
    pacer = EventPacer(load)
    loop, sched, rec, stats = load.loop, load.sched, load.rec, load.stats

    def publish() -> None:
        progress[slot] = rec.done()

    def tick() -> None:
        publish()
        if stop.is_set():
            pacer.stop()
        if rec.pos > BUFFER - MAX_CHUNK:
            pacer.fold()
        if not pacer.finished.done():
            loop.call_later(TICK_S, tick)

    stats.start_ns = sched.begin(base_ns)
    loop.call_later(TICK_S, tick)
    pacer.start()
    try:
        loop.run_until_complete(pacer.finished)
    finally:
        pacer.close()
    stats.end_ns = time.perf_counter_ns()
    rec.finish()
    publish()
    return sched.summary(stats.sent, stats.last_send_ns)


class Cutter:
    """Closes the client's interval at each interval's end (a timer on the event loop): the
    replies folded by then are the interval's."""

    def __init__(self, loop: asyncio.AbstractEventLoop, rec: Recorder, windows: Windows) -> None:
        self.loop, self.rec, self.windows = loop, rec, windows
        self.handle: asyncio.TimerHandle | None = None
        self.arm()

    def arm(self) -> None:
        end = self.windows.end_of(self.rec.index)
        if end < 1 << 61:
            delay = max(0.0, (end - time.perf_counter_ns()) / 1e9)
            self.handle = self.loop.call_later(delay, self.cut)

    def cut(self) -> None:
        rec = self.rec
        rec.fold()
        rec.close(self.windows.index_at(time.perf_counter_ns()))
        self.arm()

    def cancel(self) -> None:
        if self.handle is not None:
            self.handle.cancel()


def _shipped(shipper: Shipper, windows: Windows) -> dict[int, Window]:
    """Stop shipping: the windows left go with the client's report."""
    shipper.stop()
    return windows.take()


def event_load(
    driver: EventDriver, spec: LoadSpec, gate: Gate, stop: Any, progress: Any
) -> LoadReport:
    """Run the client's loops on one event loop: open, warm up, gate, measure, close."""
    ctx = spec.ctx
    loop = new_event_loop(str(ctx.options.get("event_loop", "uvloop")))
    asyncio.set_event_loop(loop)
    stats = ThreadStats()
    fatal = driver.fatal_errors
    slot = ctx.client_index * ctx.threads
    spin: Spin | None = None
    shipper: Shipper | None = None
    cutter: Cutter | None = None
    windows: Windows | None = None
    try:
        try:
            loop.run_until_complete(driver.open())
            channels = [driver.channel(i) for i in range(ctx.threads)]
        except Exception as exc:
            gate.ready(f"cannot connect: {type(exc).__name__}: {exc}")
            return [stats], None, {}
        gate.connected()
        if ctx.wait == "spin":
            spin = polling = Spin(loop, ctx.spin_us)
            gate.count(lambda: {"polls": polling.polls})
        try:
            warm = Phase(loop, len(channels))
            for ch in channels:
                warm_loop(ch, spec.warmup, stats, fatal, warm, spin)
            loop.run_until_complete(warm.finished)
        except Exception as exc:
            stats.fatal = f"during warmup: {type(exc).__name__}: {exc}"[:300]
        gate.ready(stats.fatal)
        if stats.fatal is not None or stop.is_set():
            return [stats], None, {}

        sched = client_schedule(spec)
        windows, shipper = start_windows(spec.clock(), gate)
        rec = Recorder(
            stats,
            driver.reports_server_time,
            call_names(channels[0]),
            uncorrected=sched is not None,
            windows=windows,
        )
        cutter = Cutter(loop, rec, windows)
        if sched is not None:
            load = EventLoad(loop, sched, channels, rec, stats, fatal, spin)
            schedule = open_event_load(load, stop, progress, slot, windows.base_ns)
            cutter.cancel()
            return [stats], schedule, _shipped(shipper, windows)
        phase = Phase(loop, len(channels))
        clock = time.perf_counter_ns

        def publish() -> None:
            progress[slot] = rec.done()

        def tick() -> None:
            publish()
            if stop.is_set():
                phase.stop()
            if rec.pos > BUFFER - MAX_CHUNK:
                rec.fold()
            if not phase.finished.done():
                loop.call_later(TICK_S, tick)

        requests = None if spec.duration_s is not None else spec.requests
        stats.start_ns = max(windows.base_ns, clock())
        for i, ch in enumerate(channels):
            spans = spec.spans(windows.base_ns, i)
            closed_loop(ch, rec, phase, requests, NO_END, fatal, spin, spans)
        if spin is not None and spin.budget_ns is not None:
            spin.wake()  # the loop did not run while the gate was closed
        loop.call_later(TICK_S, tick)
        loop.run_until_complete(phase.finished)
        stats.end_ns = clock()
        cutter.cancel()
        rec.finish()
        publish()
        return [stats], None, _shipped(shipper, windows)
    finally:
        if cutter is not None:
            cutter.cancel()
        stop_quietly(shipper)
        try:
            driver.close()
            loop.run_until_complete(asyncio.sleep(0))
        finally:
            if spin is not None:
                spin.stop()
            loop.close()
            asyncio.set_event_loop(None)
