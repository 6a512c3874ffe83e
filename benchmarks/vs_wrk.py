"""rpcmeter's HTTP driver against wrk, on the same server, in one run.

The server (:mod:`versus`: nginx, the configuration of :mod:`rpcmeter.servers.nginx` with one
worker per server CPU, on a machine with one CPU to spare; else the Go greeter's net/http port,
``benchmarks/greeter``; ``--server``) runs on the server CPUs (``--server-cpus``); wrk (``-t1``)
and rpcmeter's HTTP driver (one client process) run in turn, pinned to the client CPU, with the
same number of keep-alive connections, for the same duration, alternating for several rounds.
For each client it reports requests/s, client CPU time per request (user + system of the client
process: wrk's from ``getrusage(RUSAGE_CHILDREN)``, rpcmeter's as the runner measures it, from
the start gate to the end) and how busy the server was; then the ratios of the medians
(targets: rpcmeter / wrk >= 1 for requests/s, <= 1 for CPU per request) and the medians of the
rounds' own ratios (each round runs the clients back to back, so its ratio is the steadier one),
unless the server was busier than 85 % in a run (``server-bound``).

A third client shows the floor of any Python client on uvloop: a bare protocol per connection
that takes every read for one whole reply and writes the next request, with no parsing, no
clock and no bookkeeping (not a usable load generator: it only counts); over TLS it reads and
writes through OpenSSL's memory BIOs, one ``recv`` and one ``send`` a request, the mechanism of
rpcmeter's TLS transport with nothing of its own around it. rpcmeter's distance
from this floor is the cost of its own work per request; the floor's distance from wrk is the
event loop's and the kernel's.

With ``--tls`` all three speak HTTPS (TLS 1.3, a certificate made for the run with ``trustme``;
rpcmeter and the floor verify it, wrk verifies no certificate); the handshakes happen before the
measured interval (keep-alive), so the figures are the per-request cost of TLS records on each
side.

    python benchmarks/vs_wrk.py [--connections 50] [--duration 5] [--rounds 3] [--path /noop]
                                [--tls] [--server-cpus N] [--server auto|nginx|go]
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
from functools import partial

from versus import (
    FLOOR_TLS_HANDSHAKE,
    Run,
    add_server_arguments,
    against,
    check_timing,
    children_cpu_s,
    layout,
    need,
    run_python_floor,
    run_rpcmeter,
    server_kind,
)

from rpcmeter.net.endpoints import Endpoint
from rpcmeter.net.tls import ClientTls, RunCertificates, TlsSettings
from rpcmeter.servers import nginx


def run_wrk(url: str, connections: int, duration: float, cpu: int) -> tuple[float, float]:
    """(requests/s, client CPU seconds per request) of one wrk run."""
    cpu0 = children_cpu_s()
    out = subprocess.run(
        ["taskset", "-c", str(cpu), "wrk", "-t1", f"-c{connections}", f"-d{duration:g}s", url],
        capture_output=True,
        text=True,
        check=True,
        timeout=duration + 60,
    ).stdout
    cpu_s = children_cpu_s() - cpu0
    m = re.search(r"(\d+) requests in", out)
    rate = re.search(r"Requests/sec:\s*([\d.]+)", out)
    if m is None or rate is None:
        raise RuntimeError(f"cannot read wrk's output:\n{out}")
    return float(rate.group(1)), cpu_s / int(m.group(1))


FLOOR = (
    """
import asyncio, os, resource, socket, ssl, sys, time, uvloop
host, port, path, n_conns, duration, ca_file = sys.argv[1:7]
request = f"GET {path} HTTP/1.1\\r\\nHost: {host}:{port}\\r\\n\\r\\n".encode()
replies = 0

class Floor(asyncio.Protocol):
    def connection_made(self, transport):
        self.write = transport.write

    def data_received(self, data):
        global replies
        replies += 1
        self.write(request)

def tls_reader(sock, tls, incoming, outgoing):  # over TLS: memory BIOs, as rpcmeter's
    fd, os_read, os_write = sock.fileno(), os.read, os.write  # as rpcmeter's: no arg parsing
    feed, read, encrypt, encrypted = incoming.write, tls._sslobj.read, tls._sslobj.write, outgoing.read
    size = 65536
    def readable():
        global replies
        nonlocal size
        data = os_read(fd, size)
        feed(data)
        n = len(data)
        size = 479 if n < 479 else 65536  # a short reply: the next read small, as rpcmeter's
        try:
            read(n)  # one record's plaintext is shorter than the record
        except ssl.SSLWantReadError:
            return
        replies += 1
        encrypt(request)
        os_write(fd, encrypted())
    def write(data):
        encrypt(data)
        os_write(fd, encrypted())
    return readable, write

"""
    + FLOOR_TLS_HANDSHAKE
    + """
async def main():
    loop = asyncio.get_running_loop()
    if ca_file:
        context = floor_context(ca_file)
        writes, conns = [], []  # (the sockets held: the floor reads their descriptors)
        for _ in range(int(n_conns)):
            conn = handshake(context, host, int(port))
            conns.append(conn)
            readable, write = tls_reader(*conn)
            loop.add_reader(conn[0].fileno(), readable)
            writes.append(write)
    else:
        conns = [(await loop.create_connection(Floor, host, int(port)))[1]
                 for _ in range(int(n_conns))]
        writes = [c.write for c in conns]
    start, before, cpu = time.perf_counter(), replies, resource.getrusage(resource.RUSAGE_SELF)
    for write in writes:
        write(request)
    await asyncio.sleep(float(duration))
    seconds, end = time.perf_counter() - start, resource.getrusage(resource.RUSAGE_SELF)
    cpu_s = end.ru_utime - cpu.ru_utime + end.ru_stime - cpu.ru_stime
    print(replies - before, seconds, cpu_s)

uvloop.run(main())
"""
)


def run_floor(
    host: str,
    port: int,
    path: str,
    connections: int,
    duration: float,
    cpu: int,
    ca_file: str | None = None,
) -> tuple[float, float]:
    """(requests/s, client CPU seconds per request) of the bare uvloop protocol (its CPU
    measured by itself over the measured interval, as rpcmeter's is); over TLS trusting
    ``ca_file`` when given."""
    args = [host, str(port), path, str(connections), str(duration), ca_file or ""]
    return run_python_floor(FLOOR, args, cpu, duration + 60)


def rpcmeter_http(
    endpoint: Endpoint,
    path: str,
    connections: int,
    duration: float,
    cpu: int,
    tls: ClientTls | None = None,
) -> tuple[float, float]:
    """(requests/s, client CPU seconds per request) of one rpcmeter run (over ``tls``)."""
    options = {"path": path, "method": "GET"}
    return run_rpcmeter(
        "http", endpoint, options, connections, connections, duration, cpu, False, tls
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--connections", type=int, default=50)
    parser.add_argument("--duration", type=float, default=5.0)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--path", default="/noop")
    parser.add_argument("--tls", action="store_true", help="HTTPS (a certificate made for the run)")
    add_server_arguments(parser, ["nginx", "go", "canned"])
    args = parser.parse_args()
    check_timing(parser, args, whole_seconds=True)  # wrk takes no fraction of a second
    if need("wrk"):
        print("needs wrk (Debian: apt-get install wrk)", file=sys.stderr)
        return 2
    lay = layout(args.server_cpus)
    kind = server_kind(args, lay)
    if kind == "nginx" and nginx.executable() is None:
        print("needs nginx (Debian: apt-get install nginx-light)", file=sys.stderr)
        return 2
    certs = RunCertificates() if args.tls else None
    tls = ClientTls(TlsSettings(), certs.ca_file, None) if certs else None
    ca_file = certs.ca_file if certs else None
    c, d, path = args.connections, args.duration, args.path

    def clients(ep: Endpoint, cpu: int) -> list[tuple[str, Run]]:
        url = f"{'https' if certs else 'http'}://127.0.0.1:{ep.port}{path}"
        port = ep.port or 0
        return [
            ("wrk", partial(run_wrk, url, c, d, cpu)),
            ("rpcmeter", partial(rpcmeter_http, ep, path, c, d, cpu, tls)),
            ("floor", partial(run_floor, "127.0.0.1", port, path, c, d, cpu, ca_file)),
        ]

    what = f"{c} connections, {d:g} s per run, GET {path}{' over TLS' if certs else ''}"
    mode = "https" if certs else "http"
    try:
        return against(kind, mode, lay, what, clients, args.rounds, "wrk", (1.0, 1.0), certs)
    finally:
        if certs is not None:
            certs.close()


if __name__ == "__main__":
    sys.exit(main())
