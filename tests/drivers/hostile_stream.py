"""A hand-made HTTP/2 server whose streaming calls misbehave in one chosen way (for the
streaming fault tests), built on the hostile server of :mod:`tests.h2.hostile`.

    python -m tests.drivers.hostile_stream PORT MODE

Each call (a stream the client ended) is answered as MODE says:

- ``short``: 2 reply messages then ``grpc-status: 0`` (the calls ask for more);
- ``silent``: nothing at all;
- ``reset``: RST_STREAM (``INTERNAL_ERROR``) after one reply message;
- ``big``: a reply message whose length prefix says 8 MiB (over gRPC's 4 MiB limit), then its
  first bytes;
- anything else: the plain hostile server's behaviour.
"""

from __future__ import annotations

import asyncio
import struct
import sys

from rpcmeter.protocols.h2.connection import (
    DATA,
    END_HEADERS,
    END_STREAM,
    HEADERS,
    RST_STREAM,
    frame,
)
from tests.h2.hostile import Hostile

MESSAGE = b"\0" + (3).to_bytes(4, "big") + b"abc"


class HostileStream(Hostile):
    def answer(self, sid: int) -> None:
        enc = self.encoder  # encode only what is sent: the client's table follows ours

        def head() -> bytes:
            block = enc.encode([(b":status", b"200"), (b"content-type", b"application/grpc")])
            return frame(HEADERS, END_HEADERS, sid, block)

        def trailers() -> bytes:
            block = enc.encode([(b"grpc-status", b"0")])
            return frame(HEADERS, END_HEADERS | END_STREAM, sid, block)

        if self.mode == "short":
            self.transport.write(head() + frame(DATA, 0, sid, MESSAGE * 2) + trailers())
        elif self.mode == "silent":
            pass
        elif self.mode == "reset":
            rst = frame(RST_STREAM, 0, sid, struct.pack(">L", 2))
            self.transport.write(head() + frame(DATA, 0, sid, MESSAGE) + rst)
        elif self.mode == "big":
            big = b"\0" + (8 << 20).to_bytes(4, "big") + b"x" * 1000
            self.transport.write(head() + frame(DATA, 0, sid, big))
        else:
            super().answer(sid)


async def main(port: int, mode: str) -> None:
    loop = asyncio.get_running_loop()
    server = await loop.create_server(lambda: HostileStream(mode), "127.0.0.1", port)
    async with server:
        await server.serve_forever()


if __name__ == "__main__":
    asyncio.run(main(int(sys.argv[1]), sys.argv[2]))
