"""What ``expect`` (a schema call's replies checked field by field) costs per call, against the
unchecked path, on a server whose replies repeat.

Two measurements, each alternating the checks round by round and printing CPU microseconds per
call and the difference from the unchecked path (target: ``expect`` within 0.5 us of it):

1. The per-call path of rpcmeter's HTTP/2 gRPC client without sockets (as
   ``grpc_call_cost.py``): the Go greeter's replies to ``helloworld.Greeter/SayHello``, captured
   once, replayed through the closed loops, the driver and the connection, with replies not
   checked, compared with the expected bytes (``expect_hex``), and checked by ``expect = {
   message = "Hello world" }`` compiled from ``greeter.proto``.
2. The check step alone, as the drivers run it for each reply (the body compared with the last
   reply that passed, the check called when they differ): a reply that repeats, and, for scale,
   replies that alternate between two bodies, so that every reply is decoded and compared.

    python benchmarks/grpc_expect_cost.py [--calls 20000] [--streams 10] [--rounds 5]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import time
from collections.abc import Callable

from greeter_server import PROTO, REPLY
from grpc_call_cost import Call, Capture, Check, capture, replay_rpcmeter
from h2bench import greeter
from versus import cpus

from rpcmeter.drivers.base import ReplyCheck
from rpcmeter.drivers.stream import ExactReply
from rpcmeter.net.endpoints import Endpoint
from rpcmeter.protocols import grpc_schema as gs

EXPECT = {"message": "Hello world"}


def field_check() -> gs.FieldExpect:
    schema = gs.load_schema(gs.compile_proto(PROTO), "proto", PROTO.name)
    check = gs.compile_call(schema, "helloworld.Greeter/SayHello", {"name": "world"}, EXPECT)
    made = check.reply_check()
    assert made is not None
    return made


def per_call_path(args: argparse.Namespace) -> None:
    with greeter(cpus()[0], "-grpc") as endpoint:
        cap: Capture = asyncio.run(capture(endpoint, args.calls, args.streams))
    replay_at = Endpoint("tcp", "127.0.0.1", 1)
    checks: dict[str, Callable[[], Check]] = {
        "unchecked": lambda: None,
        "expect_hex": lambda: "bytes",
        "expect": field_check,
    }
    runs: dict[str, list[float]] = {name: [] for name in checks}
    print(f"1. the per-call path, {len(cap[1]) - cap[0]} captured reads, {args.streams} streams")
    print(f"{'round':>5}  {'check':<12} {'calls':>7} {'us CPU/call':>12}")
    for r in range(1, args.rounds + 1):
        for name, make in checks.items():
            calls, cpu = asyncio.run(replay_rpcmeter(replay_at, cap, args.streams, make()))
            runs[name].append(cpu / calls * 1e6)
            print(f"{r:>5}  {name:<12} {calls:>7} {runs[name][-1]:>12.3f}", flush=True)
    summarize(runs)


def check_step(check: ReplyCheck | None, bodies: list[bytes], n: int) -> float:
    """CPU microseconds per reply of the drivers' check step over ``bodies``, cycled."""
    framed = [b"\0" + len(b).to_bytes(4, "big") + b for b in bodies]
    replies = (framed * (n // len(framed) + 1))[:n]
    t0 = time.process_time()
    for chunk in replies:
        if check is not None:  # as GrpcH2Client.check_end does it
            body = chunk[5:]
            if body != check.last and (wrong := check(body)) is not None:
                raise AssertionError(wrong)
    return (time.process_time() - t0) / n * 1e6


def the_step_alone(args: argparse.Namespace) -> None:
    n = args.calls * 10
    cases: dict[str, Callable[[], float]] = {
        "unchecked": lambda: check_step(None, [REPLY], n),
        "expect_hex": lambda: check_step(ExactReply(REPLY), [REPLY], n),
        "expect": lambda: check_step(field_check(), [REPLY], n),
    }
    runs: dict[str, list[float]] = {name: [] for name in cases}
    print(f"\n2. the check step alone, {n:,} replies that repeat")
    for _ in range(args.rounds):
        for name, run in cases.items():
            runs[name].append(run())
    summarize(runs)
    # two bodies of the same fields (the second with an empty unknown field 2): each decoded
    varied = [REPLY, REPLY + b"\x12\x00"]
    per = statistics.median(
        check_step(field_check(), varied, args.calls) for _ in range(args.rounds)
    )
    print(f"   expect, replies that alternate (every one decoded): {per:.3f} us/reply")


def summarize(runs: dict[str, list[float]]) -> None:
    base = runs["unchecked"]
    for name, values in runs.items():
        diffs = [v - b for v, b in zip(values, base, strict=True)]
        print(
            f"   {name:<12} median {statistics.median(values):7.3f} us/call, best "
            f"{min(values):7.3f}; minus unchecked, per round: median "
            f"{statistics.median(diffs):+.3f} us"
        )


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--calls", type=int, default=20000)
    parser.add_argument("--streams", type=int, default=10)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    print(
        f"load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}; target: expect within "
        "0.5 us of unchecked"
    )
    Call.method = "/helloworld.Greeter/SayHello"
    per_call_path(args)
    the_step_alone(args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
