"""Cross-checks of where-the-time-goes figures (one run, alternating; not timed tests).

- ``hyperfine``: whole-command wall and CPU figures of rpcmeter's command driver against
  hyperfine's on the same commands (a CPU-bound Python loop, a 50 ms sleep), alternating
  rpcmeter, hyperfine, rpcmeter, hyperfine, ...; prints each tool's mean wall and CPU time and
  their ratio.
- ``sleep``: a server that sleeps exactly 1 ms per request (a raw-frame server spinning on the
  clock, :data:`EXACT_SLEEP_SERVER`) at one loop on one connection, with ``[breakdown]``: the
  latency must come out at 1 ms + the round trip within 2 %. Prints the median latency, the round
  trip's median, the server-reported handling time and the difference.
- ``profile``: the slowdown of profiling the server: the built-in HTTP server at one loop (5!,
  the server's per-request cost is small, so sampling pauses weigh most), ``[profile] server``
  off and on, alternating; prints requests/s and server CPU per request of each, and the ratio.

    python benchmarks/breakdown_checks.py [hyperfine|sleep|profile ...] [--rounds 3]
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from rpcmeter.execute import RunOptions, run_suite
from rpcmeter.suite import build_suite

COMMANDS = {
    "cpu loop": f"{sys.executable} -c 'sum(i * i for i in range(3_000_000))'",
    "sleep 50 ms": f"{sys.executable} -c 'import time; time.sleep(0.05)'",
}


def rpcmeter_command(command: str, runs: int) -> tuple[float, float]:
    """Mean wall and CPU (user + system) seconds per run, as rpcmeter's command driver sees it."""
    suite = build_suite(
        {
            "name": "hyperfine cross-check",
            "target": {"driver": "command", "command": command},
            "runs": {"count": runs, "warmup": 1},
            "workloads": {"run": {}},
        }
    )
    [case] = run_suite(suite)["cases"]
    c = case["command"]
    return float(c["wall_s"]), float(c["user_s"] + c["sys_s"])


def hyperfine_command(command: str, runs: int) -> tuple[float, float]:
    """Mean wall and CPU seconds per run, as hyperfine measures them."""
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "h.json"
        subprocess.run(
            [
                "hyperfine",
                "--runs",
                str(runs),
                "--warmup",
                "1",
                "-N",
                "--export-json",
                str(out),
                command,
            ],
            check=True,
            capture_output=True,
        )
        r = json.loads(out.read_text())["results"][0]
    return float(r["mean"]), float(r["user"] + r["system"])


def check_hyperfine(rounds: int) -> None:
    if shutil.which("hyperfine") is None:
        print("hyperfine: not installed (apt install hyperfine)")
        return
    print("whole commands: rpcmeter against hyperfine (means per run, 10 runs per round)")
    for name, command in COMMANDS.items():
        ours: list[tuple[float, float]] = []
        theirs: list[tuple[float, float]] = []
        for _ in range(rounds):
            ours.append(rpcmeter_command(command, 10))
            theirs.append(hyperfine_command(command, 10))
        wall = statistics.fmean(w for w, _ in ours), statistics.fmean(w for w, _ in theirs)
        cpu = statistics.fmean(c for _, c in ours), statistics.fmean(c for _, c in theirs)
        print(
            f"  {name:12s} wall {wall[0] * 1e3:8.1f} ms vs {wall[1] * 1e3:8.1f} ms "
            f"(ratio {wall[0] / wall[1]:.3f});  CPU {cpu[0] * 1e3:8.1f} ms vs "
            f"{cpu[1] * 1e3:8.1f} ms (ratio {cpu[0] / cpu[1]:.3f})"
        )


# A raw-frame server that handles one connection at a time and, for a ``sleep`` request, sleeps
# 0.7 ms and spins on the clock until exactly 1 ms has passed (no timer's overshoot, little CPU
# taken from the client on a small machine): the reference of the check.
EXACT_SLEEP_SERVER = """
import socket, struct, sys, time
srv = socket.create_server(("127.0.0.1", int(sys.argv[1])))
print("ready", flush=True)
clock = time.perf_counter_ns
while True:
    conn, _ = srv.accept()
    conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    buf = b""
    while True:
        data = conn.recv(65536)
        if not data:
            break
        buf += data
        while len(buf) >= 4 and len(buf) >= 4 + int.from_bytes(buf[:4], "big"):
            n = int.from_bytes(buf[:4], "big")
            code, buf = buf[4:5], buf[4 + n:]
            t0 = clock()
            if code == b"s":
                time.sleep(0.0007)  # most of it asleep, the rest on the clock
                while clock() - t0 < 1_000_000:
                    pass
            conn.sendall(struct.pack(">IBQ", 9, 0, clock() - t0))
    conn.close()
"""


def check_sleep(rounds: int) -> None:
    print("a server sleeping exactly 1 ms, one loop: latency against 1 ms + round trip (medians)")
    for _ in range(rounds):
        suite = build_suite(
            {
                "name": "sleep 1 ms",
                "target": {
                    "driver": "raw",
                    "transport": "tcp",
                    "server": {"command": ["{python}", "-c", EXACT_SLEEP_SERVER, "{port}"]},
                },
                "load": {"requests": 1000, "warmup": 20, "threads": 1, "connections": 1},
                "workloads": {"sleep": {"ms": 1}},
                "breakdown": {"rtt_requests": 500},
            }
        )
        [case] = run_suite(suite)["cases"]
        b = case["breakdown"]
        latency = case["latency"]["p50_us"]
        rtt = b["rtt_us"]["p50"]
        expected = 1000.0 + rtt
        print(
            f"  latency p50 {latency:8.1f} us, round trip p50 {rtt:6.1f} us, server handling "
            f"p50 {b['server_us']['p50']:7.1f} us: {latency / expected - 1:+.2%} from "
            "1 ms + round trip"
        )


def _profiled(on: bool) -> dict[str, Any]:
    raw: dict[str, Any] = {
        "name": "profile overhead",
        "target": {"driver": "http"},
        "load": {"duration_s": 4.0, "warmup": 50, "threads": 1, "connections": 1},
        "workloads": {"small": {"kind": "factorial", "n": 5}},
    }
    if on:
        raw["profile"] = {"server": True}
    with tempfile.TemporaryDirectory() as tmp:
        result = run_suite(build_suite(raw), RunOptions(output=Path(tmp) / "r.json"))
    case: dict[str, Any] = result["cases"][0]
    return case


def check_profile(rounds: int) -> None:
    print("profiling the server (py-spy, 100 samples/s): HTTP, 5!, one loop, 4 s per case")
    figures: dict[bool, list[tuple[float, float]]] = {False: [], True: []}
    for _ in range(rounds):
        for on in (False, True):
            case = _profiled(on)
            figures[on].append(
                (case["throughput_rps"], case["cpu"].get("server_us_per_request") or 0.0)
            )
    for on in (False, True):
        rps = statistics.fmean(r for r, _ in figures[on])
        cpu = statistics.fmean(c for _, c in figures[on])
        print(f"  profile {'on ' if on else 'off'}: {rps:9,.0f} req/s, server {cpu:6.1f} us/req")
    off = statistics.fmean(r for r, _ in figures[False])
    on_ = statistics.fmean(r for r, _ in figures[True])
    print(f"  throughput with the profile / without: {on_ / off:.3f}")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("checks", nargs="*", default=["hyperfine", "sleep", "profile"])
    p.add_argument("--rounds", type=int, default=3)
    args = p.parse_args()
    for check in args.checks:
        {"hyperfine": check_hyperfine, "sleep": check_sleep, "profile": check_profile}[check](
            args.rounds
        )


if __name__ == "__main__":
    main()
