"""Closed-loop load from the workers of a Dask cluster (``dask.distributed``).

``--cluster local:N`` starts a :class:`~distributed.LocalCluster` of N worker processes on
loopback; ``--cluster tcp://HOST:8786`` uses a running scheduler (workers on other machines, on
Kubernetes, on an HPC queue). Dask only places and coordinates the load: every client of the case
becomes ONE long-running task (:func:`load_worker`, seceded from the worker's thread pool) that
starts a client process of its own (:class:`ClientProcess`, a fresh interpreter running
:mod:`rpcmeter.runners.client_process`) and relays to it. That process runs the same client code
as a client process of the local runner (:func:`~rpcmeter.runners.client.client_main`: its
threads, hot loops, buffers folded into histograms), so the load loops never share an interpreter
(or its GIL) with Dask's event loop, heartbeats and comms. Clients are spread round-robin over the
workers.

Protocol, all through the scheduler: each task's client connects and warms up, then the task
reports ``ready`` on a Dask ``Queue``; when every client is ready the parent sets a Dask ``Event``
(the start barrier) and all threads of all clients start together. While they run, each task
publishes its client's request count (progress) and long-polls a ``stop`` event. A task returns
only its histograms and counters, which the parent merges exactly
(:func:`~rpcmeter.runners.closed_loop.merge_results`). A client process dies with its task's
thread (Linux parent-death signal, also when the worker is killed) and is killed with its process
group on every way out of the task.

Clocks are read per worker: latency is measured where the request is made, and spans are only
computed within one host (the case's wall time is the longest per-host span); there is no
cross-machine clock arithmetic. A worker that dies, leaves or fails mid-case is reported and the
case is marked incomplete (never silently short); per-worker figures are kept in the case.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import os
import pickle
import queue as queue_mod
import resource
import signal
import subprocess
import tempfile
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import IO, Any

from rpcmeter import model
from rpcmeter.errors import ClusterError
from rpcmeter.host import interrupts as interrupts
from rpcmeter.metrics.histogram import Histogram
from rpcmeter.metrics.resources import N, client_total
from rpcmeter.runners import client_process
from rpcmeter.runners.closed_loop import WARMING_UP, merge_results, timed_out
from rpcmeter.runners.recording import ClientReport, LoadInterrupted, LoadOutcome
from rpcmeter.runners.spec import LoadHooks, LoadSpec
from rpcmeter.runners.windows import StageTimer, Timeline, wait_until_epoch

POLL_S = 0.1  # parent: how often it drains messages and checks futures
PUBLISH_S = 0.25  # load worker: how often it publishes progress and looks at the stop event
MEMBERSHIP_S = 0.5  # parent: how often it asks the scheduler which workers are alive
GRACE_S = 5.0  # after a stop: how long the remaining clients have to report what they have
# the case starts this long after the gate opens: the start barrier reaches the workers' tasks
# through the scheduler, and each task then its client process
START_LEAD_NS = 600_000_000
# Dask settings for load workers: no sampling profiler (a thread that takes the GIL every 10 ms
# to sample every thread's stack, the load loops' included), slower housekeeping ticks. An idle
# local worker then costs about 7 ms of CPU per second instead of about 34 (measured here).
LOAD_WORKER_CONFIG = {
    "distributed.worker.multiprocessing-method": "forkserver",  # see _start_forkserver
    "distributed.worker.profile.enabled": False,
    "distributed.admin.tick.interval": "500ms",
    "distributed.admin.system-monitor.interval": "2s",
}


def _distributed() -> Any:
    try:
        import distributed
    except ImportError:
        raise ClusterError(
            "--cluster needs dask.distributed: pip install 'rpcmeter[dask]'"
        ) from None
    return distributed


@dataclass
class LoadCluster:
    """A connection to a Dask scheduler (and the local cluster behind it, when we started it)."""

    spec: str
    client: Any
    local: Any = None  # the LocalCluster we started, or None for an existing scheduler

    def workers(self) -> dict[str, str]:
        """Live workers as the scheduler sees them right now: address -> host. (Asked directly:
        the client's cached ``scheduler_info`` is refreshed in the background without workers.)"""
        identity = self.client.sync(self.client.scheduler.identity, n_workers=-1)
        workers: dict[str, dict[str, Any]] = identity["workers"]
        return {address: str(info.get("host", "?")) for address, info in workers.items()}

    def describe(self) -> dict[str, Any]:
        """The cluster as the result records it, as JSON values (``environment.cluster``;
        :meth:`rpcmeter.result.record.RunRecord.cluster`)."""
        workers = self.workers()
        return {
            "spec": self.spec,
            "scheduler": self.client.scheduler.address,
            "workers": len(workers),
            "hosts": sorted(set(workers.values())),
            "dask": _distributed().__version__,
        }

    def close(self) -> None:
        """Disconnect, and close the local cluster with all its processes. Dask's own exit
        handler then has nothing left to close; where the close failed, the cluster's worker
        processes are killed and that handler is silenced (it would print a traceback at
        exit)."""
        if self.client is not None:
            with contextlib.suppress(Exception):
                self.client.close()
        if self.local is None:
            return
        with contextlib.suppress(Exception):
            self.local.close(timeout=30)
        if getattr(self.local, "status", None) is not _distributed().core.Status.closed:
            _kill_workers(self.local)
            import atexit

            from distributed.deploy import spec

            atexit.unregister(spec.close_clusters)


def _kill_workers(local: Any) -> None:
    """Kill the worker processes of ``local``'s nannies that are still alive."""
    for nanny in list(getattr(local, "_created", ())):
        process = getattr(getattr(nanny, "process", None), "process", None)  # AsyncProcess
        pid = getattr(process, "pid", None)
        if pid:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)


def parse_cluster(spec: str) -> int | str:
    """``local:N`` -> N (worker processes); ``tcp://HOST:PORT`` (or ``tls://``) -> the address."""
    text = spec.strip()
    if text.startswith("local:"):
        n = text.removeprefix("local:")
        if not n.isdigit() or not 1 <= int(n) <= 256:
            raise ClusterError(f"--cluster {spec}: expected local:N with N from 1 to 256")
        return int(n)
    if text.startswith(("tcp://", "tls://")) and ":" in text.split("://", 1)[1]:
        return text
    raise ClusterError(
        f"--cluster {spec}: expected local:N or the scheduler address tcp://HOST:PORT"
    )


def open_cluster(spec: str, *, timeout_s: float = 60.0) -> LoadCluster:
    """Start ``local:N`` (N worker processes on 127.0.0.1, no dashboard) or connect to a
    scheduler and wait until it has at least one worker."""
    where = parse_cluster(spec)
    dist = _distributed()
    local = None
    client = None
    try:
        if isinstance(where, int):
            import dask

            # Dask's start cannot be cut short cleanly (a half-started cluster cannot be
            # closed, and its worker processes stay): Ctrl-C or SIGTERM waits until it is up,
            # then the cluster is closed as below
            with interrupts.deferred(), dask.config.set(LOAD_WORKER_CONFIG):
                _start_forkserver(dist)
                local = dist.LocalCluster(
                    n_workers=where,
                    threads_per_worker=2,  # load tasks secede: they do not hold these threads
                    processes=True,
                    host="127.0.0.1",
                    dashboard_address=None,
                    # a worker that fails is reported with its case; what Dask logs as its
                    # cluster closes under an interrupt (heartbeats to a closed scheduler) is not
                    silence_logs=logging.CRITICAL,
                )  # (the nannies hand the config to their workers)
                client = dist.Client(local, timeout=timeout_s)
                client.wait_for_workers(where, timeout=timeout_s)
        else:
            client = dist.Client(where, timeout=timeout_s)
            client.wait_for_workers(1, timeout=timeout_s)
    except BaseException as exc:
        with interrupts.deferred():
            LoadCluster(spec, client, local).close()
        if isinstance(exc, (OSError, TimeoutError)):
            raise ClusterError(f"--cluster {spec}: cannot use the cluster: {exc}") from None
        raise
    return LoadCluster(spec, client, local)


def _start_forkserver(dist: Any) -> None:
    """Start the process the local workers are forked from (``multiprocessing-method``
    forkserver, :data:`LOAD_WORKER_CONFIG`) with SIGINT ignored
    (:func:`rpcmeter.host.interrupts.sigint_ignored`): it and every worker forked from it (a
    restarted one too) then ignore it from their first instruction. rpcmeter closes them on
    Ctrl-C; a worker would print a KeyboardInterrupt traceback."""
    import multiprocessing.forkserver

    dist.utils.get_mp_context()  # Dask's preload (distributed and its packages)
    with interrupts.sigint_ignored():
        multiprocessing.forkserver.ensure_running()


# ---- on the worker --------------------------------------------------------------------------


class ClientProcess:
    """The task's side of one client process (:mod:`rpcmeter.runners.client_process`): started
    in a process group of its own, spoken to on its stdin and stdout, its stderr kept in a file,
    and always killed with its group (:meth:`close`)."""

    def __init__(self, spec: LoadSpec) -> None:
        self.index = spec.ctx.client_index
        self.stderr = tempfile.TemporaryFile(prefix="rpcmeter-client-")  # noqa: SIM115
        self.proc = subprocess.Popen(
            client_process.command(),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self.stderr,
            env={**os.environ, **spec.ctx.env},  # the variant's env from the first import on
            start_new_session=True,  # its own group: killed whole, never by a Ctrl-C meant for us
        )
        self.pid = self.proc.pid
        self.messages: queue_mod.Queue[tuple[Any, ...]] = queue_mod.Queue()
        self._closed = False
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self._stdin = self.proc.stdin
        self._reader = threading.Thread(
            target=self._read,
            args=(self.proc.stdout,),
            name=f"rpcmeter-client-{self.index}",
            daemon=True,
        )
        try:
            self._reader.start()
        except BaseException:
            self.close(grace_s=0.0)
            raise
        self.send(spec)

    def _read(self, stream: IO[bytes]) -> None:
        try:
            while True:
                self.messages.put(client_process.read_frame(stream))
        except (EOFError, OSError, pickle.UnpicklingError):
            self.messages.put(("eof",))

    def send(self, obj: Any) -> None:
        """Write a frame to the client's stdin (nothing when it is gone already)."""
        with contextlib.suppress(OSError, ValueError):
            client_process.write_frame(self._stdin, obj)

    def _status(self) -> os.waitid_result | None:
        """How the process ended, without reaping it (so its group id stays ours); None while
        it runs."""
        try:
            return os.waitid(os.P_PID, self.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT)
        except ChildProcessError:  # reaped already (by close)
            return None

    def exited(self) -> bool:
        return self._closed or self._status() is not None

    def died(self, wait_s: float = 1.0) -> str:
        """Why the process ended without a result: how it exited and the tail of its stderr."""
        deadline = time.monotonic() + wait_s
        while (st := self._status()) is None and not self._closed:
            if time.monotonic() > deadline:
                break
            time.sleep(0.01)
        how = " without a result"
        if self.proc.returncode is not None:
            how = f" with status {self.proc.returncode}"
        if st is not None and st.si_code == os.CLD_EXITED:
            how = f" with status {st.si_status}"
        elif st is not None and st.si_code in (os.CLD_KILLED, os.CLD_DUMPED):
            how = f" killed by {signal.Signals(st.si_status).name}"
        tail = ""
        with contextlib.suppress(OSError, ValueError):  # ValueError: closed already
            self.stderr.flush()
            size = self.stderr.seek(0, os.SEEK_END)
            self.stderr.seek(max(0, size - 4000))
            lines = self.stderr.read().decode(errors="replace").splitlines()
            tail = " | ".join(line.strip() for line in lines[-5:] if line.strip())
        return f"client {self.index}: client process {self.pid} exited{how}" + (
            f": {tail}" if tail else ""
        )

    def close(self, grace_s: float = 1.0) -> None:
        """Stop the client (``stop``, then end of input), give it ``grace_s`` to exit, then kill
        its whole process group and reap it. Safe to call twice."""
        if self._closed:
            return
        self.send("stop")
        with contextlib.suppress(OSError):
            self._stdin.close()
        deadline = time.monotonic() + grace_s
        while not self.exited() and time.monotonic() < deadline:
            time.sleep(0.01)
        # the group leader is not reaped yet, so its pid (the group id) cannot have been reused
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.pid, signal.SIGKILL)
        self.proc.wait()
        self._closed = True
        if self._reader.ident is not None:
            self._reader.join(1.0)
        with contextlib.suppress(OSError):
            self.proc.stdout.close()  # type: ignore[union-attr]
        self.stderr.close()


def _watch_stop(stop_ev: Any, child: ClientProcess, done: threading.Event) -> None:
    """Long-poll the case's stop event; pass a stop to the client at once."""
    with contextlib.suppress(Exception):
        while not done.is_set():
            if stop_ev.wait(PUBLISH_S * 4):
                child.send("stop")
                child.messages.put(("stop",))
                return


def load_worker(spec: LoadSpec, names: dict[str, str], timeout_s: float) -> ClientReport | str:
    """One client of a case, as a long-running task on a Dask worker (see the module doc): it
    starts a client process, relays the start barrier, progress and stop, and kills the process
    on every way out.

    Returns client_main's report with the worker's address and host, or why there is none."""
    dist = _distributed()
    deadline = time.monotonic() + timeout_s
    c = spec.ctx.client_index
    try:  # first: the interpreter starts while we talk to the scheduler
        child = ClientProcess(spec)
    except OSError as exc:
        return f"client {c}: cannot start a client process: {exc}"
    done = threading.Event()
    try:
        dist.secede()  # a long-running task: give the slot back to the worker's thread pool
        worker = dist.get_worker()
        posts = dist.Queue(names["queue"])
        go_ev, stop_ev = dist.Event(names["go"]), dist.Event(names["stop"])
        # 1. connected and warmed up?
        first: tuple[Any, ...] | None = None
        phase = "connecting"
        while first is None:
            with contextlib.suppress(queue_mod.Empty):
                first = child.messages.get(timeout=PUBLISH_S)
            if first is not None and first[0] == "started":
                first = None  # the task's deadline counts the process's start too
            elif first is not None and first[0] == "connected":
                phase, first = WARMING_UP, None
                posts.put(["connected", c])
            if first is None and stop_ev.is_set():
                first = ("error", f"client {c}: no connection before the case was stopped")
            elif first is None and time.monotonic() > deadline:
                first = ("error", f"client {c}: {timed_out(phase)}")
        if first[0] == "eof":
            first = ("error", child.died())
        if first[0] != "ready":
            posts.put(["error", c, first[1]])
            return str(first[1])
        posts.put(["ready", c, child.pid])
        # 2. the start barrier, and the case's start time
        while not go_ev.wait(PUBLISH_S):
            if stop_ev.is_set() or time.monotonic() > deadline:
                child.send("stop")
                break
        try:
            start = int(dist.Variable(names["start"]).get(timeout=PUBLISH_S * 4))
        except Exception:  # no start set (the case stopped first): start now
            start = 0
        child.send(("go", start))
        # 3. run: relay progress and a stop, until the result
        threading.Thread(
            target=_watch_stop,
            args=(stop_ev, child, done),
            name=f"rpcmeter-stop-{c}",
            daemon=True,
        ).start()
        count, published, stopped = 0, time.monotonic(), float("inf")
        while True:
            try:
                msg = child.messages.get(timeout=PUBLISH_S)
            except queue_mod.Empty:
                msg = ("idle",)
            if msg[0] == "result":
                report: ClientReport = msg[1]
                report.worker, report.host = worker.address, _host(worker.address)
                return report
            if msg[0] == "error":
                return str(msg[1])
            if msg[0] == "eof":
                return child.died()
            if msg[0] == "progress":
                count = int(msg[1])
            elif msg[0] == "windows":  # pickled: a Dask queue takes msgpack values only
                posts.put(["windows", c, pickle.dumps(msg[1:], protocol=pickle.HIGHEST_PROTOCOL)])
            now = time.monotonic()
            if msg[0] == "stop":
                stopped = now
            if now - published >= PUBLISH_S:
                posts.put(["progress", c, count])
                published = now
            if now > min(deadline, stopped) + GRACE_S:  # a client that ignores a stop: give up
                return f"client {c}: no result after the case stopped"
    finally:
        done.set()
        child.close()


def _process_usage() -> tuple[float, float, int]:
    """CPU seconds (user, system) and peak RSS (bytes) of the calling worker process."""
    u = resource.getrusage(resource.RUSAGE_SELF)
    return u.ru_utime, u.ru_stime, u.ru_maxrss * 1024


def _host(address: str) -> str:
    """The host part of a worker address (``tcp://10.0.0.5:40123`` -> ``10.0.0.5``)."""
    rest = address.split("://", 1)[-1]
    return rest.rpartition(":")[0].strip("[]") or rest


# ---- in the parent --------------------------------------------------------------------------


def run_distributed(
    cluster: LoadCluster, spec: LoadSpec, hooks: LoadHooks | None = None
) -> LoadOutcome:
    """Run one case's load on ``cluster``'s workers; the same contract as
    :func:`~rpcmeter.runners.closed_loop.run_closed_loop` (closed or, with ``pacing``, open
    loop: each client paces its share of the rate). ``spec.client_cpus`` pins the client
    threads on a local cluster only (the parent's CPU list means nothing on other machines)."""
    hooks = hooks or LoadHooks()
    server_problem, clients, timeout_s = hooks.server_problem, spec.clients, spec.timeout_s
    if cluster.local is None:
        spec = dataclasses.replace(spec, client_cpus=None)
    dist = _distributed()
    dc = cluster.client
    prefix = f"rpcmeter-{uuid.uuid4().hex[:12]}"
    names = {
        "queue": f"{prefix}-posts",
        "go": f"{prefix}-go",
        "stop": f"{prefix}-stop",
        "start": f"{prefix}-start",
    }
    posts = dist.Queue(names["queue"], client=dc)
    go, stop = dist.Event(names["go"], client=dc), dist.Event(names["stop"], client=dc)
    outcome = LoadOutcome()
    timeline = Timeline(spec.clock(), clients, hooks.on_window)
    stages: StageTimer | None = None
    live = cluster.workers()
    addresses = sorted(live)
    if not addresses:
        outcome.failure = "the cluster has no workers"
        return outcome
    assign = {c: addresses[c % len(addresses)] for c in range(clients)}
    used = sorted(set(assign.values()))
    futures = {
        c: dc.submit(
            load_worker,
            spec.for_client(c),
            names,
            timeout_s,
            key=f"{prefix}-client-{c}",
            workers=[assign[c]],
            allow_other_workers=False,
            pure=False,
            retries=0,
        )
        for c in range(clients)
    }
    pids: dict[str, int] = {}
    with contextlib.suppress(Exception):
        pids = dc.run(os.getpid, workers=used, on_error="ignore")
    results: dict[int, ClientReport] = {}
    lost: dict[int, str] = {}
    ready: dict[int, int] = {}  # client -> the pid of its client process
    connected: set[int] = set()  # clients warming up
    progress: dict[int, int] = {}
    pending = set(range(clients))
    deadline = time.monotonic() + timeout_s
    next_membership = time.monotonic() + MEMBERSHIP_S
    usage0: dict[str, tuple[float, float, int]] = {}
    t_go: float | None = None
    stopping = False
    try:

        def drain() -> None:
            for item in posts.get(batch=True):
                kind, c = item[0], int(item[1])
                if kind == "connected":
                    connected.add(c)
                elif kind == "ready":
                    ready[c] = int(item[2])
                elif kind == "progress":
                    progress[c] = int(item[2])
                elif kind == "windows":
                    pieces, through, cpu, at_ns = pickle.loads(item[2])
                    timeline.add(c, pieces, through, cpu, at_ns)
                elif kind == "error" and outcome.failure is None:
                    outcome.failure = str(item[2])

        while pending:
            drain()
            for c in sorted(pending):
                fut = futures[c]
                if not fut.done():
                    continue
                pending.discard(c)
                if fut.status == "finished":
                    r = fut.result()
                    if isinstance(r, str):
                        outcome.failure = outcome.failure or r
                        timeline.finish(c, {}, None)
                    else:
                        results[c] = r
                        timeline.finish(c, r.windows, (r.cpu_user_s, r.cpu_sys_s), r.ended_ns)
                else:
                    lost[c] = f"failed: {_exception(fut)}"
                    timeline.finish(c, {}, None)
            now = time.monotonic()
            if now >= next_membership and pending:
                next_membership = now + MEMBERSHIP_S
                alive = set(cluster.workers())
                for c in sorted(pending):
                    if assign[c] not in alive:
                        lost[c] = "left the cluster mid-case"
                        timeline.finish(c, {}, None)
                        pending.discard(c)
                        futures[c].cancel()
            if not stopping:
                problem = server_problem() if server_problem is not None else None
                if problem is None and now > deadline:
                    warming = len(connected | set(ready)) == clients
                    problem = timed_out(
                        "running" if t_go else WARMING_UP if warming else "connecting"
                    )
                if problem is not None:
                    outcome.failure = outcome.failure or problem
                if outcome.failure is not None or lost:
                    stopping = True
                    stop.set()
                    deadline = now + GRACE_S
                elif t_go is None and len(ready) == clients:
                    outcome.client_pids = [ready[c] for c in range(clients)]
                    if (
                        hooks.on_start and cluster.local is not None
                    ):  # local pids mean nothing elsewhere
                        hooks.on_start(outcome.client_pids)
                    usage0 = _usage(dc, used)
                    if hooks.on_go:  # its marks before the load starts
                        hooks.on_go()
                    start = time.time_ns() + START_LEAD_NS
                    dist.Variable(names["start"], client=dc).set(start)
                    go.set()
                    if hooks.on_stage is not None:
                        stages = StageTimer(spec.clock(), start, hooks.on_stage)
                    wait_until_epoch(start)
                    t_go = time.perf_counter()
            elif now > deadline:
                for c in sorted(pending):
                    lost[c] = "did not report in time"
                    timeline.finish(c, {}, None)
                    futures[c].cancel()
                pending.clear()
            if t_go is not None and hooks.on_progress:
                hooks.on_progress(sum(progress.values()), time.perf_counter() - t_go)
            if pending:
                time.sleep(POLL_S)
        drain()  # what the clients posted before their results
        if hooks.on_end and t_go is not None:
            hooks.on_end()
        usage1 = _usage(dc, [a for a in used if a in cluster.workers()]) if t_go else {}
        whole = outcome.failure is None and not lost and len(results) == clients
        timeline.close_all(ran_through=whole)
        outcome.series = timeline.series()
    except KeyboardInterrupt:
        outcome.series = timeline.series()
        outcome.interrupted = True
        raise LoadInterrupted(outcome) from None
    finally:
        if stages is not None:
            stages.stop()
        stop.set()
        go.set()
        for fut in futures.values():
            if not fut.done():
                fut.cancel()
        with contextlib.suppress(Exception):
            posts.close()
        with contextlib.suppress(Exception):
            go.clear()  # the stop event stays set: a straggling (cancelled) task still sees it
    outcome.client_pids = [ready[c] for c in sorted(ready)]
    per_client = merge_results(outcome, results)
    _per_worker(outcome, results, per_client, assign, lost, usage0, usage1, pids)
    if lost:
        reasons = [w.reason for w in outcome.workers if w.reason]
        outcome.incomplete = "; ".join(reasons[:3]) + (
            f" (+{len(reasons) - 3} more)" if len(reasons) > 3 else ""
        )
    elif len(results) < clients and outcome.failure is None:
        outcome.failure = f"{clients - len(results)} client(s) reported no result"
    return outcome


def _exception(fut: Any) -> str:
    try:
        exc = fut.exception(timeout=1.0)
    except Exception as err:  # cancelled, or the scheduler lost it
        return f"{type(err).__name__}: {err}"
    return f"{type(exc).__name__}: {exc}"


def _usage(dc: Any, workers: list[str]) -> dict[str, tuple[float, float, int]]:
    """Process CPU and peak RSS of each worker (a dead worker is left out)."""
    try:
        out: dict[str, tuple[float, float, int]] = dc.run(
            _process_usage, workers=workers, on_error="ignore"
        )
    except Exception:
        return {}
    return {a: tuple(v) for a, v in out.items()}  # type: ignore[misc]


def _per_worker(
    outcome: LoadOutcome,
    results: dict[int, ClientReport],
    per_client: dict[int, Histogram],
    assign: dict[int, str],
    lost: dict[int, str],
    usage0: dict[str, tuple[float, float, int]],
    usage1: dict[str, tuple[float, float, int]],
    pids: dict[str, int],
) -> None:
    """Per-worker figures; the case's wall time from per-host spans (one clock per host).

    A worker's client CPU and peak memory are its client processes' own, summed (unknown when
    one of them did not report); the Dask worker process's own, over the whole case, are kept
    beside them as ``worker_*``."""
    by_client = {entry.client: entry for entry in outcome.clients}
    host_spans: dict[str, tuple[int, int]] = {}
    for addr in sorted(set(assign.values())):
        mine = [c for c in sorted(assign) if assign[c] == addr]
        done = [c for c in mine if c in results]
        hist = Histogram.merged(per_client[c] for c in done)
        threads = [t for c in done for t in results[c].threads if t.end_ns]
        start = min((t.start_ns for t in threads), default=0)
        end = max((t.end_ns for t in threads), default=0)
        host = _host(addr)
        if threads:
            lo, hi = host_spans.get(host, (start, end))
            host_spans[host] = (min(lo, start), max(hi, end))
        span = (end - start) / 1e9
        ok = sum((by_client[c].requests or 0) - (by_client[c].errors or 0) for c in done)
        u0, u1 = usage0.get(addr), usage1.get(addr)
        gone = [c for c in mine if c in lost]
        reason = (
            f"worker {addr} (client{'s' if len(gone) > 1 else ''} "
            f"{', '.join(map(str, gone))}) {lost[gone[0]]}"
            if gone
            else None
        )
        outcome.workers.append(
            model.Worker(
                worker=addr,
                host=host,
                pid=pids.get(addr),
                status="lost" if gone else "ok",
                reason=reason,
                clients=mine,
                requests=sum(by_client[c].requests or 0 for c in done),
                ok=ok,
                errors=sum(by_client[c].errors or 0 for c in done),
                wall_s=span,
                throughput_rps=ok / span if span > 0 else 0.0,
                cpu_user_s=_client_sum(by_client, mine, done, lambda e: e.cpu_user_s),
                cpu_sys_s=_client_sum(by_client, mine, done, lambda e: e.cpu_sys_s),
                max_rss_bytes=_client_sum(by_client, mine, done, lambda e: e.max_rss_bytes),
                worker_cpu_user_s=u1[0] - u0[0] if u0 and u1 else None,
                worker_cpu_sys_s=u1[1] - u0[1] if u0 and u1 else None,
                worker_max_rss_bytes=u1[2] if u1 else None,
                latency=model.Latency.of(hist) if hist.count else None,
                histogram=hist if hist.count else None,
            )
        )
    if host_spans:
        outcome.wall_s = max((hi - lo) / 1e9 for lo, hi in host_spans.values())
        if len(host_spans) > 1:  # start/end on different clocks mean nothing together
            outcome.start_ns = outcome.end_ns = 0


def _client_sum(
    by_client: dict[int | None, model.Client],
    mine: list[int],
    done: list[int],
    figure: Callable[[model.Client], N | None],
) -> N | None:
    """The sum of ``figure`` over a worker's client processes; None when one did not report."""
    if len(done) < len(mine):
        return None
    return client_total([by_client[c] for c in done], figure)
