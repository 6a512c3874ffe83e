"""What the event drivers over HTTP/2 share (gRPC's own client, HTTP with ``http = "2"``): one
:class:`~rpcmeter.protocols.h2.transport.Session` per connection, closed loop ``i`` on session
``i % connections``, its calls multiplexed there as streams; requests prepared once per loop.

A subclass gives the ``view`` of header blocks it needs and ``on_end``, which turns a finished
stream into ``done(server_ns, error)``. Errors of the stream itself map the same for every
protocol on top (:meth:`H2Client.stream_error`): a reset stream counts as ``rst_stream:CODE``
(the loop goes on), and so does a request lost in flight on a connection that had served others
(:class:`~rpcmeter.errors.RequestLost`, ``connection_closed``: the session goes on over a new
connection); a GOAWAY with an error above the stream's id and a connection that cannot be
(re)opened stop the loop. A graceful GOAWAY or a server closing a connection costs nothing but
the new connection (:class:`~rpcmeter.protocols.h2.transport.Session`), counted in ``costs``.

TLS: with the case's ``tls`` (:mod:`rpcmeter.net.tls`) every connection runs over TLS, offering ALPN
``h2`` (``:scheme`` https). Each connection's connect and handshake times go into ``costs``.

With ``load.reuse = false`` no connection is kept: every request opens its own
(:meth:`H2Client.one_shot`: connect, handshake, preface and SETTINGS, the one stream), closed
once the stream ended; its request time goes into ``costs`` too and the counter ``connects``
counts them.
"""

from __future__ import annotations

import asyncio
import ssl
import time
from abc import ABC, abstractmethod
from collections.abc import Callable
from typing import Any

from mypy_extensions import mypyc_attr

from rpcmeter.drivers.base import DriverContext, ReplyError
from rpcmeter.errors import RequestLost
from rpcmeter.metrics.connections import ConnectionCosts
from rpcmeter.net.tls import HANDSHAKE_TIMEOUT_S, TlsError, client_context, server_name, tls_error
from rpcmeter.protocols.h2.connection import H2Connection
from rpcmeter.protocols.h2.errors import H2ConnectionError, H2Unavailable, StreamReset
from rpcmeter.protocols.h2.frames import ErrorCode
from rpcmeter.protocols.h2.request import Request
from rpcmeter.protocols.h2.stream import Stream as H2Stream
from rpcmeter.protocols.h2.stream import new_stream
from rpcmeter.protocols.h2.transport import H2Protocol, Session, open_connection


@mypyc_attr(allow_interpreted_subclasses=True)  # (so that GrpcH2Client may allow them)
class H2Client(ABC):
    """This client process's HTTP/2 sessions (see the module doc)."""

    protocol = "HTTP/2"  # named in connection errors

    def __init__(self, ctx: DriverContext) -> None:
        self.ctx = ctx
        self.sessions: list[Session] = []
        ep = ctx.endpoint
        self.authority = "localhost" if ep.path else ep.describe().split("//")[1]
        # TLS: an SSLContext with ALPN "h2" and the name to verify (None: cleartext, h2c)
        self.ssl_context: ssl.SSLContext | None = None
        self.server_hostname: str | None = None
        self.scheme = b"http"
        self.handshake_timeout_s = HANDSHAKE_TIMEOUT_S
        if ctx.tls is not None:
            self.ssl_context = client_context(ctx.tls, ["h2"])
            self.server_hostname = server_name(ctx.tls, ep.host)
            self.scheme = b"https"
            self.handshake_timeout_s = ctx.tls.handshake_timeout_s
        self.costs = ConnectionCosts(per_request=not ctx.reuse)
        self.connect_timeout_s = 10.0
        # load.reuse = false: the connections of requests in flight, and what the closed ones
        # connected and carried
        self.one_shots: set[H2Protocol] = set()
        self.tasks: set[asyncio.Task[None]] = set()
        self.connects = 0
        self.closed_traffic = [0, 0]

    @abstractmethod
    def view(self, headers: list[tuple[bytes, bytes]]) -> Any:
        """What this protocol keeps of a header block (once per distinct block)."""

    @abstractmethod
    def on_end(self, stream: H2Stream) -> None:
        """A stream ended: call its ``user`` (the loop's ``done``)."""

    def new_connection(self) -> H2Connection:
        return H2Connection(view=self.view)

    async def connect(self) -> H2Protocol:
        """A new connection (its connect and handshake times go into ``costs``)."""
        return await open_connection(
            self.ctx.endpoint,
            self.new_connection,
            ssl_context=self.ssl_context,
            server_hostname=self.server_hostname,
            timeout_s=self.connect_timeout_s,
            handshake_timeout_s=self.handshake_timeout_s,
            record=self.costs.record,
        )

    async def open(self, connect_timeout_s: float = 10.0) -> None:
        ep = self.ctx.endpoint
        self.connect_timeout_s = connect_timeout_s
        self.loop = asyncio.get_running_loop()
        if not self.ctx.reuse:  # a connection per request (one_shot)
            return
        for _ in range(max(1, self.ctx.connections)):
            try:
                proto = await self.connect()
            except (H2ConnectionError, TlsError):
                raise
            except ssl.SSLError as exc:  # the handshake failed: name its cause
                raise tls_error(exc) from None
            except OSError as exc:
                where = ep.path or self.authority
                raise ConnectionError(f"no {self.protocol} connection to {where}: {exc}") from None
            self.sessions.append(Session(proto, self.connect))

    def one_shot(self, req: Request, on_end: Callable[[H2Stream], object], user: Any) -> None:
        """Send ``req`` on a connection of its own, closed once its stream ended (``on_end``
        then sees the stream; a connection that could not be opened ends it with that error)."""

        async def exchange() -> None:
            try:
                proto = await self.connect()
            except Exception as exc:
                stream = new_stream(on_end, user)
                stream.error = tls_error(exc) if isinstance(exc, ssl.SSLError) else exc
                on_end(stream)
                return
            self.connects += 1
            self.one_shots.add(proto)
            t0 = time.perf_counter_ns()

            def ended(stream: H2Stream) -> None:
                self.costs.record("request", time.perf_counter_ns() - t0)
                self.one_shots.discard(proto)
                self.closed_traffic[0] += proto.bytes_out
                self.closed_traffic[1] += proto.bytes_in
                proto.close()
                on_end(stream)

            proto.request(req, ended, user)

        task = self.loop.create_task(exchange())
        self.tasks.add(task)
        task.add_done_callback(self.tasks.discard)

    def preparer(self, index: int) -> H2Connection:
        """The connection that encodes loop ``index``'s requests (a prepared request is sent
        on any connection: its header block uses no dynamic table)."""
        return self.session(index).proto.conn if self.sessions else self.new_connection()

    def session(self, index: int) -> Session:
        return self.sessions[index % len(self.sessions)]

    def stream_error(
        self, err: BaseException, unavailable: Callable[[str], BaseException] | None = None
    ) -> BaseException:
        """The error a loop sees for a stream that ended with ``err``."""
        if isinstance(err, StreamReset):
            return ReplyError(err.kind, str(err))
        if unavailable is None or isinstance(err, RequestLost):
            return err
        if isinstance(err, H2Unavailable):
            return unavailable(err.detail)
        if isinstance(err, H2ConnectionError):
            return err
        if isinstance(err, OSError):
            return unavailable(f"connection lost: {type(err).__name__}: {err}")
        return err

    def cancel(self, session: Session, stream: H2Stream) -> None:
        """Reset ``stream`` (CANCEL) where it is open, or drop it where it waits to start (a
        queued call past its deadline is never sent); its ``on_end`` is not called."""
        session.cancel(stream, ErrorCode.CANCEL)

    def traffic(self) -> tuple[int, int]:
        """Bytes written and read on every connection (frames, headers and bodies)."""
        moved = [s.bytes_moved() for s in self.sessions]
        protos = list(self.one_shots)
        return (
            self.closed_traffic[0] + sum(m[0] for m in moved) + sum(p.bytes_out for p in protos),
            self.closed_traffic[1] + sum(m[1] for m in moved) + sum(p.bytes_in for p in protos),
        )

    def close(self) -> None:
        for task in self.tasks:
            task.cancel()
        for proto in list(self.one_shots):
            proto.close()
        for session in self.sessions:
            session.close()
