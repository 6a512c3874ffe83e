"""How long rpcmeter takes to answer, beside a bare interpreter and the peers' start.

Each round runs every command once, in turn, so that a busy spell of the machine falls on all
of them alike; the table shows each command's median and fastest wall time over the rounds,
and the issue's targets beside rpcmeter's own rows:

- ``rpcmeter --version``: under 0.15 s;
- ``import rpcmeter.cli``: under 0.3 s;
- a 100-request run against an ``address`` target (a built-in HTTP server this script starts
  once, beforehand): under 1.0 s;
- a 100-request run against the built-in server that the run starts: under 1.5 s.

The peers (wrk, h2load, hyperfine) are timed with ``--version`` where they are installed.

    python benchmarks/startup.py [--rounds 10]
"""

from __future__ import annotations

import argparse
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

SUITE = """name = "startup"
[target]
driver = "http"
{address}
[workloads.noop]
[load]
requests = 100
warmup = 0
"""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_listening(port: int, seconds: float = 30.0) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.02)
    raise SystemExit(f"the built-in server did not listen on port {port} in {seconds:g} s")


def timed(argv: list[str], peer: bool) -> float:
    """Wall seconds of one run of ``argv`` (a peer's exit status is not checked: ``wrk
    --version`` prints its version and exits 1)."""
    start = time.perf_counter()
    done = subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, timeout=120)
    took = time.perf_counter() - start
    if done.returncode != 0 and not peer:
        raise SystemExit(f"{' '.join(argv)}: exit {done.returncode}: {done.stderr.decode()[-400:]}")
    return took


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=10)
    args = parser.parse_args()
    if not 1 <= args.rounds <= 1000:
        parser.error("--rounds: between 1 and 1000")
    rpcmeter = [sys.executable, "-m", "rpcmeter"]
    with tempfile.TemporaryDirectory() as tmp:
        port = free_port()
        server = subprocess.Popen(
            [sys.executable, "-m", "rpcmeter.servers.http_server", "--port", str(port)],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        try:
            wait_listening(port)
            managed = Path(tmp, "managed.toml")
            managed.write_text(SUITE.format(address=""))
            remote = Path(tmp, "address.toml")
            remote.write_text(SUITE.format(address=f'address = "127.0.0.1:{port}"'))
            run = ["run", "--no-store", "--no-live"]
            # name: (command line, target in seconds or None, a peer whose exit status is not checked)
            commands: dict[str, tuple[list[str], float | None, bool]] = {
                "python -c pass": ([sys.executable, "-c", "pass"], None, False),
                "rpcmeter --version": ([*rpcmeter, "--version"], 0.15, False),
                "import rpcmeter.cli": ([sys.executable, "-c", "import rpcmeter.cli"], 0.3, False),
                "100 requests, address": ([*rpcmeter, *run, str(remote)], 1.0, False),
                "100 requests, built-in server": ([*rpcmeter, *run, str(managed)], 1.5, False),
            }
            for tool in ("wrk", "h2load", "hyperfine"):
                path = shutil.which(tool)
                if path:
                    commands[f"{tool} --version"] = ([path, "--version"], None, True)
            times: dict[str, list[float]] = {name: [] for name in commands}
            for _ in range(args.rounds):
                for name, (argv, _target, peer) in commands.items():
                    times[name].append(timed(argv, peer))
        finally:
            server.terminate()
            server.wait(timeout=10)
    print(f"{'command':32} {'median s':>9} {'min s':>7} {'target s':>9}  met")
    missed = 0
    for name, (_argv, target, _peer) in commands.items():
        median = statistics.median(times[name])
        met = "" if target is None else ("yes" if median < target else "NO")
        missed += met == "NO"
        shown = "" if target is None else f"{target:.2f}"
        print(f"{name:32} {median:9.3f} {min(times[name]):7.3f} {shown:>9}  {met}")
    return 1 if missed else 0


if __name__ == "__main__":
    sys.exit(main())
