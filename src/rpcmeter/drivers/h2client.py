"""What the event drivers over HTTP/2 share (gRPC's own client, HTTP with ``http = "2"``): one
:class:`~rpcmeter.h2.transport.Session` per connection, closed loop ``i`` on session
``i % connections``, its calls multiplexed there as streams; requests prepared once per loop.

A subclass gives the ``view`` of header blocks it needs and ``on_end``, which turns a finished
stream into ``done(server_ns, error)``. Errors of the stream itself map the same for every
protocol on top (:meth:`H2Client.stream_error`): a reset stream counts as ``rst_stream:CODE``
(the loop goes on); a GOAWAY above the stream's id and a lost connection stop the loop.

TLS: with the case's ``tls`` (:mod:`rpcmeter.tls`) every connection runs over TLS, offering ALPN
``h2`` (``:scheme`` https). Each connection's connect and handshake times go into ``costs``.
"""

from __future__ import annotations

import ssl
from abc import ABC, abstractmethod
from collections.abc import Callable
from typing import Any

from rpcmeter.drivers.base import DriverContext, ReplyError
from rpcmeter.h2.connection import H2Connection, H2ConnectionError, H2Unavailable, StreamReset
from rpcmeter.h2.connection import Stream as H2Stream
from rpcmeter.h2.transport import H2Protocol, Session, open_connection
from rpcmeter.metrics.connections import ConnectionCosts
from rpcmeter.tls import client_context, server_name, tls_error


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
        if ctx.tls is not None:
            self.ssl_context = client_context(ctx.tls, ["h2"])
            self.server_hostname = server_name(ctx.tls, ep.host)
            self.scheme = b"https"
        self.costs = ConnectionCosts()

    @abstractmethod
    def view(self, headers: list[tuple[bytes, bytes]]) -> Any:
        """What this protocol keeps of a header block (once per distinct block)."""

    @abstractmethod
    def on_end(self, stream: H2Stream) -> None:
        """A stream ended: call its ``user`` (the loop's ``done``)."""

    def new_connection(self) -> H2Connection:
        return H2Connection(view=self.view)

    async def open(self, connect_timeout_s: float = 10.0) -> None:
        ep = self.ctx.endpoint

        async def opener() -> H2Protocol:
            return await open_connection(
                ep,
                self.new_connection,
                ssl_context=self.ssl_context,
                server_hostname=self.server_hostname,
                timeout_s=connect_timeout_s,
                record=self.costs.record,
            )

        for _ in range(max(1, self.ctx.connections)):
            try:
                proto = await opener()
            except H2ConnectionError:
                raise
            except ssl.SSLError as exc:  # the handshake failed: name its cause
                raise tls_error(exc) from None
            except OSError as exc:
                where = ep.path or self.authority
                raise ConnectionError(f"no {self.protocol} connection to {where}: {exc}") from None
            self.sessions.append(Session(proto, opener))

    def session(self, index: int) -> Session:
        return self.sessions[index % len(self.sessions)]

    def stream_error(
        self, err: BaseException, unavailable: Callable[[str], BaseException] | None = None
    ) -> BaseException:
        """The error a loop sees for a stream that ended with ``err``."""
        if isinstance(err, StreamReset):
            return ReplyError(err.kind, str(err))
        if unavailable is None:
            return err
        if isinstance(err, H2Unavailable):
            return unavailable(str(err))
        if isinstance(err, H2ConnectionError):
            return err
        if isinstance(err, OSError):
            return unavailable(f"connection lost: {type(err).__name__}: {err}")
        return err

    def traffic(self) -> tuple[int, int]:
        """Bytes written and read on every connection (frames, headers and bodies)."""
        protos = [p for s in self.sessions for p in (*s.old, s.proto)]
        return sum(p.bytes_out for p in protos), sum(p.bytes_in for p in protos)

    def close(self) -> None:
        for session in self.sessions:
            session.close()
