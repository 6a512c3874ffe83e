"""rpcmeter's HTTP/2 (``options.http = "2"``) against h2load, on the same server, in one run.

The server (:mod:`versus`: nginx with ``http2`` on a machine with one CPU to spare, else the Go
greeter's net/http h2c port, ``benchmarks/greeter``; ``--server``) runs on the server CPUs
(``--server-cpus``); h2load (nghttp2, ``-c CONNECTIONS -m STREAMS``), rpcmeter's HTTP driver over
HTTP/2 (one client process, ``connections`` x ``streams`` concurrent requests, every status read)
and the floor client (:mod:`h2bench`) run in turn pinned to the client CPU, for the same duration,
alternating for several rounds. It prints requests/s, client CPU per request (h2load's from
``getrusage(RUSAGE_CHILDREN)``, rpcmeter's as its runner measures it) and how busy the server
was in each run; then the ratios (targets: rpcmeter / h2load >= 1 for requests/s, <= 1 for CPU
per request), unless the server was busier than 85 % (``server-bound``), and rpcmeter's CPU per
request above the floor's.

With ``--tls`` the three speak HTTP/2 over TLS (ALPN ``h2``, TLS 1.3) to the server's HTTPS
port, its certificate made for the run with ``trustme``; rpcmeter and the floor verify it, h2load
verifies no certificate. Connections are opened before the measured interval, so the figures
are the per-request cost of TLS records.

    python benchmarks/vs_h2load.py [--connections 5] [--streams 10] [--duration 5] [--rounds 3]
                                   [--tls] [--server-cpus N] [--server auto|nginx|go] [--path /]

h2load: Debian package ``nghttp2-client``.
"""

from __future__ import annotations

import argparse
import re
import sys
from functools import partial

from h2bench import run_floor
from versus import (
    Run,
    add_server_arguments,
    against,
    check_timing,
    layout,
    need,
    pinned,
    run_rpcmeter,
    server_kind,
)

from rpcmeter.net.endpoints import Endpoint
from rpcmeter.net.tls import ClientTls, RunCertificates, TlsSettings
from rpcmeter.servers import nginx


def run_h2load(
    endpoint: Endpoint,
    conns: int,
    streams: int,
    duration: float,
    cpu: int,
    tls: bool = False,
    path: str = "/",
) -> tuple[float, float]:
    """(requests/s, client CPU seconds per request) of one h2load run (every request a 2xx)."""
    out, cpu_s = pinned(
        [
            "h2load",
            "-c",
            str(conns),
            "-m",
            str(streams),
            "-D",
            f"{duration * 1000:.0f}ms",  # h2load takes no fraction of a second
            f"{'https' if tls else 'http'}://127.0.0.1:{endpoint.port}{path}",
        ],
        cpu,
        duration + 60,
    )
    rate = re.search(r"finished in [\d.]+m?s, ([\d.]+) req/s", out)
    done = re.search(r"requests: \d+ total, \d+ started, (\d+) done, (\d+) succeeded", out)
    codes = re.search(r"status codes: (\d+) 2xx", out)
    if rate is None or done is None or codes is None:
        raise RuntimeError(f"cannot read h2load's output:\n{out}")
    if int(codes.group(1)) < int(done.group(1)) - conns * streams:
        raise RuntimeError(f"h2load: not every reply was 2xx:\n{out}")
    return float(rate.group(1)), cpu_s / int(done.group(1))


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--connections", type=int, default=5)
    parser.add_argument("--streams", type=int, default=10, help="concurrent per connection")
    parser.add_argument("--duration", type=float, default=5.0)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--path", default="/")
    parser.add_argument("--tls", action="store_true", help="HTTP/2 over TLS (h2 by ALPN)")
    add_server_arguments(parser, ["nginx", "go", "canned"])
    args = parser.parse_args()
    check_timing(parser, args)
    if need("h2load"):
        print("needs h2load (Debian: apt-get install nghttp2-client)", file=sys.stderr)
        return 2
    lay = layout(args.server_cpus)
    kind = server_kind(args, lay)
    if kind == "nginx" and nginx.executable() is None:
        print("needs nginx (Debian: apt-get install nginx-light)", file=sys.stderr)
        return 2
    c, m, d, path = args.connections, args.streams, args.duration, args.path
    options = {"http": "2", "path": path, "method": "GET"}
    certs = RunCertificates() if args.tls else None
    tls = ClientTls(TlsSettings(), certs.ca_file, None) if certs else None
    ca_file = certs.ca_file if certs else ""

    def clients(ep: Endpoint, cpu: int) -> list[tuple[str, Run]]:
        ours = partial(run_rpcmeter, "http", ep, options, c, c * m, d, cpu, False, tls)
        return [
            ("h2load", partial(run_h2load, ep, c, m, d, cpu, args.tls, path)),
            ("rpcmeter", ours),
            ("floor", partial(run_floor, ep, "http", path, "", c, m, d, cpu, ca_file)),
        ]

    what = f"{c} connections x {m} streams, {d:g} s per run, GET {path}"
    mode = "h2" if certs else "h2c"
    try:
        return against(kind, mode, lay, what, clients, args.rounds, "h2load", (1.0, 1.0), certs)
    finally:
        if certs is not None:
            certs.close()


if __name__ == "__main__":
    sys.exit(main())
