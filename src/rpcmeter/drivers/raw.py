"""Raw stream sockets driver: length-prefixed frames over TCP or a Unix socket, no framework.

The frame protocol is documented in :mod:`rpcmeter.servers.raw_server` (a 4-byte length, a
workload code, the body; replies carry a status byte and the server's compute time in
nanoseconds). This is the floor: a framework's latency minus this driver's, on the same transport
and connection shape, is what the framework costs.

Connections are driven like HTTP's (:mod:`rpcmeter.drivers.stream`): one uvloop event loop per
client process, ``load.connections`` connections, ``load.concurrency`` closed loops over them
(pipelined when there are more loops than connections). A reply with a non-zero status counts
as an error of kind ``raw_error``. Options: ``event_loop`` (``uvloop`` or ``asyncio``).
"""

from __future__ import annotations

from typing import ClassVar

from rpcmeter.drivers.base import ReplyError
from rpcmeter.drivers.stream import StreamConnection, StreamDriver
from rpcmeter.servers.bodies import CODES
from rpcmeter.servers.raw_server import MAX_FRAME, REPLY_HEAD, request_frame

HEAD = REPLY_HEAD.size  # 13: length, status, server_ns


class RawConnection(StreamConnection):
    """One connection; reply frames parsed in place."""

    def __init__(self) -> None:
        super().__init__()
        self.buf = b""

    def data_received(self, data: bytes) -> None:
        self.bytes_in += len(data)
        buf = self.buf + data if self.buf else data
        start = 0
        end = len(buf)
        unpack = REPLY_HEAD.unpack_from
        while end - start >= HEAD:
            length, status, server_ns = unpack(buf, start)
            stop = start + 4 + length
            if length < 9 or length > MAX_FRAME:
                self.fail(ConnectionError(f"invalid reply frame (length {length})"))
                return
            if stop > end:
                break
            body = buf[start + HEAD : stop] if status or self.wants_body() else None
            start = stop
            if status:
                text = (body or b"").decode("utf-8", "replace")
                self.reply(server_ns, None, ReplyError("raw_error", text))
            else:
                self.reply(server_ns, body, None)
        self.buf = buf[start:] if start < end else b""


class RawDriver(StreamDriver):
    name: ClassVar[str] = "raw"
    builtin_server: ClassVar[str | None] = "rpcmeter.servers.raw_server"
    packages: ClassVar[tuple[str, ...]] = ("uvloop",)

    def new_connection(self) -> StreamConnection:
        return RawConnection()

    def encode(self, body: bytes) -> bytes:
        return request_frame(CODES[self.ctx.workload.kind], body)
