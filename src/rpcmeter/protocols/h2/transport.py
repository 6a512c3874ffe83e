"""HTTP/2 connections on asyncio transports: :class:`H2Protocol` runs one
:class:`~rpcmeter.protocols.h2.connection.H2Connection` over a TCP, Unix or TLS stream, and a
:class:`Session` keeps one such connection in service, replacing it when it stops taking new
streams (a GOAWAY, stream ids used up).

Writes are coalesced: bytes queued while a read is processed (the requests that replies'
callbacks send, WINDOW_UPDATEs, ACKs) go out in one write at the end of that read; a request
made outside a read is written at once.

Connections are opened by :func:`rpcmeter.connect.open_stream`, as the HTTP/1.1 driver's are.
TLS: :func:`open_connection` takes an ``ssl.SSLContext`` (whose ALPN protocols should include
``h2``) and a server name; the connection then runs on
:class:`rpcmeter.tls.TlsTransport` (every record a read brings in one ``data_received``), a failed handshake raises
:class:`~rpcmeter.tls.TlsError` and a connection that did not negotiate ``h2`` fails with reason
``alpn``. With a :class:`~rpcmeter.tls.ResumingContext` (``tls.resume``) every connection after
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

from rpcmeter.connect import open_stream
from rpcmeter.endpoints import Endpoint
from rpcmeter.protocols.h2.connection import (
    H2Connection,
    H2ConnectionError,
    Request,
    Stream,
    new_stream,
)
from rpcmeter.tls import ResumingContext


class H2Protocol(asyncio.Protocol):
    """One HTTP/2 connection. ``ready`` resolves when the server's SETTINGS arrived (or fails
    with the reason the connection could not start)."""

    def __init__(self, conn: H2Connection) -> None:
        self.conn = conn
        conn.listener = self
        self.transport: asyncio.Transport | None = None
        self.receiving = False
        self.ready: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self.on_replace: Callable[[], object] | None = None  # the owner's: stop using me
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
        if conn.started and not self.ready.done():
            self.ready.set_result(None)
        if conn.closed is not None and self.transport is not None:
            self.transport.close()

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
        self.conn.connection_lost(exc or ConnectionResetError("connection closed by the server"))

    # listener of the connection
    def on_goaway(self, last_stream_id: int, code: int, debug: bytes) -> None:
        if self.on_replace is not None:
            self.on_replace()

    def on_closed(self, error: BaseException) -> None:
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
    record: Callable[[str, int], None] | None = None,
) -> H2Protocol:
    """Connect, send the preface and wait for the server's SETTINGS (``timeout_s`` in all);
    ``record``: see the module doc."""
    loop = asyncio.get_running_loop()

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
            handshake_timeout_s=timeout_s,
            record=record,
        )
        await proto.ready
        if isinstance(ssl_context, ResumingContext) and proto.transport is not None:
            # TLS 1.3's tickets came before the server's SETTINGS: later connections resume
            ssl_context.remember(proto.transport.get_extra_info("ssl_object"))
        return proto

    try:
        return await asyncio.wait_for(connect(), timeout_s)
    except TimeoutError:
        raise ConnectionError(
            f"no HTTP/2 connection to {endpoint.describe()} within {timeout_s:g} s "
            "(no SETTINGS from the server)"
        ) from None


class Session:
    """One connection slot: requests go to the current connection; when it stops taking new
    streams (GOAWAY, ids used up) a new one is opened and the streams that had not started
    move to it. When the new one cannot be opened, they end with that error."""

    def __init__(self, proto: H2Protocol, opener: Callable[[], Awaitable[H2Protocol]]) -> None:
        self.opener = opener
        self.proto = proto
        self.replacing: asyncio.Task[None] | None = None
        self.old: list[H2Protocol] = []
        proto.on_replace = self.replace

    def start(self, req: Request, on_end: Callable[[Stream], object], user: Any = None) -> Stream:
        """Send ``req`` on a new stream; ``on_end(stream)`` when it ends. Returns the stream (a
        streaming call's, to send more on)."""
        proto = self.proto
        conn = proto.conn
        if conn.closed is not None:  # fail it from the loop, never from inside request()
            stream = new_stream(on_end, user)
            stream.error = conn.closed
            asyncio.get_running_loop().call_soon(on_end, stream)
            return stream
        stream = conn.request(req, on_end, user)
        if not proto.receiving:
            proto.flush()
        if not conn.accepting:
            self.replace()
        return stream

    request = start

    def holder(self, stream: Stream) -> H2Protocol | None:
        """The connection ``stream`` is open on or waiting to start on (None: it ended)."""
        for proto in (self.proto, *self.old):
            if proto.conn.holds(stream):
                return proto
        return None

    def replace(self) -> None:
        if self.replacing is None:
            self.replacing = asyncio.get_running_loop().create_task(self._replace())

    async def _replace(self) -> None:
        old = self.proto
        try:
            new = await self.opener()
        except Exception as exc:
            old.conn.connection_lost(
                exc if isinstance(exc, ConnectionError) else ConnectionError(str(exc))
            )
            return
        finally:
            self.replacing = None
        new.on_replace = self.replace
        self.proto = new
        for stream, req in old.conn.take_waiting():
            new.conn.submit(stream, req)
        new.flush()
        old.on_replace = None
        if old.conn.streams:
            self.old.append(old)  # it finishes what it started
        else:
            old.close()

    def close(self) -> None:
        if self.replacing is not None:
            self.replacing.cancel()
        for proto in [*self.old, self.proto]:
            proto.close()
