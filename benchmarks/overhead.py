"""What rpcmeter adds to what it measures.

1. The rpyc ``simple`` workload against the built-in rpyc server, timed by a bare hand-written loop
   and by rpcmeter's closed-loop runner, in the same run, interleaved (bare, rpcmeter, bare, ...),
   client on the same CPU in both. Prints the ratio of mean latencies (target: at most 1.03).
2. The hot-path cost per call: rpcmeter's timed loop around a call that does nothing, minus the
   same calls made bare. Prints ns per call (target: at most 300 ns).

    python benchmarks/overhead.py [--requests 20000] [--rounds 5]
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

import rpyc

from rpcmeter.drivers.base import DriverContext
from rpcmeter.drivers.rpyc import RpycDriver
from rpcmeter.placement import available_cpus
from rpcmeter.runners.client import run_chunk
from rpcmeter.runners.closed_loop import run_closed_loop
from rpcmeter.runners.recording import Recorder, ThreadStats
from rpcmeter.runners.spec import LoadSpec
from rpcmeter.servers.process import ServerProcess, new_endpoint
from rpcmeter.workloads import SimpleParams


def bare_loop(path: str, requests: int, warmup: int) -> float:
    """Mean latency (ns) of ``requests`` calls timed by the simplest loop one would write."""
    conn = rpyc.utils.factory.unix_connect(path)
    try:
        simple = conn.root.simple
        for _ in range(warmup):
            simple()
        clock = time.perf_counter_ns
        total = 0
        for _ in range(requests):
            t0 = clock()
            simple()
            total += clock() - t0
        return total / requests
    finally:
        conn.close()


def hot_path_ns(n: int = 2_000_000) -> tuple[float, float]:
    """(ns per bare call of a no-op, ns rpcmeter adds per call), best of 5."""

    def noop() -> None:
        return None

    bare, timed = [], []
    for _ in range(5):
        t0 = time.perf_counter_ns()
        for _ in range(n):
            noop()
        bare.append((time.perf_counter_ns() - t0) / n)
        stats = ThreadStats()
        rec = Recorder(stats, server_time=False)
        done = 0
        t0 = time.perf_counter_ns()
        while done < n:
            k = min(n - done, len(rec.buf) - rec.pos)
            done += run_chunk(noop, rec, k, (OSError,))
            if rec.pos == len(rec.buf):
                rec.fold()
        elapsed = time.perf_counter_ns() - t0
        rec.fold()
        assert stats.ok == n
        timed.append(elapsed / n)
    return min(bare), min(timed) - min(bare)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--requests", type=int, default=20_000)
    parser.add_argument("--warmup", type=int, default=500)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()

    # the hot path first, in a process that has done nothing else yet
    bare_call, added = hot_path_ns()
    cpus = available_cpus()
    server_cpus, client_cpus = ([cpus[0]], [cpus[1]]) if len(cpus) > 1 else (None, None)
    if client_cpus:
        os.sched_setaffinity(0, client_cpus)
    endpoint = new_endpoint("unix")
    command = RpycDriver.server_command(endpoint, {})
    bare_means: list[float] = []
    tool_means: list[float] = []
    with ServerProcess(command, endpoint, cpus=server_cpus):
        assert endpoint.path is not None
        for _ in range(args.rounds):
            bare_means.append(bare_loop(endpoint.path, args.requests, args.warmup))
            outcome = run_closed_loop(
                LoadSpec(
                    "rpyc",
                    DriverContext(endpoint, SimpleParams(), {}, threads=1),
                    clients=1,
                    requests=args.requests,
                    duration_s=None,
                    warmup=args.warmup,
                    timeout_s=600,
                    client_cpus=client_cpus,
                )
            )
            assert outcome.failure is None, outcome.failure
            tool_means.append(outcome.hist.mean)
    ratios = [t / b for t, b in zip(tool_means, bare_means, strict=True)]
    print(f"rpyc simple, unix socket, {args.requests} requests x {args.rounds} rounds, interleaved")
    print(
        f"  bare loop mean      {statistics.median(bare_means) / 1e3:8.1f} us  (rounds: {', '.join(f'{m / 1e3:.1f}' for m in bare_means)})"
    )
    print(
        f"  rpcmeter mean       {statistics.median(tool_means) / 1e3:8.1f} us  (rounds: {', '.join(f'{m / 1e3:.1f}' for m in tool_means)})"
    )
    print(
        f"  ratio rpcmeter/bare {statistics.median(ratios):8.3f}     (per round: {', '.join(f'{r:.3f}' for r in ratios)}; target <= 1.03)"
    )
    bare_call, added = hot_path_ns()
    print(
        f"hot path: a no-op call costs {bare_call:.0f} ns bare; rpcmeter adds {added:.0f} ns per call (target <= 300 ns)"
    )


if __name__ == "__main__":
    main()
