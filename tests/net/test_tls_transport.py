"""The TLS transport against a real TLS server that chooses how its records meet the socket: several
records in one send, one record cut across sends, a record with the start of the next, records
larger than one TLS record can hold. Every byte must reach the protocol, in order, whatever the
transport's shortcut for a read that is one whole record."""

from __future__ import annotations

import asyncio
import itertools
import socket
import ssl
import threading
import time
from collections.abc import Iterator

import pytest

from rpcmeter.net.tls import RunCertificates, open_tls
from rpcmeter.net.tls_buffers import keep_record_buffers
from rpcmeter.net.tls_transport import SMALL_READ, TlsTransport
from tests.support.marks import timing_sensitive

pytestmark = pytest.mark.timeout(60)

# each step: the messages (each its own record, or several when larger than 16 KiB) and where the
# step's bytes are cut into sends (offsets; negative ones count from the end)
Step = tuple[list[bytes], list[int]]

SCRIPT: list[Step] = [
    ([b"one record, alone"], []),
    ([b"three", b"records in", b"one send"], []),
    ([b"a record cut after one byte, then after its header"], [1, 5]),
    ([b"a record alone again"], []),
    ([b"a whole record", b"and the start of the next"], [-20]),
    ([b"a header cut in two"], [3]),
    ([bytes(range(256)) * 200], []),  # 51,200 bytes: four records
    ([b"x" * 40_000, b"after it"], [7, 20_000]),
    ([b"a", b"y" * 10_000, b"b"], []),  # a short record before a long one: each read whole
    ([b"s", b"z" * 5_000], [-100]),  # a short record, then a long one cut before its end
    # a short record alone makes the next read small (SMALL_READ): a long record after it comes
    # in a small read and then a large one
    ([b"short, alone"], []),
    ([b"w" * 3_000], []),
    ([b"the last, alone"], []),
]


@pytest.fixture(scope="module")
def certs() -> Iterator[RunCertificates]:
    made = RunCertificates()
    yield made
    made.close()


def _serve(listener: socket.socket, certs: RunCertificates, script: list[Step]) -> None:
    """Accept one connection, do the handshake over memory BIOs, then send the script's records
    cut as it says (a pause between sends so that each is read on its own), each step only once
    the client said it had the last one whole (as a client in a closed loop asks again only
    once it has its reply: a record left inside OpenSSL would stop the script), and close
    (without a close_notify)."""
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(certs.cert_file, certs.key_file)
    conn, _ = listener.accept()
    with conn:
        incoming, outgoing = ssl.MemoryBIO(), ssl.MemoryBIO()
        tls = context.wrap_bio(incoming, outgoing, server_side=True)
        while True:
            try:
                tls.do_handshake()
                break
            except ssl.SSLWantReadError:
                conn.sendall(outgoing.read())
                incoming.write(conn.recv(65536))
        conn.sendall(outgoing.read())  # the Finished, the session tickets
        conn.settimeout(5)
        time.sleep(0.05)
        acks = b""
        for step, (messages, cuts) in enumerate(script):
            while len(acks) < step:  # the client has every earlier step whole
                acks = acked(tls, incoming, conn, acks)
            records = b""
            for message in messages:
                tls.write(message)
                records += outgoing.read()
            at = sorted(c % len(records) for c in cuts)
            for start, end in zip([0, *at], [*at, len(records)], strict=True):
                conn.sendall(records[start:end])
                time.sleep(0.05)
        conn.shutdown(socket.SHUT_WR)
        time.sleep(0.05)


def acked(tls: ssl.SSLObject, incoming: ssl.MemoryBIO, conn: socket.socket, acks: bytes) -> bytes:
    """``acks`` and the client's next acknowledgements (one byte a step it has whole)."""
    while True:
        try:
            return acks + tls.read(64)
        except ssl.SSLWantReadError:
            data = conn.recv(65536)
            if not data:  # the client went: no acknowledgement will come
                raise ConnectionError("the client closed before it had every step") from None
            incoming.write(data)


ENDS = list(
    itertools.accumulate(sum(len(m) for m in messages) for messages, _ in SCRIPT)
)  # how many bytes the client has at the end of each step


class Collect(asyncio.Protocol):
    def __init__(self) -> None:
        self.data: list[bytes] = []
        self.ended: asyncio.Future[Exception | None] = asyncio.get_running_loop().create_future()
        self.size = self.steps = 0

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport

    def data_received(self, data: bytes) -> None:
        self.data.append(data)
        self.size += len(data)
        while self.steps < len(ENDS) and self.size >= ENDS[self.steps]:
            self.steps += 1
            self.transport.write(b"k")  # type: ignore[attr-defined]

    def connection_lost(self, exc: Exception | None) -> None:
        self.ended.set_result(exc)


async def _client(port: int, ca_file: str, keep: bool) -> tuple[TlsTransport, Collect]:
    loop = asyncio.get_running_loop()
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setblocking(False)
    await loop.sock_connect(sock, ("127.0.0.1", port))
    context = ssl.create_default_context(cafile=ca_file)
    if keep:  # OpenSSL's buffers kept between records, as rpcmeter's contexts keep them
        assert keep_record_buffers(context)
    transport, proto = await open_tls(loop, sock, context, "127.0.0.1", Collect, 10.0)
    await asyncio.wait_for(proto.ended, 20)
    return transport, proto


@timing_sensitive  # (how many reads the sends make rests on the pauses between them)
@pytest.mark.parametrize("keep", [True, False], ids=["buffers-kept", "buffers-released"])
def test_every_byte_arrives_however_records_meet_the_reads(
    certs: RunCertificates, keep: bool
) -> None:
    with socket.create_server(("127.0.0.1", 0)) as listener:
        server = threading.Thread(target=_serve, args=(listener, certs, SCRIPT), daemon=True)
        server.start()
        transport, proto = asyncio.run(_client(listener.getsockname()[1], certs.ca_file, keep))
        server.join(10)
    assert b"".join(proto.data) == b"".join(m for messages, _ in SCRIPT for m in messages)
    assert proto.ended.result() is None  # the server's close, not an error
    # the pauses let most sends arrive as reads of their own: more deliveries than steps would
    # need if every read held everything
    assert len(proto.data) >= 5
    assert transport.closing
    # the last step, one record alone, left nothing of a record behind (either way it was read)
    assert not transport.partial
    assert transport.socket_read == SMALL_READ  # and made the next read a small one
