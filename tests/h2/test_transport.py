"""The HTTP/2 connection on asyncio: a session replacing a connection whose stream ids ran out,
against the built-in server's h2c; TLS without ALPN h2 refused."""

from __future__ import annotations

import asyncio
import ssl
import sys
from collections.abc import Iterator

import pytest
import trustme

from rpcmeter.endpoints import Endpoint
from rpcmeter.h2.connection import H2Connection, H2ConnectionError, Stream
from rpcmeter.h2.transport import H2Protocol, Session, open_connection
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
            session.request(req, on_end)
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
