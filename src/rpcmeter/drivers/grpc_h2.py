"""The gRPC driver's own client: unary calls over rpcmeter's HTTP/2 connection
(:mod:`rpcmeter.protocols.h2`) on the event loop, ``load.concurrency`` streams multiplexed over
``load.connections`` connections.

Each call is one stream: a HEADERS frame prepared once (method path, ``content-type:
application/grpc``, ``te: trailers``, ``grpc-timeout`` from ``call_timeout_s``, the ``metadata``
as headers) and one DATA frame holding the message with its 5-byte gRPC prefix (flag 0, length).
A reply is HEADERS (``:status`` 200), DATA (the message) and trailers (``grpc-status``,
``grpc-message``, and from rpcmeter's servers ``rpcmeter-server-ns``), or a trailers-only reply
carrying the status in its one header block. Each distinct header block is read once
(:meth:`~rpcmeter.protocols.h2.connection.H2Connection` caches what :func:`grpc_view` made of it), and a
reply the connection replayed from a recorded one (``stream.replay``) is checked once per
recording: later replays of it count as the same good reply.

Errors: a non-OK status counts as ``grpc:CODE`` (``UNAVAILABLE`` stops the loop, as a lost
connection does); a reset stream as ``rst_stream:CODE``; an HTTP status other than 200 as
``http_STATUS``; a compressed reply (we ask for none) as ``grpc_compressed``; a reply that is
not one whole gRPC message as ``grpc_malformed``; a reply message larger than
``max_message_bytes`` (default 4 MiB) as ``grpc:RESOURCE_EXHAUSTED``, as grpcio fails it; a reply its check refuses (``expect_*``, or
a schema call's ``expect``; :class:`~rpcmeter.drivers.base.ReplyCheck`) as ``mismatch``; a
call with no reply within ``call_timeout_s`` as ``grpc:DEADLINE_EXCEEDED`` (its stream
cancelled), whatever the server does.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from urllib.parse import unquote

from mypy_extensions import mypyc_attr

from rpcmeter.drivers.base import Channel, Done, DriverContext, ReplyCheck, ReplyError
from rpcmeter.drivers.h2client import H2Client
from rpcmeter.protocols.grpc import (
    DEADLINE_EXCEEDED,
    MAX_MESSAGE_BYTES,
    QUEUE_TIME,
    RESOURCE_EXHAUSTED,
    SERVER_TIME,
    frame,
    grpc_timeout,
)
from rpcmeter.protocols.h2.connection import Replay, Request
from rpcmeter.protocols.h2.connection import Stream as H2Stream
from rpcmeter.protocols.h2.transport import Session
from rpcmeter.protocols.timing import ServerTime

GOOD_REPLAYS = 64  # verdicts on recorded replies kept (a connection records a few at most)
MAX_VIEWS = 1024  # distinct header views kept to be shared by the connections


@dataclass(frozen=True, slots=True)  # read on every reply: slots read quickest
class GrpcView:
    """What a header block says to a gRPC client."""

    http_status: int | None
    grpc_status: int | None
    message: str
    server_ns: ServerTime | None  # (handling, queue) from the rpcmeter-*-ns trailers
    content_type: bytes


def grpc_view(headers: list[tuple[bytes, bytes]]) -> GrpcView:
    http_status = grpc_status = app_ns = queue_ns = None
    message = ""
    content_type = b""
    for name, value in headers:
        if name == b":status":
            http_status = int(value) if value.isdigit() else 0
        elif name == b"grpc-status":
            grpc_status = int(value) if value.isdigit() else 2  # UNKNOWN
        elif name == b"grpc-message":
            message = unquote(value.decode("utf-8", "replace"))
        elif name == SERVER_TIME:
            app_ns = int(value) if value.isdigit() else None
        elif name == QUEUE_TIME:
            queue_ns = int(value) if value.isdigit() else None
        elif name == b"content-type":
            content_type = value
    times = None if app_ns is None else (app_ns, queue_ns)
    return GrpcView(http_status, grpc_status, message, times, content_type)


# a view no header block has (``client.view`` never gives it): no reply is the last good one
# before there was one
NO_VIEW = GrpcView(None, None, "", None, b"")


class Verdict:
    """A recorded reply that passed every check: its server times, its message size and how
    many replies since were the same reply."""

    __slots__ = ("count", "server_ns", "size")

    def __init__(self, server_ns: ServerTime | None, size: int) -> None:
        self.server_ns = server_ns
        self.size = size
        self.count = 0


class TimedCall:
    """A unary call with a deadline: the loop's ``done`` (None once the call ended or expired),
    its stream and its timer."""

    __slots__ = ("done", "stream", "timer")

    def __init__(self, done: Done) -> None:
        self.done: Done | None = done
        self.stream: H2Stream | None = None
        self.timer: asyncio.TimerHandle | None = None


@mypyc_attr(allow_interpreted_subclasses=True)  # grpc_plan's and grpc_stream's calls
class GrpcH2Client(H2Client):
    """This client process's sessions and the per-call handling (see the module doc)."""

    protocol = "gRPC"

    def __init__(
        self,
        ctx: DriverContext,
        path: str,
        request: bytes,
        check: ReplyCheck | None,
        metadata: tuple[tuple[str, str], ...],
        timeout_s: float | None,
        errors: Callable[[int, str], BaseException],
        unavailable: Callable[[str], BaseException],
        max_message_bytes: int = MAX_MESSAGE_BYTES,
    ) -> None:
        super().__init__(ctx)
        self.path = path
        self.max_message = max_message_bytes
        self.request_message = request
        self.check = check
        self.errors = errors
        self.unavailable = unavailable
        self.timeout_s = timeout_s
        headers = [
            (b":method", b"POST"),
            (b":scheme", self.scheme),
            (b":path", path.encode()),
            (b":authority", self.authority.encode()),
            (b"content-type", b"application/grpc"),
            (b"te", b"trailers"),
        ]
        if timeout_s is not None:
            headers.append((b"grpc-timeout", grpc_timeout(timeout_s)))
        headers += [(k.lower().encode(), v.encode()) for k, v in metadata]
        self.headers = headers
        self.counts = [0, 0]  # calls answered with a message, message bytes in (but `good`'s)
        # the recorded replies (rpcmeter.protocols.h2.connection.Replay) whose reply passed every check:
        # a stream that ends as one of them passes them again (the same header views, payloads)
        self.good: dict[Replay, Verdict] = {}
        # the last reply parsed frame by frame that passed every check (a server whose replies
        # come in pieces is never replayed): its verdict, header views and payload; a reply
        # with the same views (the same objects: see view) and payload passes them again
        self.last_good: tuple[Verdict, GrpcView | None, GrpcView | None, bytes] = (
            Verdict(None, 0),
            NO_VIEW,
            NO_VIEW,
            b"",
        )
        self.views: dict[GrpcView, GrpcView] = {}

    def view(self, headers: list[tuple[bytes, bytes]]) -> GrpcView:
        """The view of a header block, the same object for the same view on every connection
        (so that :attr:`last_good` holds across them)."""
        view = grpc_view(headers)
        views = self.views
        if len(views) >= MAX_VIEWS:
            views.clear()
        return views.setdefault(view, view)

    async def open(self, connect_timeout_s: float = 10.0) -> None:
        await super().open(connect_timeout_s)
        body = frame(self.request_message)
        self.prepared = self.sessions[0].proto.conn.prepare(self.headers, body)
        self.loop = asyncio.get_running_loop()

    def channel(self, index: int) -> Channel:
        if self.timeout_s is not None:
            return partial(self.timed_call, self.session(index))
        return partial(self.session(index).start, self.prepared, self.on_end)

    def timed_call(self, session: Session, done: Done, req: Request | None = None) -> None:
        """A call (of ``req``, else the prepared request) that ends as
        ``grpc:DEADLINE_EXCEEDED`` (its stream cancelled) when no reply ended it within
        ``call_timeout_s``, whatever the server does."""
        call = TimedCall(done)
        call.stream = session.start(req or self.prepared, self.on_timed_end, call)
        assert self.timeout_s is not None
        call.timer = self.loop.call_later(self.timeout_s, self.deadline_passed, session, call)

    def on_timed_end(self, stream: H2Stream) -> None:
        call: TimedCall = stream.user
        if call.done is None:
            return  # it expired
        if call.timer is not None:
            call.timer.cancel()
        stream.user, call.done = call.done, None
        self.on_end(stream)

    def deadline_passed(self, session: Session, call: TimedCall) -> None:
        done = call.done
        if done is None:
            return
        call.done = call.timer = None
        if call.stream is not None:
            self.cancel(session, call.stream)
        done(
            None,
            self.errors(
                DEADLINE_EXCEEDED, f"no reply within call_timeout_s ({self.timeout_s:g} s)"
            ),
        )

    def on_end(self, stream: H2Stream) -> None:
        replay = stream.replay
        if replay is None:  # parsed frame by frame: the last good one again?
            verdict, head, trail, payload = self.last_good
            chunks = stream.chunks
            if (
                stream.headers is head
                and stream.trailers is trail
                and len(chunks) == 1
                and chunks[0] == payload
                and stream.error is None
            ):
                verdict.count += 1
                stream.user(verdict.server_ns, None)
                return
        else:
            replayed = self.good.get(replay)
            if replayed is not None:  # a replayed reply, checked before
                replayed.count += 1
                stream.user(replayed.server_ns, None)
                return
        self.check_end(stream)

    def status_error(self, stream: H2Stream) -> BaseException | None:
        """The error of a finished call whose stream, HTTP status or gRPC status failed (None
        when the call ended with ``grpc-status: 0``)."""
        err = stream.error
        if err is not None:
            return self.stream_error(err, self.unavailable)
        head: GrpcView | None = stream.headers
        meta: GrpcView | None = stream.trailers or head
        if head is None or meta is None:
            return ReplyError("grpc_malformed", "a reply without headers")
        if head.http_status != 200:
            status = head.http_status
            if status is None:
                return ReplyError("grpc_malformed", "a reply without :status")
            return ReplyError(f"http_{status}", f"HTTP status {status} (not a gRPC reply)")
        code = meta.grpc_status
        if code is None:
            return ReplyError("grpc_malformed", "a reply without grpc-status")
        if code != 0:
            return self.errors(code, meta.message)
        return None

    def check_end(self, stream: H2Stream) -> None:
        """Every check of a finished call (see the module doc)."""
        done: Done = stream.user
        head: GrpcView | None = stream.headers
        meta: GrpcView | None = stream.trailers or head
        if (  # what status_error passes, without the call; it names any failure
            stream.error is not None
            or head is None
            or meta is None
            or head.http_status != 200
            or meta.grpc_status != 0
        ):
            done(None, self.status_error(stream))
            return
        n = stream.received
        chunks = stream.chunks
        first = chunks[0] if chunks else b""
        if len(first) < 5:
            first = b"".join(chunks)
        if n < 5 or first[0] or int.from_bytes(first[1:5]) != n - 5:
            if n >= 5 and first[0]:
                error = ReplyError("grpc_compressed", "a compressed reply (none was asked for)")
            else:
                error = ReplyError("grpc_malformed", f"a reply of {n} bytes is not one message")
            done(None, error)
            return
        if n - 5 > self.max_message:  # as grpcio fails it (max_receive_message_length)
            message = f"Received message larger than max ({n - 5} vs. {self.max_message})"
            done(None, self.errors(RESOURCE_EXHAUSTED, message))
            return
        counts = self.counts
        counts[0] += 1
        counts[1] += n - 5
        check = self.check
        if check is not None:
            body = b"".join(chunks)[5:]
            if body != check.last and (wrong := check(body)) is not None:
                done(None, wrong)
                return
        replay = stream.replay
        if replay is not None:  # remember the verdict on this recorded reply
            good = self.good
            if len(good) >= GOOD_REPLAYS:
                self.fold()
                good.clear()
            good[replay] = Verdict(meta.server_ns, n - 5)
        elif len(chunks) == 1:  # ... or on this one, parsed frame by frame
            self.count(self.last_good[0])
            self.last_good = (Verdict(meta.server_ns, n - 5), head, stream.trailers, first)
        done(meta.server_ns, None)

    def count(self, verdict: Verdict) -> None:
        """Move the replies counted on ``verdict`` into ``counts``."""
        self.counts[0] += verdict.count
        self.counts[1] += verdict.count * verdict.size
        verdict.count = 0

    def fold(self) -> None:
        """Move the counts of the replies that passed as others did into ``counts``."""
        for verdict in self.good.values():
            self.count(verdict)
        self.count(self.last_good[0])

    def calls(self) -> int:
        """Calls answered with a message so far."""
        self.fold()
        return self.counts[0]

    def counters(self) -> dict[str, int]:
        self.fold()
        return {
            "bytes_out": self.counts[0] * len(self.request_message),
            "bytes_in": self.counts[1],
        }
