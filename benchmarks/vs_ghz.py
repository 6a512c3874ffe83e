"""rpcmeter's gRPC client against ghz, on the same Go gRPC server, in one run.

The Go greeter server (``benchmarks/greeter``, grpc-go, built with ``go build``) runs on the
server CPUs (``--server-cpus``, ``GOMAXPROCS`` as many; see :mod:`versus`); ghz, rpcmeter's gRPC
driver (its default HTTP/2 client, every reply's status read and its message validated), the
floor client (:mod:`h2bench`) and, with ``--grpcio``, rpcmeter with grpcio's client run in turn
pinned to the client CPU, with the same connections and concurrent calls, for the same duration,
alternating for several rounds. For each it prints calls/s, client CPU time per call (ghz's from
``getrusage(RUSAGE_CHILDREN)``, rpcmeter's as its runner measures it) and how busy the server was;
then the ratios (targets: rpcmeter / ghz >= 3 for calls/s, <= 0.33 for CPU per call), unless the
server was busier than 85 % in a run (``server-bound``: with one server CPU it usually is), and
rpcmeter's CPU per call above the floor's (target: at most 1.5 us).

ghz and "rpcmeter proto" are driven from the same ``greeter.proto`` and the same JSON request
(:data:`DATA`): rpcmeter compiles the call once (options ``proto``, ``call``, ``data``, and
``expect`` checked field by field) and sends pre-encoded bytes, so it must cost what the
raw-bytes path ("rpcmeter": ``request_hex`` and ``expect_hex``) costs: their ratio is printed per
round (target: calls/s and CPU per call within 3 %).

    python benchmarks/vs_ghz.py [--connections 5] [--concurrency 50] [--duration 5] [--rounds 3]
                                [--server-cpus N] [--grpcio]

ghz: ``go install github.com/bojand/ghz/cmd/ghz@latest`` (looked for on PATH and in ~/go/bin).
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
from functools import partial
from pathlib import Path

from greeter_server import METHOD, PROTO, REPLY, REQUEST
from h2bench import run_floor
from versus import Run, add_server_arguments, against, check_timing, layout, pinned, run_rpcmeter

from rpcmeter.net.endpoints import Endpoint
from rpcmeter.protocols import grpc_schema as gs

DATA = '{"name": "world"}'  # the request as JSON, for ghz and for rpcmeter's proto option


def ghz_path() -> str | None:
    found = shutil.which("ghz")
    home = Path.home() / "go" / "bin" / "ghz"
    return found or (str(home) if home.exists() else None)


def run_ghz(
    ghz: str, endpoint: Endpoint, conns: int, concurrency: int, duration: float, cpu: int
) -> tuple[float, float]:
    """(calls/s, client CPU seconds per call) of one ghz run (every call must be OK)."""
    out, cpu_s = pinned(
        [
            ghz,
            "--insecure",
            "--proto",
            str(PROTO),
            "--call",
            METHOD.strip("/").replace("/", "."),
            "-d",
            DATA,
            "-c",
            str(concurrency),
            "--connections",
            str(conns),
            "-z",
            f"{duration:g}s",
            "--format",
            "json",
            f"127.0.0.1:{endpoint.port}",
        ],
        cpu,
        duration + 60,
    )
    report = json.loads(out)
    ok = report["statusCodeDistribution"].get("OK", 0)
    if ok < report["count"] - concurrency:  # the calls in flight at the end are cancelled
        raise RuntimeError(f"ghz: not every call was OK: {report['statusCodeDistribution']}")
    return report["rps"] * ok / report["count"], cpu_s / ok


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--connections", type=int, default=5)
    parser.add_argument("--concurrency", type=int, default=50)
    parser.add_argument("--duration", type=float, default=5.0)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--grpcio", action="store_true", help="also rpcmeter with grpcio's client")
    add_server_arguments(parser, ["go"])
    args = parser.parse_args()
    check_timing(parser, args)
    lay = layout(args.server_cpus)
    ghz = ghz_path()
    if ghz is None:
        print("needs ghz: go install github.com/bojand/ghz/cmd/ghz@latest", file=sys.stderr)
        return 2
    c, n, d = args.connections, args.concurrency, args.duration
    options = {"method": METHOD, "request_hex": REQUEST.hex(), "expect_hex": REPLY.hex()}
    schema = {
        "proto": str(PROTO),
        "call": METHOD.strip("/"),
        "data": json.loads(DATA),
        "expect": {"message": "Hello world"},
    }
    compiled = gs.compile_call(
        gs.load_schema(gs.compile_proto(PROTO), "proto", PROTO.name), METHOD, json.loads(DATA)
    )
    if compiled.request != REQUEST:  # both paths must send the same bytes
        print(f"error: {DATA} encodes as {compiled.request.hex()}, not {REQUEST.hex()}")
        return 2

    def clients(ep: Endpoint, cpu: int) -> list[tuple[str, Run]]:
        out: list[tuple[str, Run]] = [
            ("ghz", partial(run_ghz, ghz, ep, c, n, d, cpu)),
            ("rpcmeter", partial(run_rpcmeter, "grpc", ep, options, c, n, d, cpu)),
            ("rpcmeter proto", partial(run_rpcmeter, "grpc", ep, schema, c, n, d, cpu)),
            ("floor", partial(run_floor, ep, "grpc", METHOD, REQUEST.hex(), c, n // c, d, cpu)),
        ]
        if args.grpcio:
            grpcio = {**options, "client": "grpcio"}
            run = partial(run_rpcmeter, "grpc", ep, grpcio, c, n, d, cpu)
            out.append(("rpcmeter grpcio", run))
        return out

    what = f"{c} connections x {n} concurrent calls, {d:g} s per run, {METHOD}"
    return against(
        "go", "grpc", lay, what, clients, args.rounds, "ghz", (3.0, 0.33), alike=("rpcmeter proto",)
    )


if __name__ == "__main__":
    sys.exit(main())
