"""What runs inside one client process: a driver, its threads, their hot loops.

The hot loop is two monotonic clock reads around the call and one store into a preallocated
``array('q')``; every chunk of requests it publishes its count (for the progress line) and checks
the deadline and the stop flag. Full buffers are folded into a :class:`Histogram` between chunks,
so memory does not grow with the number of requests.
"""

from __future__ import annotations

import contextlib
import os
import resource
import signal
import threading
import time
from array import array
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from rpcmeter.drivers import driver_class
from rpcmeter.drivers.base import Caller, DriverContext, ReplyMismatch
from rpcmeter.metrics.histogram import Histogram
from rpcmeter.runners.open_loop import Pacing, Schedule, measure_open

BUFFER = 1 << 15  # samples per thread between folds
MAX_CHUNK = 4096
CHUNK_TARGET_NS = 20_000_000  # publish progress / check the clock about every 20 ms


@dataclass(frozen=True)
class ClientSpec:
    """Picklable description of one client process's job."""

    driver: str
    ctx: DriverContext
    requests: int | None
    duration_s: float | None
    warmup: int
    cpus: list[int] | None = None
    pacing: Pacing | None = None  # open loop: this client's rate (runners/open_loop.py)


@dataclass
class ThreadStats:
    hist: Histogram = field(default_factory=Histogram)
    server_hist: Histogram = field(default_factory=Histogram)
    ok: int = 0
    errors: dict[str, int] = field(default_factory=dict)
    first_error: dict[str, str] = field(default_factory=dict)
    fatal: str | None = None
    start_ns: int = 0
    end_ns: int = 0
    # open loop: uncorrected latency (from the actual send), requests sent, late sends, last send
    uhist: Histogram = field(default_factory=Histogram)
    sent: int = 0
    late: int = 0
    last_send_ns: int = 0


class Recorder:
    """Preallocated sample buffer of one thread, folded into histograms when full."""

    __slots__ = ("buf", "pos", "sbuf", "spos", "stats")

    def __init__(self, stats: ThreadStats, server_time: bool) -> None:
        self.stats = stats
        self.buf = array("q", bytes(8 * BUFFER))
        self.pos = 0
        self.sbuf = array("q", bytes(8 * BUFFER)) if server_time else array("q")
        self.spos = 0

    def fold(self) -> None:
        if self.pos:
            self.stats.hist.record_array(np.frombuffer(self.buf, dtype=np.int64, count=self.pos))
            self.stats.ok += self.pos
            self.pos = 0
        if self.spos:
            self.stats.server_hist.record_array(
                np.frombuffer(self.sbuf, dtype=np.int64, count=self.spos)
            )
            self.spos = 0

    def error(self, exc: BaseException, fatal_types: tuple[type[BaseException], ...]) -> bool:
        """Count an error; True when it is fatal for this thread's connection."""
        kind = "mismatch" if isinstance(exc, ReplyMismatch) else type(exc).__name__
        fatal = isinstance(exc, fatal_types) and not isinstance(exc, ReplyMismatch)
        if fatal:
            kind = f"connection:{kind}"
        self.stats.errors[kind] = self.stats.errors.get(kind, 0) + 1
        self.stats.first_error.setdefault(kind, str(exc)[:200])
        if fatal:
            self.stats.fatal = f"{type(exc).__name__}: {exc}"[:300]
        return fatal


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
    sbuf = rec.sbuf
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
            buf[pos] = clock() - t0
            pos += 1
            if server_ns is not None:
                sbuf[rec.spos] = server_ns  # type: ignore[call-overload]
                rec.spos += 1
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
    rec = Recorder(stats, server_time)
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


def warm_up(
    call: Caller, n: int, stats: ThreadStats, fatal: tuple[type[BaseException], ...]
) -> None:
    """``n`` untimed calls whose results are discarded; a fatal error stops the thread."""
    for _ in range(n):
        try:
            call()
        except Exception as exc:
            if isinstance(exc, fatal) and not isinstance(exc, ReplyMismatch):
                stats.fatal = f"during warmup: {type(exc).__name__}: {exc}"[:300]
                return


def client_main(spec: ClientSpec, go: Any, stop: Any, progress: Any, conn: Any) -> None:
    """Entry point of a client process. Protocol on ``conn``: ("ready",) or ("error", msg) after
    connecting and warming up, then the final ("result", dict)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent handles Ctrl-C and stops us
    if spec.cpus:
        with contextlib.suppress(OSError):
            os.sched_setaffinity(0, spec.cpus)
    ctx = spec.ctx
    os.environ.update(ctx.env)  # before the driver imports its library (RPYC_BIND_THREADS, ...)
    try:
        cls = driver_class(spec.driver)
        driver = cls(ctx)
        driver.connect()
        callers = [driver.caller(t) for t in range(ctx.threads)]
    except Exception as exc:
        conn.send(
            ("error", f"client {ctx.client_index}: cannot connect: {type(exc).__name__}: {exc}")
        )
        return
    fatal = cls.fatal_errors
    stats = [ThreadStats() for _ in range(ctx.threads)]
    base = ctx.client_index * ctx.threads
    warmed = threading.Barrier(ctx.threads + 1)
    sched = (
        Schedule(
            spec.pacing,
            requests=spec.requests * ctx.threads if spec.requests else None,
            duration_s=spec.duration_s,
        )
        if spec.pacing
        else None
    )

    def thread_main(t: int) -> None:
        warm_up(callers[t], spec.warmup, stats[t], fatal)
        try:
            warmed.wait()
        except threading.BrokenBarrierError:
            return
        go.wait()
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
                server_time=cls.reports_server_time,
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
            server_time=cls.reports_server_time,
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
    warmed.wait()
    warm_counters = driver.counters()  # warmup calls are not part of the case
    failed = [s.fatal for s in stats if s.fatal]
    if failed:
        conn.send(("error", f"client {ctx.client_index}: {failed[0]}"))
        go.wait()
    else:
        conn.send(("ready",))
        go.wait()
    usage0 = resource.getrusage(resource.RUSAGE_SELF)
    for th in threads:
        th.join()
    usage1 = resource.getrusage(resource.RUSAGE_SELF)
    counters = {k: v - warm_counters.get(k, 0) for k, v in driver.counters().items()}
    with contextlib.suppress(Exception):
        driver.close()
    conn.send(
        (
            "result",
            {
                "client": ctx.client_index,
                "threads": [
                    {
                        "hist": s.hist.to_dict(),
                        "server_hist": s.server_hist.to_dict() if s.server_hist.count else None,
                        "ok": s.ok,
                        "errors": s.errors,
                        "first_error": s.first_error,
                        "fatal": s.fatal,
                        "start_ns": s.start_ns,
                        "end_ns": s.end_ns,
                        "uhist": s.uhist.to_dict() if s.uhist.count else None,
                        "late": s.late,
                    }
                    for s in stats
                ],
                "schedule": sched.summary(
                    sum(s.sent for s in stats), max(s.last_send_ns for s in stats)
                )
                if sched
                else None,
                "counters": counters,
                "cpu_user_s": usage1.ru_utime - usage0.ru_utime,
                "cpu_sys_s": usage1.ru_stime - usage0.ru_stime,
                "max_rss_bytes": usage1.ru_maxrss * 1024,
                "pid": os.getpid(),
            },
        )
    )
