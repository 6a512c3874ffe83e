"""What runs inside one client process: a driver, its threads, their hot loops (an event
driver's loops run in :mod:`rpcmeter.runners.event_loop`; what they record is
:mod:`rpcmeter.runners.recording`).

The hot loop is two monotonic clock reads around the call and one store into a preallocated
buffer of int64s (:func:`~rpcmeter.runners.recording.samples`); every chunk of requests it publishes its count (for the progress line) and checks
the deadline and the stop flag. Full buffers are folded into a :class:`Histogram` between chunks,
so memory does not grow with the number of requests.
"""

from __future__ import annotations

import contextlib
import os
import signal
import threading
import time
from collections.abc import Callable
from typing import Any

from rpcmeter.drivers import driver_class
from rpcmeter.drivers.base import Caller, Driver, EventDriver
from rpcmeter.host.launch import die_with_parent
from rpcmeter.runners.event_loop import event_load
from rpcmeter.runners.open_loop import client_schedule, measure_open
from rpcmeter.runners.recorder import Recorder, tagged_caller
from rpcmeter.runners.recording import (
    BUFFER,
    CHUNK_TARGET_NS,
    MAX_CHUNK,
    ClientReport,
    Gate,
    LoadReport,
    ThreadStats,
    call_names,
    warm_up,
)
from rpcmeter.runners.spec import NO_END, LoadSpec
from rpcmeter.runners.windows import Windows, start_windows, stop_quietly


def run_chunk(call: Caller, rec: Recorder, k: int, fatal: tuple[type[BaseException], ...]) -> int:
    """``k`` timed calls; returns the number of calls made (fewer when a fatal error stopped it)."""
    clock = time.perf_counter_ns
    buf = rec.buf
    pos = rec.pos
    made = 0
    try:
        for made in range(1, k + 1):
            t0 = clock()
            try:
                call()
            except Exception as exc:
                rec.pos = pos
                if rec.error(exc, fatal):
                    return made
                continue
            buf[pos] = clock() - t0
            pos += 1
    finally:
        rec.pos = pos
    return made


def run_chunk_server_time(
    call: Caller, rec: Recorder, k: int, fatal: tuple[type[BaseException], ...]
) -> int:
    """As :func:`run_chunk`, also keeping the server-reported time each call returns (ns)."""
    clock = time.perf_counter_ns
    buf = rec.buf
    served = rec.served
    pos = rec.pos
    made = 0
    try:
        for made in range(1, k + 1):
            t0 = clock()
            try:
                server_ns = call()
            except Exception as exc:
                rec.pos = pos
                if rec.error(exc, fatal):
                    return made
                continue
            latency = clock() - t0
            buf[pos] = latency
            pos += 1
            if server_ns is not None:
                served(latency, server_ns)  # type: ignore[arg-type]
    finally:
        rec.pos = pos
    return made


PARK_S = 0.05  # how often a parked loop looks at the stop flag


def park(until_ns: int, stop: Callable[[], bool]) -> bool:
    """Wait until ``until_ns`` (a parked loop, or one waiting for the case's start), looking at
    the stop flag every ``PARK_S``; False when stopped."""
    clock = time.perf_counter_ns
    while (left := until_ns - clock()) > 0:
        if stop():
            return False
        time.sleep(min(left / 1e9, PARK_S))
    return not stop()


def measure(
    call: Caller,
    rec: Recorder,
    *,
    requests: int | None,
    spans: list[tuple[int, int]],
    fatal: tuple[type[BaseException], ...],
    stop: Callable[[], bool],
    publish: Callable[[int], None],
    windows: Windows | None = None,
) -> None:
    """The closed loop of one thread: ``requests`` calls, or calls while it runs (``spans``:
    from each span's start to its end, on this client's clock; parked between them).

    Between batches the loop publishes progress, and closes the interval it is in once a batch
    ended past its end (the batch's requests count in it); a batch that would run past
    the end of the interval or of the span is cut short to about reach it (from the time per
    call of the batch before), so that both are kept to within a call or two."""
    stats = rec.stats
    chunk_fn = run_chunk_server_time if len(rec.sbuf) else run_chunk
    clock = time.perf_counter_ns
    remaining = requests if requests is not None else -1
    cut = windows.end_of(rec.index) if windows is not None else NO_END
    k = 1
    done = 0
    per_call = 0.0
    for begin, end in spans:
        if not park(begin, stop):
            break
        if windows is not None and clock() >= cut:
            rec.close(windows.index_at(clock()))
            cut = windows.end_of(rec.index)
        if not stats.start_ns:
            stats.start_ns = clock()
        while remaining != 0:
            n = min(k, remaining) if remaining > 0 else k
            n = min(n, BUFFER - rec.pos)
            t0 = clock()
            if per_call:  # end the batch about at the next boundary
                n = min(n, max(1, int((min(cut, end) - t0) / per_call) + 1))
            made = chunk_fn(call, rec, n, fatal)
            t1 = clock()
            done += made
            if made:
                per_call = (t1 - t0) / made
            if remaining > 0:
                remaining -= made
            if stats.fatal is not None:
                break
            publish(done)
            if t1 >= cut and windows is not None:  # the batch (cut short for the boundary)
                rec.fold()  # counts in the window it ends
                rec.close(windows.index_at(t1))
                cut = windows.end_of(rec.index)
            if t1 >= end or stop():
                break
            if BUFFER - rec.pos < MAX_CHUNK or rec.spos > BUFFER - MAX_CHUNK:
                rec.fold()
            if t1 - t0 < CHUNK_TARGET_NS // 2 and k < MAX_CHUNK:
                k *= 2
        if windows is not None:  # parked (or done): its requests so far are in their window
            rec.fold()
            rec.close(windows.index_at(clock()))
            cut = windows.end_of(rec.index)
        if stats.fatal is not None or remaining == 0 or stop():
            break
    stats.end_ns = clock()
    rec.finish()
    publish(done)


def thread_load(driver: Driver, spec: LoadSpec, gate: Gate, stop: Any, progress: Any) -> LoadReport:
    """One thread per loop, each calling the driver's caller (the synchronous drivers); closed
    loop, or open loop on the client's schedule when ``spec.pacing`` is set."""
    ctx = spec.ctx
    gate.connected()
    callers = [driver.caller(t) for t in range(ctx.threads)]
    fatal = driver.fatal_errors
    stats = [ThreadStats() for _ in range(ctx.threads)]
    base = ctx.client_index * ctx.threads
    warmed = threading.Barrier(ctx.threads + 1)
    began = threading.Event()  # the gate opened and the windows are set up
    sched = client_schedule(spec)
    box: list[Windows] = []

    def thread_main(t: int) -> None:
        try:
            run_thread(t)
        except Exception as exc:  # a fault of the loop itself: its connection is given up
            stats[t].fatal = f"{type(exc).__name__}: {exc}"[:300]
            warmed.abort()

    def run_thread(t: int) -> None:
        warm_up(callers[t], spec.warmup, stats[t], fatal)
        try:
            warmed.wait()
        except threading.BrokenBarrierError:
            return
        began.wait()
        if stats[t].fatal is not None or stop.is_set() or not box:
            return
        windows = box[0]
        rec = Recorder(
            stats[t],
            driver.reports_server_time,
            call_names(callers[t]),
            uncorrected=sched is not None,
            windows=windows,
        )
        call = tagged_caller(callers[t], rec)  # a mix's calls each kept apart

        def publish(done: int) -> None:
            progress[base + t] = done

        if sched is not None:
            measure_open(
                call,
                rec,
                sched,
                loops=ctx.threads,
                fatal=fatal,
                stop=stop.is_set,
                publish=publish,
                windows=windows,
            )
            return
        measure(
            call,
            rec,
            requests=spec.requests,
            spans=spec.spans(windows.base_ns, t),
            fatal=fatal,
            stop=stop.is_set,
            publish=publish,
            windows=windows,
        )

    threads = [
        threading.Thread(target=thread_main, args=(t,), name=f"load-{t}", daemon=True)
        for t in range(ctx.threads)
    ]
    for th in threads:
        th.start()
    with contextlib.suppress(threading.BrokenBarrierError):
        warmed.wait()
    shipper = None
    try:
        gate.ready(next((s.fatal for s in stats if s.fatal), None))
        if not stop.is_set() and not any(s.fatal for s in stats):
            windows, shipper = start_windows(spec.clock(), gate)
            box.append(windows)
    finally:
        began.set()
        for th in threads:
            th.join()
        stop_quietly(shipper)
    left = box[0].take() if box else {}
    if sched is None:
        return stats, None, left
    summary = sched.summary(sum(s.sent for s in stats), max(s.last_send_ns for s in stats))
    return stats, summary, left


def client_process(
    spec: LoadSpec, go: Any, stop: Any, progress: Any, conn: Any, start: Any = None
) -> None:
    """:func:`client_main` as a process of the local runner: a parent that is gone (its pipe
    broken) ends the client quietly, with no traceback."""
    try:
        client_main(spec, go, stop, progress, conn, start)
    except (BrokenPipeError, ConnectionResetError, EOFError):
        os._exit(1)


def ended_ns(stats: list[ThreadStats], base_ns: int) -> int | None:
    """When the last of a client's loops ended, in ns from the case's start (``base_ns`` on the
    client's clock); None when none ran."""
    ends = [t.end_ns for t in stats if t.end_ns]
    return max(ends) - base_ns if ends and base_ns else None


def client_main(
    spec: LoadSpec, go: Any, stop: Any, progress: Any, conn: Any, start: Any = None
) -> None:
    """Entry point of a client process (of the local runner, or started by a cluster task).
    Protocol on ``conn``: ("started",) first (``load.timeout_s`` counts from there: a process
    slow to start is not the server's doing), ("connected",) once connected, ("ready",) or
    ("error", msg) after connecting and warming up, then the final ("result", dict).
    Between them, once the gate is open, ("windows", ...) once per interval
    (:class:`~rpcmeter.runners.windows.Shipper`). ``go``/``stop`` are events, ``progress`` maps
    slot -> requests done, ``start.value`` is the case's start (ns since the epoch) once ``go``
    is set."""
    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent handles Ctrl-C and stops us
        die_with_parent(os.getppid())
    conn.send(("started",))
    if spec.client_cpus:
        with contextlib.suppress(OSError):
            os.sched_setaffinity(0, spec.client_cpus)
    ctx = spec.ctx
    os.environ.update(ctx.env)  # before the driver imports its library (RPYC_BIND_THREADS, ...)
    try:
        driver = driver_class(spec.driver, ctx.options)(ctx)  # the options' client path
        driver.connect()
    except Exception as exc:
        conn.send(
            ("error", f"client {ctx.client_index}: cannot connect: {type(exc).__name__}: {exc}")
        )
        return
    gate = Gate(ctx.client_index, go, conn, driver, start)
    try:
        if isinstance(driver, EventDriver) and driver.uses_event_loop():
            stats, schedule, windows = event_load(driver, spec, gate, stop, progress)
        else:
            stats, schedule, windows = thread_load(driver, spec, gate, stop, progress)
    except Exception as exc:  # a fault of the client itself: reported as the case's reason
        with contextlib.suppress(Exception):
            driver.close()
        conn.send(("error", f"client {ctx.client_index}: {type(exc).__name__}: {exc}"[:400]))
        return
    user_s, sys_s, rss = gate.cpu()
    counters = gate.counters()
    costs = driver.connection_costs()
    if costs is not None:
        costs.fold()
    with contextlib.suppress(Exception):
        driver.close()
    report = ClientReport(
        client=ctx.client_index,
        pid=os.getpid(),
        threads=stats,
        schedule=schedule,
        counters=counters,
        connections=costs,
        cpu_user_s=user_s,
        cpu_sys_s=sys_s,
        max_rss_bytes=rss,
        windows=windows,
        ended_ns=ended_ns(stats, gate.base_ns),
    )
    conn.send(("result", report))
