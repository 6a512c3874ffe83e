"""rpcmeter's own cost per gRPC call, without sockets: the Go greeter's reply bytes, captured once
from a real connection, replayed through the per-call path (closed loop, driver, HTTP/2
connection, recorder) and through the floor client's reply walk (:data:`h2bench.FLOOR_PROTOCOL`).

The capture runs ``--streams`` closed loops on one connection to the Go greeter server
(``benchmarks/greeter``) and keeps every read's bytes; the replay feeds the same reads to a
connection whose transport only counts what is written, so the same requests go out (stream ids
follow the order of the replies) and every reply is checked as in a real run. Without sockets,
the event loop and the clock's noise, it prints the CPU time per call of both and their
difference, best of ``--repeat``. ``--server aio`` (or ``sync``, ``h2``) captures ``noop`` calls
from rpcmeter's built-in gRPC server in that ``server_mode`` instead, whose replies carry server
times (the floor client is then left out). Under valgrind (``--replay-only`` with a ``--capture-file``),
instructions per call are exact and steady::

    valgrind --tool=callgrind --toggle-collect=functools_reduce --callgrind-out-file=/dev/null \
        python benchmarks/grpc_call_cost.py --capture-file cap.pkl --replay-only rpcmeter

    python benchmarks/grpc_call_cost.py [--calls 20000] [--streams 10] [--repeat 5]
        [--server greeter|aio|sync|h2]
"""

from __future__ import annotations

import argparse
import asyncio
import pickle
import sys
import time
from collections.abc import Callable
from functools import reduce
from pathlib import Path
from typing import Any, Literal

from greeter_server import METHOD, REPLY, REQUEST
from h2bench import FLOOR_PROTOCOL, greeter
from versus import cpus

from rpcmeter.drivers.base import DriverContext, ReplyCheck
from rpcmeter.drivers.grpc import GrpcDriver, GrpcUnavailable, error_for
from rpcmeter.drivers.grpc_h2 import GrpcH2Client
from rpcmeter.drivers.h2client import H2Client
from rpcmeter.drivers.stream import ExactReply
from rpcmeter.net.endpoints import Endpoint
from rpcmeter.protocols.grpc import frame, method_path
from rpcmeter.protocols.h2.header_blocks import huffman_table
from rpcmeter.protocols.h2.transport import H2Protocol, Session
from rpcmeter.runners.event_loop import Phase, closed_loop
from rpcmeter.runners.recorder import Recorder
from rpcmeter.runners.recording import ThreadStats
from rpcmeter.runners.spec import NO_END
from rpcmeter.servers.process import ServerProcess, new_endpoint
from rpcmeter.suite.workloads import NoopParams

Capture = tuple[int, list[bytes]]  # reads before the loops started, every read's bytes


class Call:
    """The call the loops make: the greeter's, or the built-in server's ``noop`` (with server
    times in its replies)."""

    method, request, reply, server_time = METHOD, REQUEST, REPLY, False


Check = ReplyCheck | None | Literal["bytes"]  # "bytes": each reply compared with Call.reply


def make_client(endpoint: Endpoint, streams: int, check: Check = "bytes") -> GrpcH2Client:
    ctx = DriverContext(endpoint, NoopParams(), {}, validate=True, threads=streams)
    checks = ExactReply(Call.reply) if check == "bytes" else check
    return GrpcH2Client(
        ctx, Call.method, Call.request, checks, (), None, error_for, GrpcUnavailable
    )


def start_loops(client: GrpcH2Client, streams: int, stats: ThreadStats) -> Phase:
    rec = Recorder(stats, Call.server_time)
    phase = Phase(asyncio.get_running_loop(), streams)
    for i in range(streams):
        closed_loop(client.channel(i), rec, phase, None, NO_END, ())
    return phase


async def capture(endpoint: Endpoint, calls: int, streams: int) -> Capture:
    """The reads of one connection running ``streams`` closed loops for ``calls`` calls."""
    reads: list[bytes] = []
    original = H2Protocol.data_received

    def recording(self: H2Protocol, data: bytes) -> None:
        reads.append(data)
        original(self, data)

    H2Protocol.data_received = recording  # type: ignore[method-assign]
    client = make_client(endpoint, streams)
    try:
        await client.open()
        before = len(reads)
        stats = ThreadStats()
        phase = start_loops(client, streams, stats)
        ended = client.calls
        while ended() < calls and not phase.finished.done():
            await asyncio.sleep(0.01)
        phase.stopping = True
        await asyncio.wait_for(phase.finished, 10)
        if stats.errors:
            raise RuntimeError(f"errors in the capture: {dict(stats.errors)}")
        return before, reads
    finally:
        H2Protocol.data_received = original  # type: ignore[method-assign]
        client.close()


def replay(receive: Callable[[bytes], None], reads: list[bytes]) -> float:
    """Feed ``reads`` to ``receive``: the CPU seconds it took. (The reads are fed from C, by
    ``functools.reduce``: ``valgrind --tool=callgrind --toggle-collect=functools_reduce`` counts
    the instructions of the replay alone.)"""
    t0 = time.process_time()
    reduce(lambda _, data: receive(data), reads, None)
    return time.process_time() - t0


class CountingTransport:
    """What a replayed connection writes to: bytes counted, nothing sent."""

    def __init__(self) -> None:
        self.written = 0

    def write(self, data: bytes) -> None:
        self.written += len(data)

    def get_extra_info(self, name: str) -> Any:
        return None

    def close(self) -> None:
        pass


def recut(cap: Capture, frames: int) -> Capture:
    """``cap`` with the reads after the preface cut anew: ``frames`` frames a read (a reply's
    frames split across reads, as a fast server's small writes come), or, when ``frames`` is 0,
    a read after each frame that ends a stream (a reply a read)."""
    before, reads = cap
    data = b"".join(reads[before:])
    out: list[bytes] = []
    start = pos = count = 0
    while pos + 9 <= len(data):
        kind, flags = data[pos + 3], data[pos + 4]
        pos += 9 + int.from_bytes(data[pos : pos + 3])
        count += 1 if frames or (kind < 2 and flags & 1) else 0
        if count == (frames or 1):
            out.append(data[start:pos])
            start, count = pos, 0
    if start < len(data):
        out.append(data[start:])
    return before, reads[:before] + out


def replayed_session(client: H2Client, preface: list[bytes]) -> H2Protocol:
    """``client``'s one session, on a connection whose transport only counts what it is
    written, fed the reads before the loops started (the server's preface)."""
    proto = H2Protocol(client.new_connection())
    proto.connection_made(CountingTransport())  # type: ignore[arg-type]
    for data in preface:
        proto.data_received(data)

    async def opener() -> H2Protocol:
        raise ConnectionError("no new connection in a replay")

    client.sessions.append(Session(proto, opener))
    return proto


async def replay_rpcmeter(
    endpoint: Endpoint, cap: Capture, streams: int, check: Check = "bytes"
) -> tuple[int, float]:
    """(calls, CPU seconds) of the per-call path over the captured reads, each reply checked
    by ``check``."""
    before, reads = cap
    client = make_client(endpoint, streams, check)
    proto = replayed_session(client, reads[:before])
    client.prepared = proto.conn.prepare(client.headers, frame(Call.request))
    stats = ThreadStats()
    start_loops(client, streams, stats)
    huffman_table()  # built once per process (in a real run, during the warmup)
    cpu = replay(proto.data_received, reads[before:])
    calls = client.calls()
    if stats.errors or calls == 0:
        raise RuntimeError(f"the replay went wrong: {dict(stats.errors)}, {calls} calls")
    client.close()
    return calls, cpu


def replay_floor(cap: Capture, streams: int) -> tuple[int, float]:
    """(replies, CPU seconds) of the floor client's reply walk over the captured reads."""
    before, reads = cap
    names: dict[str, Any] = {"asyncio": asyncio}
    head = b"\0\0\0\x01\x04\0\0\0\0"
    names["parts"] = [head[:5], head[9:] + b"\0\0\0\0\x01\0\0\0\0", b"\0" * 12]
    names["preface"] = b""
    exec(FLOOR_PROTOCOL, names)
    floor = names["Floor"]()
    floor.connection_made(CountingTransport())
    floor.send(streams)
    cpu = replay(floor.data_received, reads[before:])
    return int(names["replies"]), cpu


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--calls", type=int, default=20000)
    parser.add_argument("--streams", type=int, default=10)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--capture-file", type=Path, help="keep the capture here (or read it)")
    parser.add_argument("--replay-only", choices=("rpcmeter", "floor"), help="one replay, once")
    parser.add_argument("--reads", type=int, help="replay only this many of the captured reads")
    parser.add_argument(
        "--frames-per-read", type=int, help="cut the captured bytes anew (0: a reply a read)"
    )
    parser.add_argument("--server", choices=("greeter", "aio", "sync", "h2"), default="greeter")
    args = parser.parse_args()
    endpoint = Endpoint("tcp", "127.0.0.1", 1)  # the replay's authority (no connection)
    if args.server != "greeter":
        Call.method, Call.request, Call.reply, Call.server_time = (
            method_path("noop"),
            b"",
            b"",
            True,
        )
    if args.capture_file is not None and args.capture_file.exists():
        cap: Capture = pickle.loads(args.capture_file.read_bytes())
    elif args.server != "greeter":
        endpoint = new_endpoint("tcp")
        options = {"server_mode": args.server}
        with ServerProcess(
            GrpcDriver.server_command(endpoint, options), endpoint, cpus=[cpus()[0]]
        ):
            cap = asyncio.run(capture(endpoint, args.calls, args.streams))
    else:
        with greeter(cpus()[0], "-grpc") as ep:
            endpoint = ep
            cap = asyncio.run(capture(ep, args.calls, args.streams))
        if args.capture_file is not None:
            args.capture_file.write_bytes(pickle.dumps(cap))
    if args.frames_per_read is not None:
        cap = recut(cap, args.frames_per_read)
    if args.reads is not None:
        cap = (cap[0], cap[1][: cap[0] + args.reads])
    reads = cap[1][cap[0] :]
    print(f"capture: {len(reads)} reads, {sum(map(len, reads)):,} bytes, {args.streams} streams")
    if args.replay_only == "floor":
        replies, cpu = replay_floor(cap, args.streams)
        print(f"floor: {replies} replies, {cpu:.3f} s")
        return 0
    if args.replay_only == "rpcmeter":
        calls, cpu = asyncio.run(replay_rpcmeter(endpoint, cap, args.streams))
        print(f"rpcmeter: {calls} calls, {cpu:.3f} s")
        return 0
    best: dict[str, float] = {}
    for _ in range(args.repeat):
        calls, cpu = asyncio.run(replay_rpcmeter(endpoint, cap, args.streams))
        best["rpcmeter"] = min(best.get("rpcmeter", 1.0), cpu / calls)
        if args.server != "greeter":
            continue
        replies, cpu = replay_floor(cap, args.streams)
        best["floor"] = min(best.get("floor", 1.0), cpu / replies)
    if args.server != "greeter":
        print(f"calls per replay: {calls} (the built-in server, server_mode {args.server})")
    else:
        print(f"calls per replay: {calls} (floor: {replies} replies)")
    for name, per_call in best.items():
        print(f"  {name:<10} {per_call * 1e6:6.2f} us CPU/call (best of {args.repeat})")
    if args.server == "greeter":
        print(f"rpcmeter - floor: {(best['rpcmeter'] - best['floor']) * 1e6:.2f} us/call")
    return 0


if __name__ == "__main__":
    sys.exit(main())
