"""How precisely the built-in HTTP server sleeps: ``count`` requests of ``/sleep?ms=MS`` one after
another on one keep-alive connection, and the durations its ``Server-Timing`` header reports.

    python benchmarks/server_sleep.py [--count 1000] [--ms 1]
"""

from __future__ import annotations

import argparse
import socket
import statistics
import sys

from rpcmeter.servers.process import ServerProcess, new_endpoint


def sleeps(count: int, ms: float) -> list[float]:
    endpoint = new_endpoint("tcp")
    assert endpoint.port is not None
    cmd = [sys.executable, "-m", "rpcmeter.servers.http_server", "--port", str(endpoint.port)]
    request = f"GET /sleep?ms={ms} HTTP/1.1\r\nHost: x\r\n\r\n".encode()
    durations = []
    with (
        ServerProcess(cmd, endpoint),
        socket.create_connection((endpoint.host, endpoint.port), timeout=10) as sock,
    ):
        for _ in range(count):
            sock.sendall(request)
            reply = b""
            while b"\r\n\r\n" not in reply:
                reply += sock.recv(4096)
            durations.append(float(reply.split(b"app;dur=")[1].split(b"\r\n")[0]))
    return durations


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--count", type=int, default=1000)
    parser.add_argument("--ms", type=float, default=1.0)
    args = parser.parse_args()
    d = sorted(sleeps(args.count, args.ms))
    within = sum(x <= args.ms * 1.02 for x in d) / len(d)
    print(
        f"sleep {args.ms} ms x {len(d)}: median {statistics.median(d):.4f} ms, "
        f"mean {statistics.mean(d):.4f} ms, p90 {d[int(len(d) * 0.9)]:.4f} ms, "
        f"{within:.0%} within 2 %"
    )


if __name__ == "__main__":
    main()
