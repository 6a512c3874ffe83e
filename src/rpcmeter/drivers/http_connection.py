"""The HTTP/1.1 connection of the HTTP driver (:mod:`rpcmeter.drivers.http`): its replies parsed,
on a :class:`~rpcmeter.drivers.stream_connection.StreamConnection`. A module of its own, so that
the compiled build (``setup.py``) compiles the reply parser with the rest of the hot path.
"""

from __future__ import annotations

import httptools
from mypy_extensions import mypyc_attr

from rpcmeter.drivers.base import ReplyError
from rpcmeter.drivers.stream_connection import StreamConnection
from rpcmeter.errors import ProtocolError
from rpcmeter.protocols.timing import ServerTime, parse_server_timing

MAX_HEAD = 1 << 20  # a reply head longer than this is malformed
# a reply that ends the connection says so (as nginx, Apache httpd, Go, Node and h11 spell it;
# another spelling is missed, and the request sent before the close arrives is lost)
CLOSE = b"onnection: close"


@mypyc_attr(native_class=False)  # (a builtin exception's subclass)
class KeepAliveRequired(ConnectionResetError):
    """The server closed a connection after announcing it would (HTTP/1.0 or
    ``Connection: close``): it does not keep connections alive."""

    kind = "keepalive_required"  # counted so (rpcmeter.errors.error_kind)

    def __init__(self) -> None:
        super().__init__(
            "the server closes the connection after each reply (HTTP/1.0 or Connection: "
            "close); the http driver needs keep-alive, or set load.reuse = false to open a "
            "connection per request"
        )


def announces_close(head: bytes) -> bool:
    """True when a reply head says the server closes the connection after it."""
    head = head.lower()
    if head.startswith(b"http/1.0"):
        return b"\nconnection: keep-alive" not in head
    return b"\nconnection: close" in head


class HttpConnection(StreamConnection):
    """One keep-alive connection.

    Replies with a ``Content-Length`` (what servers send to keep-alive clients) are parsed by a
    few byte searches on the head (``Server-Timing`` spelled so or all in lower case); anything
    else (chunked bodies, 1xx, 204, 304, a request method of ``HEAD``) switches the connection
    to httptools' full parser for good. A read holding exactly one reply is remembered with
    what its parse gave: a server answering the same request repeats its reply byte for byte
    (until its ``Date`` changes), and the next such read costs one comparison; on a connection
    owned by its loop, that reply goes straight to the loop."""

    def __init__(self, head_only: bool = False) -> None:
        super().__init__()
        self.parser: httptools.HttpResponseParser | None = None
        self.buf = bytearray()  # an incomplete reply's bytes so far
        self.need = 0  # how many bytes buf must hold before parsing it again is worth it
        self.server_ns: ServerTime | None = None
        self.body: list[bytes] | None = None
        # the last read that held exactly one whole reply, and what parsing it gave
        self.same = b""
        self.same_server_ns: ServerTime | None = None
        self.same_status: ReplyError | None = None
        self.same_body_at = 0
        self.closes: bool | None = None  # the first reply announced a close (None: no reply yet)
        if head_only:
            self._use_parser()

    def _use_parser(self) -> None:
        self.same = b""
        if self.parser is None:
            self.parser = httptools.HttpResponseParser(self)

    def data_received(self, data: bytes) -> None:
        self.bytes_in += len(data)
        if data == self.same and not self.buf:
            owner = self.owner
            if owner is not None:  # the fast path: see the class doc
                self.bytes_out += self.owner_bytes
                owner(self.same_server_ns, self.same_status)
            else:
                body = data[self.same_body_at :] if self.wants_body() else None
                self.reply(self.same_server_ns, body, self.same_status)
            return
        if self.parser is not None:
            self._feed(data)
            return
        buffered = bool(self.buf)
        if buffered:  # bytes of an incomplete reply wait in a bytearray (linear in its size)
            self.buf += data
            if len(self.buf) < self.need:
                return
            data = bytes(self.buf)
            self.buf.clear()
        pos = 0
        n = len(data)
        replies = 0
        close_at = data.find(CLOSE)  # one search a read: the reply whose head holds it closes
        # replies this read can hold: requests sent from the callbacks below came after it
        outstanding = 1 if self.owner is not None else len(self.pending)
        while pos < n:
            end = data.find(b"\r\n\r\n", pos)
            if end < 0:
                if n - pos > MAX_HEAD:
                    self.fail(
                        ProtocolError(f"invalid HTTP reply: no end of head in {MAX_HEAD} bytes")
                    )
                    return
                self.need = n - pos + 1
                break
            try:
                if data[pos : pos + 5] != b"HTTP/":
                    raise ValueError(f"not a status line: {bytes(data[pos : pos + 20])!r}")
                status = int(data[pos + 9 : pos + 12])  # "HTTP/1.1 200 OK"
                at = data.find(b"\nContent-Length:", pos, end)
                if at < 0:  # another spelling: search the head in lower case
                    at = data[:end].lower().find(b"\ncontent-length:", pos)
                if at < 0 or status < 200 or status in (204, 304):
                    self._use_parser()
                    self._feed(data[pos:])
                    return
                eol = data.find(b"\r", at + 16, end + 1)
                length = int(data[at + 16 : eol])
                if length < 0:
                    raise ValueError(f"Content-Length {length}")
            except ValueError as exc:
                self.fail(ProtocolError(f"invalid HTTP reply: {exc}"))
                return
            stop = end + 4 + length
            if stop > n:
                self.need = stop - pos
                break
            at = data.find(b"\nServer-Timing:", pos, end)
            if at < 0:
                at = data.find(b"\nserver-timing:", pos, end)
            server_ns = None
            if at >= 0:
                server_ns = parse_server_timing(data[at + 15 : data.find(b"\r", at, end + 1)])
            closing = False
            if self.closes is None:
                self.closes = announces_close(data[pos:end])
            else:  # a later reply saying the server ends the connection now (nginx, httpd)
                closing = pos < close_at < end
            start, pos = pos, stop
            replies += 1
            if replies > outstanding:
                self.fail(ProtocolError("a reply that answers no request"))
                return
            status_error = (
                None
                if 200 <= status < 300
                else ReplyError(f"http_{status}", f"HTTP status {status}")
            )
            body = data[end + 4 : stop] if self.wants_body() else None
            if closing:
                self.last_reply(server_ns, body, status_error)
                return
            if start == 0 and stop == n and not buffered:  # the read held this reply alone
                self.same, self.same_server_ns = data, server_ns
                self.same_status, self.same_body_at = status_error, end + 4
            self.reply(server_ns, body, status_error)
            if self.lost is not None:
                return
        if pos < n:
            self.buf += memoryview(data)[pos:]

    def _feed(self, data: bytes) -> None:
        assert self.parser is not None
        try:
            self.parser.feed_data(data)
        except httptools.HttpParserCallbackError:
            raise
        except httptools.HttpParserError as exc:
            self.fail(ProtocolError(f"invalid HTTP reply: {exc}"))

    def closed_by_server(self) -> BaseException:
        if self.closes:
            return KeepAliveRequired()
        return super().closed_by_server()

    # httptools callbacks
    def on_message_begin(self) -> None:
        self.server_ns = None
        self.body = [] if self.wants_body() else None

    def on_header(self, name: bytes, value: bytes) -> None:
        if len(name) == 13 and name.lower() == b"server-timing":
            self.server_ns = parse_server_timing(value)

    def on_body(self, body: bytes) -> None:
        if self.body is not None:
            self.body.append(body)

    def on_message_complete(self) -> None:
        assert self.parser is not None
        status = self.parser.get_status_code()
        closing = False
        if self.closes is None:
            self.closes = not self.parser.should_keep_alive()
        else:
            closing = not self.parser.should_keep_alive()
        body = b"".join(self.body) if self.body is not None else None
        error = None
        if not 200 <= status < 300:
            error = ReplyError(f"http_{status}", f"HTTP status {status}")
        if closing:
            self.last_reply(self.server_ns, body, error)
        else:
            self.reply(self.server_ns, body, error)
