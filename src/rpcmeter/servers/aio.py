"""Shared pieces of the event-loop reference servers (HTTP/1.1, raw frames).

- :func:`timed` does the server side of a workload (:func:`rpcmeter.servers.bodies.compute`;
  ``sleep`` is scheduled by the protocol, never blocking the loop) and measures its compute time.
- :class:`OrderedReplies` keeps replies of pipelined requests in request order when some of them
  (``sleep``) complete later.
- :func:`serve` runs a protocol factory on uvloop over TCP or a Unix socket until SIGTERM.

Server options shared by these servers: ``corrupt_every`` (int, default 0): every N-th reply body
is altered (its first byte flipped, or one byte added to an empty body), so that tests can check
that clients count mismatches.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import time
from collections import deque
from collections.abc import Callable, Sequence
from typing import Any

from rpcmeter.servers.bodies import compute
from rpcmeter.servers.common import ServerArgs, announce_ready, exit_on_sigterm
from rpcmeter.tls import server_context
from rpcmeter.workloads import lift_int_digit_limit, payload_bytes


def timed(kind: str, body: bytes, reply_bytes: int | None = None) -> tuple[bytes, int]:
    """Reply body of workload ``kind`` (not ``sleep``: the protocol schedules its wait) and the
    server's compute time (ns). ``reply_bytes`` gives the payload size when it does not travel in
    the body. Raises ``ValueError`` (or ``struct.error``) for a malformed request."""
    t0 = time.perf_counter_ns()
    out = payload_bytes(reply_bytes) if reply_bytes is not None else compute(kind, body)
    return out, time.perf_counter_ns() - t0


class Corrupter:
    """Alters every ``every``-th reply body (``every`` 0: never)."""

    __slots__ = ("count", "every")

    def __init__(self, options: dict[str, Any]) -> None:
        self.every = int(options.get("corrupt_every", 0) or 0)
        self.count = 0

    def __call__(self, body: bytes) -> bytes:
        if not self.every:
            return body
        self.count += 1
        if self.count % self.every:
            return body
        if not body:
            return b"!"
        return bytes([body[0] ^ 0xFF]) + body[1:]


class OrderedReplies:
    """Writes replies in request order, holding back those behind a reply not yet ready."""

    __slots__ = ("queue", "write")

    def __init__(self, write: Callable[[bytes], None]) -> None:
        self.write = write
        self.queue: deque[list[bytes | None]] = deque()

    def now(self, data: bytes) -> None:
        if self.queue:
            self.queue.append([data])
        else:
            self.write(data)

    def later(self) -> list[bytes | None]:
        """A slot for a reply that will be ready later; fill it with :meth:`fill`."""
        slot: list[bytes | None] = [None]
        self.queue.append(slot)
        return slot

    def fill(self, slot: list[bytes | None], data: bytes) -> None:
        slot[0] = data
        while self.queue and self.queue[0][0] is not None:
            ready = self.queue.popleft()[0]
            assert ready is not None
            self.write(ready)


def new_loop() -> asyncio.AbstractEventLoop:
    try:
        import uvloop

        loop: asyncio.AbstractEventLoop = uvloop.new_event_loop()
        return loop
    except ImportError:
        return asyncio.new_event_loop()


def serve(
    args: ServerArgs, factory: Callable[[], asyncio.Protocol], alpn: Sequence[str] = ()
) -> None:
    """Listen at the endpoint in ``args`` and serve ``factory`` protocols until SIGTERM; over
    TLS when the options carry ``tls`` (:func:`rpcmeter.tls.server_context`, offering ``alpn``)."""
    lift_int_digit_limit()
    exit_on_sigterm()
    tls = server_context(args.options, alpn)
    loop = new_loop()
    asyncio.set_event_loop(loop)
    # SIGTERM stops the loop between callbacks: raised inside one (a TLS handshake runs Python
    # code of the ssl module), the exit would be taken for that connection's error and ignored
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, loop.stop)
    try:
        if args.transport == "unix":
            assert args.socket is not None, "--socket is required for the unix transport"
            server = loop.run_until_complete(loop.create_unix_server(factory, args.socket, ssl=tls))
            where = args.socket
        else:
            server = loop.run_until_complete(
                loop.create_server(factory, args.host, args.port, backlog=4096, ssl=tls)
            )
            port = server.sockets[0].getsockname()[1]
            where = f"{args.host}:{port}"
        announce_ready(where)
        try:
            loop.run_forever()
        finally:
            server.close()
            if args.socket:
                with contextlib.suppress(OSError):
                    os.unlink(args.socket)
    finally:
        loop.close()
