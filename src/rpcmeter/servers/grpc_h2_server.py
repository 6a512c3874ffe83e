"""The built-in gRPC server's ``server_mode = "h2"``: service ``rpcmeter.Bench`` over HTTP/2 on
python-hyper's ``h2`` (:class:`rpcmeter.servers.h2server.H2Server`), read by the same event-loop
transport as the built-in HTTP server (:func:`rpcmeter.servers.aio.serve`), so that, unlike
grpcio's server, it knows when each request arrived.

The same methods and bodies as :mod:`rpcmeter.servers.grpc_server`: the unary ``Noop``,
``Echo``, ``Payload``, ``Sleep`` (on a timer; the loop keeps serving) and ``Factorial``, and
``StreamServer``, ``StreamClient``, ``StreamBidi``. Messages carry gRPC's 5-byte prefix
(uncompressed). A unary reply is HEADERS (``:status`` 200, ``content-type: application/grpc``),
one DATA message, and trailers ``grpc-status: 0``, ``rpcmeter-server-ns`` (the handling time) and,
over TCP, ``rpcmeter-queue-ns``: the handler's start minus the kernel's receive time of the
request's last bytes (:func:`rpcmeter.servers.aio.queue_ns`). A Unix socket has no receive time,
and TLS (ALPN ``h2``) and ``queue_time = false`` run on uvloop's own transports: there the queue
trailer is left out (unknown). Streams report no times, as with grpcio's server.

Errors, each a trailers-only reply: an unknown method ``grpc-status: 12`` (UNIMPLEMENTED); a body
that is not one whole uncompressed message, or a compressed one, 13 (INTERNAL); a request body
the workload cannot read (``factorial`` of ``"x"``) 3 (INVALID_ARGUMENT). A request whose
``content-type`` is not ``application/grpc...`` gets HTTP 415; frames that break HTTP/2, GOAWAY
and the connection closed. ``grpc-timeout`` is not enforced (a call is answered however late).
"""

from __future__ import annotations

import asyncio
import struct
import time
from typing import cast
from urllib.parse import quote

from hpack import NeverIndexedHeaderTuple

from rpcmeter.protocols.bodies import KINDS, compute, sleep_seconds, stream_reply
from rpcmeter.protocols.grpc import (
    INTERNAL,
    INVALID_ARGUMENT,
    QUEUE_TIME,
    SERVER_TIME,
    STREAM_MODES,
    UNIMPLEMENTED,
    BadMessage,
    frame,
    messages,
    method_path,
    stream_method_path,
    unframe,
)
from rpcmeter.servers.aio import call_later_precisely, queue_ns, serve
from rpcmeter.servers.common import ServerArgs
from rpcmeter.servers.h2server import H2Server, Headers

UNARY = {method_path(kind).encode(): kind for kind in KINDS}
STREAMS = {stream_method_path(mode).encode(): mode for mode in STREAM_MODES}
REPLY_HEADERS: Headers = [(b":status", b"200"), (b"content-type", b"application/grpc")]
STATUS_OK: Headers = [(b"grpc-status", b"0")]
BATCH_BYTES = 1 << 16  # a server stream's replies are framed this many bytes at a time


def status_only(code: int, message: str) -> Headers:
    """The header block of a trailers-only reply with status ``code``."""
    return [
        *REPLY_HEADERS,
        (b"grpc-status", str(code).encode()),
        (b"grpc-message", quote(message, safe=" ").encode()),
    ]


class StreamCall:
    """A streaming call in progress: its mode, the reply message (framed), how many replies are
    left to send (server streaming), the request bytes not yet a whole message, and whether its
    reply headers went out."""

    __slots__ = ("buffer", "left", "mode", "reply", "replying")

    def __init__(self, mode: str, headers: Headers) -> None:
        n, reply = stream_reply((k.decode("latin-1"), v.decode("latin-1")) for k, v in headers)
        self.mode = mode
        self.reply = frame(reply)
        self.left = n
        self.buffer = bytearray()
        self.replying = False


class GrpcH2Server(H2Server):
    """``rpcmeter.Bench`` on one HTTP/2 connection (see the module doc)."""

    def __init__(self, transport: asyncio.Transport) -> None:
        super().__init__(transport, huffman=False)  # as grpcio's server: cheap for clients
        self.unary: dict[int, str] = {}  # unary calls by stream: their workload
        self.streams: dict[int, StreamCall] = {}

    def started(self, sid: int, headers: Headers) -> None:
        path = content_type = b""
        for name, value in headers:
            if name == b":path":
                path = value
            elif name == b"content-type":
                content_type = value
        if not content_type.startswith(b"application/grpc"):
            why = b"content-type must be application/grpc"
            self.reply(sid, [(b":status", b"415"), (b"content-type", b"text/plain")], why)
            return
        kind = UNARY.get(path)
        if kind is not None:
            self.unary[sid] = kind
            super().started(sid, headers)
            return
        mode = STREAMS.get(path)
        if mode is None:
            unknown = path.decode("latin-1")
            self.reply(sid, status_only(UNIMPLEMENTED, f"unknown method {unknown}"), b"")
            return
        try:
            self.streams[sid] = StreamCall(mode, headers)
        except ValueError as exc:
            self.reply(sid, status_only(INVALID_ARGUMENT, f"bad stream metadata: {exc}"), b"")

    def received(self, sid: int, data: bytes) -> None:
        call = self.streams.get(sid)
        if call is None:
            super().received(sid, data)
            return
        call.buffer += data
        try:
            got = messages(call.buffer)
        except BadMessage as exc:
            self.fail(sid, call, str(exc))
            return
        if call.mode == "bidi" and got:
            self.start_reply(sid, call)
            self.send(sid, call.reply * len(got), False)

    def ended(self, sid: int) -> None:
        kind = self.unary.pop(sid, None)
        if kind is not None:
            _, chunks = self.requests.pop(sid, ([], []))
            self.call(sid, kind, b"".join(chunks))
            return
        call = self.streams.get(sid)
        if call is None:
            return  # answered already (an error)
        if call.buffer:
            self.fail(sid, call, f"{len(call.buffer)} bytes left that are not a whole message")
            return
        self.start_reply(sid, call)
        if call.mode == "server":
            self.produce(sid)
            return
        del self.streams[sid]
        self.send(sid, call.reply if call.mode == "client" else b"", True, STATUS_OK)

    def reset(self, sid: int) -> None:
        self.unary.pop(sid, None)
        self.streams.pop(sid, None)

    def drained(self, sid: int) -> None:
        if sid in self.streams:
            self.produce(sid)

    # unary calls --------------------------------------------------------------------------
    def call(self, sid: int, kind: str, body: bytes) -> None:
        # the request's END_STREAM came with the latest read: its arrival is that read's stamp
        queued = queue_ns(self.transport)
        t0 = time.perf_counter_ns()
        try:
            message = unframe(body)
            if kind == "sleep":
                seconds = max(sleep_seconds(message), 0.0)
            else:
                out = compute(kind, message)
        except BadMessage as exc:
            self.reply(sid, status_only(INTERNAL, str(exc)), b"")
            return
        except (ValueError, struct.error) as exc:
            self.reply(sid, status_only(INVALID_ARGUMENT, f"bad {kind} request: {exc}"), b"")
            return
        if kind != "sleep":
            self.answer_call(sid, out, time.perf_counter_ns() - t0, queued)
            return

        def wake() -> None:
            if not self.closed:
                self.answer_call(sid, b"", time.perf_counter_ns() - t0, queued)
                self.flush()

        call_later_precisely(asyncio.get_running_loop(), seconds, wake)

    def answer_call(self, sid: int, out: bytes, server_ns: int, queued: int | None) -> None:
        # the times differ from call to call: never indexed, so that they leave HPACK's dynamic
        # table as it is, and with it the client's decoded header blocks (the reply's HEADERS
        # stay the same bytes, read once)
        trailers: Headers = [*STATUS_OK, NeverIndexedHeaderTuple(SERVER_TIME, b"%d" % server_ns)]
        if queued is not None:
            trailers.append(NeverIndexedHeaderTuple(QUEUE_TIME, b"%d" % queued))
        self.reply(sid, REPLY_HEADERS, frame(out), trailers)

    # streaming calls ----------------------------------------------------------------------
    def start_reply(self, sid: int, call: StreamCall) -> None:
        if not call.replying:
            call.replying = True
            self.conn.send_headers(sid, REPLY_HEADERS)

    def produce(self, sid: int) -> None:
        """A server stream's replies, a batch at a time while the windows take them."""
        call = self.streams[sid]
        batch = max(1, BATCH_BYTES // len(call.reply))
        while True:
            n = max(0, min(call.left, batch))
            call.left -= n
            if not self.send(sid, call.reply * n, call.left <= 0, STATUS_OK):
                call.left = 0  # the stream is gone
            if call.left <= 0:
                del self.streams[sid]
                return
            if sid in self.unsent:
                return  # more when the windows open (drained)

    def fail(self, sid: int, call: StreamCall, message: str) -> None:
        del self.streams[sid]
        if call.replying:
            self.send(sid, b"", True, status_only(INTERNAL, message)[len(REPLY_HEADERS) :])
        else:
            self.reply(sid, status_only(INTERNAL, message), b"")


class GrpcProtocol(asyncio.Protocol):
    """One client connection, served by :class:`GrpcH2Server`."""

    server: GrpcH2Server

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.server = GrpcH2Server(cast(asyncio.Transport, transport))  # uvloop's: no subclass
        self.server.flush()  # our SETTINGS

    def data_received(self, data: bytes) -> None:
        self.server.data_received(data)


def serve_h2(args: ServerArgs) -> None:
    """Serve until SIGTERM (TLS offers ALPN ``h2`` only)."""
    serve(args, GrpcProtocol, alpn=("h2",))
