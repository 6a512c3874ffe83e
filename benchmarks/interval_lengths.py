"""A case's intervals over its life: runs one-second cases against the built-in HTTP server
(``--repeat`` of them, four loops in one client) and prints each interval's start, length,
replies, requests/s, p50 and the clients' CPU seconds, then the case's wall time and the
clients' CPU. The intervals should add up to the wall time, and their CPU to the clients'; a
last interval of a few straggling replies should last a few milliseconds, not a second.

    python benchmarks/interval_lengths.py --repeat 2 --duration 1.0
"""

from __future__ import annotations

import argparse

from rpcmeter.plan.load import build_suite
from rpcmeter.run.execute import run_suite


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=2, help="cases to run")
    parser.add_argument("--duration", type=float, default=1.0, help="each case's load, seconds")
    parser.add_argument("--interval", type=float, default=1.0, help="the series' interval_s")
    args = parser.parse_args()
    suite = build_suite(
        {
            "name": "interval lengths",
            "repeat": args.repeat,
            "target": {"driver": "http", "transport": "tcp"},
            "workloads": {"noop": {}},
            "load": {"duration_s": args.duration, "warmup": 5, "threads": 4},
            "timeseries": {"interval_s": args.interval},
            "resources": {"idle_s": 0},
        }
    )
    for case in run_suite(suite).cases:
        print(f"case {case.id} ({case.status})")
        print(
            f"  {'start s':>8} {'seconds':>8} {'replies':>8} {'req/s':>9} {'p50 us':>9} {'CPU s':>7}"
        )
        for i in case.series.intervals if case.series is not None else []:
            p50 = f"{i.p50_us:9.1f}" if i.p50_us is not None else f"{'-':>9}"
            print(
                f"  {i.start_s:8.3f} {i.seconds:8.4f} {i.ok:8,} {i.throughput_rps:9,.0f} "
                f"{p50} {i.client_cpu_s or 0.0:7.4f}"
            )
        cpu = (case.cpu.client_user_s or 0.0) + (case.cpu.client_sys_s or 0.0)
        total = sum(i.seconds for i in case.series.intervals) if case.series else 0.0
        spent = sum(i.client_cpu_s or 0.0 for i in case.series.intervals) if case.series else 0.0
        print(
            f"  intervals {total:.4f} s of wall {case.wall_s:.4f} s; CPU {spent:.4f} of {cpu:.4f} s"
        )


if __name__ == "__main__":
    main()
