"""``rpcmeter grpc`` (the one-liner) against ghz, the same command line, in one run.

Both run the very same flags, as a ghz user types them::

    ghz              --insecure --proto greeter.proto --call helloworld.Greeter.SayHello \\
                     -d '{"name": "world"}' -c 50 --connections 1 -z 3s 127.0.0.1:PORT
    rpcmeter grpc    (the same flags)

against the Go greeter server (``benchmarks/greeter``, grpc-go; see :mod:`versus`), pinned to
the server CPUs, each client pinned to the client CPU with ``taskset``, alternating for
``--rounds`` rounds. Each run prints calls/s and the client's CPU per call: the whole process's
(``getrusage(RUSAGE_CHILDREN)``, start-up and every process it started included: see
:mod:`subreaper`), for both, and for rpcmeter also the CPU its own report gives (the measured
calls only) and its CPU outside those calls. Then the medians, and rpcmeter / ghz for calls/s
and CPU per call. A run where the server was busier than 85 % is marked ``server-bound``: both
clients then wait on the server, and the calls/s ratio says little.

    python benchmarks/oneline_vs_ghz.py [--concurrency 50] [--connections 1] [--duration 3]
                                        [--rounds 3] [--server-cpus N] [--reflection]

``--reflection`` drops ``--proto`` from both command lines: both then ask the server's reflection
service, which describes RouteGuide only, so they call ``routeguide.RouteGuide/GetFeature``. ghz: ``go install github.com/bojand/ghz/cmd/ghz@latest`` (looked for on PATH and in
~/go/bin).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
from pathlib import Path

from greeter_server import PROTO, BuildError
from subreaper import become_subreaper, run_counted
from versus import (
    SERVER_BOUND,
    Run,
    Runs,
    add_server_arguments,
    check_timing,
    layout,
    pct,
    rounds,
    serve,
)
from vs_ghz import DATA, ghz_path

CALL = "helloworld.Greeter.SayHello"  # as ghz names it; rpcmeter takes it too
# --reflection: the server's reflection describes RouteGuide only (benchmarks/greeter/main.go)
REFLECTED_CALL = "routeguide.RouteGuide.GetFeature"
REFLECTED_DATA = '{"latitude": 407838351, "longitude": -746143763}'


def flags(args: argparse.Namespace, address: str) -> list[str]:
    """The command line both tools get (after the program's name)."""
    if args.reflection:
        call = ["--call", REFLECTED_CALL, "-d", REFLECTED_DATA]
    else:
        call = ["--proto", str(PROTO), "--call", CALL, "-d", DATA]
    return [
        "--insecure",
        *call,
        "-c",
        str(args.concurrency),
        "--connections",
        str(args.connections),
        "-z",
        f"{args.duration:g}s",
        address,
    ]


def run_ghz(ghz: str, argv: list[str], cpu: int, timeout_s: float) -> tuple[float, float]:
    """(calls/s, client CPU seconds per call) of one ghz run (every call must be OK)."""
    out, cpu_s = run_counted([ghz, *argv, "--format", "json"], cpu, timeout_s)
    report = json.loads(out)
    ok = report["statusCodeDistribution"].get("OK", 0)
    if ok < report["count"] - int(argv[argv.index("-c") + 1]):  # those in flight are cancelled
        raise RuntimeError(f"ghz: not every call was OK: {report['statusCodeDistribution']}")
    return report["rps"] * ok / report["count"], cpu_s / ok


def run_oneline(
    argv: list[str], out: Path, cpu: int, timeout_s: float
) -> tuple[float, float, float, float]:
    """(calls/s, client CPU seconds per call with start-up, the same from rpcmeter's own
    report: the measured calls only, the CPU seconds outside those calls) of one ``rpcmeter grpc``
    run."""
    command = [sys.executable, "-m", "rpcmeter", "grpc", *argv, "--no-store", "--no-live"]
    _, cpu_s = run_counted([*command, "-o", str(out)], cpu, timeout_s)
    case = json.loads(out.read_text())["cases"][0]
    if case["status"] != "ok" or case["errors"]:
        raise RuntimeError(f"rpcmeter grpc failed: {case['reason'] or case['errors']}")
    own = float(case["cpu"]["client_us_per_request"]) / 1e6
    outside = cpu_s - own * int(case["ok"])  # start-up, schema, client process, warm-up
    return float(case["throughput_rps"]), cpu_s / int(case["ok"]), own, outside


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--concurrency", type=int, default=50, help="-c: calls in flight")
    parser.add_argument("--connections", type=int, default=1)
    parser.add_argument("--duration", type=float, default=3.0, help="seconds per run (-z)")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--reflection", action="store_true", help="no --proto: reflection")
    add_server_arguments(parser, ["go"])
    args = parser.parse_args()
    become_subreaper()  # rpcmeter's client processes counted (see subreaper)
    check_timing(parser, args, whole_seconds=False)
    ghz = ghz_path()
    if ghz is None:
        print("needs ghz: go install github.com/bojand/ghz/cmd/ghz@latest", file=sys.stderr)
        return 2
    lay = layout(args.server_cpus)
    timeout_s = args.duration + 120
    own: list[float] = []
    outside: list[float] = []
    try:
        with serve("go", "grpc", lay) as served, tempfile.TemporaryDirectory() as tmp:
            argv = flags(args, f"127.0.0.1:{served.endpoint.port}")
            print(f"{served.description}, clients on CPU {lay.client_cpu}")
            print("both run: ... " + " ".join(argv[:-1]) + " 127.0.0.1:PORT")
            out = Path(tmp) / "out.json"

            def oneline() -> tuple[float, float]:
                rate, cpu, mine, rest = run_oneline(argv, out, lay.client_cpu, timeout_s)
                own.append(mine)
                outside.append(rest)
                return rate, cpu

            clients: list[tuple[str, Run]] = [
                ("ghz", lambda: run_ghz(ghz, argv, lay.client_cpu, timeout_s)),
                ("rpcmeter grpc", oneline),
            ]
            runs = rounds(clients, args.rounds, served)
    except BuildError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    return report(runs, own, outside, args, served.description)


def report(
    runs: Runs, own: list[float], outside: list[float], args: argparse.Namespace, server: str
) -> int:
    """The medians, the ratios and the ``SUMMARY`` line."""
    print(f"\nmedians of {args.rounds} rounds:")
    out: dict[str, object] = {"server": server, "clients": {}}
    for name in runs.by_client:
        rate, cpu, busy, _ = runs.median(name)
        out["clients"][name] = {"calls_s": round(rate), "cpu_us": round(cpu * 1e6, 3)}  # type: ignore[index]
        print(
            f"  {name:<14} {rate:>10,.0f} calls/s {cpu * 1e6:>7.2f} us CPU/call (whole process)"
            f"   server {pct(busy)} busy"
        )
    own_us = statistics.median(own) * 1e6
    out["rpcmeter_own_cpu_us"] = round(own_us, 3)
    print(f"  rpcmeter grpc's own report: {own_us:.2f} us CPU/call (the measured calls only)")
    rest = statistics.median(outside)
    out["rpcmeter_outside_calls_cpu_s"] = round(rest, 3)
    print(f"  rpcmeter grpc's CPU outside the measured calls: {rest:.2f} s a run (start-up...)")
    o, g = runs.median("rpcmeter grpc"), runs.median("ghz")
    rate, cpu = o[0] / g[0], o[1] / g[1]
    out["ratios"] = {"calls_s": round(rate, 3), "cpu": round(cpu, 3)}
    print(f"rpcmeter grpc / ghz: calls/s {rate:.2f}, CPU per call {cpu:.2f} (whole process)")
    out["ratios"]["cpu_own"] = round(own_us / (g[1] * 1e6), 3)  # type: ignore[index]
    print(
        f"rpcmeter grpc (own report) / ghz (whole process): CPU per call "
        f"{own_us / (g[1] * 1e6):.2f}"
    )
    busiest = runs.busiest(("ghz", "rpcmeter grpc"), 2)
    out["server_bound"] = bound = busiest > SERVER_BOUND
    if bound:
        print(f"server-bound: the server was {busiest:.0%} busy in a run (calls/s is its pace)")
    print("SUMMARY " + json.dumps(out, sort_keys=True))
    return 0


if __name__ == "__main__":
    sys.exit(main())
