"""Opening a client connection on the event loop, timed, for every protocol over stream sockets
(HTTP/1.1 and raw frames in :mod:`rpcmeter.drivers.stream`, HTTP/2 and gRPC in
:mod:`rpcmeter.protocols.h2.transport`): one mechanism, so their connect and handshake times mean the same.

:func:`open_stream` connects a non-blocking socket (:func:`connect_socket`), then, given an
``ssl.SSLContext``, runs the TLS handshake on the loop (:func:`rpcmeter.tls.open_tls`); the
protocol then runs on the loop's own transport (cleartext) or on a
:class:`~rpcmeter.tls.TlsTransport`. Given ``record``, it reports the connect time and the
handshake time (ns) as ``record("connect", ns)`` and ``record("handshake", ns)`` (a resumed one
as ``handshake_resumed``), the parts of :class:`~rpcmeter.metrics.connections.ConnectionCosts`.
"""

from __future__ import annotations

import asyncio
import os
import socket
import ssl
import time
from collections.abc import Callable
from typing import Any, TypeVar

from rpcmeter.tls import HANDSHAKE_TIMEOUT_S, TlsTransport, open_tls, set_ready

P = TypeVar("P", bound=asyncio.Protocol)


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
    OSError when the connect fails, :class:`~rpcmeter.tls.TlsError` when the handshake does."""
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
