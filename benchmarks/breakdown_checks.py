"""Cross-checks of where-the-time-goes figures (one run, alternating; not timed tests).

- ``hyperfine``: whole-command wall and CPU figures of rpcmeter's command driver against
  hyperfine's on the same commands (a CPU-bound Python loop, a 50 ms sleep), alternating
  rpcmeter, hyperfine, rpcmeter, hyperfine, ...; prints each tool's mean wall and CPU time and
  their ratio.
- ``sleep``: a server that sleeps exactly 1 ms per request (a raw-frame server spinning on the
  clock, :data:`EXACT_SLEEP_SERVER`) at one loop on one connection, with ``[breakdown]``: the
  latency must come out at 1 ms + the round trip within 2 %. Placement ``auto`` and ``none``, and
  clients that wait for replies by sleeping (``load.wait = "block"``), by polling (``"spin"``)
  and by polling for at most N us after each reply (``spin:N``: ``load.spin_us = N``),
  alternating (``--wait`` picks; ``--io`` the raw driver's client path). Prints the median
  latency, the round trip's median (a no-op request at one loop), the difference and the
  client's polls per request; first what one poll of a spinning client costs here, unbounded
  and bounded (an idle event loop's iterations with ``rpcmeter.runners.spin.Spin``, a blocking
  client's zero-timeout polls in ``rpcmeter.drivers.raw.polling_recv``).
- ``wakeups``: why the ``sleep`` check comes out above 1 ms + the round trip on a virtual
  machine, with no rpcmeter code in the path: a bare client and a bare server (one connection,
  blocking reads, kernel receive timestamps on both ends, pinned to different CPUs as rpcmeter
  pins them), a no-op request and a 1 ms one alternating; prints the medians of each part of
  the round trip (the server's wakeup from its request's arrival to its read, the reply's way
  from the server's send to the client's socket, the client's wakeup from that to its read) and
  how much longer each is when the other side took 1 ms: an idle CPU's wakeup.
- ``profile``: the slowdown of profiling the server: the built-in HTTP server at one loop (5!,
  the server's per-request cost is small, so sampling pauses weigh most), ``[profile] server``
  off and on, alternating; prints requests/s and server CPU per request of each, and the ratio.

    python benchmarks/breakdown_checks.py [hyperfine|sleep|wakeups|profile ...] [--rounds 3]
        [--wait block,spin,spin:50] [--io auto|event|blocking]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import os
import shutil
import socket
import statistics
import struct
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from rpcmeter.drivers.raw import polling_recv
from rpcmeter.plan.load import build_suite
from rpcmeter.run.execute import RunOptions, run_suite
from rpcmeter.runners.event_loop import new_event_loop
from rpcmeter.runners.spin import Spin

Wait = tuple[str, float | None]  # load.wait and load.spin_us

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
    [case] = run_suite(suite).cases
    c = case.command
    assert c is not None and c.wall_s is not None
    return c.wall_s, (c.user_s or 0.0) + (c.sys_s or 0.0)


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


def _sleep_case(placement: str, wait: Wait, io: str) -> tuple[float, float, float, float, float]:
    """Latency p50, round trip p50 (before, after) of the 1 ms server at one loop (us), and the
    client's polls per request."""
    how, spin_us = wait
    suite = build_suite(
        {
            "name": "sleep 1 ms",
            "target": {
                "driver": "raw",
                "transport": "tcp",
                "server": {"command": ["{python}", "-c", EXACT_SLEEP_SERVER, "{port}"]},
                "options": {"io": io},
            },
            "load": {
                "requests": 1000,
                "warmup": 20,
                "threads": 1,
                "connections": 1,
                "wait": how,
                **({} if spin_us is None else {"spin_us": spin_us}),
            },
            "workloads": {"sleep": {"ms": 1}},
            "breakdown": {"rtt_requests": 500},
            "placement": {"server_cpus": placement, "client_cpus": placement},
        }
    )
    [case] = run_suite(suite).cases
    rtt = case.breakdown.rtt_us if case.breakdown is not None else None
    assert case.latency is not None and rtt is not None, case.reason
    p50, rtt_p50, before, after = (
        math.nan if f is None else f for f in (case.latency.p50_us, rtt.p50, rtt.before, rtt.after)
    )
    polls = (case.counters or {}).get("polls", 0) / max(case.requests, 1)
    return p50, rtt_p50, before, after, polls


def spin_poll_us(spin_us: float | None, seconds: float = 0.3) -> tuple[float, float]:
    """Microseconds per poll of a spinning client with nothing to read (``spin_us``: its
    bound, longer than ``seconds``; None: unbounded): an event loop kept polling by
    :class:`~rpcmeter.runners.spin.Spin`, and a blocking client's zero-timeout polls in
    :func:`~rpcmeter.drivers.raw.polling_recv` until a reply comes after ``seconds``."""
    loop = new_event_loop()
    try:
        spin = Spin(loop, spin_us)
        t0 = time.perf_counter()
        loop.run_until_complete(asyncio.sleep(seconds))
        event_us = (time.perf_counter() - t0) / max(spin.polls, 1) * 1e6
        spin.stop()
        loop.run_until_complete(asyncio.sleep(0))
    finally:
        loop.close()
    a, b = socket.socketpair()
    with a, b:
        polls = [0]
        recv = polling_recv(a, spin_us, polls)
        sender = threading.Timer(seconds, b.sendall, (b"x",))
        t0 = time.perf_counter()
        sender.start()
        recv(1)
        blocking_us = (time.perf_counter() - t0) / max(polls[0], 1) * 1e6
        sender.join()
    return event_us, blocking_us


def wait_label(wait: Wait) -> str:
    how, spin_us = wait
    return how if spin_us is None else f"spin {spin_us:g}us"


def check_sleep(rounds: int, waits: list[Wait], io: str) -> None:
    unbounded = spin_poll_us(None)
    bounded = spin_poll_us(10e6)
    print(
        "one poll of a spinning client with nothing to read: event loop "
        f"{unbounded[0]:.2f} us ({bounded[0]:.2f} bounded), blocking socket {unbounded[1]:.2f} us "
        f"({bounded[1]:.2f} bounded)"
    )
    print(
        "a server sleeping exactly 1 ms, one loop: latency against 1 ms + round trip (medians); "
        f"placement auto (server and client on different CPUs) and none, client io {io}, waiting "
        f"{', '.join(wait_label(w) for w in waits)}, alternating"
    )
    width = max(len(wait_label(w)) for w in waits)
    for _ in range(rounds):
        for placement in ("auto", "none"):
            for wait in waits:
                latency, rtt, before, after, polls = _sleep_case(placement, wait, io)
                print(
                    f"  {placement:4} {wait_label(wait):{width}}  latency p50 {latency:7.1f} us, "
                    f"round trip p50 {rtt:6.1f} us (before {before:5.1f}, after {after:5.1f}): "
                    f"{latency / (1000.0 + rtt) - 1:+.2%} from 1 ms + round trip, "
                    f"{polls:,.0f} polls/request"
                )


# The ``wakeups`` check's server: answers ``n`` at once and ``s`` after exactly 1 ms (0.7 ms
# asleep, the rest on the clock), with its wakeup (the request's kernel arrival to its read), its
# handling and its clock at the send (CLOCK_REALTIME, ns).
STAMPING_SERVER = """
import socket, struct, sys, time
SO_TIMESTAMPNS = getattr(socket, "SO_TIMESTAMPNS", 35)
srv = socket.create_server(("127.0.0.1", int(sys.argv[1])))
srv.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPNS, 1)
print("ready", flush=True)
conn, _ = srv.accept()
conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
clock = time.perf_counter_ns
while True:
    data, anc, _, _ = conn.recvmsg(64, socket.CMSG_SPACE(16))
    if not data:
        break
    now = time.time_ns()
    sec, nsec = struct.unpack_from("@qq", anc[0][2])
    t0 = clock()
    if data[4:5] == b"s":
        time.sleep(0.0007)
        while clock() - t0 < 1_000_000:
            pass
    conn.sendall(struct.pack(">qqq", now - (sec * 10**9 + nsec), clock() - t0, time.time_ns()))
"""
_PARTS = ("server wakeup", "reply to client socket", "client wakeup", "round trip - handling")


def _stamped_exchanges(sock: socket.socket, code: bytes, count: int) -> list[float]:
    """Medians (us) of the parts in :data:`_PARTS` over ``count`` requests ``code``."""
    rows = []
    for _ in range(count):
        t0 = time.perf_counter_ns()
        sock.sendall(struct.pack(">IB", 1, code[0]))
        data, anc, _, _ = sock.recvmsg(64, socket.CMSG_SPACE(16))
        now = time.time_ns()
        latency = time.perf_counter_ns() - t0
        sec, nsec = struct.unpack_from("@qq", anc[0][2])
        arrived = sec * 10**9 + nsec
        server_wake, handling, sent = struct.unpack(">qqq", data)
        rows.append((server_wake, arrived - sent, now - arrived, latency - handling))
    return [statistics.median(r[k] for r in rows) / 1e3 for k in range(len(_PARTS))]


def check_wakeups(rounds: int) -> None:
    cpus = sorted(os.sched_getaffinity(0))
    pin = len(cpus) >= 2
    print(
        "bare sockets, one blocking loop, no rpcmeter code: the parts of a no-op round trip and "
        f"of a 1 ms one (medians, us){'; server and client pinned apart' if pin else ''}"
    )
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    server = subprocess.Popen(
        [sys.executable, "-c", STAMPING_SERVER, str(port)], stdout=subprocess.PIPE
    )
    mask = os.sched_getaffinity(0)
    try:
        assert server.stdout is not None
        server.stdout.readline()
        if pin:
            os.sched_setaffinity(server.pid, {cpus[0]})
            os.sched_setaffinity(0, {cpus[1]})
        with socket.create_connection(("127.0.0.1", port)) as sock:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            sock.setsockopt(socket.SOL_SOCKET, getattr(socket, "SO_TIMESTAMPNS", 35), 1)
            _stamped_exchanges(sock, b"n", 100)  # warm up
            for _ in range(rounds):
                noop = _stamped_exchanges(sock, b"n", 500)
                slept = _stamped_exchanges(sock, b"s", 500)
                print(
                    "  "
                    + ", ".join(
                        f"{p} {a:.1f} -> {b:.1f}"
                        for p, a, b in zip(_PARTS, noop, slept, strict=True)
                    )
                )
    finally:
        os.sched_setaffinity(0, mask)
        server.kill()
        server.wait()


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
    case: dict[str, Any] = result.cases[0].dump()
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


def parse_wait(text: str) -> Wait:
    """``block``, ``spin`` or ``spin:N`` (spinning for at most N us after each reply)."""
    how, _, budget = text.partition(":")
    if how == "block" and not budget:
        return how, None
    if how == "spin":
        spin_us = float(budget) if budget else None
        if spin_us is not None and not 0 <= spin_us < math.inf:
            raise ValueError(text)
        return how, spin_us
    raise ValueError(text)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("checks", nargs="*", default=["hyperfine", "sleep", "wakeups", "profile"])
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument(
        "--wait",
        default="block,spin",
        help='sleep: how the client waits for replies, comma-separated (load.wait: "block", '
        '"spin"; "spin:N": spin with load.spin_us = N; default block and spin, alternating)',
    )
    p.add_argument(
        "--io",
        choices=("auto", "event", "blocking"),
        default="auto",
        help="sleep: the raw driver's client path (options.io; auto: blocking at one loop)",
    )
    args = p.parse_args()
    try:
        waits = [parse_wait(w) for w in args.wait.split(",")]
    except ValueError:
        p.error(
            f"--wait: expected block, spin or spin:MICROSECONDS comma-separated, got {args.wait!r}"
        )
    checks: dict[str, Callable[[int], None]] = {
        "hyperfine": check_hyperfine,
        "sleep": lambda rounds: check_sleep(rounds, waits, args.io),
        "wakeups": check_wakeups,
        "profile": check_profile,
    }
    for check in args.checks:
        if check not in checks:
            p.error(f"unknown check {check!r} (checks: {', '.join(checks)})")
    for check in args.checks:
        checks[check](args.rounds)


if __name__ == "__main__":
    main()
