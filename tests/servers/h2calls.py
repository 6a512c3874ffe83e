"""gRPC calls made by hand with python-hyper's client side, for what the drivers never send
(malformed messages, other content types) and for requests sent before their replies are read."""

from __future__ import annotations

import socket
from dataclasses import dataclass, field

import h2.config
import h2.connection
import h2.events

from rpcmeter.protocols.timing import ServerTime, trailer_times


@dataclass
class Reply:
    headers: dict[bytes, bytes] = field(default_factory=dict)
    body: bytes = b""
    trailers: dict[bytes, bytes] = field(default_factory=dict)
    ended: bool = False

    def status(self) -> bytes | None:
        """``grpc-status``, from the trailers or a trailers-only reply's headers."""
        return self.trailers.get(b"grpc-status", self.headers.get(b"grpc-status"))

    def times(self) -> ServerTime | None:
        return trailer_times((k.decode(), v.decode()) for k, v in self.trailers.items())


class RawGrpc:
    """One client connection: queue calls with :meth:`call`, send :meth:`outgoing`, then
    :meth:`read` the replies."""

    def __init__(self) -> None:
        self.conn = h2.connection.H2Connection(h2.config.H2Configuration(header_encoding=None))
        self.conn.initiate_connection()
        self.replies: dict[int, Reply] = {}

    def call(
        self,
        path: str,
        body: bytes,
        content_type: bytes = b"application/grpc",
        metadata: list[tuple[bytes, bytes]] | None = None,
    ) -> int:
        """A call of ``path`` whose request body is ``body`` as it is (framed by the caller)."""
        sid = self.conn.get_next_available_stream_id()
        headers = [
            (b":method", b"POST"),
            (b":scheme", b"http"),
            (b":path", path.encode()),
            (b":authority", b"x"),
            (b"content-type", content_type),
            (b"te", b"trailers"),
            *(metadata or []),
        ]
        self.conn.send_headers(sid, headers)
        self.conn.send_data(sid, body, end_stream=True)
        self.replies[sid] = Reply()
        return sid

    def outgoing(self) -> bytes:
        return self.conn.data_to_send()

    def read(self, sock: socket.socket) -> dict[int, Reply]:
        """Read until every call has ended (or the server closed the connection)."""
        while not all(r.ended for r in self.replies.values()):
            data = sock.recv(1 << 20)
            if not data:
                break
            for event in self.conn.receive_data(data):
                reply = self.replies.get(getattr(event, "stream_id", 0))
                if reply is None:
                    continue
                if isinstance(event, h2.events.ResponseReceived):
                    reply.headers = dict(event.headers)
                elif isinstance(event, h2.events.DataReceived):
                    reply.body += event.data
                    self.conn.acknowledge_received_data(
                        event.flow_controlled_length, event.stream_id
                    )
                elif isinstance(event, h2.events.TrailersReceived):
                    reply.trailers = dict(event.headers)
                elif isinstance(event, h2.events.StreamEnded | h2.events.StreamReset):
                    reply.ended = True
            sock.sendall(self.conn.data_to_send())
        return self.replies
