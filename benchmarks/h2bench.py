"""What ``vs_ghz.py`` and ``vs_h2load.py`` share: the Go greeter server pinned to one CPU, the
clients pinned to another and run in turn for several rounds, the floor client, the summary.

The floor is the cheapest Python HTTP/2 client on uvloop: per connection, requests pre-encoded
once (stream id patched per request), one write per reply, replies found by walking frame
headers with ``int.from_bytes`` (a reply ends at a frame carrying END_STREAM), no HPACK decoding,
no status check, no clock and no bookkeeping. It is not a usable load generator; rpcmeter's
distance from it is the cost of its own work per call.
"""

from __future__ import annotations

import resource
import statistics
import subprocess
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from greeter_server import build

from rpcmeter.drivers.base import DriverContext
from rpcmeter.endpoints import Endpoint
from rpcmeter.placement import available_cpus
from rpcmeter.runners.closed_loop import run_closed_loop
from rpcmeter.runners.spec import LoadSpec
from rpcmeter.servers.process import ServerProcess, free_port
from rpcmeter.workloads import NoopParams

Run = Callable[[], tuple[float, float]]  # (calls/s, client CPU seconds per call)


def children_cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def cpus() -> tuple[int, int]:
    """(server CPU, client CPU)."""
    avail = available_cpus()
    return (avail[0], avail[1]) if len(avail) > 1 else (avail[0], avail[0])


@contextmanager
def greeter(server_cpu: int, flag: str) -> Iterator[Endpoint]:
    """The Go greeter serving ``flag`` (``-grpc`` or ``-http``) on a free port."""
    endpoint = Endpoint("tcp", "127.0.0.1", free_port())
    command = [str(build()), "-grpc", "", "-http", ""]
    command[command.index(flag) + 1] = f"127.0.0.1:{endpoint.port}"
    with ServerProcess(command, endpoint, cpus=[server_cpu]):
        yield endpoint


FLOOR = """
import asyncio, resource, sys, time, uvloop
host, port, n_conns, streams, duration, mode = sys.argv[1:7]
path = sys.argv[7].encode()
from hpack import Encoder
def frame(kind, flags, sid, payload):
    return len(payload).to_bytes(3, "big") + bytes([kind, flags]) + sid.to_bytes(4, "big") + payload
headers = [(b":method", b"POST" if mode == "grpc" else b"GET"), (b":scheme", b"http"),
           (b":path", path), (b":authority", f"{host}:{port}".encode())]
if mode == "grpc":
    headers += [(b"content-type", b"application/grpc"), (b"te", b"trailers")]
    body = bytes.fromhex(sys.argv[8])
    block = Encoder().encode(headers)
    head = frame(1, 4, 0, block)
    parts = [head[:5], head[9:] + frame(0, 1, 0, b"\\0" + len(body).to_bytes(4, "big") + body)[:5],
             b"\\0" + len(body).to_bytes(4, "big") + body]
else:
    head = frame(1, 5, 0, Encoder().encode(headers))
    parts = [head[:5], head[9:]]
preface = (b"PRI * HTTP/2.0\\r\\n\\r\\nSM\\r\\n\\r\\n" + frame(4, 0, 0, (4).to_bytes(2, "big")
           + (1 << 30).to_bytes(4, "big")) + frame(8, 0, 0, (1 << 30).to_bytes(4, "big")))
replies = 0

class Floor(asyncio.Protocol):
    def connection_made(self, transport):
        self.write = transport.write
        self.sid = 1
        self.buf = b""
        self.write(preface)

    def send(self, n):
        out = []
        sid = self.sid
        for _ in range(n):
            out.append(sid.to_bytes(4, "big").join(parts))
            sid += 2
        self.sid = sid
        self.write(b"".join(out))

    def data_received(self, data):
        global replies
        if self.buf:
            data = self.buf + data
        pos, n, ended, extra = 0, len(data), 0, b""
        while n - pos >= 9:
            end = pos + 9 + int.from_bytes(data[pos:pos + 3])
            if end > n:
                break
            kind, flags = data[pos + 3], data[pos + 4]
            if kind == 4 and not flags & 1:
                extra += frame(4, 1, 0, b"")
            elif kind == 6 and not flags & 1:
                extra += frame(6, 1, 0, data[pos + 9:end])
            elif flags & 1 and kind < 2:
                ended += 1
            pos = end
        self.buf = data[pos:]
        if extra:
            self.write(extra)
        if ended:
            replies += ended
            self.send(ended)

async def main():
    loop = asyncio.get_running_loop()
    conns = [(await loop.create_connection(Floor, host, int(port)))[1] for _ in range(int(n_conns))]
    await asyncio.sleep(0.2)
    start, before, cpu = time.perf_counter(), replies, resource.getrusage(resource.RUSAGE_SELF)
    for c in conns:
        c.send(int(streams))
    await asyncio.sleep(float(duration))
    seconds, end = time.perf_counter() - start, resource.getrusage(resource.RUSAGE_SELF)
    cpu_s = end.ru_utime - cpu.ru_utime + end.ru_stime - cpu.ru_stime
    print(replies - before, seconds, cpu_s)

uvloop.run(main())
"""


def run_floor(
    endpoint: Endpoint, mode: str, path: str, body_hex: str, conns: int, streams: int,
    duration: float, cpu: int,
) -> tuple[float, float]:
    """(calls/s, client CPU seconds per call) of the bare floor client (its own CPU over the
    measured interval, as rpcmeter's is)."""
    args = [str(endpoint.host), str(endpoint.port), str(conns), str(streams), str(duration)]
    out = subprocess.run(
        ["taskset", "-c", str(cpu), sys.executable, "-c", FLOOR, *args, mode, path, body_hex],
        capture_output=True,
        text=True,
        check=True,
        timeout=duration + 60,
    ).stdout.split()
    replies, seconds, cpu_s = int(out[0]), float(out[1]), float(out[2])
    return replies / seconds, cpu_s / replies


def run_rpcmeter(
    driver: str, endpoint: Endpoint, options: dict[str, Any], conns: int, concurrency: int,
    duration: float, cpu: int, validate: bool = True,
) -> tuple[float, float]:
    """(calls/s, client CPU seconds per call) of one rpcmeter client process."""
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
    return out.ok / out.wall_s, (client["cpu_user_s"] + client["cpu_sys_s"]) / out.ok


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
    runs: dict[str, list[tuple[float, float]]], ours: str, peer: str, floor: str,
    targets: tuple[float, float],
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
