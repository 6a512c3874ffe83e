"""One HTTP/2 server connection on python-hyper's ``h2``, shared by the built-in servers that
speak HTTP/2: the HTTP server's h2c and ALPN ``h2`` (:mod:`rpcmeter.servers.http_server`) and the
gRPC server's ``server_mode = "h2"`` (:mod:`rpcmeter.servers.grpc_h2_server`).

:class:`H2Server` feeds a connection's bytes to ``h2``, gathers each request's header block and
body, and hands a request over once its ``END_STREAM`` arrived (:meth:`H2Server.answer`); a
subclass that answers as data arrives (streaming) overrides :meth:`~H2Server.started`,
:meth:`~H2Server.received` and :meth:`~H2Server.ended`. Replies go out within the peer's
flow-control windows, the rest when they open, then ``END_STREAM`` (on trailers where given).
A connection that breaks the protocol gets GOAWAY and is closed.

It runs on any asyncio transport; on :class:`rpcmeter.servers.aio.StampedTransport` the kernel's
receive time of the latest read tells how long the request just ended has waited
(:func:`rpcmeter.servers.aio.queue_ns`).
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable
from typing import Any

import h2.config
import h2.connection
import h2.events
import h2.exceptions
import hpack

Headers = list[tuple[bytes, bytes]]


class PlainEncoder(hpack.Encoder):
    """HPACK without Huffman coding: header values that differ on every reply (the servers'
    timings) cost a client in Python far less to read as plain strings (the ``hpack`` library
    decodes Huffman a bit at a time)."""

    def encode(self, headers: Iterable[Any], huffman: bool = True) -> bytes:
        return bytes(super().encode(headers, huffman=False))


class H2Server:
    """HTTP/2, server side, on one connection (see the module doc)."""

    def __init__(self, transport: asyncio.Transport, huffman: bool = True) -> None:
        config = h2.config.H2Configuration(client_side=False, header_encoding=None)
        self.conn = h2.connection.H2Connection(config)
        if not huffman:
            self.conn.encoder = PlainEncoder()
        self.conn.initiate_connection()
        self.transport = transport
        self.requests: dict[int, tuple[Headers, list[bytes]]] = {}
        # per stream, what the windows held back: [body, then END_STREAM?, trailers or None]
        self.unsent: dict[int, tuple[bytes, bool, Headers | None]] = {}

    def data_received(self, data: bytes) -> None:
        try:
            events = self.conn.receive_data(data)
        except h2.exceptions.ProtocolError:
            self.flush()
            self.transport.close()
            return
        for event in events:
            if isinstance(event, h2.events.RequestReceived):
                self.started(event.stream_id, event.headers)
            elif isinstance(event, h2.events.DataReceived):
                self.received(event.stream_id, event.data)
                self.conn.acknowledge_received_data(event.flow_controlled_length, event.stream_id)
            elif isinstance(event, h2.events.StreamEnded):
                self.ended(event.stream_id)
            elif isinstance(event, h2.events.StreamReset):
                self.requests.pop(event.stream_id, None)
                self.unsent.pop(event.stream_id, None)
                self.reset(event.stream_id)
            elif (
                isinstance(event, h2.events.WindowUpdated | h2.events.RemoteSettingsChanged)
                and self.unsent
            ):
                for sid in list(self.unsent):
                    self.send(sid, *self.unsent.pop(sid))
                    if sid not in self.unsent:
                        self.drained(sid)
        self.flush()

    # the request side (a subclass answers whole requests, or overrides all three) ------------
    def started(self, sid: int, headers: Headers) -> None:
        self.requests[sid] = (headers, [])

    def received(self, sid: int, data: bytes) -> None:
        request = self.requests.get(sid)
        if request is not None:
            request[1].append(data)

    def ended(self, sid: int) -> None:
        headers, chunks = self.requests.pop(sid, ([], []))
        self.answer(sid, headers, b"".join(chunks))

    def answer(self, sid: int, headers: Headers, body: bytes) -> None:
        """Answer the request of stream ``sid``, whose ``END_STREAM`` just arrived."""
        raise NotImplementedError

    def reset(self, sid: int) -> None:
        """Stream ``sid`` was reset by the peer (forget what it was doing)."""

    def drained(self, sid: int) -> None:
        """What the windows held back on stream ``sid`` has gone out (a producer sends more)."""

    # the reply side --------------------------------------------------------------------------
    @property
    def closed(self) -> bool:
        return bool(self.conn.state_machine.state == h2.connection.ConnectionState.CLOSED)

    def flush(self) -> None:
        out = self.conn.data_to_send()
        if out:
            self.transport.write(out)

    def reply(
        self, sid: int, headers: Headers, body: bytes, trailers: Headers | None = None
    ) -> None:
        """A whole reply: headers, then ``body`` and ``trailers`` (when given), then
        END_STREAM. The caller flushes."""
        try:
            self.conn.send_headers(sid, headers, end_stream=not body and trailers is None)
        except h2.exceptions.StreamClosedError:
            return
        if body or trailers is not None:
            self.send(sid, body, True, trailers)

    def send(
        self, sid: int, body: bytes, end: bool = True, trailers: Headers | None = None
    ) -> bool:
        """``body`` on stream ``sid`` as far as the windows allow (the rest when they open,
        after what they already held back); with ``end``, then END_STREAM, on ``trailers``
        where given. False when the stream is closed."""
        held = self.unsent.pop(sid, None)
        if held is not None:
            body = held[0] + body
        conn = self.conn
        last = end and trailers is None
        try:
            while True:
                room = min(conn.local_flow_control_window(sid), conn.max_outbound_frame_size)
                if body and room <= 0:
                    self.unsent[sid] = (body, end, trailers)
                    return True
                chunk, body = body[:room], body[room:]
                if chunk or (last and not body):
                    conn.send_data(sid, chunk, end_stream=last and not body)
                if not body:
                    break
            if end and trailers is not None:
                conn.send_headers(sid, trailers, end_stream=True)
        except h2.exceptions.StreamClosedError:
            return False
        return True
