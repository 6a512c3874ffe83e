"""Every peer comparison in one command: ``vs_wrk.py`` (HTTP/1.1, HTTPS/1.1), ``vs_h2load.py``
(h2c, HTTP/2 over TLS) and ``vs_ghz.py`` (gRPC), each run as it runs alone, for each server size
given, and one table of what their ``SUMMARY`` lines say: the peer's and rpcmeter's requests/s and
CPU a request, the ratios against the targets, how busy the server was, and a verdict a row:
``met``, ``missed``, ``server-bound`` (the server set the pace: no ratio) or why it did not run
(a peer not installed, a script that failed).

    python benchmarks/vs_all.py [--server-cpus 6 10] [--duration 3] [--rounds 3] [--one]
                                [--only wrk,h2load,ghz] [--json FILE]

``--one``: one connection and one request in flight (``--connections 1``, ``--streams 1``),
where one nginx worker on a 2-CPU machine leaves the clients the pace; the scripts' defaults (50
requests in flight) need a server with several CPUs. gRPC does not run with ``--one``: its target
(3x ghz's calls/s) is for many calls in flight, where ghz's own cost sets its pace, not for one
call's round trip. The exit status is 1 when a row missed its targets, 2 when none could run.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent

# (the peer, the path, the script, its own arguments, and those of one request in flight: None
# where the targets are for many, as gRPC's 3x ghz is)
COMPARISONS: list[tuple[str, str, str, list[str], list[str] | None]] = [
    ("wrk", "HTTP/1.1", "vs_wrk.py", [], ["--connections", "1"]),
    ("wrk", "HTTPS/1.1", "vs_wrk.py", ["--tls"], ["--connections", "1"]),
    ("h2load", "h2c", "vs_h2load.py", [], ["--connections", "1", "--streams", "1"]),
    (
        "h2load",
        "HTTP/2 over TLS",
        "vs_h2load.py",
        ["--tls"],
        ["--connections", "1", "--streams", "1"],
    ),
    ("ghz", "gRPC", "vs_ghz.py", [], None),
]


@dataclass
class Row:
    """One comparison's outcome: its summary, or why there is none."""

    path: str
    server_cpus: int | None
    summary: dict[str, Any] | None
    why: str = ""

    def verdict(self) -> str:
        s = self.summary
        if s is None:
            return self.why
        if s.get("server_bound"):
            return "server-bound"
        ratios, targets = s.get("ratios") or {}, s.get("targets") or {}
        if "calls_s" not in ratios or "cpu" not in ratios:
            return "no ratio"
        met = ratios["calls_s"] >= targets.get("calls_s", 0) and ratios["cpu"] <= targets.get(
            "cpu", float("inf")
        )
        return "met" if met else "missed"


def summary_of(output: str) -> dict[str, Any] | None:
    """The ``SUMMARY {json}`` line of a script's output, if it printed one."""
    for line in reversed(output.splitlines()):
        if line.startswith("SUMMARY "):
            found: dict[str, Any] = json.loads(line.removeprefix("SUMMARY "))
            return found
    return None


def run_one(script: str, args: list[str], timeout_s: float) -> tuple[dict[str, Any] | None, str]:
    """Run one script; its summary, or the last line it said when it gave none."""
    command = [sys.executable, str(HERE / script), *args]
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=timeout_s)
    except subprocess.TimeoutExpired:
        return None, f"timed out after {timeout_s:.0f} s"
    found = summary_of(done.stdout)
    if found is not None:
        return found, ""
    said = (done.stderr.strip() or done.stdout.strip() or f"exit {done.returncode}").splitlines()
    return None, said[-1][:100]


def cell(client: dict[str, Any] | None) -> str:
    if not client:
        return ""
    return f"{client['calls_s']:,.0f}/s, {client['cpu_us']:.2f} us"


def table(rows: list[Row]) -> str:
    """The rows as a Markdown table."""
    lines = [
        "| path | server CPUs | peer | rpcmeter | ratio req/s (rounds) | ratio CPU (rounds) "
        "| above floor | server busy | verdict |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for row in rows:
        s = row.summary or {}
        clients, ratios = s.get("clients") or {}, s.get("ratios") or {}
        peer = s.get("peer", "")
        busy = [c.get("server_busy") for c in clients.values() if c.get("server_busy") is not None]
        ratio_rps = (
            f"{ratios['calls_s']:.2f}x ({ratios.get('calls_s_per_round', 0):.2f}x)"
            if "calls_s" in ratios
            else ""
        )
        ratio_cpu = (
            f"{ratios['cpu']:.2f}x ({ratios.get('cpu_per_round', 0):.2f}x)"
            if "cpu" in ratios
            else ""
        )
        floor = s.get("above_floor_us")
        lines.append(
            f"| {row.path} | {row.server_cpus or 'default'} | {peer} {cell(clients.get(peer))} "
            f"| {cell(clients.get('rpcmeter'))} | {ratio_rps} | {ratio_cpu} "
            f"| {'' if floor is None else f'{floor:.2f} us'} "
            f"| {f'{min(busy):.0%}-{max(busy):.0%}' if busy else ''} | {row.verdict()} |"
        )
    return "\n".join(lines)


def write_json(path: Path, rows: list[Row]) -> None:
    kept = [
        {"path": r.path, "server_cpus": r.server_cpus, "summary": r.summary, "verdict": r.verdict()}
        for r in rows
    ]
    path.write_text(json.dumps(kept, indent=1))


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--server-cpus", type=int, nargs="*", default=[], help="one run each")
    parser.add_argument("--duration", type=float, default=3.0)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--one", action="store_true", help="one request in flight")
    parser.add_argument("--only", default="", help="peers to run, comma-separated")
    parser.add_argument("--json", type=Path, help="write every summary here too")
    args = parser.parse_args()
    if args.duration <= 0 or args.rounds < 1:
        parser.error("--duration must be above 0 and --rounds at least 1")
    only = {p for p in args.only.split(",") if p}
    unknown = only - {peer for peer, *_ in COMPARISONS}
    if unknown:
        parser.error(f"--only: no comparison with {', '.join(sorted(unknown))}")
    common = ["--duration", str(args.duration), "--rounds", str(args.rounds)]
    # a round runs the peer, rpcmeter and the floor (and ghz's proto client) for the duration
    timeout_s = 120 + args.rounds * 5 * (args.duration + 10)
    rows: list[Row] = []
    for cpus in args.server_cpus or [None]:
        sizing = [] if cpus is None else ["--server-cpus", str(cpus)]
        for peer, path, script, own, one in COMPARISONS:
            if (only and peer not in only) or (args.one and one is None):
                continue
            print(f"{path}, server CPUs {cpus or 'default'} ...", file=sys.stderr, flush=True)
            extra = one if args.one and one is not None else []
            summary, why = run_one(script, [*own, *extra, *sizing, *common], timeout_s)
            rows.append(Row(path, cpus, summary, why))
            print(f"  {rows[-1].verdict()}", file=sys.stderr, flush=True)
            if args.json is not None:  # after each, so that a run cut short keeps what it took
                write_json(args.json, rows)
    print(table(rows))
    if not any(r.summary for r in rows):
        return 2
    return 1 if any(r.verdict() == "missed" for r in rows) else 0


if __name__ == "__main__":
    sys.exit(main())
