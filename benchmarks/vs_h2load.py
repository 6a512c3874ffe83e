"""rpcmeter's HTTP/2 (``options.http = "2"``) against h2load, on the same Go server, in one run.

The Go greeter server's net/http h2c port (``benchmarks/greeter``) runs pinned to one CPU; h2load
(nghttp2, ``-c CONNECTIONS -m STREAMS``), rpcmeter's HTTP driver over HTTP/2 (one client
process, ``connections`` x ``streams`` concurrent requests, every status read) and the floor
client (:mod:`h2bench`) run in turn pinned to another CPU, for the same duration, alternating
for several rounds. It prints requests/s and client CPU per request (h2load's from
``getrusage(RUSAGE_CHILDREN)``, rpcmeter's as its runner measures it), the ratios (targets:
rpcmeter / h2load >= 0.95 for requests/s, <= 1.1 for CPU per request) and rpcmeter's CPU per
request above the floor's.

With ``--tls`` the three speak HTTP/2 over TLS (ALPN ``h2``, TLS 1.3) to the greeter's HTTPS
port, its certificate made for the run with ``trustme`` (in a temporary directory, passed on its
command line); rpcmeter and the floor verify it, h2load verifies no certificate. Connections are
opened before the measured interval, so the figures are the per-request cost of TLS records.

    python benchmarks/vs_h2load.py [--connections 5] [--streams 10] [--duration 5] [--rounds 3]
                                   [--tls]

h2load: Debian package ``nghttp2-client``.
"""

from __future__ import annotations

import argparse
import re
import shutil
import sys
from functools import partial

from h2bench import against_greeter, run_floor
from versus import Run, pinned, run_rpcmeter

from rpcmeter.endpoints import Endpoint
from rpcmeter.tls import ClientTls, RunCertificates, TlsSettings


def run_h2load(
    endpoint: Endpoint, conns: int, streams: int, duration: float, cpu: int, tls: bool = False
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
            f"{duration:g}",
            f"{'https' if tls else 'http'}://127.0.0.1:{endpoint.port}/",
        ],
        cpu,
        duration + 60,
    )
    rate = re.search(r"finished in [\d.]+s, ([\d.]+) req/s", out)
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
    parser.add_argument("--tls", action="store_true", help="HTTP/2 over TLS (h2 by ALPN)")
    args = parser.parse_args()
    if shutil.which("h2load") is None:
        print("needs h2load (Debian: apt-get install nghttp2-client)", file=sys.stderr)
        return 2
    c, m, d = args.connections, args.streams, args.duration
    options = {"http": "2", "path": "/", "method": "GET"}
    certs = RunCertificates() if args.tls else None
    tls = ClientTls(TlsSettings(), certs.ca_file, None) if certs else None
    ca_file = certs.ca_file if certs else ""

    def clients(ep: Endpoint, cpu: int) -> list[tuple[str, Run]]:
        ours = partial(run_rpcmeter, "http", ep, options, c, c * m, d, cpu, False, tls)
        return [
            ("h2load", partial(run_h2load, ep, c, m, d, cpu, args.tls)),
            ("rpcmeter", ours),
            ("floor", partial(run_floor, ep, "http", "/", "", c, m, d, cpu, ca_file)),
        ]

    what = f"{c} connections x {m} streams, {d:g} s per run, GET /"
    flag, server = ("-https", "Go net/http over TLS") if certs else ("-http", "Go net/http h2c")
    try:
        return against_greeter(
            flag, server, what, clients, args.rounds, "h2load", (0.95, 1.1), certs
        )
    finally:
        if certs is not None:
            certs.close()


if __name__ == "__main__":
    sys.exit(main())
