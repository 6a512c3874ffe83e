"""Command-line scaffolding shared by the built-in reference servers."""

from __future__ import annotations

import argparse
import json
import signal
import sys
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class ServerArgs:
    transport: str
    host: str
    port: int
    socket: str | None
    options: dict[str, Any]


def parse_server_args(description: str, argv: list[str] | None = None) -> ServerArgs:
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--transport", default="tcp")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--socket", default=None, help="Unix socket path")
    parser.add_argument("--options", default="{}", help="JSON object of server options")
    ns = parser.parse_args(argv)
    try:
        options = json.loads(ns.options)
    except json.JSONDecodeError as exc:
        parser.error(f"--options: invalid JSON: {exc}")
    if not isinstance(options, dict):
        parser.error("--options: expected a JSON object")
    return ServerArgs(ns.transport, ns.host, ns.port, ns.socket, options)


def exit_on_sigterm() -> None:
    """Turn SIGTERM into a clean exit (finally blocks run, sockets are unlinked)."""

    def _handler(signum: int, frame: object) -> None:
        sys.exit(0)

    signal.signal(signal.SIGTERM, _handler)
    signal.signal(signal.SIGINT, _handler)


def announce_ready(address: str) -> None:
    """One line on stdout once the server accepts connections (kept in the server's log)."""
    print(f"rpcmeter-server ready {address}", flush=True)
