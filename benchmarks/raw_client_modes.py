"""The raw-socket driver's two client paths against the same built-in raw server, in one run.

``io = "event"`` (closed loops as callbacks on one uvloop event loop) and ``io = "blocking"``
(one thread per loop, blocking send and receive), alternating for several rounds, server pinned to
one CPU and the client to another; for each shape (connections = loops) prints the median
requests/s and client CPU per request of both and their ratio.

    python benchmarks/raw_client_modes.py [--requests 20000] [--rounds 3] [--shapes 1,8]
"""

from __future__ import annotations

import argparse
import statistics
import sys

from rpcmeter.drivers.base import DriverContext
from rpcmeter.host.placement import available_cpus
from rpcmeter.runners.closed_loop import run_closed_loop
from rpcmeter.runners.spec import LoadSpec
from rpcmeter.servers.process import ServerProcess, new_endpoint
from rpcmeter.suite.workloads import NoopParams


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--requests", type=int, default=20000, help="per loop")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--shapes", default="1,8", help="loops (= connections) to compare")
    args = parser.parse_args()
    cpus = available_cpus()
    server_cpu, client_cpu = (cpus[0], cpus[1]) if len(cpus) > 1 else (cpus[0], cpus[0])
    endpoint = new_endpoint("tcp")
    cmd = [sys.executable, "-m", "rpcmeter.servers.raw_server", "--port", str(endpoint.port)]
    with ServerProcess(cmd, endpoint, cpus=[server_cpu]):
        for loops in (int(x) for x in args.shapes.split(",")):
            runs: dict[str, list[tuple[float, float]]] = {"event": [], "blocking": []}
            for _ in range(args.rounds):
                for io, results in runs.items():
                    out = run_closed_loop(
                        LoadSpec(
                            "raw",
                            DriverContext(
                                endpoint, NoopParams(), {"io": io}, threads=loops, connections=loops
                            ),
                            clients=1,
                            requests=max(1, args.requests // loops),
                            duration_s=None,
                            warmup=50,
                            timeout_s=300,
                            client_cpus=[client_cpu],
                        )
                    )
                    if out.failure:
                        raise SystemExit(f"{io}: {out.failure}")
                    c = out.clients[0]
                    results.append(
                        (
                            out.ok / out.wall_s,
                            ((c.cpu_user_s or 0.0) + (c.cpu_sys_s or 0.0)) / out.ok * 1e6,
                        )
                    )
            med = {
                io: (statistics.median(r[0] for r in rs), statistics.median(r[1] for r in rs))
                for io, rs in runs.items()
            }
            for io, (rps, cpu) in med.items():
                print(f"{loops:>3} loop(s)  {io:<8} {rps:>9,.0f} req/s  {cpu:6.1f} us CPU/req")
            print(
                f"{loops:>3} loop(s)  blocking / event: requests/s "
                f"{med['blocking'][0] / med['event'][0]:.2f}, "
                f"CPU per request {med['blocking'][1] / med['event'][1]:.2f}"
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
