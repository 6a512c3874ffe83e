"""A connection owned by its closed loop (drivers/stream.py ``SendChannel.own``), driven by the
event-loop runner's ``closed_loop`` over a transport that records what is written."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import pytest

from rpcmeter.drivers.http_connection import HttpConnection
from rpcmeter.drivers.stream import SendChannel
from rpcmeter.drivers.stream_connection import StreamSlot
from rpcmeter.runners.event_loop import Phase, closed_loop
from rpcmeter.runners.recorder import Recorder
from rpcmeter.runners.recording import ThreadStats

REQUEST = b"GET /noop HTTP/1.1\r\nHost: x\r\n\r\n"
OK = b"HTTP/1.1 200 OK\r\nDate: Sun, 22 Nov 2026 01:04:45 GMT\r\nContent-Length: 0\r\n\r\n"
TIMED = b"HTTP/1.1 200 OK\r\nServer-Timing: app;dur=0.25\r\nContent-Length: 2\r\n\r\nhi"
BUSY = b"HTTP/1.1 503 Busy\r\nContent-Length: 0\r\n\r\n"


class Transport:
    """Records writes; ``abort`` and ``close`` only mark it closed."""

    def __init__(self) -> None:
        self.writes: list[bytes] = []
        self.closed = False

    def write(self, data: bytes) -> None:
        assert not self.closed, "write after the connection was closed"
        self.writes.append(data)

    def abort(self) -> None:
        self.closed = True

    close = abort


@pytest.fixture
def loop() -> Iterator[asyncio.AbstractEventLoop]:
    loop = asyncio.new_event_loop()
    yield loop
    loop.close()


def start(
    loop: asyncio.AbstractEventLoop, exclusive: bool, requests: int | None = None
) -> tuple[HttpConnection, Transport, ThreadStats, Recorder, Phase]:
    conn = HttpConnection()
    transport = Transport()
    conn.connection_made(transport)  # type: ignore[arg-type]
    channel = SendChannel(conn.send, REQUEST)
    channel.conn, channel.exclusive = conn, exclusive
    stats = ThreadStats()
    rec = Recorder(stats, server_time=True)
    phase = Phase(loop, 1)
    closed_loop(channel, rec, phase, requests, 1 << 62, (OSError,))
    return conn, transport, stats, rec, phase


@pytest.mark.parametrize("exclusive", [True, False])
def test_owned_and_queued_connections_count_the_same(
    loop: asyncio.AbstractEventLoop, exclusive: bool
) -> None:
    conn, transport, stats, rec, phase = start(loop, exclusive, requests=7)
    assert (conn.owner is not None) is exclusive
    # repeated replies (the cached path), a reply split over reads, one with server time, an error
    for data in (OK, OK, OK[:20], OK[20:], TIMED, BUSY, OK, OK):
        conn.data_received(data)
    rec.fold()
    assert stats.ok == 6 and stats.errors == {"http_503": 1}
    assert stats.server_hist.count == 1 and stats.server_hist.max == pytest.approx(250_000, 0.01)
    assert phase.finished.done()
    assert conn.owner is None  # released: the connection is a queued one again
    assert transport.writes == [REQUEST] * 7  # no request after the loop's last reply
    assert conn.bytes_out == 7 * len(REQUEST)
    assert conn.bytes_in == 5 * len(OK) + len(TIMED) + len(BUSY)
    # a reply nobody asked for fails the connection instead of restarting the loop
    conn.data_received(OK)
    assert isinstance(conn.lost, ConnectionError) and transport.closed
    assert stats.ok + sum(stats.errors.values()) == 7


def test_owned_connection_lost_ends_its_loop_once(loop: asyncio.AbstractEventLoop) -> None:
    conn, _transport, stats, rec, phase = start(loop, exclusive=True)
    conn.data_received(OK)
    conn.connection_lost(None)
    assert phase.finished.done() and phase.active == 0
    assert stats.fatal is not None and "connection_closed" in stats.fatal
    assert stats.errors == {"connection_closed": 1}
    assert conn.owner is None and conn.bytes_out == 2 * len(REQUEST)
    rec.fold()
    assert stats.ok == 1


def test_shared_or_validated_channels_are_not_owned() -> None:
    conn = HttpConnection()
    conn.connection_made(Transport())  # type: ignore[arg-type]
    shared = SendChannel(conn.send, REQUEST)
    shared.conn, shared.exclusive = conn, False
    assert shared.own(lambda s, e: None) is None
    mine = SendChannel(conn.send, REQUEST)
    mine.conn, mine.exclusive = conn, True
    conn.send(REQUEST, lambda s, e: None)  # a request of the warmup still in flight
    assert mine.own(lambda s, e: None) is None


CLOSING = OK.replace(b"Content-Length: 0", b"Connection: close\r\nContent-Length: 0")


def in_a_slot(
    loop: asyncio.AbstractEventLoop, exclusive: bool, loops: int
) -> tuple[list[tuple[HttpConnection, Transport]], ThreadStats, Phase]:
    """``loops`` closed loops of 5 requests each over one StreamSlot whose replacements are
    made by hand: (connection, transport) of each connection opened, oldest first."""
    opened: list[tuple[HttpConnection, Transport]] = []

    async def opener() -> HttpConnection:
        conn = HttpConnection()
        transport = Transport()
        conn.connection_made(transport)  # type: ignore[arg-type]
        opened.append((conn, transport))
        return conn

    first = loop.run_until_complete(opener())
    slot = StreamSlot(first, opener, loop)
    channel = SendChannel(first.send, REQUEST)
    channel.conn, channel.slot, channel.exclusive = first, slot, exclusive
    stats = ThreadStats()
    rec = Recorder(stats, server_time=True)
    phase = Phase(loop, loops)
    for _ in range(loops):
        closed_loop(channel, rec, phase, 5, 1 << 62, (OSError,))
    return opened, stats, phase


@pytest.mark.parametrize("exclusive", [True, False])
def test_a_reply_that_closes_moves_the_loops_to_a_new_connection(
    loop: asyncio.AbstractEventLoop, exclusive: bool
) -> None:
    loops = 1 if exclusive else 2  # shared: the second loop's request is pipelined
    opened, stats, phase = in_a_slot(loop, exclusive, loops)
    conn, transport = opened[0]
    assert (conn.owner is not None) is exclusive
    conn.data_received(OK)
    conn.data_received(CLOSING)  # the server ends the connection after this reply
    assert len(transport.writes) == loops + 1  # nothing written after the closing reply
    loop.run_until_complete(asyncio.sleep(0))  # the replacement opens
    new, fresh = opened[1]
    # the request pipelined after the closing reply went again, then the loop's next one
    assert fresh.writes == [REQUEST] * loops
    assert (new.owner is not None) is exclusive  # the loop owns the new connection
    for _ in range(5 * loops - 2):
        new.data_received(OK)
    loop.run_until_complete(asyncio.sleep(0))
    assert phase.finished.done() and stats.errors == {} and stats.fatal is None
    assert new.owner is None  # released at the end
    assert len(opened) == 2


def test_a_request_lost_in_flight_is_counted_and_the_loop_goes_on(
    loop: asyncio.AbstractEventLoop,
) -> None:
    opened, stats, phase = in_a_slot(loop, True, 1)
    conn, _ = opened[0]
    conn.data_received(OK)
    conn.connection_lost(None)  # closed with the loop's second request in flight
    assert stats.errors == {"connection_closed": 1} and stats.fatal is None
    loop.run_until_complete(asyncio.sleep(0))
    new, fresh = opened[1]
    assert fresh.writes == [REQUEST] and new.owner is not None
    for _ in range(3):
        new.data_received(OK)
    assert phase.finished.done() and stats.fatal is None
    # a new connection that closes before answering anything ends the loop: no reconnect storm
    opened, stats, phase = in_a_slot(loop, True, 1)
    opened[0][0].connection_lost(None)
    assert stats.fatal is not None and "connection_closed" in stats.fatal
    assert phase.finished.done()
