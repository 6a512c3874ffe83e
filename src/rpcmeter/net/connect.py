"""Opening a client connection on the event loop, timed, for every protocol over stream sockets
(HTTP/1.1 and raw frames in :mod:`rpcmeter.drivers.stream`, HTTP/2 and gRPC in
:mod:`rpcmeter.protocols.h2.transport`): one mechanism, so their connect and handshake times mean the same.

:func:`open_stream` connects a non-blocking socket (:func:`connect_socket`), then, given an
``ssl.SSLContext``, runs the TLS handshake on the loop (:func:`rpcmeter.net.tls.open_tls`); the
protocol then runs on the loop's own transport (cleartext) or on a
:class:`~rpcmeter.net.tls_transport.TlsTransport`. Given ``record``, it reports the connect time and the
handshake time (ns) as ``record("connect", ns)`` and ``record("handshake", ns)`` (a resumed one
as ``handshake_resumed``), the parts of :class:`~rpcmeter.metrics.connections.ConnectionCosts`.

A :class:`Slot` keeps one connection in service for every protocol that keeps connections
alive (HTTP/1.1 and raw frames: :class:`rpcmeter.drivers.stream_connection.StreamSlot`; HTTP/2 and gRPC:
:class:`rpcmeter.protocols.h2.transport.Session`): when the server ends a connection (HTTP/2's GOAWAY,
HTTP/1.1's ``Connection: close``, or a close after a complete reply) it opens the replacement at
once, moves the requests the server will not process to it, and lets the old connection finish
the ones it has in flight.
"""

from __future__ import annotations

import asyncio
import os
import socket
import ssl
import time
from abc import ABC, abstractmethod
from collections import deque
from collections.abc import Awaitable, Callable, Iterable
from typing import Any, Generic, Protocol, TypeVar

from rpcmeter.net.tls import HANDSHAKE_TIMEOUT_S, open_tls
from rpcmeter.net.tls_transport import TlsTransport, set_ready

P = TypeVar("P", bound=asyncio.Protocol)
R = TypeVar("R")  # a request as a slot queues it


class Counted(Protocol):
    """A connection's traffic: bytes written and read."""

    bytes_out: int
    bytes_in: int


C = TypeVar("C", bound=Counted)


async def connect_socket(
    loop: asyncio.AbstractEventLoop, sock: socket.socket, address: Any
) -> None:
    """Connect a non-blocking socket: ``connect``, then wait until it is writable (its own
    readiness, no resolver: uvloop's ``sock_connect`` took 130-200 us a connect on loopback
    where this takes 40-70, and its first call 10 ms)."""
    try:
        sock.connect(address)
        return
    except (BlockingIOError, InterruptedError):
        pass
    fd = sock.fileno()
    ready: asyncio.Future[None] = loop.create_future()
    loop.add_writer(fd, set_ready, ready)
    try:
        await ready
    finally:
        loop.remove_writer(fd)
    err = sock.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
    if err:
        raise OSError(err, f"connect to {address}: {os.strerror(err)}")


async def open_stream(
    loop: asyncio.AbstractEventLoop,
    family: int,
    address: Any,
    factory: Callable[[], P],
    *,
    ssl_context: ssl.SSLContext | None = None,
    server_hostname: str = "",
    handshake_timeout_s: float = HANDSHAKE_TIMEOUT_S,
    record: Callable[[str, int], None] | None = None,
) -> tuple[asyncio.BaseTransport | TlsTransport, P]:
    """A new connection to ``address`` (of ``family``: ``AF_UNIX``, ``AF_INET``, ``AF_INET6``)
    running ``factory()``; over TLS when ``ssl_context`` is given (see the module doc). Raises
    OSError when the connect fails, :class:`~rpcmeter.net.tls.TlsError` when the handshake does."""
    clock = time.perf_counter_ns
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setblocking(False)
        if family != socket.AF_UNIX:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        t0 = clock()
        await connect_socket(loop, sock, address)
        t1 = clock()
    except BaseException:
        sock.close()
        raise
    if record is not None:
        record("connect", t1 - t0)
    if ssl_context is None:
        return await loop.create_connection(factory, sock=sock)
    transport, proto = await open_tls(
        loop, sock, ssl_context, server_hostname, factory, handshake_timeout_s
    )
    if record is not None:
        resumed = transport.tls.session_reused
        record("handshake_resumed" if resumed else "handshake", clock() - t1)
    return transport, proto


class Slot(ABC, Generic[C, R]):
    """One connection kept in service (a client's connection ``i``): ``conn`` takes the requests
    while it can. When it stops (the server announced the end of the connection, or closed it),
    the connection calls :meth:`retire`, which opens a replacement at once (``opener``, which
    records its connect and handshake times, so ``cases[].connections`` counts it). The requests
    the old connection will not process, and those sent meanwhile (:meth:`send`), wait in
    ``queue`` in order and go to the replacement as soon as it is open; the old connection
    finishes the requests it has in flight (``old`` until then). When the replacement cannot be
    opened, or takes none of them (the server ends every connection at once), the queued requests
    end with that error, and so do the requests sent later.

    A subclass says how its protocol submits a request to a connection, fails one, tells whether
    a connection still has requests in flight, and closes one; its connections call
    :meth:`retire` and :meth:`closed`. Requests go straight to ``conn`` on the protocol's own
    fast path; only a connection that stopped sends here."""

    def __init__(
        self, conn: C, opener: Callable[[], Awaitable[C]], loop: asyncio.AbstractEventLoop
    ) -> None:
        self.conn = conn
        self.opener = opener
        self.loop = loop
        self.queue: deque[R] = deque()
        self.replacing: asyncio.Task[None] | None = None
        self.old: list[C] = []  # replaced, finishing their requests in flight
        self.error: BaseException | None = None  # why the last replacement failed
        self.closing = False
        self.traffic = [0, 0]  # bytes out and in of the connections let go
        self.attach(conn)

    @abstractmethod
    def attach(self, conn: C) -> None:
        """Make ``conn`` report to this slot."""

    @abstractmethod
    def usable(self, conn: C) -> bool:
        """Whether ``conn`` takes new requests."""

    @abstractmethod
    def submit(self, conn: C, request: R) -> None:
        """Send ``request`` on ``conn`` (open and usable)."""

    @abstractmethod
    def fail(self, request: R, error: BaseException) -> None:
        """End ``request`` with ``error`` (called from the event loop)."""

    @abstractmethod
    def busy(self, conn: C) -> bool:
        """Whether ``conn`` has requests in flight that it will still finish."""

    @abstractmethod
    def shut(self, conn: C) -> None:
        """Close ``conn``."""

    def submitted(self, conn: C) -> None:
        """The queued requests went to ``conn`` (write what it buffered)."""

    def refusal(self, conn: C) -> BaseException:
        """The error of requests that a new connection, ``conn``, took none of."""
        return ConnectionError("the server ended the new connection before taking any request")

    def send(self, request: R) -> None:
        """Send ``request`` on the current connection, or queue it for the replacement."""
        conn = self.conn
        if self.queue or not self.usable(conn):
            if self.error is not None and self.replacing is None:
                self.loop.call_soon(self.fail, request, self.error)
                return
            self.queue.append(request)
            self.retire(conn)
            return
        self.submit(conn, request)
        self.submitted(conn)

    def retire(self, conn: C, unprocessed: Iterable[R] = ()) -> None:
        """``conn`` takes no more requests; ``unprocessed`` are requests sent on it that the
        server will not process (to send again, oldest first)."""
        self.queue.extend(unprocessed)
        if conn is self.conn and self.replacing is None and not self.closing:
            self.replacing = self.loop.create_task(self._replace())

    def closed(self, conn: C, unprocessed: Iterable[R] = ()) -> None:
        """``conn`` is closed (by either side)."""
        if conn is self.conn:
            if self.queue or unprocessed or self.error is None:
                self.retire(conn, unprocessed)
        elif conn in self.old:
            self.let_go(conn)

    def let_go(self, conn: C) -> None:
        """Forget an old connection (closed, or closed now), counting its traffic."""
        if conn in self.old:
            self.old.remove(conn)
        self.traffic[0] += conn.bytes_out
        self.traffic[1] += conn.bytes_in
        self.shut(conn)

    async def _replace(self) -> None:
        old = self.conn
        try:
            new = await self.opener()
        except Exception as exc:
            self.replacing = None
            self.error = exc if isinstance(exc, ConnectionError) else ConnectionError(str(exc))
            queued = list(self.queue)
            self.queue.clear()
            for request in queued:
                self.fail(request, self.error)
            return
        self.replacing = None
        if self.closing:
            self.shut(new)
            return
        self.error = None
        self.attach(new)
        self.conn = new
        if self.busy(old):
            self.old.append(old)  # it finishes what it started
        else:
            self.let_go(old)
        queue = self.queue
        took = 0
        while queue and self.conn is new and self.usable(new):
            self.submit(new, queue.popleft())
            took += 1
        self.submitted(new)
        if queue and self.conn is new:
            if took:  # it stopped after taking some: the next one
                self.retire(new)
                return
            # it took none: the server ends every connection at once (no reconnecting forever)
            self.error = self.refusal(new)
            queued = list(queue)
            queue.clear()
            for request in queued:
                self.fail(request, self.error)

    def bytes_moved(self) -> tuple[int, int]:
        """Bytes written and read on every connection of the slot."""
        live = [self.conn, *self.old]
        return (
            self.traffic[0] + sum(c.bytes_out for c in live),
            self.traffic[1] + sum(c.bytes_in for c in live),
        )

    def close(self) -> None:
        self.closing = True
        if self.replacing is not None:
            self.replacing.cancel()
        for conn in [*self.old, self.conn]:
            self.shut(conn)
