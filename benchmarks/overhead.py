"""What rpcmeter adds to what it measures.

1. The rpyc ``simple`` workload against the built-in rpyc server, timed by a bare hand-written loop
   and by rpcmeter's closed-loop runner, in the same run, interleaved (bare, rpcmeter, bare, ...),
   client on the same CPU in both. Prints the ratio of mean latencies (target: at most 1.03).
2. The hot-path cost per call: rpcmeter's timed loop around a call that does nothing, minus the
   same calls made bare. Prints ns per call (target: at most 300 ns).
3. With ``--live``, instead: what the live view and the time series cost the clients. Whole
   ``rpcmeter run`` commands of one case (the built-in HTTP/1.1 server, echo, closed loop,
   server and client on CPUs of their own where there are two) on a pseudo-terminal, so that
   the live view draws as it does for a user, round by round in turn: ``--no-live`` (the
   progress line alone), the live view, and (``--no-live``) the case cut into 0.1 s intervals
   in place of 1 s. Prints each one's requests/s and the clients' CPU per request against the
   first's: the median ratio and a 95 % bootstrap interval of the ratio of means (target: the
   live view within 1 %); and the CPU one redraw of the live view takes in rpcmeter's own
   process, timed alone.

    python benchmarks/overhead.py [--requests 20000] [--rounds 5]
    python benchmarks/overhead.py --live [--rounds 5] [--seconds 3]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import pty
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import rpyc

from rpcmeter.analysis.compare import bootstrap_ratio_ci
from rpcmeter.drivers.base import DriverContext
from rpcmeter.drivers.rpyc import RpycDriver
from rpcmeter.host.placement import available_cpus
from rpcmeter.reporters.live import HISTORY, LiveView
from rpcmeter.run.events import IntervalFigures
from rpcmeter.runners.client import run_chunk
from rpcmeter.runners.closed_loop import run_closed_loop
from rpcmeter.runners.recorder import Recorder
from rpcmeter.runners.recording import ThreadStats
from rpcmeter.runners.spec import LoadSpec
from rpcmeter.servers.process import ServerProcess, new_endpoint
from rpcmeter.suite.workloads import SimpleParams


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


LIVE_SUITE = """
name = "live-cost"
[target]
driver = "http"
transport = "tcp"
[workloads.echo]
kind = "echo"
request_bytes = 100
[load]
connections = 4
concurrency = 4
duration_s = {seconds}
warmup = 200
[timeseries]
interval_s = {interval}
[resources]
idle_s = 0
[placement]
server_cpus = {cpus}
client_cpus = {cpus}
"""

#: The variants of part 3: (label, --no-live, interval_s); the first is the baseline.
LIVE_VARIANTS = (
    ("--no-live, 1 s intervals", True, 1.0),
    ("live view, 1 s intervals", False, 1.0),
    ("--no-live, 0.1 s intervals", True, 0.1),
)


def run_on_terminal(argv: list[str], timeout_s: float) -> int:
    """Run ``argv`` with its stdout and stderr on a pseudo-terminal of 100 columns (the output
    read and dropped as it comes); its exit status."""
    leader, follower = pty.openpty()
    env = {**os.environ, "COLUMNS": "100", "LINES": "40", "TERM": "xterm-256color"}
    proc = subprocess.Popen(
        argv, stdin=subprocess.DEVNULL, stdout=follower, stderr=follower, env=env
    )
    os.close(follower)

    def drain() -> None:
        with contextlib.suppress(OSError):
            while os.read(leader, 65536):
                pass

    reader = threading.Thread(target=drain, daemon=True)
    reader.start()
    try:
        return proc.wait(timeout=timeout_s)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        reader.join(timeout=5)
        os.close(leader)


def redraw_us(redraws: int = 2000) -> float:
    """CPU microseconds one redraw of the live view takes (its progress line, the last interval
    and four sparklines of 40 intervals, written to a terminal stream that drops it)."""
    view = LiveView(open(os.devnull, "w"))  # noqa: SIM115 (closed with the view below)
    for i in range(HISTORY):
        view.interval(IntervalFigures(i, i * 1.0, 1.0, "", 30_000 + 37 * i, 0, 95.0, 8_000.0))
    t0 = time.process_time()
    for i in range(redraws):
        view.line(f"[1/1] default · echo · {i * 1000:,} requests · 30,000 req/s · ETA 3 s")
    spent = time.process_time() - t0
    view.stop()
    view.console.file.close()
    return spent / redraws * 1e6


def live_cost(rounds: int, seconds: float) -> None:
    """Part 3: requests/s of each of :data:`LIVE_VARIANTS`, round by round in turn."""
    cpus = 1 if len(available_cpus()) > 1 else '"none"'
    rps: dict[str, list[float]] = {label: [] for label, _, _ in LIVE_VARIANTS}
    # the clients' CPU per request: what the live view could cost them, without the host's
    # noise in requests/s (another job taking a CPU away slows a round but costs it no CPU)
    cpu: dict[str, list[float]] = {label: [] for label, _, _ in LIVE_VARIANTS}
    with tempfile.TemporaryDirectory(prefix="rpcmeter-live-") as tmp:
        for r in range(rounds):
            # each round in another order, so that no variant always runs first
            order = LIVE_VARIANTS[r % 3 :] + LIVE_VARIANTS[: r % 3]
            for label, quiet, interval in order:
                suite = Path(tmp) / f"{interval}.toml"
                suite.write_text(LIVE_SUITE.format(seconds=seconds, interval=interval, cpus=cpus))
                out = Path(tmp) / "result.json"
                argv = [
                    sys.executable,
                    "-m",
                    "rpcmeter",
                    "run",
                    str(suite),
                    "-o",
                    str(out),
                    "--no-store",
                ]
                code = run_on_terminal(argv + (["--no-live"] if quiet else []), 120 + seconds)
                assert code == 0, f"{label}: rpcmeter exited with status {code}"
                (case,) = json.loads(out.read_text())["cases"]
                assert case["status"] == "ok", case.get("reason")
                rps[label].append(case["throughput_rps"])
                cpu[label].append(case["cpu"]["client_us_per_request"])
    each = redraw_us()
    base_label = LIVE_VARIANTS[0][0]
    load = ", ".join(f"{x:.2f}" for x in os.getloadavg())
    print(
        f"http echo, 4 loops, {seconds:g} s a case, {rounds} rounds in turn, on a pseudo-terminal "
        f"(load average {load})"
    )
    for figures, unit, fmt in ((rps, "req/s", ",.0f"), (cpu, "client us/req", ".2f")):
        base = figures[base_label]
        for label, values in figures.items():
            rounds_text = ", ".join(f"{v:{fmt}}" for v in values)
            line = (
                f"  {label:28} {statistics.median(values):9{fmt}} {unit}  (rounds: {rounds_text})"
            )
            if label != base_label:
                ratios = [v / b for v, b in zip(values, base, strict=True)]
                lo, hi = bootstrap_ratio_ci(base, values)
                line += (
                    f"\n  {'':28} ratio to {base_label}: median {statistics.median(ratios):.3f}, "
                    f"mean ratio 95 % interval {lo:.3f}-{hi:.3f}"
                )
            print(line)
    # the progress line at most 5 times a second, and each 1 s interval
    print(
        f"  a redraw of the live view: {each:.0f} us of CPU in rpcmeter's own process (not the "
        f"clients'); 6 a second: {6 * each / 1e4:.2f} % of one CPU"
    )


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--requests", type=int, default=20_000)
    parser.add_argument("--warmup", type=int, default=500)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument(
        "--live", action="store_true", help="part 3 alone: the live view's and time series' cost"
    )
    parser.add_argument("--seconds", type=float, default=3.0, help="part 3: a case's duration")
    args = parser.parse_args()
    if args.live:
        live_cost(args.rounds, args.seconds)
        return

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
