"""What runs inside one client process: a driver, its threads, their hot loops (an event
driver's loops run in :mod:`rpcmeter.runners.event_loop`; what they record is
:mod:`rpcmeter.runners.recording`).

The hot loop is two monotonic clock reads around the call and one store into a preallocated
``array('q')``; every chunk of requests it publishes its count (for the progress line) and checks
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
from rpcmeter.runners.event_loop import event_load
from rpcmeter.runners.open_loop import client_schedule, measure_open
from rpcmeter.runners.recording import (
    BUFFER,
    CHUNK_TARGET_NS,
    MAX_CHUNK,
    ClientReport,
    Gate,
    LoadReport,
    Recorder,
    ThreadStats,
    call_names,
    tagged_caller,
    warm_up,
)
from rpcmeter.runners.spec import LoadSpec
from rpcmeter.servers.process import die_with_parent


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


def measure(
    call: Caller,
    stats: ThreadStats,
    *,
    requests: int | None,
    duration_s: float | None,
    server_time: bool,
    fatal: tuple[type[BaseException], ...],
    stop: Callable[[], bool],
    publish: Callable[[int], None],
) -> None:
    """The closed loop of one thread: ``requests`` calls, or calls for ``duration_s`` seconds."""
    rec = Recorder(stats, server_time, call_names(call))
    call = tagged_caller(call, rec)
    chunk_fn = run_chunk_server_time if server_time else run_chunk
    clock = time.perf_counter_ns
    remaining = requests if requests is not None else -1
    deadline = clock() + int(duration_s * 1e9) if duration_s is not None else None
    k = 1
    done = 0
    stats.start_ns = clock()
    while remaining != 0:
        n = min(k, remaining) if remaining > 0 else k
        n = min(n, BUFFER - rec.pos)
        t0 = clock()
        made = chunk_fn(call, rec, n, fatal)
        t1 = clock()
        done += made
        if remaining > 0:
            remaining -= made
        if stats.fatal is not None:
            break
        publish(done)
        if deadline is not None and t1 >= deadline:
            break
        if stop():
            break
        if BUFFER - rec.pos < MAX_CHUNK or rec.spos > BUFFER - MAX_CHUNK:
            rec.fold()
        if t1 - t0 < CHUNK_TARGET_NS // 2 and k < MAX_CHUNK:
            k *= 2
    stats.end_ns = clock()
    rec.fold()
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
    sched = client_schedule(spec)

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
        gate.go.wait()
        if stats[t].fatal is not None or stop.is_set():
            return

        def publish(done: int) -> None:
            progress[base + t] = done

        if sched is not None:
            measure_open(
                callers[t],
                stats[t],
                sched,
                loops=ctx.threads,
                server_time=driver.reports_server_time,
                fatal=fatal,
                stop=stop.is_set,
                publish=publish,
            )
            return
        measure(
            callers[t],
            stats[t],
            requests=spec.requests,
            duration_s=spec.duration_s,
            server_time=driver.reports_server_time,
            fatal=fatal,
            stop=stop.is_set,
            publish=publish,
        )

    threads = [
        threading.Thread(target=thread_main, args=(t,), name=f"load-{t}", daemon=True)
        for t in range(ctx.threads)
    ]
    for th in threads:
        th.start()
    with contextlib.suppress(threading.BrokenBarrierError):
        warmed.wait()
    gate.ready(next((s.fatal for s in stats if s.fatal), None))
    for th in threads:
        th.join()
    if sched is None:
        return stats, None
    return stats, sched.summary(sum(s.sent for s in stats), max(s.last_send_ns for s in stats))


def client_process(spec: LoadSpec, go: Any, stop: Any, progress: Any, conn: Any) -> None:
    """:func:`client_main` as a process of the local runner: a parent that is gone (its pipe
    broken) ends the client quietly, with no traceback."""
    try:
        client_main(spec, go, stop, progress, conn)
    except (BrokenPipeError, ConnectionResetError, EOFError):
        os._exit(1)


def client_main(spec: LoadSpec, go: Any, stop: Any, progress: Any, conn: Any) -> None:
    """Entry point of a client process (of the local runner, or started by a cluster task).
    Protocol on ``conn``: ("started",) first (``load.timeout_s`` counts from there: a process
    slow to start is not the server's doing), ("connected",) once connected, ("ready",) or
    ("error", msg) after connecting and warming up, then the final ("result", dict).
    ``go``/``stop`` are events, ``progress`` maps slot -> requests done."""
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
    gate = Gate(ctx.client_index, go, conn, driver)
    try:
        if isinstance(driver, EventDriver) and driver.uses_event_loop():
            stats, schedule = event_load(driver, spec, gate, stop, progress)
        else:
            stats, schedule = thread_load(driver, spec, gate, stop, progress)
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
    )
    conn.send(("result", report))
