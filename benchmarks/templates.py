"""What requests that vary cost the client per request, without sockets: the fixed request
against one placeholder, a 10,000-line data file and a 3-call mix, on HTTP/1.1 and on gRPC.

Each is the real per-request path (the closed loops of rpcmeter's runner, the driver's channel,
the connection, the recorder), fed replies without a socket, so that only the client's own CPU is
timed and the machine's other load matters less:

- HTTP/1.1: the HTTP driver's connections write to a transport that answers every request with
  the same 200 reply on the next turn of the event loop (uvloop);
- gRPC: rpcmeter's HTTP/2 client replays the Go greeter's replies to ``SayHello``, captured once
  from a real connection (as ``grpc_call_cost.py``), while its loops send the requests of each
  variant (the replies are the same bytes for every variant; none is checked).

Variants (the same number of requests, the loops alternating variant by variant, round by round):
``fixed`` (one pre-encoded request, today's path), ``placeholder`` (one ``{{request_number}}``:
in the path, in the gRPC message's ``name``), ``data-file`` (10,000 requests in turn), ``mix``
(three fixed calls drawn 5:3:2). Prints CPU microseconds per request, best of ``--rounds``, and
each variant's difference from ``fixed`` (target: at most 1 us more per request).

    python benchmarks/templates.py [--requests 20000] [--loops 10] [--rounds 5] [--no-grpc]

On a busy machine the CPU times wander; instructions do not. ``--only VARIANT --protocol
http|grpc`` runs one variant once (the gRPC capture read from ``--capture-file``, written by a
normal run given the same option), so that valgrind can count its instructions: run it with two
request counts, and the difference over the difference of requests is the instructions per
request, the start-up left out::

    valgrind --tool=callgrind --callgrind-out-file=/dev/null \
        python benchmarks/templates.py --only placeholder --protocol http --requests 2000
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import pickle
import sys
import tempfile
import time
from collections.abc import Callable
from functools import reduce
from pathlib import Path
from typing import Any

import uvloop
from greeter_server import METHOD, PROTO, REPLY, REQUEST
from grpc_call_cost import Call, CountingTransport, capture, replay
from h2bench import greeter
from versus import cpus

from rpcmeter.drivers.base import Channel, DriverContext
from rpcmeter.drivers.grpc import GrpcUnavailable, error_for
from rpcmeter.drivers.grpc_calls import prepare_mix
from rpcmeter.drivers.grpc_h2 import GrpcH2Client
from rpcmeter.drivers.grpc_plan import PlanCall, grpc_plan, h2_channels
from rpcmeter.drivers.http import HttpDriver
from rpcmeter.drivers.http_connection import HttpConnection
from rpcmeter.drivers.stream_connection import StreamSlot
from rpcmeter.drivers.varying import MIX_KEY, LoopState, MixChannel, loop_of, mix_key
from rpcmeter.metrics.connections import ConnectionCosts
from rpcmeter.net.endpoints import Endpoint
from rpcmeter.protocols import grpc_schema as gs
from rpcmeter.protocols.grpc import frame
from rpcmeter.protocols.h2.transport import H2Protocol, Session
from rpcmeter.runners.event_loop import Phase, closed_loop
from rpcmeter.runners.recorder import Recorder
from rpcmeter.runners.recording import ThreadStats, call_names
from rpcmeter.runners.spec import NO_END
from rpcmeter.suite.workloads import MixParams, NoopParams, WorkloadParams

VARIANTS = ("fixed", "placeholder", "data-file", "mix")
LINES = 10_000
ENDPOINT = Endpoint("tcp", "127.0.0.1", 1)  # an authority; nothing connects to it
HTTP_REPLY = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"
MIX_WEIGHTS = (5, 3, 2)


# ---- HTTP/1.1 -------------------------------------------------------------------------------------


class Answering:
    """A transport that answers each request written with ``HTTP_REPLY`` on the loop's next
    turn."""

    def __init__(self, conn: HttpConnection, loop: asyncio.AbstractEventLoop) -> None:
        self.conn, self.loop, self.written = conn, loop, 0

    def write(self, data: bytes) -> None:
        self.written += 1
        self.loop.call_soon(self.conn.data_received, HTTP_REPLY)

    def get_extra_info(self, name: str) -> Any:
        return None

    def close(self) -> None:
        pass

    abort = close


def http_setup(variant: str, data_file: Path) -> tuple[dict[str, Any], WorkloadParams]:
    """The options and workload of a variant (HTTP)."""
    if variant == "fixed":
        return {"path": "/kv/1"}, NoopParams()
    if variant == "placeholder":
        return {"path": "/kv/{{request_number}}"}, NoopParams()
    if variant == "data-file":
        return {"data_file": str(data_file)}, NoopParams()
    calls = [
        {"name": name, "weight": w, "path": f"/kv/{name}"}
        for name, w in zip("abc", MIX_WEIGHTS, strict=True)
    ]
    return {}, MixParams(tuple(calls))


def http_channels(variant: str, loops: int, data_file: Path) -> tuple[HttpDriver, list[Channel]]:
    """An HTTP driver whose ``loops`` connections (one per loop) answer themselves."""
    options, w = http_setup(variant, data_file)
    ctx = DriverContext(ENDPOINT, w, options, threads=loops, connections=loops)
    driver = HttpDriver(ctx)
    loop = asyncio.get_running_loop()
    driver.loop = loop
    driver.conns, driver.slots, driver.connects, driver.tasks = [], [], 0, set()
    driver.closed_traffic = [0, 0]
    driver.costs = ConnectionCosts()

    async def no_more() -> HttpConnection:
        raise ConnectionError("no new connection here")

    for _ in range(loops):
        conn = HttpConnection()
        conn.connection_made(Answering(conn, loop))  # type: ignore[arg-type]
        driver.slots.append(StreamSlot(conn, no_more, loop))
    return driver, [driver.channel(i) for i in range(loops)]


def http_round(variant: str, loops: int, requests: int, data_file: Path) -> tuple[int, float]:
    """(requests answered, CPU microseconds per request) of one round: ``requests`` per loop.
    The loop runs inside ``functools.reduce`` (valgrind's ``--toggle-collect=functools_reduce``
    counts the instructions of the requests alone)."""
    loop = uvloop.new_event_loop()
    asyncio.set_event_loop(loop)

    async def made() -> list[Channel]:
        return http_channels(variant, loops, data_file)[1]

    try:
        channels = loop.run_until_complete(made())
        stats = ThreadStats()
        rec = Recorder(stats, False, call_names(channels[0]))
        phase = Phase(loop, len(channels))
        t0 = time.process_time()
        for ch in channels:
            closed_loop(ch, rec, phase, requests, NO_END, ())
        reduce(lambda _, done: loop.run_until_complete(done), [phase.finished], None)
        cpu = time.process_time() - t0
    finally:
        loop.close()
        asyncio.set_event_loop(None)
    rec.fold()
    if stats.errors:
        raise RuntimeError(f"errors: {stats.errors} {stats.first_error}")
    return stats.ok, cpu / stats.ok * 1e6


# ---- gRPC -----------------------------------------------------------------------------------------


def grpc_plan_of(variant: str, loops: int, lines: list[tuple[Any, str]]) -> Any:
    """The plan of a variant (gRPC: SayHello of the greeter's schema)."""
    schema = gs.load_schema(gs.compile_proto(PROTO), "proto", PROTO.name)
    call = "helloworld.Greeter/SayHello"
    w: WorkloadParams = NoopParams()
    prepared: dict[str, Any] = {}
    compiled = None
    if variant == "placeholder":
        compiled = gs.compile_call(schema, call, {"name": "{{request_number}}"})
    elif variant == "data-file":
        compiled = gs.compile_call(schema, call, lines=lines)
    else:
        w = MixParams(
            tuple(
                {"name": n, "weight": wt, "call": call, "data": {"name": n}}
                for n, wt in zip("abc", MIX_WEIGHTS, strict=True)
            )
        )
        prepared[MIX_KEY] = {mix_key(w): prepare_mix(w, {}, schema, Path.cwd())}
    ctx = DriverContext(ENDPOINT, w, {}, threads=loops, prepared=prepared)
    return ctx, grpc_plan(ctx, compiled, METHOD, REQUEST, ())


def replay_session(cap: Any) -> tuple[H2Protocol, Session]:
    before, reads = cap
    proto = H2Protocol(GrpcH2Client.new_connection(_plain_client(1)))
    proto.connection_made(CountingTransport())  # type: ignore[arg-type]
    for data in reads[:before]:
        proto.data_received(data)

    async def opener() -> H2Protocol:
        raise ConnectionError("no new connection in a replay")

    return proto, Session(proto, opener)


def _plain_client(loops: int) -> GrpcH2Client:
    ctx = DriverContext(ENDPOINT, NoopParams(), {}, threads=loops)
    return GrpcH2Client(ctx, METHOD, REQUEST, None, (), None, error_for, GrpcUnavailable)


async def grpc_round(
    variant: str, loops: int, cap: Any, lines: list[tuple[Any, str]]
) -> tuple[int, float]:
    """(calls answered, CPU microseconds per call) of one replay of the capture (fed inside
    ``functools.reduce``, as ``grpc_call_cost.py`` does)."""
    proto, session = replay_session(cap)
    stats = ThreadStats()
    channels: list[Channel]
    if variant == "fixed":
        client = _plain_client(loops)
        client.sessions.append(session)
        client.prepared = proto.conn.prepare(client.headers, frame(REQUEST))
        channels = [client.channel(i) for i in range(loops)]
        answered: Callable[[], int] = client.calls
    else:
        ctx, plan = grpc_plan_of(variant, loops, lines)
        calls = []
        for k, c in enumerate(plan.calls):
            e = c.entries[0]
            pc = PlanCall(ctx, e.path, b"", None, (), None, error_for, GrpcUnavailable)
            if k == 0:
                pc.sessions.append(session)
                pc.loop = asyncio.get_running_loop()
                main = pc
            else:
                pc.share(main)
            calls.append(pc)
        channels = []
        for i in range(loops):
            state = LoopState(loop_of(ctx, i))
            chans = h2_channels(calls, plan, i, state)
            channels.append(MixChannel(chans, plan, state) if plan.mix else chans[0])
        answered = lambda: sum(pc.calls() for pc in calls)  # noqa: E731
    rec = Recorder(stats, False, call_names(channels[0]))
    phase = Phase(asyncio.get_running_loop(), loops)
    for ch in channels:
        closed_loop(ch, rec, phase, None, NO_END, ())
    cpu = replay(proto.data_received, cap[1][cap[0] :])
    n = answered()
    if stats.errors or n == 0:
        raise RuntimeError(f"{variant}: the replay went wrong: {dict(stats.errors)}, {n} calls")
    return n, cpu / n * 1e6


# ---- main -----------------------------------------------------------------------------------------


def report(name: str, best: dict[str, float]) -> dict[str, float]:
    base = best["fixed"]
    print(f"{name}: CPU us per request, best of the rounds (difference from fixed)")
    for v in VARIANTS:
        diff = best[v] - base
        print(f"  {v:<12} {best[v]:7.2f} us   {diff:+6.2f} us   ({best[v] / base:.2f}x)")
    return {v: round(best[v] - base, 3) for v in VARIANTS}


def one(args: argparse.Namespace) -> int:
    """One round of one variant (for valgrind: see the module doc)."""
    per = max(1, args.requests // args.loops)
    with tempfile.TemporaryDirectory() as tmp:
        data_file = Path(tmp) / "requests.jsonl"
        data_file.write_text("".join(json.dumps({"path": f"/kv/{i}"}) + "\n" for i in range(LINES)))
        if args.protocol == "http":
            n, got = http_round(args.only, args.loops, per, data_file)
        else:
            cap = pickle.loads(args.capture_file.read_bytes())
            lines = [({"name": f"user-{i}"}, f"requests.jsonl:{i + 1}") for i in range(LINES)]
            n, got = uvloop.run(grpc_round(args.only, args.loops, cap, lines))
    print(f"{args.protocol} {args.only}: {n} requests, {got:.2f} us per request")
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--requests", type=int, default=20000, help="per round and variant")
    parser.add_argument("--loops", type=int, default=10)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--no-grpc", action="store_true", help="HTTP/1.1 only (no Go needed)")
    parser.add_argument("--capture-file", type=Path, help="keep the gRPC capture here (or read it)")
    parser.add_argument("--only", choices=VARIANTS, help="one round of this variant alone")
    parser.add_argument("--protocol", choices=("http", "grpc"), default="http")
    args = parser.parse_args()
    if args.only is not None:
        return one(args)
    server_cpu, client_cpu = cpus()
    os.sched_setaffinity(0, [client_cpu])
    print(f"load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}, client CPU {client_cpu}")
    summary: dict[str, Any] = {}
    with tempfile.TemporaryDirectory() as tmp:
        data_file = Path(tmp) / "requests.jsonl"
        data_file.write_text("".join(json.dumps({"path": f"/kv/{i}"}) + "\n" for i in range(LINES)))
        per = max(1, args.requests // args.loops)
        best = dict.fromkeys(VARIANTS, float("inf"))
        for _ in range(args.rounds):
            for v in VARIANTS:
                best[v] = min(best[v], http_round(v, args.loops, per, data_file)[1])
        summary["http"] = report(f"HTTP/1.1, {args.loops} loops x {per} requests", best)
    if not args.no_grpc:
        lines = [({"name": f"user-{i}"}, f"requests.jsonl:{i + 1}") for i in range(LINES)]
        Call.method, Call.request, Call.reply, Call.server_time = METHOD, REQUEST, REPLY, False
        if args.capture_file is not None and args.capture_file.exists():
            cap = pickle.loads(args.capture_file.read_bytes())
        else:
            with greeter(server_cpu, "-grpc") as ep:
                cap = asyncio.run(capture(ep, args.requests, args.loops))
            if args.capture_file is not None:
                args.capture_file.write_bytes(pickle.dumps(cap))
        print(f"gRPC capture: {len(cap[1]) - cap[0]} reads from the Go greeter")
        best = dict.fromkeys(VARIANTS, float("inf"))
        for _ in range(args.rounds):
            for v in VARIANTS:
                best[v] = min(best[v], uvloop.run(grpc_round(v, args.loops, cap, lines))[1])
        summary["grpc"] = report(f"gRPC (HTTP/2 client), {args.loops} loops", best)
    print("SUMMARY " + json.dumps(summary))
    return 0


if __name__ == "__main__":
    sys.exit(main())
