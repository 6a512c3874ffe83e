"""Shared pieces of the event-loop reference servers (HTTP/1.1, raw frames).

- :func:`timed` does the server side of a workload (:func:`rpcmeter.protocols.bodies.compute`;
  ``sleep`` is scheduled by the protocol, never blocking the loop) and measures its compute time.
- :class:`OrderedReplies` keeps replies of pipelined requests in request order when some of them
  (``sleep``) complete later.
- :func:`call_later_precisely` / :func:`sleep_precisely`: waits precise to microseconds (``sleep``).
- :func:`serve` runs a protocol factory on uvloop over TCP or a Unix socket until SIGTERM. Over
  TCP, connections are read by :class:`StampedTransport`, which keeps the kernel's receive time
  of the last bytes read (``arrived_ns``): how long a request waited in the server before its
  handling began (its queue time, :mod:`rpcmeter.protocols.timing`) is then known even when it
  arrived while the event loop was busy computing another request. Reading in Python costs the
  server a few microseconds of CPU per request more than uvloop's own transports; server option
  ``queue_time = false`` uses those instead (and reports no queue time).

Server options shared by these servers: ``corrupt_every`` (int, default 0): every N-th reply body
is altered (its first byte flipped, or one byte added to an empty body), so that tests can check
that clients count mismatches.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import os
import socket
import time
from collections import deque
from collections.abc import Callable, Sequence
from typing import Any

from rpcmeter.protocols.bodies import compute
from rpcmeter.protocols.timing import SO_TIMESTAMPNS, STAMP_SPACE, kernel_stamp_ns
from rpcmeter.servers.common import ServerArgs, announce_ready, exit_on_sigterm, stop_requested
from rpcmeter.suite.workloads import lift_int_digit_limit, payload_bytes

READ_BYTES = 1 << 16  # below malloc's mmap threshold: a read allocates no fresh pages


def queue_ns(transport: asyncio.BaseTransport | None) -> int | None:
    """How long the request whose last bytes came with the latest read has waited since they
    arrived (None: the transport does not know when they arrived)."""
    arrived = getattr(transport, "arrived_ns", 0)
    return max(0, time.time_ns() - arrived) if arrived else None


class StampedTransport(asyncio.Transport):
    """A TCP connection read with ``recvmsg`` and ``SO_TIMESTAMPNS``: ``arrived_ns`` is the kernel's
    receive time (``CLOCK_REALTIME``, ns) of the last bytes of the latest read, taken when they
    reached the socket, however long the event loop took to get to them. Writes go straight to the
    socket; what it does not take is kept and sent when it is writable."""

    def __init__(
        self, loop: asyncio.AbstractEventLoop, sock: socket.socket, protocol: asyncio.Protocol
    ) -> None:
        super().__init__()
        self.loop = loop
        self.sock = sock
        self.fd = sock.fileno()
        self.protocol = protocol
        self.recvmsg = sock.recvmsg
        self.send = sock.send
        self.arrived_ns = 0
        self.pending = bytearray()
        self.closing = False
        self.closed = False
        sock.setblocking(False)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        sock.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPNS, 1)
        protocol.connection_made(self)
        loop.add_reader(self.fd, self._read)

    def _read(self) -> None:
        try:
            data, anc, _, _ = self.recvmsg(READ_BYTES, STAMP_SPACE)
        except (BlockingIOError, InterruptedError):
            return
        except OSError as exc:
            self._lost(exc)
            return
        if not data:
            self._lost(None)
            return
        if anc:
            self.arrived_ns = kernel_stamp_ns(anc)
        self.protocol.data_received(data)

    def write(self, data: bytes | bytearray | memoryview) -> None:
        if self.closed:
            return
        if not self.pending:
            try:
                sent = self.send(data)
            except (BlockingIOError, InterruptedError):
                sent = 0
            except OSError as exc:
                self._lost(exc)
                return
            if sent == len(data):
                return
            data = memoryview(data)[sent:]
            self.loop.add_writer(self.fd, self._flush)
        self.pending += data

    def _flush(self) -> None:
        try:
            sent = self.sock.send(self.pending)
        except (BlockingIOError, InterruptedError):
            return
        except OSError as exc:
            self._lost(exc)
            return
        del self.pending[:sent]
        if not self.pending:
            self.loop.remove_writer(self.fd)
            if self.closing:
                self._lost(None)

    def close(self) -> None:
        self.closing = True
        if not self.pending:
            self._lost(None)

    def abort(self) -> None:
        self._lost(None)

    def is_closing(self) -> bool:
        return self.closing or self.closed

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        if name == "socket":
            return self.sock
        if name == "peername":
            with contextlib.suppress(OSError):
                return self.sock.getpeername()
        return default

    def _lost(self, exc: Exception | None) -> None:
        if self.closed:
            return
        self.closed = True
        self.loop.remove_reader(self.fd)
        if self.pending:
            self.loop.remove_writer(self.fd)
        self.sock.close()
        self.protocol.connection_lost(exc)


def listen_stamped(
    loop: asyncio.AbstractEventLoop,
    host: str,
    port: int,
    factory: Callable[[], asyncio.Protocol],
) -> socket.socket:
    """A listening TCP socket whose connections are read by :class:`StampedTransport`."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    listener = socket.create_server((host, port), family=family, backlog=4096)
    listener.setblocking(False)
    # on the listener too, so that bytes sent before the accept are stamped as well
    listener.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPNS, 1)

    def accept() -> None:
        while True:
            try:
                sock, _ = listener.accept()
            except OSError:  # none pending (BlockingIOError), a reset before the accept, ...
                return
            StampedTransport(loop, sock, factory())

    loop.add_reader(listener.fileno(), accept)
    return listener


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


# A loop timer (libuv's) counts whole milliseconds: asked for 1 ms it fires after 1.05-1.5 ms, asked
# for 0.5 ms at once. So a precise wait takes the timer for the whole milliseconds up to
# PRECISE_FINISH_S before the deadline and finishes on the loop's own iterations (a spin of about a
# millisecond, during which the loop keeps serving other connections); the last PRECISE_SPIN_S it
# spins in place (one loop iteration can take longer than that on a busy machine).
PRECISE_FINISH_S = 0.001
PRECISE_SPIN_S = 0.0001


def call_later_precisely(
    loop: asyncio.AbstractEventLoop, seconds: float, callback: Callable[[], None]
) -> None:
    """Run ``callback`` on ``loop`` ``seconds`` from now, precise to microseconds."""
    deadline = time.perf_counter() + seconds

    def finish() -> None:
        left = deadline - time.perf_counter()
        if left > PRECISE_SPIN_S:
            loop.call_soon(finish)
            return
        while time.perf_counter() < deadline:
            pass
        callback()

    coarse_ms = math.floor((seconds - PRECISE_FINISH_S) * 1e3)
    if coarse_ms > 0:
        loop.call_later(coarse_ms / 1e3, finish)
    else:
        loop.call_soon(finish)


async def sleep_precisely(seconds: float) -> None:
    """``asyncio.sleep`` precise to microseconds (:func:`call_later_precisely`)."""
    loop = asyncio.get_running_loop()
    done: asyncio.Future[None] = loop.create_future()

    def wake() -> None:
        if not done.done():  # cancelled meanwhile
            done.set_result(None)

    call_later_precisely(loop, seconds, wake)
    await done


def serve(
    args: ServerArgs, factory: Callable[[], asyncio.Protocol], alpn: Sequence[str] = ()
) -> None:
    """Listen at the endpoint in ``args`` and serve ``factory`` protocols until the first SIGTERM;
    over TLS when the options carry ``tls`` (:func:`rpcmeter.net.tls.server_context`, offering
    ``alpn``)."""
    lift_int_digit_limit()
    tls = None
    if args.options.get("tls"):  # imported only here: rpcmeter.net.tls loads pydantic (0.2 s)
        from rpcmeter.net.tls import server_context

        tls = server_context(args.options, alpn)
    loop = new_loop()
    asyncio.set_event_loop(loop)

    # SIGTERM stops the loop between callbacks: raised inside one (a TLS handshake runs Python
    # code of the ssl module; httptools wraps a callback's exception), the exit would be taken for
    # that connection's error and ignored. The handler also ends a stall in progress.
    def stop() -> None:
        loop.call_soon_threadsafe(loop.stop)

    exit_on_sigterm(stop)
    try:
        server: asyncio.AbstractServer | socket.socket
        if args.transport == "unix":
            assert args.socket is not None, "--socket is required for the unix transport"
            server = loop.run_until_complete(loop.create_unix_server(factory, args.socket, ssl=tls))
            where = args.socket
        elif tls is not None or not args.options.get("queue_time", True):
            # uvloop's own transports (TLS, or queue_time = false): no queue time
            server = loop.run_until_complete(
                loop.create_server(factory, args.host, args.port, backlog=4096, ssl=tls)
            )
            port = server.sockets[0].getsockname()[1]
            where = f"{args.host}:{port}"
        else:
            server = listen_stamped(loop, args.host, args.port, factory)
            where = f"{args.host}:{server.getsockname()[1]}"
        announce_ready(where)
        try:
            if not stop_requested():
                loop.run_forever()
        finally:
            server.close()
            if args.socket:
                with contextlib.suppress(OSError):
                    os.unlink(args.socket)
    finally:
        loop.close()
