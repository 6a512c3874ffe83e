"""The event drivers that speak over stream sockets (HTTP/1.1, raw frames): what they share
around their connections (:mod:`rpcmeter.drivers.stream_connection`, compiled: a
:class:`~rpcmeter.drivers.stream_connection.StreamConnection`, whose replies come back in the
order the requests were sent, and the :class:`~rpcmeter.drivers.stream_connection.StreamSlot`
that keeps one in service).

A :class:`StreamDriver` keeps ``ctx.connections`` such connections in service, each in a
:class:`~rpcmeter.drivers.stream_connection.StreamSlot`, and gives closed loop ``i`` slot
``i % connections`` through a :class:`SendChannel` (which lets the loop own the connection when
it is its only user); requests are prebuilt bytes (a few variants cycled, so validation is not
fooled by a server replaying one reply). With ``ctx.reuse`` false (``load.reuse = false``) every
request opens a connection of its own instead, closed after its reply; the latency then includes
the connect (and the handshake), and the counter ``connects`` counts them.

Every connection is opened in two timed steps: the TCP (or Unix) connect, then, with TLS
(``ctx.tls``, :mod:`rpcmeter.net.tls`), the handshake; both go into the client's
:class:`~rpcmeter.metrics.connections.ConnectionCosts` (resumed handshakes apart), and with a
connection per request the request's own time (write to reply) too. A TLS connection then runs
on :class:`rpcmeter.net.tls_transport.TlsTransport` (the event loop watching the socket, OpenSSL's memory
BIOs between: measured at 0.4x the client CPU per request of uvloop's TLS transport).
"""

from __future__ import annotations

import asyncio
import random
import socket
import time
from abc import abstractmethod
from collections.abc import Callable
from functools import partial
from typing import Any, ClassVar

from rpcmeter.drivers.base import (
    Channel,
    Done,
    DriverContext,
    EventDriver,
    Moved,
    Ownership,
    ReplyMismatch,
)
from rpcmeter.drivers.stream_connection import StreamConnection, StreamSlot, mismatch
from rpcmeter.metrics.connections import ConnectionCosts
from rpcmeter.net.connect import open_stream
from rpcmeter.net.tls import (
    HANDSHAKE_TIMEOUT_S,
    ResumingContext,
    TlsError,
    client_context,
    server_name,
)
from rpcmeter.protocols.bodies import KINDS, expected_reply, request_body
from rpcmeter.protocols.timing import ServerTime
from rpcmeter.suite.workloads import EchoParams, lift_int_digit_limit

VARIANTS = 8  # distinct request bodies per loop when validating echo


def workload_body(ctx: DriverContext, variant: int) -> bytes:
    """The request body of the workload (for echo, random bytes: variant ``variant``)."""
    w = ctx.workload
    if isinstance(w, EchoParams):
        return random.Random(ctx.seed * 7919 + variant).randbytes(w.request_bytes)
    return request_body(w)


def loop_bodies(ctx: DriverContext, index: int, body: Callable[[int], bytes]) -> list[bytes]:
    """The request bodies loop ``index`` sends in turn, each ``body(variant)`` (several for
    echo: see the module doc)."""
    n = VARIANTS if isinstance(ctx.workload, EchoParams) else 1
    return [body(index * VARIANTS + v) for v in range(n)]


class ExactReply:
    """The :class:`~rpcmeter.drivers.base.ReplyCheck` of one expected body: every reply must be
    those bytes."""

    __slots__ = ("last",)

    def __init__(self, expect: bytes) -> None:
        self.last: bytes | None = expect

    def __call__(self, body: bytes) -> ReplyMismatch | None:
        assert self.last is not None
        return mismatch(body, self.last)


class SendChannel(partial[None]):
    """Loop ``index``'s channel: ``channel(done)`` is ``conn.send(request, done)`` (a partial: no
    Python frame of its own; once ``conn`` was replaced, its ``send`` hands the request to the
    slot). ``own(done, moved)`` hands the slot's connection to a closed loop when the loop is
    its only user (``exclusive``) and replies are not validated; ``moved(send)`` gives the loop
    the way it sends from then on when the connection is replaced."""

    conn: StreamConnection
    exclusive: bool
    slot: StreamSlot | None = None

    def own(self, done: Done, moved: Moved | None = None) -> Ownership | None:
        slot = self.slot
        conn = self.conn if slot is None else slot.conn
        if not self.exclusive or conn.lost is not None or conn.pending:
            return None
        if slot is not None and (moved is None or slot.queue):
            return None
        request: bytes = self.args[0]
        conn.take_owner(done, request, moved)
        release = conn.release if slot is None else partial(slot.release, done)
        return Ownership(partial(conn.write, request), release)


def in_turn(
    send: Callable[[bytes, Done, bytes | None], None], pairs: list[tuple[bytes, bytes | None]]
) -> Channel:
    """A channel sending the requests of ``pairs`` (request, expected reply or None) in turn
    through ``send(request, done, expect)``."""
    turn = 0

    def channel(done: Done) -> None:
        nonlocal turn
        data, expect = pairs[turn]
        turn = (turn + 1) % len(pairs)
        send(data, done, expect)

    return channel


class StreamDriver(EventDriver):
    """An event driver over ``ctx.connections`` stream connections of one protocol."""

    transports: ClassVar[tuple[str, ...]] = ("tcp", "unix")
    workloads: ClassVar[frozenset[str]] = frozenset(KINDS)
    reports_server_time: ClassVar[bool] = True

    conns: list[StreamConnection]

    @abstractmethod
    def new_connection(self) -> StreamConnection:
        """A protocol instance for one new connection."""

    @abstractmethod
    def encode(self, body: bytes) -> bytes:
        """The request bytes carrying the workload with request body ``body``."""

    alpn: ClassVar[tuple[str, ...]] = ()  # protocols offered by ALPN over TLS

    async def open(self) -> None:
        lift_int_digit_limit()  # expected factorial replies
        loop = asyncio.get_running_loop()
        ep = self.ctx.endpoint
        self.loop = loop
        self.conns = []  # load.reuse = false: the connections of requests in flight
        self.slots: list[StreamSlot] = []
        self.connects = 0
        self.tasks: set[asyncio.Task[None]] = set()  # connections being opened (reuse false)
        self.closed_traffic = [0, 0]  # bytes out and in of the connections already closed
        self.costs = ConnectionCosts(per_request=not self.ctx.reuse)
        self.ssl = client_context(self.ctx.tls, self.alpn) if self.ctx.tls else None
        self.address: Any = ep.path
        if ep.transport != "unix":
            infos = await loop.getaddrinfo(ep.host, ep.port, type=socket.SOCK_STREAM)
            self.family, self.address = infos[0][0], infos[0][4]
        if not self.ctx.reuse:
            return
        for _ in range(self.ctx.connections):
            self.slots.append(StreamSlot(await self.connect_one(), self.connect_one, loop))

    async def connect_one(self) -> StreamConnection:
        """A new connection: the connect, then the TLS handshake, each timed into ``costs``."""
        ep = self.ctx.endpoint
        family = socket.AF_UNIX if ep.transport == "unix" else self.family
        tls = self.ctx.tls
        _, proto = await open_stream(
            asyncio.get_running_loop(),
            family,
            self.address,
            self.new_connection,
            ssl_context=self.ssl,
            server_hostname=server_name(tls, ep.host) if tls is not None else "",
            handshake_timeout_s=tls.handshake_timeout_s if tls is not None else HANDSHAKE_TIMEOUT_S,
            record=self.costs.record,
        )
        if tls is None:
            return proto
        self.check_alpn(proto)
        # TLS 1.3: a server refuses a client certificate after the client's handshake ended
        proto.refused = (
            "the server closed the connection after the handshake, before any reply "
            + (
                "(did it refuse the client certificate?)"
                if tls.settings.cert_file
                else "(does it require a client certificate? give tls.cert_file and tls.key_file)"
            )
        )
        return proto

    def check_alpn(self, conn: StreamConnection) -> None:
        """A connection whose server chose by ALPN a protocol this driver does not speak is
        closed, with a TlsError that says so (``tls.alpn = ["h2"]`` on the HTTP/1.1 driver: the
        server would close the connection at the first request)."""
        if not self.alpn or conn.transport is None:
            return
        ssl_object = conn.transport.get_extra_info("ssl_object")
        chosen = ssl_object.selected_alpn_protocol() if ssl_object is not None else None
        if chosen is None or chosen in self.alpn:
            return
        conn.transport.close()
        offered = self.ctx.tls.settings.alpn if self.ctx.tls is not None else None
        raise TlsError(
            f"the server chose {chosen} by ALPN, which the {self.name} driver does not speak "
            f"here ({', '.join(self.alpn)}; tls.alpn offered {', '.join(offered or [])})"
        )

    def remember_session(self, conn: StreamConnection) -> None:
        """Resumption (``tls.resume``): later connections offer this connection's session."""
        if isinstance(self.ssl, ResumingContext) and conn.transport is not None:
            self.ssl.remember(conn.transport.get_extra_info("ssl_object"))

    def connection_costs(self) -> ConnectionCosts | None:
        return getattr(self, "costs", None)

    def request_body(self, variant: int) -> bytes:
        """The request body of the workload (for echo, random bytes: variant ``variant``)."""
        return workload_body(self.ctx, variant)

    def loop_bodies(self, index: int) -> list[bytes]:
        """The request bodies loop ``index`` sends in turn (several for echo: see the doc)."""
        return loop_bodies(self.ctx, index, self.request_body)

    def one_shot(self, data: bytes, done: Done, expect: bytes | None = None) -> None:
        """Send ``data`` on a connection of its own, closed once its reply is read."""

        async def exchange() -> None:
            try:
                conn = await self.connect_one()
            except OSError as exc:
                done(None, exc)
                return
            self.connects += 1
            self.conns.append(conn)
            t0 = time.perf_counter_ns()

            def finished(server_ns: ServerTime | None, error: BaseException | None) -> None:
                self.costs.record("request", time.perf_counter_ns() - t0)
                self.remember_session(conn)
                self.conns.remove(conn)
                self.closed_traffic[0] += conn.bytes_out
                self.closed_traffic[1] += conn.bytes_in
                if conn.transport is not None:
                    conn.transport.close()
                done(server_ns, error)

            conn.send(data, finished, expect)

        task = self.loop.create_task(exchange())
        self.tasks.add(task)
        task.add_done_callback(self.tasks.discard)

    def channel(self, index: int) -> Channel:
        w = self.ctx.workload
        bodies = self.loop_bodies(index)
        requests = [self.encode(b) for b in bodies]
        expects = [expected_reply(w, b) if self.ctx.validate else None for b in bodies]
        pairs = list(zip(requests, expects, strict=True))
        if not self.ctx.reuse:
            return in_turn(self.one_shot, pairs)
        slot = self.slots[index % len(self.slots)]
        conn = slot.conn
        if not self.ctx.validate:
            channel = SendChannel(conn.send, requests[0])
            channel.conn, channel.slot = conn, slot
            channel.exclusive = self.ctx.threads <= len(self.slots)
            return channel
        return in_turn(conn.send, pairs)

    def counters(self) -> dict[str, int]:
        conns = getattr(self, "conns", [])
        closed = getattr(self, "closed_traffic", [0, 0])
        moved = [s.bytes_moved() for s in getattr(self, "slots", [])]
        counters = {
            "bytes_out": closed[0] + sum(c.bytes_out for c in conns) + sum(m[0] for m in moved),
            "bytes_in": closed[1] + sum(c.bytes_in for c in conns) + sum(m[1] for m in moved),
        }
        if not self.ctx.reuse:
            counters["connects"] = getattr(self, "connects", 0)
        return counters

    def close(self) -> None:
        for slot in getattr(self, "slots", []):
            slot.close()
        for c in getattr(self, "conns", []):
            if c.transport is not None:
                c.transport.close()
