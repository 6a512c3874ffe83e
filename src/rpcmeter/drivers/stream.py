"""Shared pieces of the event drivers that speak over stream sockets (HTTP/1.1, raw frames).

A :class:`StreamConnection` is an asyncio protocol for one TCP or Unix connection whose replies
arrive in the order the requests were sent. Each sent request leaves ``(done, expect)`` in a FIFO;
the subclass parses replies and calls :meth:`StreamConnection.reply` for each one, which pops the
oldest entry, checks the body against ``expect`` (when validating) and calls ``done``. A lost
connection fails every pending request with :class:`~rpcmeter.drivers.base.ConnectionClosed`, a
malformed or surplus reply with :class:`~rpcmeter.drivers.base.ProtocolError` (both fatal for
their loop). Subclasses keep unparsed bytes in a ``bytearray`` and parse again only once the
bytes a reply needs have arrived, so a large reply costs linear time.

Matching replies by order is the protocols' own rule, not a shortcut: only HTTP/1.1
(:mod:`rpcmeter.drivers.http`) and the raw frames (:mod:`rpcmeter.drivers.raw`) run on this class.
HTTP/1.1 requires a server to answer pipelined requests in the order they came (RFC 9112,
section 9.3.2), and a raw frame carries no request id, so order is the only thing that can pair a
reply with its request there. Multiplexed HTTP/2 never comes here: ``http = "2"`` and gRPC run on
:mod:`rpcmeter.drivers.h2client`, whose streams pair each reply with its request by stream id
(:class:`rpcmeter.protocols.h2.connection.H2Connection`), in whatever order they finish.

A connection that serves one closed loop alone, without validation, can be *owned* by it
(:meth:`SendChannel.own`): every reply goes straight to the loop's ``done`` (the connection's
``owner``) and the loop writes the next request through the transport's C ``write`` with the
request bound, so no queue entry, tuple or Python frame of ours sits between two requests.

A :class:`StreamDriver` keeps ``ctx.connections`` such connections in service, each in a
:class:`StreamSlot` (:class:`rpcmeter.connect.Slot`), and gives closed loop ``i`` slot
``i % connections``; requests are prebuilt bytes (a few variants cycled, so validation is not
fooled by a server replaying one reply). With ``ctx.reuse`` false (``load.reuse = false``) every
request opens a connection of its own instead, closed after its reply; the latency then includes
the connect (and the handshake), and the counter ``connects`` counts them.

Servers end keep-alive connections (nginx after 1000 requests, Apache httpd after 100): a reply
that says the server closes the connection after it (:meth:`StreamConnection.last_reply`: HTTP's
``Connection: close`` on a reply other than the connection's first) retires the connection: the
requests pipelined after that reply, which the server will not process, and those sent from
then on go to the slot's next connection, opened at once (a loop that owned the old one owns
the new one). A server closing a connection after a complete reply, with nothing in flight, is
the same. A request in flight when the server closed a connection that had answered before is
lost: it counts as ``connection_closed`` (:class:`~rpcmeter.errors.RequestLost`) and its loop
goes on over the next connection; on a connection that never answered, the loss ends the loop.

Every connection is opened in two timed steps: the TCP (or Unix) connect, then, with TLS
(``ctx.tls``, :mod:`rpcmeter.tls`), the handshake; both go into the client's
:class:`~rpcmeter.metrics.connections.ConnectionCosts` (resumed handshakes apart), and with a
connection per request the request's own time (write to reply) too. A TLS connection then runs
on :class:`rpcmeter.tls_transport.TlsTransport` (the event loop watching the socket, OpenSSL's memory
BIOs between: measured at 0.4x the client CPU per request of uvloop's TLS transport).
"""

from __future__ import annotations

import asyncio
import random
import socket
import ssl
import time
from abc import abstractmethod
from collections import deque
from collections.abc import Callable
from functools import partial
from typing import Any, ClassVar, cast

from rpcmeter.connect import Slot, open_stream
from rpcmeter.drivers.base import (
    Channel,
    Done,
    DriverContext,
    EventDriver,
    Moved,
    Ownership,
    ReplyMismatch,
)
from rpcmeter.errors import ConnectionClosed, ProtocolError, RequestLost
from rpcmeter.metrics.connections import ConnectionCosts
from rpcmeter.protocols.bodies import KINDS, check, expected_reply, request_body
from rpcmeter.protocols.timing import ServerTime
from rpcmeter.tls import (
    HANDSHAKE_TIMEOUT_S,
    ResumingContext,
    TlsError,
    client_context,
    server_name,
    tls_error,
)
from rpcmeter.workloads import EchoParams, lift_int_digit_limit

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


def mismatch(body: bytes, expect: bytes) -> ReplyMismatch | None:
    """None when ``body`` is the expected reply, else the error to count."""
    if body == expect:
        return None
    try:
        check(body, expect, "reply")
    except ReplyMismatch as exc:
        return exc
    return None


class ExactReply:
    """The :class:`~rpcmeter.drivers.base.ReplyCheck` of one expected body: every reply must be
    those bytes."""

    __slots__ = ("last",)

    def __init__(self, expect: bytes) -> None:
        self.last: bytes | None = expect

    def __call__(self, body: bytes) -> ReplyMismatch | None:
        assert self.last is not None
        return mismatch(body, self.last)


def _running_loop() -> asyncio.AbstractEventLoop | None:
    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        return None


# a request as a slot queues it: its bytes, its done, the reply expected (or None), and for a
# loop that owned its connection, how to give that loop its new connection (else None)
Queued = tuple[bytes, Done, bytes | None, Moved | None]


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
        """Let one closed loop own the connection (see :meth:`SendChannel.own`)."""
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
