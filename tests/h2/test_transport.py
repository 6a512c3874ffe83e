"""The HTTP/2 connection on asyncio: a session replacing a connection whose stream ids ran out,
against the built-in server's h2c; TLS without ALPN h2 refused; HTTP/2 over rpcmeter's TLS
transport against python-hyper's h2 server, with resumption."""

from __future__ import annotations

import asyncio
import ssl
import sys
import tempfile
from collections.abc import Iterator
from typing import cast

import pytest
import trustme

from rpcmeter.net.endpoints import Endpoint
from rpcmeter.net.tls import ClientTls, TlsSettings, client_context
from rpcmeter.net.tls_transport import TlsTransport
from rpcmeter.protocols.h2.connection import H2Connection, H2ConnectionError, Stream
from rpcmeter.protocols.h2.transport import H2Protocol, Session, open_connection
from rpcmeter.servers.process import ServerProcess, new_endpoint

pytestmark = pytest.mark.timeout(60)
GET = [(b":method", b"GET"), (b":scheme", b"http"), (b":path", b"/noop"), (b":authority", b"x")]


@pytest.fixture(scope="module")
def server() -> Iterator[Endpoint]:
    endpoint = new_endpoint("tcp")
    cmd = [sys.executable, "-m", "rpcmeter.servers.http_server", "--port", str(endpoint.port)]
    with ServerProcess(cmd, endpoint):
        yield endpoint


def test_a_session_replaces_a_connection_whose_stream_ids_ran_out(server: Endpoint) -> None:
    made: list[H2Connection] = []

    def new() -> H2Connection:  # the first connection has three stream ids left
        made.append(H2Connection(first_stream_id=(1 << 31) - 5 if not made else 1))
        return made[-1]

    async def main() -> tuple[list[Stream], Session]:
        async def opener() -> H2Protocol:
            return await open_connection(server, new)

        session = Session(await opener(), opener)
        first = session.proto
        req = first.conn.prepare(GET, None)
        ended: list[Stream] = []
        all_done = asyncio.get_running_loop().create_future()

        def on_end(stream: Stream) -> None:
            ended.append(stream)
            if len(ended) == 10:
                all_done.set_result(None)

        for _ in range(10):
            session.start(req, on_end)
        await asyncio.wait_for(all_done, 10)
        assert session.proto is not first and not first.conn.accepting
        session.close()
        await asyncio.sleep(0.01)
        return ended, session

    ended, _ = asyncio.run(main())
    assert [s.error for s in ended] == [None] * 10
    assert sorted(s.id for s in ended) == [
        1,
        3,
        5,
        7,
        9,
        11,
        13,
        (1 << 31) - 5,
        (1 << 31) - 3,
        (1 << 31) - 1,
    ]
    assert len(made) == 2


def test_tls_without_alpn_h2_is_refused() -> None:
    ca = trustme.CA()
    server_ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ca.issue_cert("localhost").configure_cert(server_ctx)
    server_ctx.set_alpn_protocols(["http/1.1"])
    client_ctx = ssl.create_default_context()
    ca.configure_trust(client_ctx)
    client_ctx.set_alpn_protocols(["h2"])

    async def main() -> None:
        srv = await asyncio.start_server(lambda r, w: None, "127.0.0.1", 0, ssl=server_ctx)
        port = srv.sockets[0].getsockname()[1]
        try:
            with pytest.raises(H2ConnectionError, match="alpn: the server did not agree to h2"):
                await open_connection(
                    Endpoint("tcp", "127.0.0.1", port),
                    ssl_context=client_ctx,
                    server_hostname="localhost",
                    timeout_s=5,
                )
        finally:
            srv.close()
            await srv.wait_closed()

    asyncio.run(main())


class H2TlsServer(asyncio.Protocol):
    """python-hyper's ``h2`` as a server over the loop's TLS: every request gets 200 and a
    body of 20,000 bytes (several TLS records, and DATA frames beyond one record)."""

    BODY = bytes(range(256)) * 78 + b"tail"

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        import h2.config
        import h2.connection

        self.transport = cast(asyncio.Transport, transport)
        self.h2 = h2.connection.H2Connection(h2.config.H2Configuration(client_side=False))
        self.h2.initiate_connection()
        self.h2.increment_flow_control_window(1 << 20)
        self.transport.write(self.h2.data_to_send())

    def data_received(self, data: bytes) -> None:
        import h2.events

        for event in self.h2.receive_data(data):
            if isinstance(event, h2.events.RequestReceived):
                sid = event.stream_id
                self.h2.send_headers(sid, [(":status", "200")])
                body, size = self.BODY, self.h2.max_outbound_frame_size
                for at in range(0, len(body), size):
                    end = at + size >= len(body)
                    self.h2.send_data(sid, body[at : at + size], end_stream=end)
        self.transport.write(self.h2.data_to_send())


def test_http2_over_tls_on_rpcmeter_transport_against_the_h2_library() -> None:
    """A TLS connection opened by open_connection runs on rpcmeter's own TLS transport: ALPN h2,
    the connect and handshake timed, streams answered by python-hyper's h2 server, and with a
    resuming context the second connection resumes the first one's session."""
    ca = trustme.CA()
    server_ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ca.issue_cert("localhost").configure_cert(server_ctx)
    server_ctx.set_alpn_protocols(["h2"])
    settings = TlsSettings(resume=True)
    with tempfile.TemporaryDirectory() as tmp:
        ca_file = f"{tmp}/ca.pem"
        ca.cert_pem.write_to_path(ca_file)
        client_ctx = client_context(ClientTls(settings, ca_file, "localhost"), ["h2"])
    recorded: list[tuple[str, int]] = []

    async def five_streams(proto: H2Protocol) -> list[Stream]:
        req = proto.conn.prepare(GET, None)
        ended: asyncio.Future[list[Stream]] = asyncio.get_running_loop().create_future()
        streams: list[Stream] = []

        def on_end(stream: Stream) -> None:
            streams.append(stream)
            if len(streams) == 5:
                ended.set_result(streams)

        for _ in range(5):
            proto.request(req, on_end)
        return await ended

    async def main() -> list[tuple[int | None, bytes, bool]]:
        srv = await asyncio.get_running_loop().create_server(
            H2TlsServer, "127.0.0.1", 0, ssl=server_ctx
        )
        endpoint = Endpoint("tcp", "127.0.0.1", srv.sockets[0].getsockname()[1])
        out: list[tuple[int | None, bytes, bool]] = []
        try:
            for _ in range(2):
                proto = await open_connection(
                    endpoint,
                    ssl_context=client_ctx,
                    server_hostname="localhost",
                    timeout_s=5,
                    record=lambda part, ns: recorded.append((part, ns)),
                )
                assert isinstance(proto.transport, TlsTransport)
                tls_object = proto.transport.get_extra_info("ssl_object")
                assert tls_object.selected_alpn_protocol() == "h2"
                for stream in await asyncio.wait_for(five_streams(proto), 10):
                    assert stream.error is None
                    out.append((stream.headers, stream.body(), tls_object.session_reused))
                proto.close()
        finally:
            srv.close()
            await srv.wait_closed()
        return out

    out = asyncio.run(main())
    assert len(out) == 10
    assert {body for _, body, _ in out} == {H2TlsServer.BODY}
    assert [reused for _, _, reused in out] == [False] * 5 + [True] * 5
    assert [part for part, _ in recorded] == [
        "connect",
        "handshake",
        "connect",
        "handshake_resumed",
    ]
    assert all(ns > 0 for _, ns in recorded)
