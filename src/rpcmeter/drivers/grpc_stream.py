"""gRPC streaming calls (workload ``stream``): the calls, and the per-message figures they record.

A stream is what the load loops count as one request: a closed loop starts the next stream when
one ended, the open-loop pacer starts streams at the scheduled times, and the case's latency
histogram holds whole-stream durations. What happens inside each stream is recorded here
(:class:`StreamFigures`) and travels as driver counters, histograms included
(:meth:`~rpcmeter.metrics.histogram.Histogram.to_counters`), so it merges exactly across clients
and workers and the warmup's streams are left out like the warmup's bytes. The samples:

- ``first``: time to the first reply message, from the start of the stream;
- ``message``: the per-message latency: server streaming and bidirectional ``flood``, the gap
  between two reply messages; bidirectional ``ping-pong``, each round trip (a request sent, its
  reply read); client streaming, the time from handing the last request message to the
  connection to the reply (every request goes out at once, as fast as flow control allows);
- ``messages_out``, ``messages_in``, ``bytes_out``, ``bytes_in``: message counts and bodies;
- ``count_mismatch``: streams that ended with another number of replies than the workload's
  ``messages`` said (:meth:`~rpcmeter.suite.workloads.StreamParams.expected_replies`). A stream is read
  until the server ends it: such a stream is measured all the same, and counted here.

A stream's request message may vary (placeholders in a schema call's ``data``, a data file): each
stream takes its loop's next message (:func:`stream_messages`; the values drawn once per stream,
as a unary call's per request), and every request message of that stream is that one.

Two clients: :class:`GrpcStreamH2` on rpcmeter's HTTP/2 connection (the default; a stream's
requests are DATA frames on one HTTP/2 stream, flow control obeyed by the connection, replies
parsed from the DATA frames as they arrive) and :func:`grpcio_stream_caller` on grpcio's stubs
(``options.client = "grpcio"``), which sends the same messages and records the same figures.

Faults, each counted under its kind while the loop goes on: a reply message over
``max_message_bytes`` (``message_too_large``; the stream is reset), a compressed one
(``grpc_compressed``), a server that sends nothing before ``call_timeout_s``
(``grpc:DEADLINE_EXCEEDED``; the stream is reset), a reset stream (``rst_stream:CODE``), a
non-OK status (``grpc:CODE``).
"""

from __future__ import annotations

import asyncio
import queue
import time
from array import array
from collections.abc import Callable, Iterator, Sequence
from functools import partial
from itertools import repeat
from typing import Any

import grpc

from rpcmeter.drivers.base import Caller, Channel, Done, DriverContext, ReplyCheck, ReplyError
from rpcmeter.drivers.grpc_h2 import GrpcH2Client
from rpcmeter.drivers.varying import Fill, LoopState, loop_of, source
from rpcmeter.metrics.histogram import Histogram
from rpcmeter.protocols.grpc import DEADLINE_EXCEEDED, MAX_MESSAGE_BYTES, frame
from rpcmeter.protocols.grpc_schema import MessageTemplate, PreparedCall
from rpcmeter.protocols.h2.connection import Request
from rpcmeter.protocols.h2.connection import Stream as H2Stream
from rpcmeter.protocols.h2.transport import Session
from rpcmeter.suite.workloads import StreamParams

PREFIX = "stream"
FOLD = 1 << 16


class StreamFigures:
    """The per-message samples of one client process (see the module doc). Several threads may
    append (grpcio's loops); only the event loop's client folds while it runs."""

    def __init__(self) -> None:
        self.first = array("q")
        self.message = array("q")
        self.first_hist = Histogram()
        self.message_hist = Histogram()
        self.counts = {
            "messages_out": 0,
            "messages_in": 0,
            "bytes_out": 0,
            "bytes_in": 0,
            "count_mismatch": 0,
        }

    def fold(self) -> None:
        for buf, hist in ((self.first, self.first_hist), (self.message, self.message_hist)):
            if buf:
                hist.record_array(buf)
                del buf[:]

    def counters(self) -> dict[str, int]:
        self.fold()
        out = {f"{PREFIX}.{k}": v for k, v in self.counts.items()}
        out.update(self.first_hist.to_counters(f"{PREFIX}.first_ns"))
        out.update(self.message_hist.to_counters(f"{PREFIX}.message_ns"))
        out["bytes_out"] = self.counts["bytes_out"]
        out["bytes_in"] = self.counts["bytes_in"]
        return out


Messages = Sequence[bytes | Fill[bytes]]  # a stream's framed request message, in turn


def stream_messages(call: PreparedCall | None) -> Messages | None:
    """The framed request messages of a schema call whose message varies (placeholders in its
    data, a data file's messages), each fixed bytes or made from a stream's values; None when
    every stream sends the one message."""
    if call is None or not call.messages:
        return None
    out: list[bytes | Fill[bytes]] = []
    for msg in call.entries():
        if isinstance(msg, MessageTemplate):
            out.append(Fill(msg.exprs, msg.filler(call.files, msg.exprs, framed=True)))
        else:
            out.append(frame(msg))
    return out


def message_source(messages: Messages, ctx: DriverContext, index: int) -> Callable[[], bytes]:
    """Loop ``index``'s next framed request message, one per stream (its request number
    advanced each time)."""
    return source(messages, LoopState(loop_of(ctx, index)), advance=True)


class Call:
    """One stream in flight (the HTTP/2 stream's ``user``)."""

    __slots__ = (
        "done",
        "failed",
        "framed",
        "got",
        "have",
        "last",
        "need",
        "parts",
        "sent",
        "session",
        "stream",
        "t0",
        "timer",
    )

    def __init__(self, done: Done, session: Session, t0: int, framed: bytes = b"") -> None:
        self.done = done
        self.session = session
        self.t0 = t0
        self.framed = framed  # its request message, framed
        self.last = t0  # the time the current sample is measured from
        self.got = 0
        self.sent = 0
        # the bytes of a reply message not complete yet: its DATA payloads, how many bytes
        # they hold, and how many the message (or its 5-byte prefix) needs before it is parsed
        self.parts: list[bytes] = []
        self.have = 0
        self.need = 0
        self.failed = False
        self.stream: H2Stream | None = None
        self.timer: asyncio.TimerHandle | None = None


class GrpcStreamH2(GrpcH2Client):
    """Streaming calls on rpcmeter's HTTP/2 client (see the module doc)."""

    def __init__(
        self,
        *args: Any,
        params: StreamParams,
        max_message_bytes: int = MAX_MESSAGE_BYTES,
        messages: Messages | None = None,
    ) -> None:
        super().__init__(*args)
        self.params = params
        self.messages = messages  # the request message per stream, when it varies
        self.max_message = max_message_bytes
        self.figures = StreamFigures()
        self.expected = params.expected_replies()  # None: whatever the server sends
        self.requests = params.requests_per_stream()
        self.ping_pong = params.mode == "bidi" and params.pattern == "ping-pong"
        # the first reply is a message sample too (ping-pong: a round trip; client: the reply)
        self.sample_first = params.mode == "client" or self.ping_pong
        self.framed = frame(self.request_message)

    async def open(self, connect_timeout_s: float = 10.0) -> None:
        await super().open(connect_timeout_s)
        conn = self.sessions[0].proto.conn
        if self.ping_pong:  # the first request; the others follow their replies
            self.prepared = conn.prepare(self.headers, self.framed)
            self.prepared = Request(self.prepared.block, self.framed, end_stream=self.requests == 1)
        else:  # every request at once
            self.prepared = conn.prepare(self.headers, self.framed * self.requests)

    def channel(self, index: int) -> Channel:
        session = self.session(index)
        if self.messages is None:
            return partial(self.start, session)
        message = message_source(self.messages, self.ctx, index)
        return lambda done: self.start(session, done, message())

    def start(self, session: Session, done: Done, framed: bytes | None = None) -> None:
        clock = time.perf_counter_ns
        prepared = self.prepared
        if framed is None:
            framed = self.framed
        elif self.ping_pong:  # the stream's own message: the first now, the others after replies
            prepared = Request(prepared.block, framed, end_stream=self.requests == 1)
        else:
            prepared = Request(prepared.block, framed * self.requests)
        call = Call(done, session, clock(), framed)
        stream = session.start(prepared, self.on_end, call)
        stream.on_data = self.on_data
        call.stream = stream
        n = 1 if self.ping_pong else self.requests
        call.sent = n
        counts = self.figures.counts
        counts["messages_out"] += n
        counts["bytes_out"] += n * (len(framed) - 5)
        if self.timeout_s is not None:
            call.timer = self.loop.call_later(self.timeout_s, self.expire, call)

    def on_data(self, stream: H2Stream, data: bytes) -> None:
        call: Call = stream.user
        if call.failed:
            return
        parts = call.parts
        if parts:  # a message in pieces: joined once, when it is whole (linear in its size)
            parts.append(data)
            call.have += len(data)
            if call.have < call.need:
                return
            data = b"".join(parts)
            parts.clear()
        n = len(data)
        pos = 0
        clock = time.perf_counter_ns
        figures = self.figures
        check = self.check
        while n - pos >= 5:
            size = int.from_bytes(data[pos + 1 : pos + 5])
            if data[pos] or size > self.max_message:
                if data[pos]:
                    error = ReplyError("grpc_compressed", "a compressed reply (none was asked for)")
                else:
                    error = ReplyError(
                        "message_too_large",
                        f"a reply message of {size} bytes (limit {self.max_message})",
                    )
                self.fail(call, error)
                return
            end = pos + 5 + size
            if end > n:
                break
            t = clock()
            if check is not None:
                body = data[pos + 5 : end]
                if body != check.last and (wrong := check(body)) is not None:
                    self.fail(call, wrong)
                    return
            figures.counts["bytes_in"] += size
            if call.got == 0:
                figures.first.append(t - call.t0)
                if self.sample_first:
                    figures.message.append(t - call.last)
            else:
                figures.message.append(t - call.last)
            call.got += 1
            call.last = t
            pos = end
            if self.ping_pong and call.sent < self.requests and call.got == call.sent:
                proto = call.session.holder(stream)
                if proto is not None:
                    call.sent += 1
                    proto.conn.send_data(stream, call.framed, call.sent == self.requests)
                    proto.flush()
                    figures.counts["messages_out"] += 1
                    figures.counts["bytes_out"] += len(call.framed) - 5
                    call.last = clock()
        if pos < n:
            rest = data[pos:]
            parts.append(rest)
            call.have = len(rest)
            call.need = 5 + int.from_bytes(rest[1:5]) if len(rest) >= 5 else 5
        if len(figures.message) > FOLD:
            figures.fold()

    def fail(self, call: Call, error: BaseException) -> None:
        """End the call with ``error`` now; reset its stream from the loop (not inside a read)."""
        call.failed = True
        self.figures.counts["messages_in"] += call.got
        if call.timer is not None:
            call.timer.cancel()
        if call.stream is not None:
            self.loop.call_soon(self.cancel, call.session, call.stream)
        call.done(None, error)

    def expire(self, call: Call) -> None:
        if call.failed:
            return
        call.timer = None
        self.fail(
            call,
            self.errors(
                DEADLINE_EXCEEDED,
                f"no end of the stream within {self.timeout_s} s ({call.got} replies)",
            ),
        )

    def on_end(self, stream: H2Stream) -> None:
        call: Call = stream.user
        if call.failed:
            return
        call.failed = True  # ended: a late timer or reset finds nothing to do
        if call.timer is not None:
            call.timer.cancel()
        self.figures.counts["messages_in"] += call.got
        error = self.status_error(stream)
        if error is None and call.parts:
            error = ReplyError("grpc_malformed", f"{call.have} bytes of a partial message")
        if error is None and self.expected is not None and call.got != self.expected:
            self.figures.counts["count_mismatch"] += 1  # measured all the same
        call.done(None, error)

    def counters(self) -> dict[str, int]:
        return self.figures.counters()


def grpcio_stream_caller(
    channel: grpc.Channel,
    path: str,
    params: StreamParams,
    request: bytes,
    check: ReplyCheck | None,
    metadata: tuple[tuple[str, str], ...],
    timeout: float | None,
    figures: StreamFigures,
    status_error: Callable[[grpc.RpcError], BaseException],
    message: Callable[[], bytes] | None = None,
) -> Caller:
    """One blocking streaming call per invocation on grpcio's stubs, recording what
    :class:`GrpcStreamH2` records (see the module doc); ``message``, when the request message
    varies, gives each stream's (framed: :func:`message_source`)."""
    clock = time.perf_counter_ns
    mode = params.mode
    n_req = params.requests_per_stream()
    expected = params.expected_replies()  # None: whatever the server sends
    ping_pong = mode == "bidi" and params.pattern == "ping-pong"
    counts = figures.counts
    first, sample = figures.first.append, figures.message.append
    opts: dict[str, Any] = {"timeout": timeout, "metadata": metadata or None}
    if mode == "server":
        unary_stream = channel.unary_stream(path)
    elif mode == "client":
        stream_unary = channel.stream_unary(path)
    else:
        stream_stream = channel.stream_stream(path)

    sample_first = mode == "client" or ping_pong  # the first reply is a message sample too

    def replies(
        t0: int,
        it: Iterator[bytes],
        request: bytes,
        turns: queue.SimpleQueue[bytes | None] | None = None,
    ) -> int:
        """Read, check and time every reply; with ``turns``, send a request after each."""
        got = 0
        last = t0
        for reply in it:
            t = clock()
            if check is not None and reply != check.last and (err := check(reply)) is not None:
                raise err
            counts["bytes_in"] += len(reply)
            if got == 0:
                first(t - t0)
                if sample_first:
                    sample(t - last)
            else:
                sample(t - last)
            got += 1
            last = t
            if turns is not None:
                if got < n_req:
                    turns.put(request)
                    counts["messages_out"] += 1
                    counts["bytes_out"] += len(request)
                    last = clock()
                else:
                    turns.put(None)
        return got

    fixed = request

    def call() -> None:
        got = 0
        request = fixed if message is None else message()[5:]
        try:
            t0 = clock()
            if mode == "server":
                counts["messages_out"] += 1
                counts["bytes_out"] += len(request)
                got = replies(t0, unary_stream(request, **opts), request)
            elif mode == "client":
                counts["messages_out"] += n_req
                counts["bytes_out"] += n_req * len(request)
                got = replies(t0, iter((stream_unary(repeat(request, n_req), **opts),)), request)
            elif ping_pong:
                turns: queue.SimpleQueue[bytes | None] = queue.SimpleQueue()
                turns.put(request)
                counts["messages_out"] += 1
                counts["bytes_out"] += len(request)
                got = replies(t0, stream_stream(iter(turns.get, None), **opts), request, turns)
            else:
                counts["messages_out"] += n_req
                counts["bytes_out"] += n_req * len(request)
                got = replies(t0, stream_stream(repeat(request, n_req), **opts), request)
        except grpc.RpcError as exc:
            raise status_error(exc) from None
        finally:
            counts["messages_in"] += got
        if expected is not None and got != expected:
            counts["count_mismatch"] += 1  # measured all the same

    return call
