"""A small hand-made HTTP/2 server that misbehaves in one chosen way (for the fault tests).

    python -m tests.h2.hostile PORT MODE

It reads the client's frames by hand; each request (a stream that ended) is answered with
``:status 200``, ``content-type: application/grpc``, an empty gRPC message and ``grpc-status:
0``, except as MODE says:

- ``http1``: answers every connection with an HTTP/1.1 400 and closes it;
- ``malformed``: answers the first request with a DATA frame on stream 0;
- ``big_headers``: answers the first request with a header block of 100 kB (CONTINUATIONs);
- ``settings_flood``: sends 5000 SETTINGS frames after its preface;
- ``goaway``: after 20 requests on a connection, sends GOAWAY (``NO_ERROR``) naming the 20th
  and answers no more on it (a graceful end: the client sends the others on a new connection);
- ``goaway_at_once``: sends GOAWAY (``NO_ERROR``, last stream 0) right after its SETTINGS on
  every connection, and answers nothing;
- ``no_status``: answers every request without ``:status``;
- ``bad_hpack``: answers the first request with a header block that is not HPACK (it ends
  inside an integer).
"""

from __future__ import annotations

import asyncio
import struct
import sys
from typing import cast

import hpack

from rpcmeter.protocols.h2.connection import (
    CONTINUATION,
    DATA,
    END_HEADERS,
    END_STREAM,
    GOAWAY,
    HEADERS,
    PREFACE,
    SETTINGS,
    frame,
)


class Hostile(asyncio.Protocol):
    def __init__(self, mode: str) -> None:
        self.mode = mode
        self.buf = b""
        self.seen_preface = False
        self.requests = 0
        self.gone = False
        self.encoder = hpack.Encoder()

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.Transport, transport)

    def data_received(self, data: bytes) -> None:
        if self.mode == "http1":
            self.transport.write(b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n")
            self.transport.close()
            return
        data = self.buf + data
        if not self.seen_preface:
            if len(data) < len(PREFACE):
                self.buf = data
                return
            self.seen_preface = True
            data = data[len(PREFACE) :]
            out = frame(SETTINGS, 0, 0)
            if self.mode == "settings_flood":
                out += frame(SETTINGS, 0, 0) * 5000
            if self.mode == "goaway_at_once":
                out += frame(GOAWAY, 0, 0, struct.pack(">LL", 0, 0))
                self.gone = True
            self.transport.write(out)
        pos = 0
        while len(data) - pos >= 9:
            n = int.from_bytes(data[pos : pos + 3])
            if len(data) - pos < 9 + n:
                break
            kind, flags = data[pos + 3], data[pos + 4]
            sid = int.from_bytes(data[pos + 5 : pos + 9])
            if kind in (HEADERS, DATA) and flags & END_STREAM:
                self.answer(sid)
            elif kind == SETTINGS and not flags & 1:
                self.transport.write(frame(SETTINGS, 1, 0))
            pos += 9 + n
        self.buf = data[pos:]

    def answer(self, sid: int) -> None:
        if self.gone:
            return
        self.requests += 1
        enc = self.encoder
        if self.mode == "malformed":
            self.transport.write(frame(DATA, 0, 0, b"x"))
            return
        if self.mode == "big_headers":
            block = enc.encode([(b":status", b"200"), (b"x-big", b"y" * 100_000)], huffman=False)
            pieces = [block[i : i + 16384] for i in range(0, len(block), 16384)]
            out = frame(HEADERS, 0, sid, pieces[0])
            for i, piece in enumerate(pieces[1:], 2):
                out += frame(CONTINUATION, END_HEADERS if i == len(pieces) else 0, sid, piece)
            self.transport.write(out)
            return
        if self.mode == "bad_hpack":
            self.transport.write(frame(HEADERS, END_HEADERS | END_STREAM, sid, b"\x3f"))
            return
        status = [] if self.mode == "no_status" else [(b":status", b"200")]
        head = enc.encode([*status, (b"content-type", b"application/grpc")])
        self.transport.write(
            frame(HEADERS, END_HEADERS, sid, head)
            + frame(DATA, 0, sid, b"\0\0\0\0\0")
            + frame(HEADERS, END_HEADERS | END_STREAM, sid, enc.encode([(b"grpc-status", b"0")]))
        )
        if self.mode == "goaway" and self.requests == 20:
            self.gone = True
            self.transport.write(frame(GOAWAY, 0, 0, struct.pack(">LL", sid, 0) + b"bye"))


async def main(port: int, mode: str) -> None:
    loop = asyncio.get_running_loop()
    server = await loop.create_server(lambda: Hostile(mode), "127.0.0.1", port)
    async with server:
        await server.serve_forever()


if __name__ == "__main__":
    asyncio.run(main(int(sys.argv[1]), sys.argv[2]))
