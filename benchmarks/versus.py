"""What the benchmarks against other clients share (``vs_wrk.py``, ``vs_ghz.py``,
``vs_h2load.py``): where the server and the clients run, the server (nginx or the Go greeter)
and how busy it was during each run, a peer client run pinned to a CPU with its CPU time
measured, rpcmeter's client run the same way, rounds of every client in turn, and the summary
of medians and ratios.

The clients are compared one CPU each; the server must not set the pace, or both clients idle and
their ratio says nothing. So the server gets the other CPUs (``--server-cpus N``; by default every
CPU but the client's and its hyperthread siblings', at most 6), and its CPU use is measured during
every run (its cgroup's accounting, else its process tree's) as a share of the CPUs it can use:
above 85 % busy, a run is *server-bound* and the summary prints no ratio for it. On a machine with
one CPU to spare, a Go server on it tops out below any client, so the HTTP benchmarks use nginx
there (one worker per server CPU: C, cheaper per request than any client); with several server
CPUs they use the Go greeter (``GOMAXPROCS`` = the server CPUs), as gRPC always does.
``--server nginx|go|canned`` chooses. One nginx worker still sets the pace once a client keeps
several requests in flight; the *canned* server (``greeter/canned.go``: nginx's reply to every
request, from a loop that parses only frames and request ends, HTTP/1.1 and HTTP/2, over TLS too)
costs a fraction of nginx per request, so on one CPU it leaves the clients the bottleneck.

Every script ends with one line ``SUMMARY {json}`` (the medians, the server's busy share, the
ratios or ``"server_bound": true``) for other tools to read.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psutil
from greeter_server import BuildError, build

from rpcmeter.drivers.base import DriverContext
from rpcmeter.host.placement import available_cpus, format_cpus
from rpcmeter.metrics.resources import CpuTicks, machine_cpu, process_cpu
from rpcmeter.net.endpoints import Endpoint
from rpcmeter.net.tls import ClientTls, RunCertificates
from rpcmeter.runners.closed_loop import run_closed_loop
from rpcmeter.runners.spec import LoadSpec
from rpcmeter.servers import nginx
from rpcmeter.servers.process import ServerProcess, expand_command, free_port
from rpcmeter.suite.workloads import NoopParams

Run = Callable[[], tuple[float, float]]  # (calls/s, client CPU seconds per call)
SERVER_BOUND = 0.85  # a server busier than this (share of the CPUs it can use) sets the pace
MAX_SERVER_CPUS = 6


def children_cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def pinned(command: list[str], cpu: int, timeout_s: float) -> tuple[str, float]:
    """Run ``command`` on CPU ``cpu``: its standard output and the CPU seconds it used."""
    cpu0 = children_cpu_s()
    out = subprocess.run(
        ["taskset", "-c", str(cpu), *command],
        capture_output=True,
        text=True,
        check=True,
        timeout=timeout_s,
    ).stdout
    return out, children_cpu_s() - cpu0


def callgrind_instructions(script: str, *args: str) -> int:
    """The instructions of ``script`` run with ``args`` in a Python process of its own under
    valgrind's callgrind (the ``*_call_cost.py`` benchmarks' clients), hash seed fixed."""
    return callgrind_command([os.path.realpath(sys.executable), script, *args])


def callgrind_command(program: list[str]) -> int:
    """The instructions (in user space: the kernel's work for its system calls is not counted)
    of ``program`` under valgrind's callgrind."""
    command = ["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null", *program]
    # the same start-up in every run (counts that differ by a few requests' worth are not lost in
    # a start-up that hashed otherwise), and no OpenBLAS worker threads (numpy's: waiting for
    # work they poll, and callgrind counts that polling, so a run's count varied by hundreds of
    # instructions a request with how long it ran; with one thread, by tens)
    env = {**os.environ, "PYTHONHASHSEED": "0", "OPENBLAS_NUM_THREADS": "1"}
    out = subprocess.run(command, capture_output=True, text=True, check=True, timeout=1800, env=env)
    found = re.search(r"Collected : (\d+)", out.stderr)
    if found is None:
        raise RuntimeError(f"no instruction count from callgrind:\n{out.stderr[-2000:]}")
    return int(found.group(1))


# ---- where things run ---------------------------------------------------------------------------


def siblings(cpu: int) -> set[int]:
    """``cpu`` and its hyperthread siblings (Linux topology; just ``cpu`` where unknown)."""
    path = Path(f"/sys/devices/system/cpu/cpu{cpu}/topology/thread_siblings_list")
    try:
        text = path.read_text().strip()
    except OSError:
        return {cpu}
    out: set[int] = set()
    for part in text.split(","):
        lo, _, hi = part.partition("-")
        out.update(range(int(lo), int(hi or lo) + 1))
    return out | {cpu}


@dataclass(frozen=True)
class Layout:
    """The server's CPUs and the one CPU every client runs on."""

    server_cpus: list[int]
    client_cpu: int

    def describe(self) -> str:
        return f"server on CPUs {format_cpus(self.server_cpus)}, clients on CPU {self.client_cpu}"


def layout(server_cpus: int | None = None) -> Layout:
    """The client on the last available CPU; the server on ``server_cpus`` of the others (by
    default all of them, at most 6), those that share no core with the client's first."""
    avail = available_cpus()
    if len(avail) == 1:
        return Layout([avail[0]], avail[0])
    client = avail[-1]
    others = [c for c in avail if c != client]
    apart = [c for c in others if c not in siblings(client)]
    pool = apart + [c for c in others if c not in apart]
    n = server_cpus if server_cpus is not None else min(MAX_SERVER_CPUS, len(apart) or 1)
    if not 1 <= n <= len(pool):
        raise SystemExit(
            f"error: --server-cpus {n}: this machine has {len(pool)} CPUs besides the client's"
        )
    return Layout(sorted(pool[:n]), client)


def cpus() -> tuple[int, int]:
    """(a server CPU, the client CPU) of the default layout with one server CPU."""
    lay = layout(1)
    return lay.server_cpus[0], lay.client_cpu


def add_server_arguments(parser: argparse.ArgumentParser, choices: Sequence[str]) -> None:
    parser.add_argument(
        "--server-cpus",
        type=int,
        help="CPUs for the server (default: every CPU but the client's, at most 6)",
    )
    if len(choices) > 1:
        parser.add_argument(
            "--server",
            choices=["auto", *choices],
            default="auto",
            help="auto: nginx when the server has one CPU, else the Go greeter",
        )


def check_timing(
    parser: argparse.ArgumentParser, args: argparse.Namespace, whole_seconds: bool = False
) -> None:
    """A one-line usage error for a ``--duration`` the peer cannot run (under 1 ms, or a
    fraction of a second where it takes whole seconds) or ``--rounds`` below 1."""
    d = args.duration
    if whole_seconds and (d < 1 or d != int(d)):
        parser.error(f"--duration {d:g}: whole seconds here (the peer takes no fraction)")
    if d < 0.001:
        parser.error(f"--duration {d:g}: 1 ms at least")
    if args.rounds < 1:
        parser.error(f"--rounds {args.rounds}: 1 at least")


def server_kind(args: argparse.Namespace, lay: Layout) -> str:
    chosen = getattr(args, "server", "go")
    if chosen != "auto":
        return str(chosen)
    return "nginx" if len(lay.server_cpus) == 1 else "go"


# ---- the server, and how busy it was ------------------------------------------------------------


@dataclass
class Served:
    """A running server: where it listens, its process, how many CPUs it can keep busy."""

    endpoint: Endpoint
    process: ServerProcess
    usable: int
    description: str
    cpus: list[int]


def greeter_command(flag: str, endpoint: Endpoint, certs: RunCertificates | None) -> list[str]:
    """The greeter serving only ``flag`` (``-grpc``, ``-http``, ``-https``, ``-canned`` or
    ``-canned-tls``) on ``endpoint``, with ``certs`` for TLS."""
    command = [
        str(build()),
        "-grpc",
        "",
        "-http",
        "",
        "-https",
        "",
        "-canned",
        "",
        "-canned-tls",
        "",
    ]
    command[command.index(flag) + 1] = f"127.0.0.1:{endpoint.port}"
    if certs is not None:
        command += ["-cert", certs.cert_file, "-key", certs.key_file]
    return command


@contextlib.contextmanager
def greeter(
    server_cpus: int | list[int], flag: str, certs: RunCertificates | None = None
) -> Iterator[Endpoint]:
    """The Go greeter serving ``flag`` (``-grpc``, ``-http``, or ``-https`` with ``certs``) on a
    free port, on ``server_cpus`` (``GOMAXPROCS`` as many)."""
    chosen = [server_cpus] if isinstance(server_cpus, int) else server_cpus
    endpoint = Endpoint("tcp", "127.0.0.1", free_port())
    env = {"GOMAXPROCS": str(len(chosen))}
    with ServerProcess(greeter_command(flag, endpoint, certs), endpoint, cpus=chosen, env=env):
        yield endpoint


GREETER_FLAGS = {
    "http": "-http",
    "h2c": "-http",
    "https": "-https",
    "h2": "-https",
    "grpc": "-grpc",
}


@contextlib.contextmanager
def serve(
    kind: str, mode: str, lay: Layout, certs: RunCertificates | None = None
) -> Iterator[Served]:
    """``kind`` (``nginx``, ``go`` or ``canned``) serving ``mode``: ``http`` (HTTP/1.1), ``https``,
    ``h2c`` (HTTP/2 with prior knowledge), ``h2`` (HTTP/2 over TLS, ALPN) or ``grpc`` (Go only)
    on the layout's server CPUs."""
    n = len(lay.server_cpus)
    endpoint = Endpoint("tcp", "127.0.0.1", free_port())
    where = format_cpus(lay.server_cpus)
    if kind == "nginx":
        if mode == "grpc" or (mode in ("https", "h2") and certs is None):
            raise ValueError(f"nginx cannot serve {mode} here")
        tls = (certs.cert_file, certs.key_file) if certs is not None else None
        with tempfile.TemporaryDirectory(prefix="rpcmeter-nginx-") as tmp:
            command = nginx.prepare(
                Path(tmp),
                tls=tls if mode in ("https", "h2") else None,
                http2=mode in ("h2c", "h2"),
                keepalive_requests=1 << 30,  # the benchmarks measure kept connections
                workers=n,
            )
            command = expand_command(command, endpoint)
            with ServerProcess(command, endpoint, cpus=lay.server_cpus) as process:
                what = f"nginx ({n} worker{'s' if n > 1 else ''}, CPUs {where})"
                yield Served(endpoint, process, n, what, lay.server_cpus)
        return
    env = {"GOMAXPROCS": str(n)}
    if kind == "canned":
        if mode == "grpc" or (mode in ("https", "h2") and certs is None):
            raise ValueError(f"the canned server cannot serve {mode} here")
        flag = "-canned-tls" if mode in ("https", "h2") else "-canned"
        command = greeter_command(flag, endpoint, certs)
        what = f"canned server (GOMAXPROCS {n}, CPUs {where})"
    else:
        command = greeter_command(GREETER_FLAGS[mode], endpoint, certs)
        what = f"Go greeter (GOMAXPROCS {n}, CPUs {where})"
    with ServerProcess(command, endpoint, cpus=lay.server_cpus, env=env) as process:
        yield Served(endpoint, process, n, what, lay.server_cpus)


def server_cpu_s(process: ServerProcess) -> float:
    """CPU seconds the server's processes used so far (cgroup accounting, else the tree)."""
    times = process.cpu_times()
    if times is not None:
        return times[0] + times[1]
    total = 0.0
    for p in process.tree():
        with contextlib.suppress(psutil.Error):
            total += sum(process_cpu(p))
    return total


class ServerLoad:
    """How busy the server was while a client ran: its CPU (and its CPUs' use by anything, from
    ``/proc/stat``) sampled every ``every`` seconds in a thread. :attr:`busy` is its own CPU use
    over the intervals it was working (at least a quarter as busy as in its busiest one: a
    client's start-up and connection set-up are left out), as a share of the CPUs it can use;
    :attr:`cpus_busy` how busy its CPUs were with anything over the same intervals (on a shared
    machine other work takes CPU time the server would have used)."""

    def __init__(self, served: Served, every: float = 0.2) -> None:
        self.served = served
        self.every = every
        self.samples: list[tuple[float, float, CpuTicks]] = []
        self.stopping = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _sample(self) -> None:
        now = time.monotonic()
        self.samples.append((now, server_cpu_s(self.served.process), machine_cpu()))

    def __enter__(self) -> ServerLoad:
        self._sample()
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stopping.set()
        self.thread.join()

    def _run(self) -> None:
        while not self.stopping.wait(self.every):
            self._sample()
        self._sample()

    def _active(self) -> list[tuple[int, float, float]]:
        """(index, seconds, server CPU seconds) of the intervals the server worked in."""
        spans = [
            (i, b[0] - a[0], b[1] - a[1])
            for i, (a, b) in enumerate(zip(self.samples, self.samples[1:], strict=False))
            if b[0] > a[0]
        ]
        peak = max((cpu / wall for _, wall, cpu in spans), default=0.0)
        return [span for span in spans if peak > 0 and span[2] / span[1] >= peak / 4]

    @property
    def busy(self) -> float | None:
        active = self._active()
        wall = sum(w for _, w, _ in active)
        return sum(c for _, _, c in active) / (wall * self.served.usable) if wall > 0 else None

    @property
    def cpus_busy(self) -> float | None:
        cpus = self.served.cpus
        busy = total = 0.0
        for i, _, _ in self._active():
            start, end = self.samples[i][2], self.samples[i + 1][2]
            for c in cpus:
                if c < len(start) and c < len(end):
                    busy += end[c][0] - start[c][0]
                    total += end[c][1] - start[c][1]
        return busy / total if total > 0 else None


# ---- the clients --------------------------------------------------------------------------------

# a floor client's context and blocking TLS handshake through memory BIOs, as rpcmeter's
# transport does them (floor scripts include it; it needs ``socket`` and ``ssl``): the context keeps
# OpenSSL's record buffers (rpcmeter.net.tls_buffers); the handshake returns the socket, the TLS object
# and its incoming and outgoing BIOs, the socket non-blocking once the handshake is done
FLOOR_TLS_HANDSHAKE = """
def floor_context(ca_file):
    from rpcmeter.net.tls_buffers import keep_record_buffers
    context = ssl.create_default_context(cafile=ca_file)
    assert keep_record_buffers(context)
    return context

def handshake(context, host, port):
    sock = socket.create_connection((host, port))
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    incoming, outgoing = ssl.MemoryBIO(), ssl.MemoryBIO()
    tls = context.wrap_bio(incoming, outgoing, server_hostname=host)
    while True:
        try:
            tls.do_handshake()
            break
        except ssl.SSLWantReadError:
            sock.sendall(outgoing.read())
            incoming.write(sock.recv(65536))
    sock.sendall(outgoing.read())
    sock.setblocking(False)
    return sock, tls, incoming, outgoing
"""


def run_python_floor(code: str, args: list[str], cpu: int, timeout_s: float) -> tuple[float, float]:
    """(calls/s, client CPU seconds per call) of a floor client: Python ``code`` run pinned to
    ``cpu`` with ``args``, printing its replies, seconds and CPU seconds (its own CPU over the
    interval it measured, as rpcmeter's is)."""
    out = pinned([sys.executable, "-c", code, *args], cpu, timeout_s)[0].split()
    replies, seconds, cpu_s = int(out[0]), float(out[1]), float(out[2])
    return replies / seconds, cpu_s / replies


def run_rpcmeter(
    driver: str,
    endpoint: Endpoint,
    options: dict[str, Any],
    conns: int,
    concurrency: int,
    duration: float,
    cpu: int,
    validate: bool = True,
    tls: ClientTls | None = None,
) -> tuple[float, float]:
    """(calls/s, client CPU seconds per call) of one rpcmeter client process (over ``tls``)."""
    out = run_closed_loop(
        LoadSpec(
            driver,
            DriverContext(
                endpoint,
                NoopParams(),
                options,
                validate=validate,
                threads=concurrency,
                connections=conns,
                tls=tls,
            ),
            clients=1,
            requests=None,
            duration_s=duration,
            warmup=10,
            timeout_s=duration + 60,
            client_cpus=[cpu],
        )
    )
    if out.failure or out.errors:
        raise RuntimeError(f"rpcmeter run failed: {out.failure or out.errors}")
    client = out.clients[0]
    return out.ok / out.wall_s, ((client.cpu_user_s or 0.0) + (client.cpu_sys_s or 0.0)) / out.ok


# ---- rounds and the summary ---------------------------------------------------------------------


@dataclass
class Runs:
    """Every run of every client: calls/s, client CPU seconds per call, the server's busy share
    and its CPUs' (with anything)."""

    by_client: dict[str, list[tuple[float, float, float | None, float | None]]] = field(
        default_factory=dict
    )

    def median(self, name: str) -> tuple[float, float, float | None, float | None]:
        runs = self.by_client[name]
        busy = [b for _, _, b, _ in runs if b is not None]
        cpus = [b for _, _, _, b in runs if b is not None]
        return (
            statistics.median(r for r, _, _, _ in runs),
            statistics.median(c for _, c, _, _ in runs),
            statistics.median(busy) if busy else None,
            statistics.median(cpus) if cpus else None,
        )

    def busiest(self, names: Sequence[str], which: int) -> float:
        return max((run[which] or 0.0 for n in names for run in self.by_client[n]), default=0.0)

    def server_bound(self, *names: str) -> bool:
        return self.busiest(names, 2) > SERVER_BOUND


def pct(busy: float | None) -> str:
    return "?" if busy is None else f"{busy * 100:.0f}%"


def rounds(clients: list[tuple[str, Run]], n: int, served: Served | None = None) -> Runs:
    """Run every client once per round, in turn, printing each run (and how busy the server
    was: ``served``)."""
    runs = Runs({name: [] for name, _ in clients})
    print(
        f"{'round':>5}  {'client':<16} {'calls/s':>10} {'CPU us/call':>12} {'server busy':>12}"
        f" {'its CPUs busy':>14}"
    )
    for r in range(1, n + 1):
        for name, run in clients:
            busy = cpus = None
            if served is not None:
                with ServerLoad(served) as load:
                    rate, cpu = run()
                busy, cpus = load.busy, load.cpus_busy
            else:
                rate, cpu = run()
            runs.by_client[name].append((rate, cpu, busy, cpus))
            mark = "  server-bound" if busy is not None and busy > SERVER_BOUND else ""
            print(
                f"{r:>5}  {name:<16} {rate:>10,.0f} {cpu * 1e6:>12.2f} {pct(busy):>12}"
                f" {pct(cpus):>14}{mark}",
                flush=True,
            )
    return runs


def summary(
    runs: Runs,
    ours: str,
    peer: str,
    floor: str,
    targets: tuple[float, float],
    info: dict[str, Any] | None = None,
    alike: tuple[str, ...] = (),
) -> dict[str, Any]:
    """Print the medians, the ratios (of the medians, and the median of each round's ratio) and
    the distance from the floor; none of them where the server was busier than 85 % in a run
    of rpcmeter or the peer. ``alike``: clients of ours that should cost what ours does (their
    ratio to ours per round). Ends with the ``SUMMARY`` line; returns what it holds."""
    print("\nmedians:")
    out: dict[str, Any] = {**(info or {}), "clients": {}}
    for name in runs.by_client:
        rate, cpu, busy, cpus = runs.median(name)
        out["clients"][name] = {"calls_s": round(rate), "cpu_us": round(cpu * 1e6, 3)}
        out["clients"][name]["server_busy"] = None if busy is None else round(busy, 3)
        out["clients"][name]["server_cpus_busy"] = None if cpus is None else round(cpus, 3)
        print(
            f"  {name:<16} {rate:>10,.0f} calls/s {cpu * 1e6:>7.2f} us CPU/call"
            f"   server {pct(busy)} busy, its CPUs {pct(cpus)}"
        )
    o, p, f = runs.median(ours), runs.median(peer), runs.median(floor)
    out["server_bound"] = bound = runs.server_bound(ours, peer)
    if bound:
        busiest = runs.busiest((ours, peer), 2)
        print(f"server-bound: ratio not meaningful (the server was {busiest:.0%} busy in a run)")
    else:
        crowded = runs.busiest((ours, peer), 3)
        if crowded > SERVER_BOUND:
            print(
                f"note: the server's CPUs were up to {crowded:.0%} busy with other work too: the "
                "server may have set the pace; compare on a quiet machine"
            )
        pairs = list(zip(runs.by_client[ours], runs.by_client[peer], strict=True))
        ratios = {
            "calls_s": o[0] / p[0],
            "cpu": o[1] / p[1],
            "calls_s_per_round": statistics.median(a[0] / b[0] for a, b in pairs),
            "cpu_per_round": statistics.median(a[1] / b[1] for a, b in pairs),
        }
        out["ratios"] = {k: round(v, 3) for k, v in ratios.items()}
        out["targets"] = {"calls_s": targets[0], "cpu": targets[1]}
        print(
            f"{ours} / {peer} calls/s:        {ratios['calls_s']:.2f}  (target >= {targets[0]:g})"
        )
        print(f"{ours} / {peer} CPU per call:   {ratios['cpu']:.2f}  (target <= {targets[1]:g})")
        print(
            f"per round, median: {ours} / {peer} calls/s {ratios['calls_s_per_round']:.2f}, "
            f"CPU {ratios['cpu_per_round']:.2f}"
        )
    above = (o[1] - f[1]) * 1e6
    out["above_floor_us"] = round(above, 3)
    print(f"{ours} - floor CPU per call: {above:.2f} us")
    for name in alike:  # clients of ours that should cost what ours does
        pairs = list(zip(runs.by_client[name], runs.by_client[ours], strict=True))
        rate = statistics.median(a[0] / b[0] for a, b in pairs)
        cpu = statistics.median(a[1] / b[1] for a, b in pairs)
        out.setdefault("alike", {})[name] = {"calls_s": round(rate, 3), "cpu": round(cpu, 3)}
        print(
            f"{name} / {ours}, per round, median: calls/s {rate:.3f}, CPU per call {cpu:.3f}"
            "  (target: within 3 %)"
        )
    load = psutil.getloadavg()
    out["load_average"] = [round(x, 2) for x in load]
    print(f"load average: {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}")
    print("SUMMARY " + json.dumps(out, sort_keys=True))
    return out


def against(
    kind: str,
    mode: str,
    lay: Layout,
    what: str,
    clients: Callable[[Endpoint, int], list[tuple[str, Run]]],
    n_rounds: int,
    peer: str,
    targets: tuple[float, float],
    certs: RunCertificates | None = None,
    alike: tuple[str, ...] = (),
) -> int:
    """Start the server (``kind`` serving ``mode``), run ``clients(endpoint, client_cpu)`` for
    ``n_rounds`` rounds (``what``: connections, duration...), print the summary of rpcmeter
    against ``peer`` and the floor (and of each of ``alike`` against rpcmeter); the exit
    status."""
    try:
        with serve(kind, mode, lay, certs) as served:
            print(f"{served.description}, clients on CPU {lay.client_cpu}; {what}")
            runs = rounds(clients(served.endpoint, lay.client_cpu), n_rounds, served)
    except BuildError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    info = {
        "mode": mode,
        "server": served.description,
        "server_cpus": lay.server_cpus,
        "client_cpu": lay.client_cpu,
        "peer": peer,
        "what": what,
    }
    summary(runs, "rpcmeter", peer, "floor", targets, info, alike)
    return 0


def need(*tools: str) -> str | None:
    """The first of ``tools`` not on PATH, if any."""
    return next((t for t in tools if shutil.which(t) is None), None)
