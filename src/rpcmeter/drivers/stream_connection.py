"""The connections of the stream drivers (HTTP/1.1, raw frames): compiled with the hot path.

A :class:`StreamConnection` is an asyncio protocol for one TCP or Unix connection whose replies
arrive in the order the requests were sent. Each sent request leaves ``(done, expect)`` in a FIFO;
the subclass parses replies and calls :meth:`StreamConnection.reply` for each one, which pops the
oldest entry, checks the body against ``expect`` (when validating) and calls ``done``. A lost
connection fails every pending request with :class:`~rpcmeter.errors.ConnectionClosed`, a
malformed or surplus reply with :class:`~rpcmeter.errors.ProtocolError` (both fatal for their
loop). Subclasses keep unparsed bytes in a ``bytearray`` and parse again only once the bytes a
reply needs have arrived, so a large reply costs linear time.

Matching replies by order is the protocols' own rule, not a shortcut: only HTTP/1.1
(:mod:`rpcmeter.drivers.http_connection`) and the raw frames (:mod:`rpcmeter.drivers.raw`) run on
this class. HTTP/1.1 requires a server to answer pipelined requests in the order they came (RFC
9112, section 9.3.2), and a raw frame carries no request id, so order is the only thing that can
pair a reply with its request there. Multiplexed HTTP/2 never comes here: ``http = "2"`` and gRPC
run on :mod:`rpcmeter.drivers.h2client`, whose streams pair each reply with its request by stream
id (:class:`rpcmeter.protocols.h2.connection.H2Connection`), in whatever order they finish.

A connection that serves one closed loop alone, without validation, can be *owned* by it
(:meth:`rpcmeter.drivers.stream.SendChannel.own`): every reply goes straight to the loop's
``done`` (the connection's ``owner``) and the loop writes the next request through the
transport's C ``write`` with the request bound, so no queue entry, tuple or Python frame of ours
sits between two requests.

Servers end keep-alive connections (nginx after 1000 requests, Apache httpd after 100): a reply
that says the server closes the connection after it (:meth:`StreamConnection.last_reply`: HTTP's
``Connection: close`` on a reply other than the connection's first) retires the connection: the
requests pipelined after that reply, which the server will not process, and those sent from then
on go to the slot's next connection (:class:`StreamSlot`, a :class:`rpcmeter.net.connect.Slot`),
opened at once (a loop that owned the old one owns the new one). A server closing a connection
after a complete reply, with nothing in flight, is the same. A request in flight when the server
closed a connection that had answered before is lost: it counts as ``connection_closed``
(:class:`~rpcmeter.errors.RequestLost`) and its loop goes on over the next connection; on a
connection that never answered, the loss ends the loop.

A module of its own, with the HTTP/1.1 reply parser (:mod:`rpcmeter.drivers.http_connection`),
so that the compiled build (``setup.py``) compiles the connections with the rest of the hot path;
the drivers around them (:mod:`rpcmeter.drivers.stream`) stay Python.
"""

from __future__ import annotations

import asyncio
import ssl
from collections import deque
from collections.abc import Callable
from functools import partial
from typing import cast

from mypy_extensions import mypyc_attr

from rpcmeter.drivers.base import Done, Moved, ReplyMismatch
from rpcmeter.errors import ConnectionClosed, ProtocolError, RequestLost
from rpcmeter.net.connect import Slot
from rpcmeter.net.tls import TlsError, tls_error
from rpcmeter.protocols.bodies import check
from rpcmeter.protocols.timing import ServerTime


def mismatch(body: bytes, expect: bytes) -> ReplyMismatch | None:
    """None when ``body`` is the expected reply, else the error to count."""
    if body == expect:
        return None
    try:
        check(body, expect, "reply")
    except ReplyMismatch as exc:
        return exc
    return None


def _running_loop() -> asyncio.AbstractEventLoop | None:
    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        return None


# a request as a slot queues it: its bytes, its done, the reply expected (or None), and for a
# loop that owned its connection, how to give that loop its new connection (else None)
Queued = tuple[bytes, Done, bytes | None, Moved | None]


@mypyc_attr(allow_interpreted_subclasses=True)  # raw.py's RawConnection
class StreamConnection(asyncio.Protocol):
    """One connection; requests may be pipelined, replies come back in order."""

    def __init__(self) -> None:
        # the loop that completes requests: made inside it (create_connection); a connection
        # made outside any loop (a parser fed by hand) takes it when connected
        self.loop: asyncio.AbstractEventLoop | None = _running_loop()
        # requests sent, not answered yet: their bytes, done, the reply expected (or None)
        self.pending: deque[tuple[bytes, Done, bytes | None]] = deque()
        self.transport: asyncio.Transport | None = None
        self.write: Callable[[bytes], object] = self._not_connected
        self.lost: BaseException | None = None
        self.bytes_out = 0
        self.bytes_in = 0
        self.owner: Done | None = None  # the closed loop that owns the connection
        self.owner_bytes = 0  # the size of its request (counted out as each reply comes in)
        self.owner_request = b""
        self.moved: Moved | None = None  # how to give the owner another connection
        self.slot: StreamSlot | None = None  # what keeps a connection in service, if anything
        self.refused: str | None = None  # TLS: what a close before the first reply means

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.Transport, transport)  # uvloop's are not subclasses
        self.write = self.transport.write
        self.loop = self.loop or _running_loop()

    def _not_connected(self, data: bytes) -> None:
        raise ConnectionError("not connected")

    def send(self, data: bytes, done: Done, expect: bytes | None = None) -> None:
        """Write one request; ``done`` is called when its reply has been read (never before
        this method returned)."""
        if self.lost is not None:  # also before the loop runs again (a loop's first request)
            if self.slot is not None:  # to the connection that replaces this one
                self.slot.send((data, done, expect, None))
                return
            (self.loop or asyncio.get_running_loop()).call_soon(done, None, self.lost)
            return
        self.pending.append((data, done, expect))
        self.bytes_out += len(data)
        self.write(data)

    def take_owner(self, done: Done, request: bytes, moved: Moved | None) -> None:
        """Let one closed loop own the connection (see :meth:`rpcmeter.drivers.stream.SendChannel.own`)."""
        self.owner, self.owner_bytes, self.owner_request = done, len(request), request
        self.moved = moved

    def reply(
        self, server_ns: ServerTime | None, body: bytes | None, error: BaseException | None
    ) -> None:
        """The next reply is complete: validate it and complete its request."""
        owner = self.owner
        if owner is not None:
            self.bytes_out += self.owner_bytes
            owner(server_ns, error)
            return
        if not self.pending:
            self.fail(ProtocolError("a reply that answers no request"))
            return
        _, done, expect = self.pending.popleft()
        if error is None and expect is not None:
            error = mismatch(body or b"", expect)
        done(server_ns, error)

    def last_reply(
        self, server_ns: ServerTime | None, body: bytes | None, error: BaseException | None
    ) -> None:
        """The next reply is complete, and the server closes the connection after it (it said
        so): with a slot, the requests sent after it (the server will not process them) and
        those sent from now on go to the slot's next connection (see the module doc); then the
        reply completes its request."""
        slot = self.slot
        if slot is None:
            self.reply(server_ns, body, error)
            return
        owner = self.owner
        unprocessed: list[Queued] = []
        if owner is not None:
            self.bytes_out += self.owner_bytes
            self._unown(slot)
            done, expect = owner, None
        elif not self.pending:
            self.fail(ProtocolError("a reply that answers no request"))
            return
        else:
            _, done, expect = self.pending.popleft()
            unprocessed = [(data, d, e, None) for data, d, e in self.pending]
            self.pending.clear()
        self.lost = ConnectionClosed("the server ended the connection after a reply")
        slot.retire(self, unprocessed)
        if error is None and expect is not None:
            error = mismatch(body or b"", expect)
        done(server_ns, error)

    def _unown(self, slot: StreamSlot) -> None:
        """The owning loop sends through ``slot`` from now on (until it owns the next
        connection)."""
        owner, moved = self.owner, self.moved
        self.owner = self.moved = None
        if owner is not None and moved is not None:
            moved(partial(slot.send, (self.owner_request, owner, None, moved)))

    def wants_body(self) -> bool:
        """True when the oldest pending request validates its reply body."""
        return bool(self.pending) and self.pending[0][2] is not None

    def fail(self, exc: BaseException) -> None:
        """Fail every pending request and refuse new ones (the connection is unusable)."""
        if self.lost is None:
            self.lost = exc
        if self.transport is not None:
            self.transport.abort()
        self._fail_pending()

    def release(self) -> None:
        """The owning loop ended: replies go through the queue again."""
        self.owner = None

    def _fail_pending(self) -> None:
        assert self.lost is not None
        owner = self.owner
        if owner is not None:  # its one request in flight is lost
            if self.slot is not None and isinstance(self.lost, RequestLost):
                self._unown(self.slot)  # the loop goes on, on the next connection
            self.owner = None
            self.bytes_out += self.owner_bytes
            owner(None, self.lost)
        while self.pending:
            _, done, _ = self.pending.popleft()
            done(None, self.lost)

    def closed_by_server(self) -> BaseException:
        """The error pending requests fail with when the server closed the connection."""
        return ConnectionClosed("connection closed by the server")

    def connection_lost(self, exc: Exception | None) -> None:
        if isinstance(exc, ssl.SSLError):
            exc = tls_error(exc)
        elif self.refused is not None and self.bytes_in == 0:  # closed right after a handshake
            exc = TlsError(self.refused)
        if self.lost is None:
            closed = self.closed_by_server()  # what the server announced, if anything
            if isinstance(exc, TlsError):
                self.lost = exc
            elif exc is not None and type(closed) is ConnectionClosed:  # reset, broken pipe
                self.lost = ConnectionClosed(f"connection lost: {exc}")
            else:  # a clean close, or one the server announced (KeepAliveRequired)
                self.lost = closed
            slot = self.slot
            if slot is not None and type(self.lost) is ConnectionClosed and self.bytes_in:
                if self.pending or self.owner is not None:
                    self.lost = RequestLost(f"a request in flight: {self.lost}")
                slot.closed(self)  # the next connection, at once
        self._fail_pending()


class StreamSlot(Slot[StreamConnection, Queued]):
    """One connection of a :class:`StreamDriver` kept in service (see the module doc)."""

    def attach(self, conn: StreamConnection) -> None:
        conn.slot = self

    def usable(self, conn: StreamConnection) -> bool:
        return conn.lost is None

    def submit(self, conn: StreamConnection, request: Queued) -> None:
        data, done, expect, moved = request
        if moved is not None and conn.owner is None and not conn.pending:
            conn.take_owner(done, data, moved)  # the loop owns the new connection
            moved(partial(conn.write, data))
            conn.write(data)
        else:
            conn.send(data, done, expect)

    def fail(self, request: Queued, error: BaseException) -> None:
        request[1](None, error)

    def busy(self, conn: StreamConnection) -> bool:
        return bool(conn.pending) or conn.owner is not None

    def shut(self, conn: StreamConnection) -> None:
        if conn.transport is not None:
            conn.transport.close()

    def release(self, done: Done) -> None:
        """The loop ``done`` that owned a connection of this slot ended."""
        for conn in (self.conn, *self.old):
            if conn.owner is done:
                conn.release()
