"""``rpcmeter http`` (the one-liner) against the same run as a suite file and against wrk, oha
and h2load, on one server, alternating in one run.

The server (nginx by default, one worker; ``--server builtin``: rpcmeter's built-in HTTP server)
runs pinned to the server CPU (see :mod:`versus`). Each round runs, one after the other, pinned
to the client CPU with ``taskset``, for the same duration and connections:

- ``rpcmeter http URL -c C -z D`` (the one-liner);
- ``rpcmeter run`` of the suite that ``--save-suite`` wrote for that very command line;
- ``wrk -t1 -cC -dD``, ``oha -c C -z D`` and ``h2load --h1 -t1 -c C -D D``, those installed.

With ``--http2`` every client speaks h2c with ``--streams`` requests in flight per connection
(rpcmeter ``--http2 -p``, oha ``--http2 -p``, h2load ``-m``); wrk, HTTP/1.1 only, sits out.

It prints requests/s, the client's CPU per request (the whole process's, from
``getrusage(RUSAGE_CHILDREN)``, start-up and every process it started included: see
:mod:`subreaper`) and how busy the server was; then the
medians, the CPU per request rpcmeter's own report gives (the measured requests only), and the
ratios one-liner / suite (expected 1 within the noise: both build the same Suite and run the
same code) and one-liner / each peer.

    python benchmarks/oneline_vs_peers.py [--connections 10] [--duration 3] [--rounds 3]
                                          [--server nginx|builtin] [--http2 [--streams 10]]

wrk, h2load: Debian packages ``wrk`` and ``nghttp2-client``; oha: ``cargo install oha``
(looked for on PATH and in ~/.cargo/bin). A peer that is missing sits out.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from functools import partial
from pathlib import Path

from subreaper import become_subreaper, run_counted
from versus import Layout, Run, Runs, Served, layout, pct, rounds, serve

from rpcmeter.servers import nginx
from rpcmeter.servers.process import ServerProcess, new_endpoint


def tool(name: str) -> str | None:
    found = shutil.which(name)
    home = Path.home() / ".cargo" / "bin" / name
    return found or (str(home) if home.exists() else None)


def run_wrk(url: str, c: int, d: float, cpu: int) -> tuple[float, float]:
    """(requests/s, client CPU seconds per request) of one wrk run."""
    out, cpu_s = run_counted(["wrk", "-t1", f"-c{c}", f"-d{d:g}s", url], cpu, d + 60)
    requests = re.search(r"(\d+) requests in", out)
    rate = re.search(r"Requests/sec:\s*([\d.]+)", out)
    errors = re.search(r"Non-2xx or 3xx responses: (\d+)", out)
    if requests is None or rate is None or errors is not None:
        raise RuntimeError(f"wrk: no rate, or errors:\n{out}")
    return float(rate.group(1)), cpu_s / int(requests.group(1))


def run_oha(
    oha: str, url: str, c: int, d: float, streams: int | None, cpu: int
) -> tuple[float, float]:
    """(requests/s, client CPU seconds per request) of one oha run (every reply 200)."""
    h2 = ["--http2", "-p", str(streams)] if streams else []
    command = [oha, "--no-tui", "--output-format", "json", "-c", str(c), "-z", f"{d:g}s", *h2]
    out, cpu_s = run_counted([*command, url], cpu, d + 60)
    report = json.loads(out)
    codes = report["statusCodeDistribution"]
    ok = int(codes.get("200", 0))
    if ok == 0 or len(codes) != 1:
        raise RuntimeError(
            f"oha: not every reply was 200: {codes} {report.get('errorDistribution')}"
        )
    return float(report["summary"]["requestsPerSec"]), cpu_s / ok


def run_h2load(url: str, c: int, d: float, streams: int | None, cpu: int) -> tuple[float, float]:
    """(requests/s, client CPU seconds per request) of one h2load run (every request OK)."""
    mode = ["-m", str(streams)] if streams else ["--h1"]
    out, cpu_s = run_counted(
        ["h2load", "-t1", "-c", str(c), "-D", f"{d:g}", *mode, url], cpu, d + 60
    )
    rate = re.search(r"finished in [\d.]+\w+, ([\d.]+) req/s", out)
    done = re.search(
        r"requests: \d+ total, \d+ started, \d+ done, (\d+) succeeded, (\d+) failed", out
    )
    if rate is None or done is None or int(done.group(2)):
        raise RuntimeError(f"h2load: no rate, or failures:\n{out}")
    return float(rate.group(1)), cpu_s / int(done.group(1))


def run_rpcmeter(
    argv: list[str], out: Path, cpu: int, timeout_s: float, own: list[float], rest: list[float]
) -> tuple[float, float]:
    """(requests/s, client CPU seconds per request, start-up included) of one rpcmeter run;
    the CPU per request of its own report (measured requests only) is appended to ``own``, the
    CPU seconds outside the measured requests (start-up, client process, warm-up) to ``rest``."""
    command = [sys.executable, "-m", "rpcmeter", *argv, "--no-store", "--no-live", "-o", str(out)]
    _, cpu_s = run_counted(command, cpu, timeout_s)
    case = json.loads(out.read_text())["cases"][0]
    if case["status"] != "ok" or case["errors"]:
        raise RuntimeError(f"rpcmeter: the case failed: {case['reason'] or case['errors']}")
    own.append(float(case["cpu"]["client_us_per_request"]) / 1e6)
    rest.append(cpu_s - own[-1] * int(case["ok"]))
    return float(case["throughput_rps"]), cpu_s / int(case["ok"])


@contextlib.contextmanager
def builtin(lay: Layout) -> Iterator[Served]:
    """rpcmeter's built-in HTTP server (HTTP/1.1 and h2c) on the layout's first server CPU."""
    ep = new_endpoint("tcp")
    cpus = lay.server_cpus[:1]
    command = [sys.executable, "-m", "rpcmeter.servers.http_server", "--port", str(ep.port)]
    with ServerProcess(command, ep, cpus=cpus) as process:
        yield Served(ep, process, 1, f"rpcmeter's built-in HTTP server (CPU {cpus[0]})", cpus)


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--connections", type=int, default=10)
    parser.add_argument("--duration", type=float, default=3.0, help="seconds per run")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--server", choices=["nginx", "builtin"], default="nginx")
    parser.add_argument("--http2", action="store_true", help="h2c for every client (no wrk)")
    parser.add_argument("--streams", type=int, default=10, help="--http2: in flight per connection")
    args = parser.parse_args()
    become_subreaper()  # rpcmeter's client processes counted (see subreaper)
    if args.duration < 1 or args.duration != int(args.duration):
        parser.error(f"--duration {args.duration:g}: whole seconds (h2load takes no fraction)")
    if args.server == "nginx" and nginx.executable() is None:
        parser.error("--server nginx: nginx is not installed (or try --server builtin)")
    lay = layout(1)
    c, d, cpu = args.connections, args.duration, lay.client_cpu
    streams = args.streams if args.http2 else None
    own: dict[str, list[float]] = {"one-liner": [], "suite": []}
    rest: dict[str, list[float]] = {"one-liner": [], "suite": []}
    server = (
        builtin(lay)
        if args.server == "builtin"
        else serve("nginx", "h2c" if streams else "http", lay)
    )
    with server as served, tempfile.TemporaryDirectory() as tmp:
        t = Path(tmp)
        url = f"http://127.0.0.1:{served.endpoint.port}/noop"
        oneline = ["http", url, "-c", str(c), "-z", f"{d:g}s"]
        if streams:
            oneline += ["--http2", "-p", str(streams)]
        saved = t / "suite.toml"
        subprocess.run(
            [sys.executable, "-m", "rpcmeter", *oneline, "--save-suite", str(saved), "--dry-run"],
            check=True,
            capture_output=True,
            timeout=60,
        )
        timeout_s = d + 120
        clients: list[tuple[str, Run]] = [
            (
                "one-liner",
                partial(
                    run_rpcmeter,
                    oneline,
                    t / "a.json",
                    cpu,
                    timeout_s,
                    own["one-liner"],
                    rest["one-liner"],
                ),
            ),
            (
                "suite",
                partial(
                    run_rpcmeter,
                    ["run", str(saved)],
                    t / "b.json",
                    cpu,
                    timeout_s,
                    own["suite"],
                    rest["suite"],
                ),
            ),
        ]
        if not streams and tool("wrk"):
            clients.append(("wrk", partial(run_wrk, url, c, d, cpu)))
        oha = tool("oha")
        if oha:
            clients.append(("oha", partial(run_oha, oha, url, c, d, streams, cpu)))
        if tool("h2load"):
            clients.append(("h2load", partial(run_h2load, url, c, d, streams, cpu)))
        what = f"{c} connections" + (f" x {streams} streams (h2c)" if streams else " (HTTP/1.1)")
        print(f"{served.description}, clients on CPU {cpu}; {what}, {d:g} s per run")
        print("one-liner: rpcmeter " + " ".join(oneline))
        runs = rounds(clients, args.rounds, served)
    return report(runs, own, rest, args.rounds)


def report(runs: Runs, own: dict[str, list[float]], rest: dict[str, list[float]], n: int) -> int:
    """The medians, the ratios and the ``SUMMARY`` line."""
    print(f"\nmedians of {n} rounds (CPU: the whole process, start-up included):")
    out: dict[str, object] = {"clients": {}, "ratios": {}}
    for name in runs.by_client:
        rate, cpu, busy, _ = runs.median(name)
        out["clients"][name] = {"rps": round(rate), "cpu_us": round(cpu * 1e6, 3)}  # type: ignore[index]
        print(
            f"  {name:<10} {rate:>10,.0f} req/s {cpu * 1e6:>7.2f} us CPU/req   server {pct(busy)} busy"
        )
    for name, figures in own.items():
        us = statistics.median(figures) * 1e6
        out["clients"][name]["cpu_us_own"] = round(us, 3)  # type: ignore[index]
        outside = statistics.median(rest[name])
        out["clients"][name]["cpu_s_outside"] = round(outside, 3)  # type: ignore[index]
        print(
            f"  {name:<10} own report: {us:.2f} us CPU/req (the measured requests only); "
            f"{outside:.2f} s CPU outside them (start-up...)"
        )
    one = runs.median("one-liner")
    for other in runs.by_client:
        if other == "one-liner":
            continue
        theirs = runs.median(other)
        rate, cpu = one[0] / theirs[0], one[1] / theirs[1]
        out["ratios"][other] = {"rps": round(rate, 3), "cpu": round(cpu, 3)}  # type: ignore[index]
        theirs_own = statistics.median(own[other]) if other in own else theirs[1]
        mine = statistics.median(own["one-liner"]) / theirs_own  # a suite's: its own report too
        out["ratios"][other]["cpu_own"] = round(mine, 3)  # type: ignore[index]
        print(
            f"  one-liner / {other}: requests/s {rate:.2f}, CPU per request {cpu:.2f} "
            f"({mine:.2f} from its own report)"
        )
    print("SUMMARY " + json.dumps(out, sort_keys=True))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
