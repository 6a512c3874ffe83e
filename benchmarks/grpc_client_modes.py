"""Which gRPC client path is faster here: blocking stubs in threads, or grpc.aio in one event loop?

Both drive rpcmeter's built-in gRPC server (echo, 100 B, trailing metadata read on every call, as
the driver does) with the same channels (one connection each) and concurrency, alternating
(sync, aio, sync, aio, ...) so that both see the same machine. Server pinned to the first CPU,
client to the last. Prints calls/s of each and the ratio aio / sync (the gRPC driver uses the
blocking stubs in threads: keep it that way while the ratio stays at or below about 1).

    python benchmarks/grpc_client_modes.py [--seconds 2] [--rounds 4] [--server-mode aio|sync]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import threading
import time
from typing import Any

import grpc

from rpcmeter.drivers.grpc import GrpcDriver
from rpcmeter.host.placement import available_cpus
from rpcmeter.protocols.grpc import method_path, target
from rpcmeter.servers.process import ServerProcess, new_endpoint

REQUEST = b"x" * 100
PATH = method_path("echo")


def channel_options(i: int) -> list[tuple[str, Any]]:
    return [("grpc.use_local_subchannel_pool", 1), ("rpcmeter.channel", i)]


def sync_rate(addr: str, connections: int, concurrency: int, seconds: float) -> float:
    channels = [grpc.insecure_channel(addr, options=channel_options(i)) for i in range(connections)]
    stubs = [ch.unary_unary(PATH) for ch in channels]
    for stub in stubs:
        stub(REQUEST)
    counts = [0] * concurrency
    barrier = threading.Barrier(concurrency + 1)
    end = [0.0]

    def loop(i: int) -> None:
        stub = stubs[i % connections]
        n = 0
        barrier.wait()
        while time.perf_counter() < end[0]:
            _, call = stub.with_call(REQUEST)
            call.trailing_metadata()
            n += 1
        counts[i] = n

    threads = [threading.Thread(target=loop, args=(i,)) for i in range(concurrency)]
    for th in threads:
        th.start()
    t0 = time.perf_counter()
    end[0] = t0 + seconds
    barrier.wait()
    for th in threads:
        th.join()
    elapsed = time.perf_counter() - t0
    for ch in channels:
        ch.close()
    return sum(counts) / elapsed


async def aio_rate(addr: str, connections: int, concurrency: int, seconds: float) -> float:
    channels = [
        grpc.aio.insecure_channel(addr, options=channel_options(i)) for i in range(connections)
    ]
    stubs = [ch.unary_unary(PATH) for ch in channels]
    for stub in stubs:
        await stub(REQUEST)
    counts = [0] * concurrency
    end = time.perf_counter() + seconds

    async def loop(i: int) -> None:
        stub = stubs[i % connections]
        n = 0
        while time.perf_counter() < end:
            call = stub(REQUEST)
            await call
            await call.trailing_metadata()
            n += 1
        counts[i] = n

    t0 = time.perf_counter()
    await asyncio.gather(*(loop(i) for i in range(concurrency)))
    elapsed = time.perf_counter() - t0
    for ch in channels:
        await ch.close()
    return sum(counts) / elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=2.0)
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--server-mode", default="aio", choices=["aio", "sync"])
    args = parser.parse_args()
    cpus = available_cpus()
    server_cpus, client_cpus = (cpus[:1], cpus[-1:]) if len(cpus) > 1 else (None, None)
    if client_cpus:
        os.sched_setaffinity(0, client_cpus)
    endpoint = new_endpoint("tcp")
    command = GrpcDriver.server_command(endpoint, {"server_mode": args.server_mode})
    with ServerProcess(command, endpoint, cpus=server_cpus):
        addr = target(endpoint)
        print(f"server {args.server_mode} on CPUs {server_cpus}, client on CPUs {client_cpus}")
        for connections, concurrency in [(1, 1), (5, 50)]:
            sync, aio = [], []
            for _ in range(args.rounds):
                sync.append(sync_rate(addr, connections, concurrency, args.seconds))
                aio.append(asyncio.run(aio_rate(addr, connections, concurrency, args.seconds)))
            s, a = statistics.median(sync), statistics.median(aio)
            print(
                f"{connections} connection(s) x {concurrency} concurrent: "
                f"sync threads {s:,.0f} calls/s, grpc.aio {a:,.0f} calls/s, aio/sync {a / s:.2f}",
                flush=True,
            )
    sys.exit(0)


if __name__ == "__main__":
    main()
