"""Build and run the Go greeter server of ``benchmarks/greeter`` (grpc-go, and net/http h2c).

    python benchmarks/greeter_server.py --grpc 127.0.0.1:50051 [--http 127.0.0.1:8080]

builds the server on first use (``go build``, into ``benchmarks/greeter/greeter``; the Go module
proxy serves its dependencies) and replaces itself with it, so it can be a suite's server command.
Without ``go`` it says so in one line and exits with status 2.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

SOURCE = Path(__file__).resolve().parent / "greeter"
BINARY = SOURCE / "greeter"
PROTO = SOURCE / "greeter.proto"
METHOD = "/helloworld.Greeter/SayHello"
REQUEST = b"\x0a\x05world"  # HelloRequest{name: "world"}
REPLY = b"\x0a\x0bHello world"  # HelloReply{message: "Hello world"}


class BuildError(Exception):
    """The server cannot be built (no Go, or the build failed); the message is one line."""


def build() -> Path:
    """The server binary, built when missing or older than its sources."""
    sources = [p for p in SOURCE.iterdir() if p.suffix in (".go", ".mod", ".sum")]
    if BINARY.exists() and all(BINARY.stat().st_mtime >= p.stat().st_mtime for p in sources):
        return BINARY
    go = shutil.which("go")
    if go is None:
        raise BuildError(
            f"the Go greeter server needs Go to build ({SOURCE}): `go` is not on PATH "
            "(https://go.dev/dl/)"
        )
    done = subprocess.run(
        [go, "build", "-o", str(BINARY), "."],
        cwd=SOURCE,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    if done.returncode != 0:
        last = (done.stderr.strip().splitlines() or ["?"])[-1]
        raise BuildError(f"go build of {SOURCE} failed: {last}")
    return BINARY


def main() -> int:
    try:
        binary = build()
    except BuildError as exc:
        print(f"greeter: error: {exc}", file=sys.stderr)
        return 2
    os.execv(binary, [str(binary), *sys.argv[1:]])


if __name__ == "__main__":
    sys.exit(main())
