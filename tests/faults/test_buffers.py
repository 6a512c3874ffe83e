"""Receive buffers stay linear: a large reply read in small pieces costs time in proportion to its
size (the HTTP and raw connections keep the bytes of an incomplete reply in a bytearray and parse
again only once the reply can be whole)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

import pytest

from rpcmeter.drivers.http_connection import HttpConnection
from rpcmeter.drivers.raw import RawConnection
from rpcmeter.drivers.stream_connection import StreamConnection
from rpcmeter.protocols.raw import reply_frame
from tests.support.marks import timing_sensitive

SIZE = 16 << 20  # a 16 MiB body
PIECE = 4096  # read 4 KiB at a time: 4,096 reads


def http_reply(body: bytes) -> bytes:
    return b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n" % len(body) + body


def feed(
    make: Callable[[], StreamConnection], reply: bytes, expect: bytes | None = None
) -> tuple[float, list[tuple[object, BaseException | None]]]:
    """Seconds to feed ``reply`` in pieces to a new connection; what its request completed with."""
    loop = asyncio.new_event_loop()
    try:

        async def new() -> StreamConnection:
            return make()

        conn = loop.run_until_complete(new())
        got: list[tuple[object, BaseException | None]] = []
        conn.pending.append((b"", lambda ns, err: got.append((ns, err)), expect))
        t0 = time.perf_counter()
        for at in range(0, len(reply), PIECE):
            conn.data_received(reply[at : at + PIECE])
        return time.perf_counter() - t0, got
    finally:
        loop.close()


@timing_sensitive
def test_large_reply_in_small_reads_costs_linear_time() -> None:
    for make, reply in (
        (HttpConnection, http_reply(bytes(SIZE))),
        (RawConnection, reply_frame(bytes(SIZE), 7)),
    ):
        took, got = feed(make, reply)
        assert len(got) == 1 and got[0][1] is None, got
        # copying the buffer on every read moves 4,096 x 8 MiB on average: 32 GiB, seconds
        assert took < 1.0, f"{make.__name__}: {took:.2f} s for {SIZE >> 20} MiB in {PIECE} B reads"


@pytest.mark.parametrize("make", [HttpConnection, RawConnection], ids=["http", "raw"])
def test_body_whole_when_it_arrives_in_pieces(make: Callable[[], StreamConnection]) -> None:
    body = bytes(range(256)) * 64
    reply = http_reply(body) if make is HttpConnection else reply_frame(body, 7)
    _, got = feed(make, reply, expect=body)
    assert got == [(None if make is HttpConnection else (7, None), None)]
