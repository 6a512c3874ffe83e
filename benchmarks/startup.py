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
Beside the wall time, the table shows the CPU time (user + system) of every process a command
started (the forkserver, the clients and the server too: this script reaps them as a child
subreaper, on Linux): on a busy machine it moves far less than the wall time.

    python benchmarks/startup.py [--rounds 10]
"""

from __future__ import annotations

import argparse
import contextlib
import ctypes
import os
import resource
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


def reap_orphans() -> bool:
    """Become a child subreaper (Linux): the processes a command leaves behind (a forkserver
    that exits after its parent) are then reaped here, and their CPU counted. False elsewhere."""
    try:
        return bool(ctypes.CDLL(None).prctl(36, 1) == 0)  # PR_SET_CHILD_SUBREAPER
    except (OSError, AttributeError):
        return False


def reap(keep: int) -> None:
    """Wait for this process's children but ``keep`` (the server): the orphans a command left,
    which are ours once it exited."""
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == keep:
            continue
        try:
            ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            continue
        if ppid == os.getpid():
            with contextlib.suppress(ChildProcessError):
                os.waitpid(int(entry.name), 0)


def cpu_children() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def timed(argv: list[str], peer: bool, keep: int) -> tuple[float, float]:
    """Wall seconds of one run of ``argv``, and the CPU seconds of its processes (a peer's exit
    status is not checked: ``wrk --version`` prints its version and exits 1)."""
    cpu = cpu_children()
    start = time.perf_counter()
    done = subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, timeout=120)
    took = time.perf_counter() - start
    if done.returncode != 0 and not peer:
        raise SystemExit(f"{' '.join(argv)}: exit {done.returncode}: {done.stderr.decode()[-400:]}")
    reap(keep)
    return took, cpu_children() - cpu


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=10)
    args = parser.parse_args()
    if not 1 <= args.rounds <= 1000:
        parser.error("--rounds: between 1 and 1000")
    rpcmeter = [sys.executable, "-m", "rpcmeter"]
    whole_tree = reap_orphans()
    if sys.flags.dont_write_bytecode:
        print(
            "note: PYTHONDONTWRITEBYTECODE is set: where rpcmeter's modules have no cached "
            "bytecode (__pycache__), every start compiles them (about 0.7 s more)"
        )
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
            cpus: dict[str, list[float]] = {name: [] for name in commands}
            for _ in range(args.rounds):
                for name, (argv, _target, peer) in commands.items():
                    wall, cpu = timed(argv, peer, server.pid)
                    times[name].append(wall)
                    cpus[name].append(cpu)
        finally:
            server.terminate()
            server.wait(timeout=10)
    load = ", ".join(f"{x:.2f}" for x in os.getloadavg())
    cpu_of = "all its processes" if whole_tree else "the processes it waited for"
    print(f"{args.rounds} rounds, load average {load}; CPU: user + system of {cpu_of}")
    print(f"{'command':32} {'median s':>9} {'min s':>7} {'CPU s':>7} {'target s':>9}  met")
    missed = 0
    for name, (_argv, target, _peer) in commands.items():
        median = statistics.median(times[name])
        met = "" if target is None else ("yes" if median < target else "NO")
        missed += met == "NO"
        shown = "" if target is None else f"{target:.2f}"
        cpu = statistics.median(cpus[name])
        print(f"{name:32} {median:9.3f} {min(times[name]):7.3f} {cpu:7.3f} {shown:>9}  {met}")
    return 1 if missed else 0


if __name__ == "__main__":
    sys.exit(main())
