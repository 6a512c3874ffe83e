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
from rpcmeter.drivers.base import (
    Caller,
    Driver,
    DriverContext,
    EventDriver,
    ReplyError,
    ReplyMismatch,
)
from rpcmeter.metrics.histogram import Histogram
from rpcmeter.metrics.resources import peak_rss_of
from rpcmeter.runners.open_loop import Pacing, client_schedule, measure_open
from rpcmeter.servers.process import die_with_parent

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
    net_hist: Histogram = field(default_factory=Histogram)  # latency - server time, per request
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

    def to_dict(self) -> dict[str, Any]:
        return {
            "hist": self.hist.to_dict(),
            "server_hist": self.server_hist.to_dict() if self.server_hist.count else None,
            "net_hist": self.net_hist.to_dict() if self.net_hist.count else None,
            "ok": self.ok,
            "errors": self.errors,
            "first_error": self.first_error,
            "fatal": self.fatal,
            "start_ns": self.start_ns,
            "end_ns": self.end_ns,
            "uhist": self.uhist.to_dict() if self.uhist.count else None,
            "late": self.late,
        }


class Recorder:
    """Preallocated sample buffers of one loop (or one event loop), folded into histograms when
    full: latencies in ``buf``; with server time, the server-reported time in ``sbuf`` and
    latency minus server time of the same request in ``nbuf`` (same index ``spos``)."""

    __slots__ = ("buf", "nbuf", "pos", "sbuf", "spos", "stats")

    def __init__(self, stats: ThreadStats, server_time: bool) -> None:
        self.stats = stats
        self.buf = array("q", bytes(8 * BUFFER))
        self.pos = 0
        self.sbuf = array("q", bytes(8 * BUFFER)) if server_time else array("q")
        self.nbuf = array("q", bytes(8 * BUFFER)) if server_time else array("q")
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
            self.stats.net_hist.record_array(
                np.frombuffer(self.nbuf, dtype=np.int64, count=self.spos)
            )
            self.spos = 0

    def error(self, exc: BaseException, fatal_types: tuple[type[BaseException], ...]) -> bool:
        """Count an error; True when it is fatal for this loop's connection."""
        if isinstance(exc, ReplyMismatch):
            kind = "mismatch"
        elif isinstance(exc, ReplyError):
            kind = exc.kind
        else:
            kind = type(exc).__name__
        fatal = isinstance(exc, fatal_types) and not isinstance(exc, ReplyMismatch | ReplyError)
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
    nbuf = rec.nbuf
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
                sbuf[rec.spos] = server_ns  # type: ignore[call-overload]
                nbuf[rec.spos] = latency - server_ns  # type: ignore[operator]
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


def is_fatal(exc: BaseException, fatal: tuple[type[BaseException], ...]) -> bool:
    """True when ``exc`` means the connection is gone (not a wrong or failed reply)."""
    return isinstance(exc, fatal) and not isinstance(exc, ReplyMismatch | ReplyError)


def warm_up(
    call: Caller, n: int, stats: ThreadStats, fatal: tuple[type[BaseException], ...]
) -> None:
    """``n`` untimed calls whose results are discarded; a fatal error stops the thread."""
    for _ in range(n):
        try:
            call()
        except Exception as exc:
            if is_fatal(exc, fatal):
                stats.fatal = f"during warmup: {type(exc).__name__}: {exc}"[:300]
                return


class Gate:
    """The client's side of the start protocol: report ready (or why not), wait for the gate,
    then measure this process's CPU time until :meth:`finish`."""

    def __init__(self, index: int, go: Any, conn: Any, driver: Driver) -> None:
        self.index = index
        self.go = go
        self.conn = conn
        self.driver = driver
        self.usage0: Any = None
        self.counters0: dict[str, int] = {}

    def ready(self, failure: str | None) -> None:
        self.counters0 = self.driver.counters()  # warmup traffic is not the case's
        if failure:
            self.conn.send(("error", f"client {self.index}: {failure}"))
        else:
            self.conn.send(("ready",))
        self.go.wait()
        self.usage0 = resource.getrusage(resource.RUSAGE_SELF)

    def counters(self) -> dict[str, int]:
        """The driver's counters since the gate opened."""
        return {k: v - self.counters0.get(k, 0) for k, v in self.driver.counters().items()}

    def cpu(self) -> dict[str, float]:
        usage1 = resource.getrusage(resource.RUSAGE_SELF)
        usage0 = self.usage0 or usage1
        return {
            "cpu_user_s": usage1.ru_utime - usage0.ru_utime,
            "cpu_sys_s": usage1.ru_stime - usage0.ru_stime,
            # this process image's own peak (ru_maxrss would also count the image it was
            # started from: a Dask worker, when a cluster task starts the client)
            "max_rss_bytes": peak_rss_of(os.getpid()) or usage1.ru_maxrss * 1024,
        }


# what a client's load returns: per-loop stats, and the open-loop schedule's totals (or None)
LoadReport = tuple[list["ThreadStats"], dict[str, float] | None]


def thread_load(
    driver: Driver, spec: ClientSpec, gate: Gate, stop: Any, progress: Any
) -> LoadReport:
    """One thread per loop, each calling the driver's caller (the synchronous drivers); closed
    loop, or open loop on the client's schedule when ``spec.pacing`` is set."""
    ctx = spec.ctx
    callers = [driver.caller(t) for t in range(ctx.threads)]
    fatal = driver.fatal_errors
    stats = [ThreadStats() for _ in range(ctx.threads)]
    base = ctx.client_index * ctx.threads
    warmed = threading.Barrier(ctx.threads + 1)
    sched = client_schedule(spec)

    def thread_main(t: int) -> None:
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
    warmed.wait()
    gate.ready(next((s.fatal for s in stats if s.fatal), None))
    for th in threads:
        th.join()
    if sched is None:
        return stats, None
    return stats, sched.summary(sum(s.sent for s in stats), max(s.last_send_ns for s in stats))


def client_main(spec: ClientSpec, go: Any, stop: Any, progress: Any, conn: Any) -> None:
    """Entry point of a client process (of the local runner, or started by a cluster task).
    Protocol on ``conn``: ("ready",) or ("error", msg) after connecting and warming up, then the
    final ("result", dict). ``go``/``stop`` are events, ``progress`` maps slot -> requests done."""
    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent handles Ctrl-C and stops us
        die_with_parent(os.getppid())
    if spec.cpus:
        with contextlib.suppress(OSError):
            os.sched_setaffinity(0, spec.cpus)
    ctx = spec.ctx
    os.environ.update(ctx.env)  # before the driver imports its library (RPYC_BIND_THREADS, ...)
    try:
        driver = driver_class(spec.driver)(ctx)
        driver.connect()
    except Exception as exc:
        conn.send(
            ("error", f"client {ctx.client_index}: cannot connect: {type(exc).__name__}: {exc}")
        )
        return
    gate = Gate(ctx.client_index, go, conn, driver)
    if isinstance(driver, EventDriver) and driver.uses_event_loop():
        from rpcmeter.runners.event_loop import event_load

        stats, schedule = event_load(driver, spec, gate, stop, progress)
    else:
        stats, schedule = thread_load(driver, spec, gate, stop, progress)
    cpu = gate.cpu()
    counters = gate.counters()
    with contextlib.suppress(Exception):
        driver.close()
    conn.send(
        (
            "result",
            {
                "client": ctx.client_index,
                "threads": [s.to_dict() for s in stats],
                "schedule": schedule,
                "counters": counters,
                **cpu,
                "pid": os.getpid(),
            },
        )
    )
