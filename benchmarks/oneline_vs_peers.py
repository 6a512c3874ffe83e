"""``rpcmeter http`` (the one-liner) against the same run as a suite file and against wrk, on
one server, alternating in one run.

The built-in HTTP server runs pinned to CPU 0. Each round runs, one after the other for the same
duration and connections: wrk (``-t1``, pinned to CPU 1), ``rpcmeter http URL -c C -z D`` and
``rpcmeter run`` of the suite that ``--save-suite`` wrote for that very command line (rpcmeter
places its own client). It prints requests/s and client CPU per request of each, their medians,
and the ratios one-liner / suite (expected 1 within the noise: both build the same Suite and run
the same code) and one-liner / wrk.

    python benchmarks/oneline_vs_peers.py [--connections 10] [--duration 3] [--rounds 3]

wrk: Debian package ``wrk`` (the round runs without it when it is missing).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import resource
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def children_cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def run_wrk(url: str, connections: int, duration: float) -> tuple[float, float]:
    """(requests/s, client CPU microseconds per request) of one wrk run."""
    cpu0 = children_cpu_s()
    command = ["taskset", "-c", "1", "wrk", "-t1", f"-c{connections}", f"-d{duration:g}s", url]
    out = subprocess.run(
        command, capture_output=True, text=True, check=True, timeout=duration + 60
    ).stdout
    cpu_s = children_cpu_s() - cpu0
    requests = re.search(r"(\d+) requests in", out)
    rate = re.search(r"Requests/sec:\s*([\d.]+)", out)
    if requests is None or rate is None:
        raise RuntimeError(f"cannot read wrk's output:\n{out}")
    return float(rate.group(1)), cpu_s / int(requests.group(1)) * 1e6


def run_rpcmeter(args: list[str], out: Path, timeout_s: float) -> tuple[float, float]:
    """(requests/s, client CPU microseconds per request) of one rpcmeter run, from its result."""
    command = [sys.executable, "-m", "rpcmeter", *args, "--no-store", "--no-live", "-o", str(out)]
    subprocess.run(command, capture_output=True, text=True, check=True, timeout=timeout_s)
    case = json.loads(out.read_text())["cases"][0]
    return float(case["throughput_rps"]), float(case["cpu"]["client_us_per_request"])


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--connections", type=int, default=10)
    parser.add_argument("--duration", type=float, default=3.0)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    port = free_port()
    url = f"http://127.0.0.1:{port}/noop"
    server = subprocess.Popen(
        [
            "taskset",
            "-c",
            "0",
            sys.executable,
            "-m",
            "rpcmeter.servers.http_server",
            "--port",
            str(port),
        ],
        stdout=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                if server.poll() is not None or time.monotonic() > deadline:
                    raise SystemExit("the server did not start") from None
                time.sleep(0.05)
        with tempfile.TemporaryDirectory() as tmp:
            d = Path(tmp)
            oneline = ["http", url, "-c", str(args.connections), "-z", f"{args.duration:g}s"]
            saved = d / "suite.toml"
            subprocess.run(
                [
                    sys.executable,
                    "-m",
                    "rpcmeter",
                    *oneline,
                    "--save-suite",
                    str(saved),
                    "--dry-run",
                ],
                check=True,
                capture_output=True,
                timeout=60,
            )
            clients: dict[str, list[tuple[float, float]]] = {"one-liner": [], "suite": []}
            if shutil.which("wrk"):
                clients["wrk"] = []
            timeout_s = args.duration + 120
            for r in range(args.rounds):
                for name in clients:
                    if name == "wrk":
                        got = run_wrk(url, args.connections, args.duration)
                    elif name == "one-liner":
                        got = run_rpcmeter(oneline, d / "a.json", timeout_s)
                    else:
                        got = run_rpcmeter(["run", str(saved)], d / "b.json", timeout_s)
                    clients[name].append(got)
                    print(
                        f"round {r + 1}  {name:<10} {got[0]:>10,.0f} req/s "
                        f"{got[1]:>7.2f} us CPU/req",
                        flush=True,
                    )
    finally:
        server.terminate()
        server.wait(timeout=10)
    print(
        f"\nmedians of {args.rounds} rounds ({args.connections} connections, "
        f"{args.duration:g} s each; load average {os.getloadavg()[0]:.1f}):"
    )
    med = {
        name: (statistics.median(r for r, _ in runs), statistics.median(c for _, c in runs))
        for name, runs in clients.items()
    }
    for name, (rate, cpu) in med.items():
        print(f"  {name:<10} {rate:>10,.0f} req/s {cpu:>7.2f} us CPU/req")
    for other in ("suite", "wrk"):
        if other in med:
            rate = med["one-liner"][0] / med[other][0]
            cpu = med["one-liner"][1] / med[other][1]
            print(f"  one-liner / {other}: requests/s {rate:.2f}, CPU per request {cpu:.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
