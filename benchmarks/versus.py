"""What the benchmarks against other clients share (``vs_wrk.py``, ``vs_ghz.py``,
``vs_h2load.py``): a peer client run pinned to a CPU with its CPU time measured, rpcmeter's client
run the same way, rounds of every client in turn, and the summary of medians and ratios."""

from __future__ import annotations

import resource
import statistics
import subprocess
import sys
from collections.abc import Callable
from typing import Any

from rpcmeter.drivers.base import DriverContext
from rpcmeter.endpoints import Endpoint
from rpcmeter.placement import available_cpus
from rpcmeter.runners.closed_loop import run_closed_loop
from rpcmeter.runners.spec import LoadSpec
from rpcmeter.tls import ClientTls
from rpcmeter.workloads import NoopParams

Run = Callable[[], tuple[float, float]]  # (calls/s, client CPU seconds per call)


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


# a floor client's blocking TLS handshake through memory BIOs, as rpcmeter's transport does it
# (floor scripts include it; it needs ``socket`` and ``ssl``): the socket, the TLS object and its
# incoming and outgoing BIOs, the socket non-blocking once the handshake is done
FLOOR_TLS_HANDSHAKE = """
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


def cpus() -> tuple[int, int]:
    """(server CPU, client CPU)."""
    avail = available_cpus()
    return (avail[0], avail[1]) if len(avail) > 1 else (avail[0], avail[0])


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


def rounds(clients: list[tuple[str, Run]], n: int) -> dict[str, list[tuple[float, float]]]:
    """Run every client once per round, in turn, printing each run."""
    runs: dict[str, list[tuple[float, float]]] = {name: [] for name, _ in clients}
    print(f"{'round':>5}  {'client':<16} {'calls/s':>10} {'CPU us/call':>12}")
    for r in range(1, n + 1):
        for name, run in clients:
            rate, cpu = run()
            runs[name].append((rate, cpu))
            print(f"{r:>5}  {name:<16} {rate:>10,.0f} {cpu * 1e6:>12.2f}", flush=True)
    return runs


def summary(
    runs: dict[str, list[tuple[float, float]]],
    ours: str,
    peer: str,
    floor: str,
    targets: tuple[float, float],
    alike: tuple[str, ...] = (),
) -> None:
    """Medians, ratios (of the medians, and the median of each round's ratio), the floor."""
    med = {
        name: (statistics.median(r for r, _ in v), statistics.median(c for _, c in v))
        for name, v in runs.items()
    }
    print("\nmedians:")
    for name, (rate, cpu) in med.items():
        print(f"  {name:<16} {rate:>10,.0f} calls/s {cpu * 1e6:>7.2f} us CPU/call")
    o, p, f = med[ours], med[peer], med[floor]
    print(f"{ours} / {peer} calls/s:        {o[0] / p[0]:.2f}  (target >= {targets[0]:g})")
    print(f"{ours} / {peer} CPU per call:   {o[1] / p[1]:.2f}  (target <= {targets[1]:g})")
    pairs = list(zip(runs[ours], runs[peer], strict=True))
    print(
        f"per round, median: {ours} / {peer} calls/s "
        f"{statistics.median(a[0] / b[0] for a, b in pairs):.2f}, "
        f"CPU {statistics.median(a[1] / b[1] for a, b in pairs):.2f}"
    )
    print(f"{ours} - floor CPU per call: {(o[1] - f[1]) * 1e6:.2f} us  (target <= 1.5)")
    for name in alike:  # clients of ours that should cost what ours does
        pairs = list(zip(runs[name], runs[ours], strict=True))
        print(
            f"{name} / {ours}, per round, median: calls/s "
            f"{statistics.median(a[0] / b[0] for a, b in pairs):.3f}, CPU per call "
            f"{statistics.median(a[1] / b[1] for a, b in pairs):.3f}  (target: within 3 %)"
        )
