"""rpcmeter's own cost per HTTP/2 request, without sockets: a real server's reply bytes (nginx's by
default, whose header blocks add every field to the HPACK table on every reply; or the Go
greeter's net/http h2c), captured once from a real connection, replayed through the per-request
path of the HTTP driver over HTTP/2 (closed loop, driver, HTTP/2 connection, recorder) and
through the floor client's reply walk (:data:`h2bench.FLOOR_PROTOCOL`).

As ``grpc_call_cost.py`` does for gRPC: the capture runs ``--streams`` closed loops on one
connection and keeps every read's bytes; the replay feeds the same reads to a connection whose
transport only counts what is written, so the same requests go out and every reply's status is
read as in a real run. It prints the CPU time per request of both, best of ``--repeat``, and their
difference. Under valgrind (``--replay-only`` with a ``--capture-file``), instructions per request
are exact and steady::

    valgrind --tool=callgrind --toggle-collect=functools_reduce --callgrind-out-file=/dev/null \
        python benchmarks/h2_call_cost.py --capture-file cap.pkl --replay-only rpcmeter

    python benchmarks/h2_call_cost.py [--server nginx|go] [--calls 20000] [--streams 10]
        [--repeat 5] [--path /] [--capture-file FILE] [--replay-only rpcmeter|floor]
"""

from __future__ import annotations

import argparse
import asyncio
import pickle
import sys
from functools import partial
from pathlib import Path
from typing import Any

from grpc_call_cost import recut, replay, replay_floor, replayed_session
from versus import layout, serve

from rpcmeter.drivers.base import DriverContext
from rpcmeter.drivers.http2 import Http2Client
from rpcmeter.net.endpoints import Endpoint
from rpcmeter.protocols.h2.header_blocks import huffman_table
from rpcmeter.protocols.h2.transport import H2Protocol
from rpcmeter.runners.event_loop import Phase, closed_loop
from rpcmeter.runners.recorder import Recorder
from rpcmeter.runners.recording import ThreadStats
from rpcmeter.runners.spec import NO_END
from rpcmeter.suite.workloads import NoopParams

Capture = tuple[int, list[bytes]]  # reads before the loops started, every read's bytes


def make_client(endpoint: Endpoint, streams: int, path: str) -> Http2Client:
    ctx = DriverContext(endpoint, NoopParams(), {"http": "2"}, validate=False, threads=streams)
    authority = f"{endpoint.host}:{endpoint.port}"
    return Http2Client(ctx, "GET", path, authority, {})


def start_loops(client: Http2Client, streams: int, stats: ThreadStats) -> tuple[Phase, Recorder]:
    rec = Recorder(stats, False)
    phase = Phase(asyncio.get_running_loop(), streams)
    for i in range(streams):
        closed_loop(client.channel(i, [b""], None), rec, phase, None, NO_END, ())
    return phase, rec


def answered(stats: ThreadStats, rec: Recorder) -> int:
    rec.fold()
    return stats.ok


async def capture(endpoint: Endpoint, calls: int, streams: int, path: str) -> Capture:
    """The reads of one connection running ``streams`` closed loops for ``calls`` requests."""
    reads: list[bytes] = []
    original = H2Protocol.data_received

    def recording(self: H2Protocol, data: bytes) -> None:
        reads.append(data)
        original(self, data)

    H2Protocol.data_received = recording  # type: ignore[method-assign]
    client = make_client(endpoint, streams, path)
    try:
        await client.open()
        before = len(reads)
        stats = ThreadStats()
        phase, rec = start_loops(client, streams, stats)
        while answered(stats, rec) < calls and not phase.finished.done():
            await asyncio.sleep(0.01)
        phase.stopping = True
        await asyncio.wait_for(phase.finished, 10)
        if stats.errors:
            raise RuntimeError(f"errors in the capture: {dict(stats.errors)}")
        return before, reads
    finally:
        H2Protocol.data_received = original  # type: ignore[method-assign]
        client.close()


async def replay_rpcmeter(
    endpoint: Endpoint, cap: Capture, streams: int, path: str
) -> tuple[int, float]:
    """(requests, CPU seconds) of the per-request path over the captured reads."""
    before, reads = cap
    client = make_client(endpoint, streams, path)
    proto = replayed_session(client, reads[:before])
    stats = ThreadStats()
    _, rec = start_loops(client, streams, stats)
    huffman_table()  # built once per process (in a real run, during the warmup)
    cpu = replay(proto.data_received, reads[before:])
    client.close()
    done = answered(stats, rec)
    if stats.errors or done == 0:
        raise RuntimeError(f"the replay went wrong: {dict(stats.errors)}, {done} requests")
    return done, cpu


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--server", choices=("nginx", "go", "canned"), default="nginx")
    parser.add_argument("--calls", type=int, default=20000)
    parser.add_argument("--streams", type=int, default=10)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--path", default="/")
    parser.add_argument("--capture-file", type=Path, help="keep the capture here (or read it)")
    parser.add_argument("--replay-only", choices=("rpcmeter", "floor"), help="one replay, once")
    parser.add_argument(
        "--frames-per-read", type=int, help="cut the captured bytes anew (0: a reply a read)"
    )
    args = parser.parse_args()
    endpoint = Endpoint("tcp", "127.0.0.1", 1)
    if args.capture_file is not None and args.capture_file.exists():
        endpoint, cap = pickle.loads(args.capture_file.read_bytes())
    else:
        with serve(args.server, "h2c", layout(1)) as served:
            endpoint = served.endpoint
            cap = asyncio.run(capture(endpoint, args.calls, args.streams, args.path))
        if args.capture_file is not None:
            args.capture_file.write_bytes(pickle.dumps((endpoint, cap)))
    if args.frames_per_read is not None:
        cap = recut(cap, args.frames_per_read)
    reads = cap[1][cap[0] :]
    print(
        f"capture ({args.server}): {len(reads)} reads, {sum(map(len, reads)):,} bytes, "
        f"{args.streams} streams"
    )
    run: Any = partial(replay_rpcmeter, endpoint, cap, args.streams, args.path)
    if args.replay_only == "floor":
        replies, cpu = replay_floor(cap, args.streams)
        print(f"floor: {replies} replies, {cpu:.3f} s")
        return 0
    if args.replay_only == "rpcmeter":
        calls, cpu = asyncio.run(run())
        print(f"rpcmeter: {calls} requests, {cpu:.3f} s")
        return 0
    best: dict[str, float] = {}
    counts: dict[str, int] = {}
    for _ in range(args.repeat):
        calls, cpu = asyncio.run(run())
        best["rpcmeter"] = min(best.get("rpcmeter", 1.0), cpu / calls)
        counts["rpcmeter"] = calls
        replies, cpu = replay_floor(cap, args.streams)
        best["floor"] = min(best.get("floor", 1.0), cpu / replies)
        counts["floor"] = replies
    print(f"requests per replay: {counts['rpcmeter']} (floor: {counts['floor']} replies)")
    for name, per_call in best.items():
        print(f"  {name:<10} {per_call * 1e6:6.2f} us CPU/request (best of {args.repeat})")
    print(f"rpcmeter - floor: {(best['rpcmeter'] - best['floor']) * 1e6:.2f} us/request")
    return 0


if __name__ == "__main__":
    sys.exit(main())
