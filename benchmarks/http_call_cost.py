"""rpcmeter's whole per-request cost over HTTP/1.1 (or HTTP/2, ``--http 2``) in instructions, one
request in flight: the HTTP driver's closed loop (the loop, the recorder, the driver, the
connection, uvloop) and, over HTTP/1.1, the floor's bare uvloop protocol that reads a reply and
writes the next request, each in a client process of its own under valgrind's callgrind, against
nginx (one worker) on one keep-alive connection.

Each client runs ``--few`` requests, then ``--many``; the difference of the two runs'
instruction counts divided by the difference of their requests is the count per request,
without the start-up and the connection (exact and steady, where CPU time on a shared machine is
not). With ``--tls``, HTTPS/1.1: rpcmeter's client over its TLS transport, against the floor
of ``tls_call_cost.py`` (one ``read`` of the socket, one decrypted record, one encrypted request
and one ``write`` a reply), nginx serving HTTPS with a certificate made for the run; with ``--http 2
--tls``, HTTP/2 over TLS (h2 by ALPN; rpcmeter and h2load, no floor). Where h2load is
installed, it is counted too, the same way (``-c 1 -m 1``, ``--h1`` over HTTP/1.1): a C client's
count beside rpcmeter's. Callgrind counts user space only: the kernel's work for each client's
system calls (a ``recv`` and a ``send`` a request for each) is not in these figures, as it is in
the CPU time the ``vs_*`` benchmarks compare. With ``--trace``, no
valgrind: rpcmeter's client runs once in this process with Python's opcode tracing, and prints
the bytecodes each of its functions runs a request::

    python benchmarks/http_call_cost.py [--http 1|2] [--tls] [--few 1000] [--many 11000] [--trace]

Needs valgrind (not with ``--trace``) and nginx; the callgrind runs take a minute or two.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import os
import shutil
import sys
from types import FrameType
from typing import Any

from tls_call_cost import Job, floor_connection
from versus import callgrind_command, callgrind_instructions, layout, serve

from rpcmeter.drivers import driver_class
from rpcmeter.drivers.base import DriverContext, EventDriver
from rpcmeter.net.endpoints import Endpoint
from rpcmeter.net.tls import ClientTls, RunCertificates, TlsSettings, client_context
from rpcmeter.runners.event_loop import Phase, closed_loop
from rpcmeter.runners.recorder import Recorder
from rpcmeter.runners.recording import ThreadStats
from rpcmeter.runners.spec import NO_END
from rpcmeter.suite.workloads import NoopParams

Tracer = Any  # sys.settrace's callback


async def rpcmeter_loop(
    port: int, http: str, n: int, ca_file: str = "", tracer: Tracer = None
) -> None:
    """``n`` requests of rpcmeter's HTTP driver on one connection, one in flight (after 100
    untraced ones, when ``tracer`` is given); over TLS trusting ``ca_file`` when given."""
    options = {"path": "/", "method": "GET"}
    if http == "2":
        options["http"] = "2"
    ctx = DriverContext(
        Endpoint("tcp", "127.0.0.1", port),
        NoopParams(),
        options,
        validate=False,
        threads=1,
        connections=1,
        tls=ClientTls(TlsSettings(), ca_file, None) if ca_file else None,
    )
    driver = driver_class("http", options)(ctx)
    assert isinstance(driver, EventDriver)
    await driver.open()
    stats = ThreadStats()
    rec = Recorder(stats, False)
    loop = asyncio.get_running_loop()
    try:
        for count, traced in ((100, False), (n, True)) if tracer is not None else ((n, False),):
            phase = Phase(loop, 1)
            if traced:
                sys.settrace(tracer)
            closed_loop(driver.channel(0), rec, phase, count, NO_END, ())
            await phase.finished
            sys.settrace(None)
    finally:
        driver.close()
    rec.fold()
    if stats.errors or stats.ok != n + (100 if tracer is not None else 0):
        raise RuntimeError(f"the client went wrong: {dict(stats.errors)}, {stats.ok} requests")


async def floor_loop(port: int, n: int, ca_file: str = "") -> None:
    """The floor: a protocol that counts replies and writes the next request (over TLS, the
    bare reads and writes through memory BIOs of ``tls_call_cost.py``)."""
    request = f"GET / HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n\r\n".encode()
    loop = asyncio.get_running_loop()
    done: asyncio.Future[None] = loop.create_future()
    if ca_file:
        context = client_context(ClientTls(TlsSettings(), ca_file, None), ["http/1.1"])
        sock = floor_connection(Job(loop, port, context, request, n, lambda: done.set_result(None)))
        await done
        sock.close()
        return

    class Floor(asyncio.Protocol):
        left = n

        def connection_made(self, transport: asyncio.BaseTransport) -> None:
            self.write = transport.write  # type: ignore[attr-defined]
            self.write(request)

        def data_received(self, data: bytes) -> None:
            self.left -= 1
            if self.left == 0:
                done.set_result(None)
                return
            self.write(request)

    transport, _ = await loop.create_connection(Floor, "127.0.0.1", port)
    await done
    transport.close()


def client(kind: str, port: int, http: str, n: int, ca_file: str) -> None:
    import uvloop

    if kind == "floor":
        uvloop.run(floor_loop(port, n, ca_file))
    else:
        uvloop.run(rpcmeter_loop(port, http, n, ca_file))


def instructions(kind: str, port: int, http: str, n: int, ca_file: str) -> int:
    """The instructions of one client process under callgrind (h2load: the peer, one
    connection, one request in flight, over HTTP/1.1 with ``--h1``)."""
    if kind == "h2load":
        scheme = "https" if ca_file else "http"
        h1 = ["--h1"] if http == "1" else []
        url = f"{scheme}://127.0.0.1:{port}/"
        return callgrind_command(["h2load", *h1, "-n", str(n), "-c", "1", "-m", "1", url])
    return callgrind_instructions(__file__, "--client", kind, str(port), http, str(n), ca_file)


def traced(port: int, http: str, n: int, ca_file: str) -> None:
    """Bytecodes a request in each of rpcmeter's functions, by Python's opcode tracing."""
    import uvloop

    counts: collections.Counter[str] = collections.Counter()

    def tracer(frame: FrameType, event: str, arg: object) -> Tracer:
        frame.f_trace_opcodes = True
        if event == "opcode":
            code = frame.f_code
            counts[f"{os.path.basename(code.co_filename)}:{code.co_name}"] += 1
        return tracer

    uvloop.run(rpcmeter_loop(port, http, n, ca_file, tracer))
    print(f"rpcmeter: {sum(counts.values()) / n:.0f} bytecodes/request")
    for name, count in counts.most_common(10):
        if count >= n / 10:
            print(f"  {count / n:7.1f}  {name}")


def main() -> int:
    if len(sys.argv) > 1 and sys.argv[1] == "--client":
        which, at, http, n, ca_file = sys.argv[2:7]
        client(which, int(at), http, int(n), ca_file)
        return 0
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--http", choices=("1", "2"), default="1", help="2: h2c")
    parser.add_argument("--few", type=int, default=1000, help="requests, first run")
    parser.add_argument("--many", type=int, default=11000, help="and in the second run")
    parser.add_argument(
        "--tls", action="store_true", help="over TLS: HTTPS/1.1, or HTTP/2 with --http 2"
    )
    parser.add_argument("--trace", action="store_true", help="bytecodes a request, no valgrind")
    args = parser.parse_args()
    if not 0 < args.few < args.many:
        parser.error("--few must be above 0 and below --many")
    if not args.trace and shutil.which("valgrind") is None:
        print("needs valgrind (Debian: apt-get install valgrind)", file=sys.stderr)
        return 2
    certs = RunCertificates() if args.tls else None
    mode = {("1", False): "http", ("2", False): "h2c", ("1", True): "https", ("2", True): "h2"}[
        (args.http, args.tls)
    ]
    ca_file = certs.ca_file if certs is not None else ""
    try:
        counts = measure(mode, certs, ca_file, args)
    finally:
        if certs is not None:
            certs.close()
    if "floor" in counts:
        print(f"rpcmeter - floor: {counts['rpcmeter'] - counts['floor']:,.0f} instructions/request")
    if "h2load" in counts:
        print(f"rpcmeter / h2load: {counts['rpcmeter'] / counts['h2load']:.2f}x instructions")
    return 0


def measure(
    mode: str, certs: RunCertificates | None, ca_file: str, args: argparse.Namespace
) -> dict[str, float]:
    """Instructions a request of each client against nginx serving ``mode`` (none traced)."""
    counts: dict[str, float] = {}
    with serve("nginx", mode, layout(1), certs) as served:
        port = served.endpoint.port or 0
        if args.trace:
            traced(port, args.http, args.many, ca_file)
            return counts
        kinds = ["floor", "rpcmeter"] if args.http == "1" else ["rpcmeter"]
        if shutil.which("h2load") is not None:
            kinds.append("h2load")
        for kind in kinds:
            few = instructions(kind, port, args.http, args.few, ca_file)
            many = instructions(kind, port, args.http, args.many, ca_file)
            counts[kind] = (many - few) / (args.many - args.few)
            print(f"  {kind:<10} {counts[kind]:9,.0f} instructions/request", flush=True)
    return counts


if __name__ == "__main__":
    sys.exit(main())
