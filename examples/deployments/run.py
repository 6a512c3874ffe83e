#!/usr/bin/env python3
"""Study 004's deployments on hosts of their own, from one command (root only):

    sudo python3 examples/deployments/run.py [--quick] [-o DIR] [-- RPCMETER-RUN-ARGS...]

It makes seven hosts (network namespaces on a bridge, tests/support/hosts.py; see hosts.sh for
the map), starts the factorial server in A and in each of C, D, E and F, nginx in B in front of
C (port 8001) and of C-F (port 8004), runs deployments.toml from host G with ``rpcmeter run``,
and prints the study's table per workload: latency, server compute and overhead (mean and
standard deviation), the network round trip taken out, and requests/s. Every process and every
namespace is gone afterwards, also after a failure or Ctrl-C.

With ``--dask`` the load comes from two Dask workers in hosts H and I (198.18.0.8 and .9), with
the scheduler and ``rpcmeter run --cluster`` in G; the result names each worker's host.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "src")]

from rpcmeter.runners.distributed import LOAD_WORKER_CONFIG  # noqa: E402
from tests.support.hosts import Hosts, can_make_namespaces, torn_down_on_signals  # noqa: E402

A, B, C, D, E, F, G = range(7)
WORKERS = (7, 8)  # hosts H and I: Dask workers, with --dask
PORT = 8080


def start_servers(h: Hosts, env: dict[str, str], tmp: Path) -> None:
    """The factorial server in A and C-F, nginx in B; wait until all listen."""
    for i in (A, C, D, E, F):
        h.start(
            i,
            [
                sys.executable,
                "-m",
                "rpcmeter.servers.http_server",
                "--host",
                h.addresses[i],
                "--port",
                str(PORT),
            ],
            env=env,
            stdout=subprocess.DEVNULL,
        )
    conf = (HERE / "nginx.conf.in").read_text().replace("@DIR@", str(tmp))
    for name, i in zip("BCDEF", (B, C, D, E, F), strict=True):
        conf = conf.replace(f"@{name}@", h.addresses[i])
    (tmp / "nginx.conf").write_text(conf)
    nginx = shutil.which("nginx") or "/usr/sbin/nginx"
    h.start(
        B,
        [
            nginx,
            "-p",
            str(tmp),
            "-c",
            str(tmp / "nginx.conf"),
            "-e",
            str(tmp / "error.log"),
            "-g",
            "daemon off;",
        ],
    )
    for i, port in ((A, PORT), (C, PORT), (D, PORT), (E, PORT), (F, PORT), (B, 8001), (B, 8004)):
        h.wait_listening(i, port)


def start_dask(h: Hosts, env: dict[str, str]) -> list[str]:
    """A Dask scheduler in G and a worker in each of H and I (as ``local:N`` starts its
    workers: no sampling profiler, slower housekeeping); the ``--cluster`` arguments."""
    for key, value in LOAD_WORKER_CONFIG.items():
        env["DASK_" + key.upper().replace(".", "__").replace("-", "_")] = str(value)
    scheduler = f"tcp://{h.addresses[G]}:8786"
    h.start(
        G,
        [
            sys.executable,
            "-m",
            "dask",
            "scheduler",
            "--host",
            h.addresses[G],
            "--port",
            "8786",
            "--no-dashboard",
        ],
        env=env,
        stderr=subprocess.DEVNULL,
    )
    h.wait_listening(G, 8786)
    for i in WORKERS:
        h.start(
            i,
            [
                sys.executable,
                "-m",
                "dask",
                "worker",
                scheduler,
                "--host",
                h.addresses[i],
                "--nthreads",
                "1",
                "--no-dashboard",
            ],
            env=env,
            stderr=subprocess.DEVNULL,
        )
    deadline = time.monotonic() + 60  # each worker connected to the scheduler
    while not all(
        h.run(i, ["ss", "-Htn", "state", "established", "dport = :8786"]).stdout.strip()
        for i in WORKERS
    ):
        if time.monotonic() > deadline:
            raise RuntimeError("the Dask workers did not join the scheduler in 60 s")
        time.sleep(0.2)
    # two clients of two loops each (the suite's 4 loops), one per worker; the big one stays one
    return [
        "--cluster",
        scheduler,
        "--set",
        "load.clients=2",
        "--set",
        "load.threads=2",
        "--set",
        "load.connections=2",
        "--set",
        "workloads.big.clients=1",
    ]


def rate(rps: float) -> str:
    return f"{rps:,.1f}" if rps >= 10 else f"{rps:.3f}"


def ms(us: float | None) -> str:
    """Microseconds as milliseconds, three significant places or more."""
    if us is None or not math.isfinite(us):
        return "-"
    return f"{us / 1e3:,.3f}" if abs(us) < 1e4 else f"{us / 1e3:,.1f}"


def table(doc: dict[str, Any]) -> str:
    """The study's table, one per workload: per setup, requests/s, latency, latency less the
    network round trip, the server's queue and compute and the overhead (mean and sd, ms), and
    the network round trip (TCP handshakes, median)."""
    out: list[str] = []
    for workload in dict.fromkeys(c["workload"] for c in doc["cases"]):
        out += [
            f"{workload}",
            "",
            "| setup | req/s | latency avg | sd | latency - network RTT | queue avg "
            "| server compute avg | sd | overhead avg | sd | network RTT |",
            "|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|",
        ]
        for case in (c for c in doc["cases"] if c["workload"] == workload):
            if case["status"] != "ok":
                out.append(f"| {case['variant']} | {case['status']}: {case['reason']} |")
                continue
            lat = case["latency"]
            b = case.get("breakdown") or {}
            server = b.get("server_us") or {}
            over = b.get("overhead_us") or {}
            net = (case.get("network_rtt_us") or {}).get("p50")
            less = lat["mean_us"] - net if net is not None else None
            cells = [
                case["variant"],
                rate(case["throughput_rps"]),
                ms(lat["mean_us"]),
                ms(lat["stdev_us"]),
                ms(less),
                ms((b.get("queue_us") or {}).get("mean")),
                ms(server.get("mean")),
                ms(server.get("stdev")),
                ms(over.get("mean")),
                ms(over.get("stdev")),
                ms(net),
            ]
            out.append("| " + " | ".join(cells) + " |")
        out.append("")
    return "\n".join(out)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="the suite's quick counts")
    parser.add_argument("-o", "--output", type=Path, help="directory for the result and table")
    parser.add_argument(
        "--dask",
        action="store_true",
        help="the load from two Dask workers in hosts H and I (the scheduler in G)",
    )
    parser.add_argument("rest", nargs="*", help="more arguments for `rpcmeter run`")
    args = parser.parse_args()
    reason = can_make_namespaces()
    if reason:
        print(f"run.py: {reason}: run it with sudo", file=sys.stderr)
        return 2
    if not (shutil.which("nginx") or Path("/usr/sbin/nginx").exists()):
        print("run.py: needs nginx (apt-get install nginx-light)", file=sys.stderr)
        return 2
    outdir = args.output or Path(tempfile.mkdtemp(prefix="rpcmeter-deployments-"))
    outdir.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT / "src"), *sys.path])}
    with (
        torn_down_on_signals(),
        tempfile.TemporaryDirectory(prefix="rpcmeter-nginx-") as tmp,
        Hosts(9 if args.dask else 7, prefix=f"rpm-{os.getpid()}-deploy") as h,
    ):
        start_servers(h, env, Path(tmp))
        cluster = start_dask(h, env) if args.dask else []
        cmd = [
            sys.executable,
            "-m",
            "rpcmeter",
            "run",
            str(HERE / "deployments.toml"),
            "-o",
            str(outdir / "result.json"),
            "--no-store",
            "--markdown",
            str(outdir / "report.md"),
            *(["--quick"] if args.quick else []),
            *cluster,
            *args.rest,
        ]
        done = subprocess.run(h.argv(G, cmd), env=env, check=False)
        if done.returncode not in (0, 1):
            return done.returncode
    doc = json.loads((outdir / "result.json").read_text())
    text = table(doc)
    (outdir / "table.md").write_text(text)
    print(f"\n{text}\nresult, report and table in {outdir}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
