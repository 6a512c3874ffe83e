"""HTTP/2 connections on asyncio transports: :class:`H2Protocol` runs one
:class:`~rpcmeter.protocols.h2.connection.H2Connection` over a TCP, Unix or TLS stream, and a
:class:`Session` keeps one such connection in service (a :class:`~rpcmeter.net.connect.Slot`),
replacing it when it stops taking new streams (a GOAWAY, stream ids used up, the server closed
it): the streams a graceful GOAWAY left unprocessed, and those that had not started, go to the
new connection, opened at once; the old one finishes the streams it has in flight, and is closed
when they ended. A stream in flight on a connection that is lost fails with
:class:`~rpcmeter.errors.RequestLost` when the connection had served streams before (the loop
goes on, on the next connection), with the plain error otherwise.

Writes are coalesced: bytes queued while a read is processed (the requests that replies'
callbacks send, WINDOW_UPDATEs, ACKs) go out in one write at the end of that read; a request
made outside a read is written at once.

Connections are opened by :func:`rpcmeter.net.connect.open_stream`, as the HTTP/1.1 driver's are.
TLS: :func:`open_connection` takes an ``ssl.SSLContext`` (whose ALPN protocols should include
``h2``) and a server name; the connection then runs on
:class:`rpcmeter.net.tls_transport.TlsTransport` (every record a read brings in one ``data_received``), a failed handshake raises
:class:`~rpcmeter.net.tls.TlsError` and a connection that did not negotiate ``h2`` fails with reason
``alpn``. With a :class:`~rpcmeter.net.tls.ResumingContext` (``tls.resume``) every connection after
the first offers the session of the last one opened. Given ``record``, it reports the connect
time and the TLS handshake time (ns) of each connection as ``record("connect", ns)`` and
``record("handshake", ns)`` (a resumed one as ``handshake_resumed``), the parts of
:class:`~rpcmeter.metrics.connections.ConnectionCosts`.
"""

from __future__ import annotations

import asyncio
import socket
import ssl
from collections.abc import Awaitable, Callable
from typing import Any, cast

from rpcmeter.errors import RequestLost
from rpcmeter.net.connect import Slot, open_stream
from rpcmeter.net.endpoints import Endpoint
from rpcmeter.net.tls import HANDSHAKE_TIMEOUT_S, ResumingContext
from rpcmeter.protocols.h2.connection import H2Connection
from rpcmeter.protocols.h2.errors import H2ConnectionError, H2Unavailable
from rpcmeter.protocols.h2.frames import ErrorCode
from rpcmeter.protocols.h2.request import Request
from rpcmeter.protocols.h2.stream import Stream, new_stream


class H2Protocol(asyncio.Protocol):
    """One HTTP/2 connection. ``ready`` resolves when the server's SETTINGS arrived (or fails
    with the reason the connection could not start)."""

    def __init__(self, conn: H2Connection) -> None:
        self.conn = conn
        conn.listener = self
        self.transport: asyncio.Transport | None = None
        self.receiving = False
        self.loop = asyncio.get_running_loop()
        self.ready: asyncio.Future[None] = self.loop.create_future()
        self.starting = True  # ``ready`` not yet resolved here (a read tests this, not the future)
        self.session: Session | None = None  # the owner that keeps a connection in service
        self.served = False  # a stream ended on it before the connection was lost
        self.bytes_in = 0
        self.bytes_out = 0

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.Transport, transport)  # uvloop's are not subclasses
        ssl_object = transport.get_extra_info("ssl_object")
        if ssl_object is not None and ssl_object.selected_alpn_protocol() != "h2":
            chosen = ssl_object.selected_alpn_protocol()
            self.conn.connection_lost(
                H2ConnectionError("alpn", f"the server did not agree to h2 (ALPN: {chosen})")
            )
            return
        preface = self.conn.initiate()
        self.bytes_out += len(preface)
        self.transport.write(preface)

    def data_received(self, data: bytes) -> None:
        self.bytes_in += len(data)
        conn = self.conn
        self.receiving = True
        try:
            conn.receive(data)
        finally:
            self.receiving = False
        out = conn.out
        if out and self.transport is not None:
            data = b"".join(out) if len(out) > 1 else out[0]
            self.bytes_out += len(data)
            self.transport.write(data)
            out.clear()
        if self.starting and conn.started:
            self.starting = False
            if not self.ready.done():
                self.ready.set_result(None)
        if not conn.accepting:
            if conn.closed is not None:
                if self.transport is not None:
                    self.transport.close()
            elif not conn.streams and self.session is not None and self.session.conn is not self:
                self.session.let_go(self)  # replaced, and its last stream ended

    def flush(self) -> None:
        """Write what the connection queued (requests made outside a read)."""
        out = self.conn.out
        if out and not self.receiving and self.transport is not None:
            data = b"".join(out) if len(out) > 1 else out[0]
            self.bytes_out += len(data)
            self.transport.write(data)
            out.clear()

    def request(self, req: Request, on_end: Callable[[Stream], object], user: Any = None) -> None:
        conn = self.conn
        conn.request(req, on_end, user)
        self.flush()

    def connection_lost(self, exc: Exception | None) -> None:
        conn = self.conn
        error: BaseException = exc or ConnectionResetError("connection closed by the server")
        self.served = conn.served()
        if self.session is not None and conn.streams and self.served:
            error = RequestLost(f"a request in flight when the connection was lost ({error})")
        conn.connection_lost(error)

    # listener of the connection
    def on_goaway(self, last_stream_id: int, code: int, debug: bytes) -> None:
        if self.session is not None:
            self.session.retire(self, self.conn.take_waiting())

    def on_closed(self, error: BaseException) -> None:
        conn = self.conn
        if self.session is not None and (self.served or conn.goaway_id is not None):
            self.session.closed(self, conn.take_waiting())  # else it was never of use
        if not self.ready.done():
            self.ready.set_exception(error)
            self.ready.exception()  # retrieved: an owner that gave up waiting is not warned
        if self.transport is not None:
            out = self.conn.data_to_send()  # our GOAWAY, when we closed it
            if out:
                self.transport.write(out)
            self.transport.close()

    def close(self) -> None:
        if self.transport is not None:
            self.conn.close()
            self.flush()
            self.transport.close()


async def open_connection(
    endpoint: Endpoint,
    make: Callable[[], H2Connection] = H2Connection,
    *,
    ssl_context: ssl.SSLContext | None = None,
    server_hostname: str | None = None,
    timeout_s: float = 10.0,
    handshake_timeout_s: float = HANDSHAKE_TIMEOUT_S,
    record: Callable[[str, int], None] | None = None,
) -> H2Protocol:
    """Connect (``timeout_s``), run the TLS handshake (``handshake_timeout_s``: a handshake that
    takes longer fails with :class:`~rpcmeter.net.tls.TlsError` saying so), send the preface and wait
    for the server's SETTINGS (``timeout_s``); ``record``: see the module doc."""
    loop = asyncio.get_running_loop()
    where = endpoint.describe()

    def factory() -> H2Protocol:
        return H2Protocol(make())

    async def connect() -> H2Protocol:
        address: Any
        if endpoint.transport == "unix":
            assert endpoint.path is not None
            family, address = socket.AF_UNIX, endpoint.path
        else:
            assert endpoint.port is not None
            infos = await loop.getaddrinfo(endpoint.host, endpoint.port, type=socket.SOCK_STREAM)
            family, address = infos[0][0], infos[0][4]
        _, proto = await open_stream(
            loop,
            family,
            address,
            factory,
            ssl_context=ssl_context,
            server_hostname=server_hostname or endpoint.host,
            handshake_timeout_s=handshake_timeout_s,
            record=record,
        )
        return proto

    handshake_s = handshake_timeout_s if ssl_context is not None else 0.0
    try:  # the handshake's own deadline comes first: its error names it
        proto = await asyncio.wait_for(connect(), timeout_s + handshake_s)
    except TimeoutError:
        raise ConnectionError(f"no connection to {where} within {timeout_s:g} s") from None
    try:
        await asyncio.wait_for(proto.ready, timeout_s)
    except TimeoutError:
        proto.close()
        raise ConnectionError(
            f"no HTTP/2 connection to {where} within {timeout_s:g} s (no SETTINGS from the server)"
        ) from None
    except BaseException:
        proto.close()
        raise
    if isinstance(ssl_context, ResumingContext) and proto.transport is not None:
        # TLS 1.3's tickets came before the server's SETTINGS: later connections resume
        ssl_context.remember(proto.transport.get_extra_info("ssl_object"))
    return proto


class Session(Slot[H2Protocol, tuple[Stream, Request]]):
    """One connection kept in service (see the module doc and :class:`~rpcmeter.net.connect.Slot`):
    :meth:`start` sends on the current connection, or queues the stream for the next one."""

    def __init__(self, proto: H2Protocol, opener: Callable[[], Awaitable[H2Protocol]]) -> None:
        super().__init__(proto, opener, proto.loop)

    @property
    def proto(self) -> H2Protocol:
        """The current connection."""
        return self.conn

    def start(self, req: Request, on_end: Callable[[Stream], object], user: Any = None) -> Stream:
        """Send ``req`` on a new stream; ``on_end(stream)`` when it ends (never from inside this
        method). Returns the stream (a streaming call's, to send more on)."""
        proto = self.conn
        conn = proto.conn
        if conn.accepting:  # (streams queue here only while the connection takes none)
            stream = conn.request(req, on_end, user)
            if not proto.receiving:
                proto.flush()
            if not conn.accepting:  # it took the last stream id
                self.retire(proto, conn.take_waiting())
            return stream
        stream = new_stream(on_end, user)
        self.send((stream, req))
        return stream

    # the Slot's part
    def attach(self, conn: H2Protocol) -> None:
        conn.session = self

    def usable(self, conn: H2Protocol) -> bool:
        return conn.conn.accepting

    def submit(self, conn: H2Protocol, request: tuple[Stream, Request]) -> None:
        conn.conn.submit(*request)

    def submitted(self, conn: H2Protocol) -> None:
        conn.flush()

    def refusal(self, conn: H2Protocol) -> BaseException:
        why = conn.conn.goaway_why or "its stream ids ran out"
        return H2Unavailable(f"the server ended a new connection ({why}) before any stream")

    def fail(self, request: tuple[Stream, Request], error: BaseException) -> None:
        stream = request[0]
        stream.error = error
        stream.on_end(stream)

    def busy(self, conn: H2Protocol) -> bool:
        return conn.conn.closed is None and bool(conn.conn.streams)

    def shut(self, conn: H2Protocol) -> None:
        conn.close()

    def holder(self, stream: Stream) -> H2Protocol | None:
        """The connection ``stream`` is open on or waiting to start on (None: it ended, or it
        waits for the next connection)."""
        for proto in (self.conn, *self.old):
            if proto.conn.holds(stream):
                return proto
        return None

    def cancel(self, stream: Stream, code: ErrorCode = ErrorCode.CANCEL) -> None:
        """Reset ``stream`` where it is open, or drop it where it waits to start (never sent);
        its ``on_end`` is not called."""
        proto = self.holder(stream)
        if proto is not None:
            proto.conn.reset(stream, code)
            proto.flush()
            return
        for i, (queued, _) in enumerate(self.queue):
            if queued is stream:
                del self.queue[i]
                return
