"""Closed-loop load: clients (processes) x threads, each thread sending its next request as soon as
the previous reply arrived.

Every client process connects and warms up, then reports ready; when all are ready the parent opens
the gate and all threads of all clients start together. While they run, the parent publishes
progress, watches the server and the deadline, and on Ctrl-C, a dead server, a crashed client or a
timeout stops the clients and reports the case as failed with the reason.
"""

from __future__ import annotations

import contextlib
import math
import multiprocessing as mp
import multiprocessing.connection
import signal
import threading
import time
from collections.abc import Iterable
from typing import Any

from rpcmeter import model
from rpcmeter.drivers.base import Driver, TargetSpec
from rpcmeter.metrics.histogram import Histogram
from rpcmeter.runners.client import client_process
from rpcmeter.runners.recording import ClientReport, LoadInterrupted, LoadOutcome, merge_calls
from rpcmeter.runners.spec import AliveFn, LoadHooks, LoadSpec
from rpcmeter.runners.windows import StageTimer, Timeline, wait_until_epoch

GRACE_S = 2.0  # after a failure, how long clients may take to report what they measured
# the phases of a case before its gate opens, each named in a timeout's reason: the client
# processes starting (the forkserver importing the client code, on a busy machine seconds; its
# own bound, START_S or load.timeout_s whichever is longer: load.timeout_s runs from when the
# clients run), connecting, and connected but not all warmed up (a server that takes the
# connections and answers no request times out there, not "while connecting")
STARTING = "starting the client processes"
WARMING_UP = "warming up"
START_S = 60.0
START_LEAD_NS = 10_000_000  # the case starts this long after the gate opens (clients wake up)
_CTX: Any = None
_PRELOAD = ["rpcmeter.runners.client"]


def preload_drivers(targets: Iterable[type[TargetSpec]]) -> None:
    """Have client processes start with these drivers' modules already imported (effective
    before the first client starts; drivers that are not fork-safe, and targets that are no
    drivers, are left out)."""
    for cls in targets:
        if issubclass(cls, Driver) and cls.fork_safe and cls.__module__ not in _PRELOAD:
            _PRELOAD.append(cls.__module__)


def mp_context() -> Any:
    """A forkserver context (fast, thread-safe starts) preloading the client code."""
    global _CTX
    if _CTX is None:
        methods = mp.get_all_start_methods()
        _CTX = mp.get_context("forkserver" if "forkserver" in methods else "spawn")
        if "forkserver" in methods:
            _CTX.set_forkserver_preload(_PRELOAD)
    return _CTX


def start_forkserver() -> None:
    """Start the forkserver now, in the background, so that it imports the client code while
    the run prepares (the server starting, its readiness probe, the idle window): the first
    client process then starts at once. Call it after :func:`preload_drivers`; without a
    forkserver (spawn) it does nothing."""
    if mp_context().get_start_method() != "forkserver":
        return
    from multiprocessing import forkserver, resource_tracker

    def start() -> None:
        # Ctrl-C reaches the whole process group: blocked in this thread, and so in the
        # forkserver it starts (a mask is inherited), a Ctrl-C while it imports cannot kill it
        # with a traceback; it ignores SIGINT once it serves. The resource tracker first: its
        # start unblocks SIGINT in the thread that starts it
        resource_tracker.ensure_running()
        signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
        forkserver.ensure_running()

    threading.Thread(target=start, name="forkserver", daemon=True).start()


def run_closed_loop(spec: LoadSpec, hooks: LoadHooks | None = None) -> LoadOutcome:
    """Run one case's load (:class:`~rpcmeter.runners.spec.LoadSpec`) from local client
    processes, calling ``hooks`` on the way (:class:`~rpcmeter.runners.spec.LoadHooks`). With
    ``spec.pacing``, the load is open loop at ``pacing.rate_rps`` requests/s in total (split
    evenly over the clients; see :mod:`rpcmeter.runners.open_loop`)."""
    hooks = hooks or LoadHooks()
    server_problem = hooks.server_problem
    clients = spec.clients
    ctx = mp_context()
    go = ctx.Event()
    stop = ctx.Event()
    start = ctx.Value("q", 0, lock=False)  # the case's start, ns since the epoch
    progress = ctx.Array("q", clients * spec.ctx.threads, lock=False)
    pipes: list[Any] = []
    procs: list[Any] = []
    outcome = LoadOutcome()
    timeline = Timeline(spec.clock(), clients, hooks.on_window)
    stages: StageTimer | None = None
    stop_grace = GRACE_S
    try:
        # Ctrl-C reaches the whole process group: blocked while the clients (and the forkserver)
        # start, a child cannot die of it in its imports with a traceback; ours comes after
        masked = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
        try:
            for c in range(clients):
                recv, send = ctx.Pipe(duplex=False)
                proc = ctx.Process(
                    target=client_process,
                    args=(spec.for_client(c), go, stop, progress, send, start),
                    daemon=True,
                )
                proc.start()
                send.close()
                pipes.append(recv)
                procs.append(proc)
        finally:
            signal.pthread_sigmask(signal.SIG_SETMASK, masked)
        outcome.client_pids = [p.pid for p in procs]
        if hooks.on_start:
            hooks.on_start(outcome.client_pids)
        started_by = time.monotonic() + max(spec.timeout_s, START_S)
        deadline = math.inf  # load.timeout_s from when every client runs

        # 1. wait until every client is connected and warmed up
        pending = set(range(clients))
        started: set[int] = set()
        connected: set[int] = set()
        while pending and outcome.failure is None:
            if len(started) < clients:
                phase, limit = STARTING, started_by
            else:
                if deadline == math.inf:
                    deadline = time.monotonic() + spec.timeout_s
                phase = WARMING_UP if pending <= connected else "connecting"
                limit = deadline
            outcome.failure = _problem(server_problem, procs, pipes, pending, limit, phase)
            ready = multiprocessing.connection.wait([pipes[i] for i in pending], timeout=0.1)
            for r in ready:
                i = pipes.index(r)
                try:
                    msg = pipes[i].recv()
                except EOFError:
                    outcome.failure = (
                        f"client {i} exited with status {procs[i].exitcode} while connecting"
                    )
                    break
                if msg[0] == "error":
                    outcome.failure = msg[1]
                    break
                if msg[0] == "started":
                    started.add(i)
                    continue
                if msg[0] == "connected":
                    connected.add(i)
                    continue
                pending.discard(i)
        if outcome.failure is not None:
            stop.set()
            go.set()
            stop_grace = 0.5  # nothing measured yet: no results to wait for
            if hooks.server_problem is not None:
                outcome.failure = with_server_exit(outcome.failure, hooks.server_problem)
            return outcome

        # 2. open the gate, watch until every client has reported its result
        if hooks.on_go:  # its marks before the load starts (the load does not share the CPUs)
            hooks.on_go()
        start.value = time.time_ns() + START_LEAD_NS
        go.set()
        if hooks.on_stage is not None:
            stages = StageTimer(spec.clock(), start.value, hooks.on_stage)
        wait_until_epoch(start.value)
        t_go = time.perf_counter()
        results: dict[int, ClientReport] = {}
        pending = set(range(clients))
        while pending:
            problem = _problem(server_problem, procs, pipes, pending, deadline, "running")
            if problem is not None and outcome.failure is None:
                outcome.failure = problem
                stop.set()
                deadline = time.monotonic() + GRACE_S  # for clients to report what they have
                server_problem = None
                if problem.startswith("timed out"):
                    break
            elif outcome.failure is not None and time.monotonic() > deadline:
                break  # the grace is over: clients stuck in a receive are stopped below
            ready = multiprocessing.connection.wait([pipes[i] for i in pending], timeout=0.2)
            for r in ready:
                i = pipes.index(r)
                try:
                    msg = pipes[i].recv()
                except EOFError:
                    pending.discard(i)
                    timeline.finish(i, {}, None)  # it ships nothing more
                    continue
                if msg[0] == "windows":
                    timeline.add(i, msg[1], msg[2], msg[3], msg[4])
                elif msg[0] == "result":
                    results[i] = msg[1]
                    pending.discard(i)
                    report = msg[1]
                    cpu = (report.cpu_user_s, report.cpu_sys_s)
                    timeline.finish(i, report.windows, cpu, report.ended_ns)
                elif msg[0] == "error":  # the client's load raised: it says why, then exits
                    outcome.failure = outcome.failure or msg[1]
                    pending.discard(i)
                    timeline.finish(i, {}, None)
            if hooks.on_progress:
                hooks.on_progress(sum(progress), time.perf_counter() - t_go)
        if hooks.on_end:
            hooks.on_end()
        timeline.close_all(ran_through=outcome.failure is None and len(results) == clients)
        outcome.series = timeline.series()
        merge_results(outcome, results)
        if len(results) < clients and outcome.failure is None:
            outcome.failure = f"{clients - len(results)} client(s) reported no result"
        if outcome.failure is not None and hooks.server_problem is not None:
            outcome.failure = with_server_exit(outcome.failure, hooks.server_problem)
        return outcome
    except KeyboardInterrupt:
        outcome.series = timeline.series()
        outcome.interrupted = True
        raise LoadInterrupted(outcome) from None
    finally:
        if stages is not None:
            stages.stop()
        stop.set()
        go.set()
        stop_processes(procs, stop_grace)
        for pipe in pipes:
            with contextlib.suppress(OSError):
                pipe.close()


def with_server_exit(failure: str, server_problem: AliveFn, wait_s: float = 0.25) -> str:
    """``failure`` led by the server's exit when the server is gone: a connection lost or a
    client stopped because the server exited says so first. The exit may take a moment to be
    seen after the connection closed, hence ``wait_s``."""
    if failure.startswith("timed out"):
        return failure
    until = time.monotonic() + wait_s
    while True:
        reason = server_problem()
        if reason:
            return failure if failure.startswith(reason) else f"{reason} ({failure})"
        if time.monotonic() > until:
            return failure
        time.sleep(0.01)


def stop_processes(procs: list[Any], grace_s: float = GRACE_S) -> None:
    """Wait for processes told to stop, ``grace_s`` in all; then SIGTERM, then SIGKILL, the
    same shared grace each (a client blocked in a receive never sees the stop flag)."""
    for signal_them in (None, "terminate", "kill"):
        if signal_them is not None:
            for proc in procs:
                if proc.is_alive():
                    getattr(proc, signal_them)()
        until = time.monotonic() + grace_s
        for proc in procs:
            proc.join(timeout=max(0.0, until - time.monotonic()))
        if not any(proc.is_alive() for proc in procs):
            return
    for proc in procs:
        proc.join()


def _problem(
    server_problem: AliveFn | None,
    procs: list[Any],
    pipes: list[Any],
    pending: set[int],
    deadline: float,
    phase: str,
) -> str | None:
    if server_problem is not None:
        reason = server_problem()
        if reason:
            return reason
    for i in pending:
        if not procs[i].is_alive() and not pipes[i].poll():
            return f"client {i} exited with status {procs[i].exitcode} while {phase}"
    if time.monotonic() > deadline:
        return timed_out(phase)
    return None


def timed_out(phase: str) -> str:
    """The reason of a case that ran out of ``load.timeout_s`` in ``phase``."""
    if phase == WARMING_UP:
        return (
            "timed out while warming up (load.timeout_s): the clients connected, but the "
            "server did not answer their warmup requests"
        )
    if phase == STARTING:
        return (
            f"timed out while {phase}: they did not run within {START_S:g} s or "
            "load.timeout_s, whichever is longer (is the machine overloaded?)"
        )
    return f"timed out while {phase} (load.timeout_s)"


def merge_results(outcome: LoadOutcome, results: dict[int, ClientReport]) -> dict[int, Histogram]:
    """Merge client reports (:func:`~rpcmeter.runners.client.client_main`) into ``outcome``
    exactly: histograms and counters add. Returns each client's latency histogram."""
    per_client: dict[int, Histogram] = {}
    starts: list[int] = []
    ends: list[int] = []
    fatal: list[str] = []
    for i in sorted(results):
        r = results[i]
        client_hist = Histogram()
        client_ok = 0
        client_errors: dict[str, int] = {}
        for t in r.threads:
            client_hist.merge(t.hist)
            outcome.uhist.merge(t.uhist)
            outcome.server_hist.merge(t.server_hist)
            outcome.net_hist.merge(t.net_hist)
            outcome.queue_hist.merge(t.queue_hist)
            client_ok += t.ok
            if t.calls:
                merge_calls(outcome.calls, t.calls)
            for kind, n in t.errors.items():
                client_errors[kind] = client_errors.get(kind, 0) + n
            for kind, text in t.first_error.items():
                outcome.first_error.setdefault(kind, text)
            if t.fatal:
                fatal.append(f"client {i}: {t.fatal}")
            if t.end_ns:
                starts.append(t.start_ns)
                ends.append(t.end_ns)
        outcome.hist.merge(client_hist)
        per_client[i] = client_hist
        outcome.ok += client_ok
        for kind, n in client_errors.items():
            outcome.errors[kind] = outcome.errors.get(kind, 0) + n
        for key, value in r.counters.items():
            outcome.counters[key] = outcome.counters.get(key, 0) + value
        if r.connections is not None:
            if outcome.connections is None:
                outcome.connections = r.connections
            else:
                outcome.connections.merge(r.connections)
        if r.schedule:
            sched = {**r.schedule, "late": sum(t.late for t in r.threads)}
            total = outcome.schedule or dict.fromkeys(sched, 0)
            outcome.schedule = {k: total[k] + v for k, v in sched.items()}
        span = (max(t.end_ns for t in r.threads) - min(t.start_ns for t in r.threads)) / 1e9
        client = model.Client(
            client=i,
            pid=r.pid,
            requests=client_ok + sum(client_errors.values()),
            errors=sum(client_errors.values()),
            throughput_rps=client_ok / span if span > 0 else 0.0,
            cpu_user_s=r.cpu_user_s,
            cpu_sys_s=r.cpu_sys_s,
            max_rss_bytes=r.max_rss_bytes,
        )
        # on a cluster, the worker that ran it
        outcome.clients.append(
            client.model_copy(update={"worker": r.worker}) if r.worker else client
        )
    if starts:
        outcome.start_ns = min(starts)
        outcome.end_ns = max(ends)
        outcome.wall_s = (outcome.end_ns - outcome.start_ns) / 1e9
    if fatal and outcome.failure is None:
        outcome.failure = f"lost connection: {fatal[0]}"
    return per_client
