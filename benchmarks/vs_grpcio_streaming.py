"""rpcmeter's gRPC streaming client against grpcio's, on the same server, in one run.

The Go greeter server (``benchmarks/greeter``, grpc-go; it serves rpcmeter's built-in streaming
methods too) runs pinned to one CPU (``--server python``: rpcmeter's built-in gRPC server
instead); rpcmeter's gRPC driver with its own HTTP/2 client (``client = "h2"``) and with grpcio's
(``client = "grpcio"``) run in turn pinned to another CPU, for each streaming mode, with the same
connections, concurrent streams, messages and sizes, for the same duration, alternating for
several rounds, every reply message validated. For each it prints messages/s, client CPU per
message (as rpcmeter's runner measures the client process) and messages/s per client core
(1 / CPU per message: what one fully busy client core would carry), then the medians and the
ratio of messages/s per client core (target: h2 / grpcio >= 3).

With the Python server, the server, not the client, sets the messages/s of both clients; the
figure per client core still compares the clients.

    python benchmarks/vs_grpcio_streaming.py [--server go] [--messages 100] [--duration 3] [--rounds 3]
"""

from __future__ import annotations

import argparse
import statistics
import sys
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager

from greeter_server import BuildError
from h2bench import greeter
from versus import cpus

from rpcmeter.drivers.base import DriverContext
from rpcmeter.drivers.grpc import GrpcDriver
from rpcmeter.net.endpoints import Endpoint
from rpcmeter.runners.closed_loop import run_closed_loop
from rpcmeter.runners.spec import LoadSpec
from rpcmeter.servers.process import ServerProcess, new_endpoint
from rpcmeter.suite.workloads import StreamParams

MODES = {
    "server": StreamParams(mode="server"),
    "bidi ping-pong": StreamParams(mode="bidi", pattern="ping-pong"),
    "bidi flood": StreamParams(mode="bidi", pattern="flood"),
    "client": StreamParams(mode="client"),
}


def run(
    endpoint: Endpoint, params: StreamParams, client: str, args: argparse.Namespace, cpu: int
) -> tuple[float, float]:
    """(messages/s, client CPU seconds per message) of one client process."""
    out = run_closed_loop(
        LoadSpec(
            "grpc",
            DriverContext(
                endpoint,
                params,
                {"client": client},
                validate=True,
                threads=args.concurrency,
                connections=args.connections,
            ),
            clients=1,
            requests=None,
            duration_s=args.duration,
            warmup=5,
            timeout_s=args.duration + 60,
            client_cpus=[cpu],
        )
    )
    if out.failure or out.errors:
        raise RuntimeError(f"{client}: {out.failure or out.errors}")
    c = out.counters
    messages = max(c["stream.messages_out"], c["stream.messages_in"])
    proc = out.clients[0]
    cpu_s = (proc.cpu_user_s or 0.0) + (proc.cpu_sys_s or 0.0)
    return messages / out.wall_s, cpu_s / messages


@contextmanager
def server(kind: str, cpu: int) -> Iterator[Endpoint]:
    if kind == "go":
        with greeter(cpu, "-grpc") as endpoint:
            yield endpoint
        return
    endpoint = new_endpoint("tcp")
    with ServerProcess(GrpcDriver.server_command(endpoint, {}), endpoint, cpus=[cpu]):
        yield endpoint


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--server", choices=("go", "python"), default="go")
    ap.add_argument("--connections", type=int, default=2)
    ap.add_argument("--concurrency", type=int, default=8)
    ap.add_argument("--messages", type=int, default=100)
    ap.add_argument("--bytes", type=int, default=100, help="request and reply message size")
    ap.add_argument("--duration", type=float, default=3.0)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--modes", default=",".join(MODES), help="comma-separated: " + ", ".join(MODES))
    args = ap.parse_args()
    server_cpu, client_cpu = cpus()
    print(
        f"{args.server} server on CPU {server_cpu}, client on CPU {client_cpu}; {args.connections} connections "
        f"x {args.concurrency} streams, {args.messages} messages of {args.bytes} B per stream, "
        f"{args.duration:g} s per run, {args.rounds} rounds"
    )
    results: dict[tuple[str, str], list[tuple[float, float]]] = {}
    with ExitStack() as stack:
        try:
            endpoint = stack.enter_context(server(args.server, server_cpu))
        except BuildError as exc:
            sys.exit(f"vs_grpcio_streaming: {exc}")
        print(
            f"{'round':>5}  {'mode':<15} {'client':<7} {'msgs/s':>9} {'CPU us/msg':>11} "
            f"{'msgs/s/core':>12}"
        )
        for r in range(1, args.rounds + 1):
            for mode in args.modes.split(","):
                params = StreamParams(
                    mode=MODES[mode].mode,
                    pattern=MODES[mode].pattern,
                    messages=args.messages,
                    request_bytes=args.bytes,
                    reply_bytes=args.bytes,
                )
                for client in ("h2", "grpcio"):
                    rate, cpu = run(endpoint, params, client, args, client_cpu)
                    results.setdefault((mode, client), []).append((rate, cpu))
                    print(
                        f"{r:>5}  {mode:<15} {client:<7} {rate:>9,.0f} {cpu * 1e6:>11.2f} "
                        f"{1 / cpu:>12,.0f}",
                        flush=True,
                    )
    print("\nmedians:")
    for mode in args.modes.split(","):
        med = {
            c: (
                statistics.median(r for r, _ in results[mode, c]),
                statistics.median(u for _, u in results[mode, c]),
            )
            for c in ("h2", "grpcio")
        }
        (h_rate, h_cpu), (g_rate, g_cpu) = med["h2"], med["grpcio"]
        print(
            f"  {mode:<15} h2 {h_rate:>8,.0f} msgs/s {h_cpu * 1e6:>6.2f} us/msg | grpcio "
            f"{g_rate:>8,.0f} msgs/s {g_cpu * 1e6:>6.2f} us/msg | msgs/s per client core "
            f"h2 / grpcio {g_cpu / h_cpu:.2f} (target >= 3), msgs/s {h_rate / g_rate:.2f}"
        )


if __name__ == "__main__":
    main()
