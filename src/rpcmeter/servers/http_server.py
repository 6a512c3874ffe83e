"""Built-in HTTP/1.1 reference server: a raw asyncio protocol on uvloop, parsed by httptools.

URL scheme (any method; keep-alive and pipelining supported; bodies need ``Content-Length``):

=====================================  ===================================================
``/noop``                              empty reply (the round-trip baseline)
``/echo``                              the request body
``/payload?reply_bytes=N``             ``N`` bytes (``payload_bytes``), any request body
``/sleep?ms=X``                        empty reply after ``X`` ms (the loop keeps serving)
``/factorial`` (body: ``n``)           decimal digits of ``n!``; ``/factorial?n=N`` works too
=====================================  ===================================================

Every reply carries ``Server-Timing: app;dur=MS``: the server's own compute time for that request
in milliseconds (6 decimals: nanoseconds). Unknown paths get 404, bad arguments 400.

Options (JSON): ``corrupt_every`` (see :mod:`rpcmeter.servers.aio`).
"""

from __future__ import annotations

import asyncio
import time
from typing import Any, cast
from urllib.parse import parse_qsl

import httptools

from rpcmeter.servers.aio import (
    BadRequest,
    Corrupter,
    OrderedReplies,
    UnknownWorkload,
    run_workload,
    serve,
)
from rpcmeter.servers.common import parse_server_args

REASONS = {200: b"OK", 400: b"Bad Request", 404: b"Not Found"}


def response(status: int, body: bytes, server_ns: int, keep_alive: bool = True) -> bytes:
    head = (
        b"HTTP/1.1 %d %s\r\nServer-Timing: app;dur=%.6f\r\nContent-Length: %d\r\n"
        b"Content-Type: application/octet-stream\r\n"
        % (status, REASONS.get(status, b"Error"), server_ns / 1e6, len(body))
    )
    if not keep_alive:
        head += b"Connection: close\r\n"
    return head + b"\r\n" + body


def query_int(query: dict[str, str], key: str, default: int = -1) -> int:
    if key not in query:
        return default
    try:
        return int(query[key])
    except ValueError:
        raise BadRequest(f"{key} must be an integer, got {query[key]!r}") from None


class HttpServerProtocol(asyncio.Protocol):
    """One client connection."""

    def __init__(self, corrupt: Corrupter) -> None:
        self.corrupt = corrupt
        self.parser = httptools.HttpRequestParser(self)
        self.url = b""
        self.body: list[bytes] = []
        self.transport: asyncio.Transport | None = None
        self.replies: OrderedReplies | None = None
        self.closing = False

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.Transport, transport)  # uvloop's are not subclasses
        self.replies = OrderedReplies(self.transport.write)

    def data_received(self, data: bytes) -> None:
        try:
            self.parser.feed_data(data)
        except httptools.HttpParserUpgrade:
            self._close()
        except httptools.HttpParserError:
            if self.transport is not None:
                self.transport.write(response(400, b"bad request", 0, keep_alive=False))
            self._close()

    def _close(self) -> None:
        if self.transport is not None:
            self.transport.close()

    def _close_when_sent(self) -> None:
        """Close once every reply before this one has been written (``Connection: close``)."""
        self.closing = True
        if self.replies is not None and not self.replies.queue:
            self._close()

    # httptools callbacks ----------------------------------------------------------------------
    def on_message_begin(self) -> None:
        self.url = b""
        self.body = []

    def on_url(self, url: bytes) -> None:
        self.url += url

    def on_body(self, body: bytes) -> None:
        self.body.append(body)

    def on_message_complete(self) -> None:
        assert self.replies is not None
        keep_alive = self.parser.should_keep_alive()
        path, _, raw_query = self.url.decode("latin-1").partition("?")
        body = b"".join(self.body)
        try:
            query = dict(parse_qsl(raw_query)) if raw_query else {}
            kind = path.strip("/")
            if kind == "sleep":
                self._sleep(query, keep_alive)
                return
            arg = query_int(query, "reply_bytes" if kind == "payload" else "n")
            out, server_ns = run_workload(kind, arg, body)
            status = 200
        except BadRequest as exc:
            status = 404 if isinstance(exc, UnknownWorkload) else 400
            out, server_ns = str(exc).encode(), 0
        if status == 200:
            out = self.corrupt(out)
        self.replies.now(response(status, out, server_ns, keep_alive))
        if not keep_alive:
            self._close_when_sent()

    def _sleep(self, query: dict[str, str], keep_alive: bool) -> None:
        assert self.replies is not None
        try:
            ms = float(query.get("ms", "0"))
        except ValueError:
            self.replies.now(response(400, b"ms must be a number", 0, keep_alive))
            return
        replies = self.replies
        slot = replies.later()
        t0 = time.perf_counter_ns()

        def wake() -> None:
            server_ns = time.perf_counter_ns() - t0
            replies.fill(slot, response(200, self.corrupt(b""), server_ns, keep_alive))
            if self.closing:
                self._close_when_sent()

        asyncio.get_running_loop().call_later(max(ms, 0.0) / 1e3, wake)


def make_factory(options: dict[str, Any]) -> Any:
    corrupt = Corrupter(options)
    return lambda: HttpServerProtocol(corrupt)


def main() -> None:
    args = parse_server_args("rpcmeter's built-in HTTP/1.1 server")
    serve(args, make_factory(args.options))


if __name__ == "__main__":
    main()
