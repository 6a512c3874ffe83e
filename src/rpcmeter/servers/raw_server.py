"""Built-in raw-socket reference server: length-prefixed frames (:mod:`rpcmeter.protocols.raw`)
over TCP or a Unix socket.

``status`` is 0 for a served request and 1 for a request the server could not serve (the body
then says why); ``server_ns`` is the server's own compute time, and over TCP ``queue_ns`` follows
it: how long the request waited after it had fully arrived, from the kernel's receive time (over
a Unix socket it is left out: unknown). See :mod:`rpcmeter.protocols.timing`. Requests may be
pipelined; replies come back in order.

Options (JSON): ``corrupt_every``, ``queue_time`` (see :mod:`rpcmeter.servers.aio`); ``tls``: frames
over TLS (:func:`rpcmeter.net.tls.server_context`; no queue time then).
"""

from __future__ import annotations

import asyncio
import struct
import time
from typing import Any, cast

from rpcmeter.protocols.bodies import OPS, sleep_seconds
from rpcmeter.protocols.raw import FAILED, MAX_FRAME, OK, reply_frame
from rpcmeter.servers.aio import (
    Corrupter,
    OrderedReplies,
    call_later_precisely,
    queue_ns,
    serve,
    timed,
)
from rpcmeter.servers.common import parse_server_args


class RawServerProtocol(asyncio.Protocol):
    """One client connection."""

    def __init__(self, corrupt: Corrupter) -> None:
        self.corrupt = corrupt
        self.buf = bytearray()
        self.transport: asyncio.Transport | None = None
        self.replies: OrderedReplies | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.Transport, transport)  # uvloop's are not subclasses
        self.replies = OrderedReplies(self.transport.write)

    def data_received(self, data: bytes) -> None:
        buf = self.buf
        buf += data
        start = 0
        end = len(buf)
        while end - start >= 4:
            (length,) = struct.unpack_from(">I", buf, start)
            if length < 1 or length > MAX_FRAME:
                assert self.transport is not None
                self.transport.close()
                return
            if end - start < 4 + length:
                break
            code = bytes(buf[start + 4 : start + 5])
            body = bytes(buf[start + 5 : start + 4 + length])
            start += 4 + length
            self.serve(code, body)
        del buf[:start]

    def serve(self, code: bytes, body: bytes) -> None:
        assert self.replies is not None
        queued = queue_ns(self.transport)
        kind = OPS.get(code)
        if kind is None:
            self.replies.now(reply_frame(b"unknown workload code " + code, 0, FAILED))
        elif kind == "sleep":
            self._sleep(body, queued)
        else:
            try:
                out, server_ns = timed(kind, body)
            except (ValueError, struct.error) as exc:
                self.replies.now(reply_frame(f"bad {kind} request: {exc}".encode(), 0, FAILED))
                return
            self.replies.now(reply_frame(self.corrupt(out), server_ns, OK, queued))

    def _sleep(self, body: bytes, queued: int | None) -> None:
        assert self.replies is not None
        try:
            seconds = sleep_seconds(body)
        except ValueError:
            self.replies.now(reply_frame(b"bad sleep request", 0, FAILED))
            return
        replies = self.replies
        slot = replies.later()
        t0 = time.perf_counter_ns()

        def wake() -> None:
            server_ns = time.perf_counter_ns() - t0
            replies.fill(slot, reply_frame(self.corrupt(b""), server_ns, OK, queued))

        call_later_precisely(asyncio.get_running_loop(), seconds, wake)


def make_factory(options: dict[str, Any]) -> Any:
    corrupt = Corrupter(options)
    return lambda: RawServerProtocol(corrupt)


def main() -> None:
    args = parse_server_args("rpcmeter's built-in raw-socket (length-prefixed frames) server")
    serve(args, make_factory(args.options))


if __name__ == "__main__":
    main()
