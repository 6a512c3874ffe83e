"""A real HTTP/2 server side for the connection's tests: python-hyper's ``h2`` library, in memory
(both sides sans-I/O, bytes passed by hand)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import h2.config
import h2.connection
import h2.events
import h2.settings

from rpcmeter.protocols.h2.connection import H2Connection, Stream

Handler = Callable[["Peer", int, list[tuple[bytes, bytes]], bytes], None]


def echo(peer: Peer, sid: int, headers: list[tuple[bytes, bytes]], body: bytes) -> None:
    """Reply 200 with the request body and a trailer naming the path."""
    path = dict(headers)[b":path"]
    peer.h2.send_headers(sid, [(b":status", b"200"), (b"content-type", b"application/grpc")])
    peer.send_body(sid, body, trailers=[(b"grpc-status", b"0"), (b"x-path", path)])


class Peer:
    """An ``h2`` server connection; requests complete through ``handler`` (default: echo)."""

    def __init__(self, handler: Handler = echo, **settings: int) -> None:
        config = h2.config.H2Configuration(client_side=False, header_encoding=None)
        self.h2 = h2.connection.H2Connection(config)
        self.h2.initiate_connection()
        if settings:
            self.h2.update_settings(
                {getattr(h2.settings.SettingCodes, k.upper()): v for k, v in settings.items()}
            )
        self.handler = handler
        self.bodies: dict[int, list[bytes]] = {}
        self.headers: dict[int, list[tuple[bytes, bytes]]] = {}
        self.events: list[Any] = []
        self.pending_bodies: dict[int, bytes] = {}  # replies waiting for window
        self.trailers: dict[int, list[tuple[bytes, bytes]]] = {}  # sent after the body

    def send_body(
        self, sid: int, body: bytes, trailers: list[tuple[bytes, bytes]] | None = None
    ) -> None:
        """As much of ``body`` as the windows allow, the rest on WINDOW_UPDATE; then the
        trailers."""
        if trailers is not None:
            self.trailers[sid] = trailers
        body = self.pending_bodies.pop(sid, b"") + body
        while body:
            room = min(self.h2.local_flow_control_window(sid), self.h2.max_outbound_frame_size)
            if room <= 0:
                self.pending_bodies[sid] = body
                return
            self.h2.send_data(sid, body[:room])
            body = body[room:]
        if sid in self.trailers:
            self.h2.send_headers(sid, self.trailers.pop(sid), end_stream=True)

    def receive(self, data: bytes) -> bytes:
        for event in self.h2.receive_data(data):
            self.events.append(event)
            if isinstance(event, h2.events.RequestReceived):
                self.headers[event.stream_id] = list(event.headers)
                self.bodies[event.stream_id] = []
            elif isinstance(event, h2.events.DataReceived):
                self.bodies[event.stream_id].append(event.data)
                self.h2.acknowledge_received_data(event.flow_controlled_length, event.stream_id)
            elif isinstance(event, h2.events.StreamEnded):
                self._complete(event.stream_id)
            elif isinstance(event, h2.events.WindowUpdated):
                for sid in list(self.pending_bodies):
                    self.send_body(sid, b"")
        return self.h2.data_to_send()

    def _complete(self, sid: int) -> None:
        self.handler(self, sid, self.headers[sid], b"".join(self.bodies.pop(sid)))


def pump(client: H2Connection, peer: Peer, first: bytes = b"", rounds: int = 50) -> None:
    """Pass bytes both ways until neither side has anything to say."""
    to_peer = first + client.data_to_send()
    for _ in range(rounds):
        to_client = peer.receive(to_peer) if to_peer else peer.h2.data_to_send()
        if to_client:
            client.receive(to_client)
        to_peer = client.data_to_send()
        if not to_peer and not to_client:
            return


def connected(peer: Peer, **kwargs: Any) -> H2Connection:
    client = H2Connection(**kwargs)
    pump(client, peer, client.initiate())
    assert client.started and client.settings_acked == 1
    return client


def ended() -> tuple[list[Stream], Callable[[Stream], None]]:
    done: list[Stream] = []
    return done, done.append
