"""Command-line scaffolding shared by the built-in reference servers."""

from __future__ import annotations

import argparse
import json
import signal
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from rpcmeter.net.endpoints import Endpoint


@dataclass(frozen=True)
class ServerArgs:
    transport: str
    host: str
    port: int
    socket: str | None
    options: dict[str, Any]

    def endpoint(self) -> Endpoint:
        """Where to listen, as the drivers describe it."""
        if self.socket is not None:
            return Endpoint(self.transport, host=self.host, path=self.socket)
        return Endpoint(self.transport, host=self.host, port=self.port)


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


class _Stopping:
    """Set by the first SIGTERM or SIGINT (read by stalls and serving loops)."""

    requested = False


def stop_requested() -> bool:
    """Whether SIGTERM or SIGINT has arrived: a stall in progress ends, a serving loop returns."""
    return _Stopping.requested


def exit_on_sigterm(stop: Callable[[], None] | None = None) -> None:
    """Stop on the first SIGTERM (or SIGINT), so that finally blocks run and sockets are unlinked.

    Without ``stop`` the handler raises ``SystemExit`` in the main thread. An event-loop server
    passes ``stop`` (which must not raise; it stops the loop): an exception raised inside the loop
    can be caught by the code it interrupts (httptools wraps it, rpyc sends it to the client) and
    the signal lost. Either way :func:`stop_requested` turns true, which ends a stall early.
    """

    def _handler(signum: int, frame: object) -> None:
        _Stopping.requested = True
        if stop is None:
            sys.exit(0)
        stop()

    signal.signal(signal.SIGTERM, _handler)
    signal.signal(signal.SIGINT, _handler)


# Thread sleeps: time.sleep (the kernel's high-resolution timer) for all but the last
# PRECISE_FINISH_S, then a spin on the clock, yielding the GIL (time.sleep(0), which itself takes up
# to the 50 us timer slack) until the last PRECISE_YIELD_S. time.sleep overshoots by 50-200 us on
# a quiet machine; the spin costs up to a millisecond of CPU per sleep and keeps the median 1 ms
# sleep within 0.3 %.
PRECISE_FINISH_S = 0.001
PRECISE_YIELD_S = 0.0002


def precise_sleep(seconds: float) -> None:
    """Sleep ``seconds`` precisely (a timer for most of it, a short spin to finish)."""
    deadline = time.perf_counter() + seconds
    coarse = seconds - PRECISE_FINISH_S
    if coarse > 0:
        time.sleep(coarse)
    while (left := deadline - time.perf_counter()) > 0:
        if left > PRECISE_YIELD_S:
            time.sleep(0)  # lets other threads run; returns after up to the timer slack (50 us)


def announce_ready(address: str) -> None:
    """One line on stdout once the server accepts connections (kept in the server's log)."""
    print(f"rpcmeter-server ready {address}", flush=True)


class Stall:
    """A server stall at a known moment, to see what the load generator makes of it.

    Server options: ``stall_ms`` (how long), ``stall_after_s`` (when: seconds after the first
    request the server handles; default 1) and ``stall_every_s`` (repeat; default: once). A request
    handled inside a stall window waits until the window ends, so every request arriving
    meanwhile queues behind it, as in a garbage-collection pause. Reference servers call
    :meth:`check` at the start of every request (from any thread; a blocking wait on purpose,
    ended early by SIGTERM)."""

    def __init__(self, options: dict[str, Any]) -> None:
        self.stall_ns = int(float(options.get("stall_ms", 0)) * 1e6)
        self.after_ns = int(float(options.get("stall_after_s", 1.0)) * 1e9)
        every = options.get("stall_every_s")
        self.every_ns = int(float(every) * 1e9) if every else 0
        if self.every_ns and self.every_ns <= self.stall_ns:
            raise ValueError("stall_every_s must be longer than stall_ms")
        self.first_ns = 0
        self._lock = threading.Lock()

    @property
    def active(self) -> bool:
        return self.stall_ns > 0

    def check(self) -> None:
        """Wait out the stall window this request falls into, if any."""
        wait = self.wait_ns(time.monotonic_ns())
        if not wait:
            return
        # in slices, so that a SIGTERM whose handler does not raise (event-loop servers) ends it
        end = time.monotonic_ns() + wait
        while not stop_requested() and (left := end - time.monotonic_ns()) > 0:
            time.sleep(min(left / 1e9, 0.01))

    def wait_ns(self, now_ns: int) -> int:
        """How long a request handled at ``now_ns`` waits (the first call starts the clock)."""
        if not self.first_ns:
            with self._lock:
                self.first_ns = self.first_ns or now_ns
        since = now_ns - self.first_ns - self.after_ns
        if since < 0 or (not self.every_ns and since >= self.stall_ns):
            return 0
        if self.every_ns:
            since %= self.every_ns
        return max(0, self.stall_ns - since)
