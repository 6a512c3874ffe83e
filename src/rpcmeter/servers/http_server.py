"""Built-in HTTP/1.1 reference server: a raw asyncio protocol on uvloop, parsed by httptools.
A connection that opens with the HTTP/2 preface is served HTTP/2 instead (h2c with prior
knowledge, python-hyper's ``h2``: :class:`rpcmeter.servers.h2server.H2Server`), with the same
URL scheme and replies. Over TLS the server offers ALPN ``h2`` and ``http/1.1`` and speaks the
protocol negotiated.

URL scheme (any method; keep-alive and pipelining supported; bodies need ``Content-Length``):

=====================================  ===================================================
``/noop``                              empty reply (the round-trip baseline)
``/echo``                              the request body
``/payload?reply_bytes=N``             ``N`` bytes (``payload_bytes``), any request body
``/sleep?ms=X``                        empty reply after ``X`` ms (the loop keeps serving)
``/factorial`` (body: ``n``)           decimal digits of ``n!``; ``/factorial?n=N`` works too
``GET /kv/KEY``                        the value stored under ``KEY`` (a key/value store:
                                       :class:`KvStore`)
``PUT /kv/KEY`` (or ``POST``)          stores the body under ``KEY``
``DELETE /kv/KEY``                     forgets ``KEY``
``GET /kv``                            the store's tally as JSON (keys, hits, misses, puts)
=====================================  ===================================================

Without the query string, ``payload``, ``sleep`` and ``factorial`` read their argument from the
body as :mod:`rpcmeter.protocols.bodies` encodes it (so its request bodies work here unchanged).

Every reply carries ``Server-Timing: queue;dur=MS, app;dur=MS`` (milliseconds, 6 decimals): how
long the request waited after it had fully arrived (over TCP, from the kernel's receive time;
over a Unix socket, which has none, ``queue`` is left out: unknown) and the server's own compute
time for it (:mod:`rpcmeter.protocols.timing`). Unknown paths get 404, bad arguments 400.

The key/value store behaves as a cache in front of a slower store: a ``GET`` of a key it holds is
a hit (the value at once, ``X-Cache: hit``); of a key it does not hold, a miss: the server spends
``kv_miss_us`` microseconds of CPU making the value (default 100; the backing store's work), keeps
it and answers ``X-Cache: miss``. It holds at most ``kv_capacity`` keys (default 1,000,000), the
least recently used forgotten first. Requests that are all the same hit it every time; requests
with keys that vary (``path = "/kv/{{random_int(1, 100000)}}"``) show what a cache miss costs.

Options (JSON): ``corrupt_every``, ``queue_time`` (see :mod:`rpcmeter.servers.aio`); ``stall_ms``,
``stall_after_s``, ``stall_every_s``: the whole server (its event loop) stalls at a known moment
(:class:`~rpcmeter.servers.common.Stall`); ``tls`` (``cert_file``, ``key_file``,
``client_ca_files``): serve HTTPS (:func:`rpcmeter.net.tls.server_context`).
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import struct
import time
from collections import OrderedDict
from collections.abc import Callable
from typing import Any, cast
from urllib.parse import parse_qsl

import httptools

from rpcmeter.protocols.bodies import KINDS, sleep_seconds
from rpcmeter.protocols.timing import server_timing_header, server_timing_value
from rpcmeter.servers.aio import (
    Corrupter,
    OrderedReplies,
    call_later_precisely,
    queue_ns,
    serve,
    timed,
)
from rpcmeter.servers.common import Stall, parse_server_args
from rpcmeter.servers.h2server import H2Server, Headers

H2_PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
REASONS = {200: b"OK", 400: b"Bad Request", 404: b"Not Found", 405: b"Method Not Allowed"}
KV_CAPACITY = 1_000_000
KV_MISS_US = 100.0


class KvStore:
    """The key/value store of ``/kv/KEY`` (see the module doc): at most ``capacity`` keys, the
    least recently used forgotten first; a ``GET`` of a missing key costs ``miss_us`` of CPU and
    stores the value it makes. ``tally`` counts hits, misses and puts."""

    def __init__(self, options: dict[str, Any]) -> None:
        self.capacity = int(options.get("kv_capacity", KV_CAPACITY))
        self.miss_ns = int(float(options.get("kv_miss_us", KV_MISS_US)) * 1000)
        self.data: OrderedDict[bytes, bytes] = OrderedDict()
        self.tally = {"hits": 0, "misses": 0, "puts": 0, "deletes": 0}

    def get(self, key: bytes) -> tuple[bytes, bool]:
        """The value of ``key`` and whether it was held (a hit)."""
        value = self.data.get(key)
        if value is not None:
            self.data.move_to_end(key)
            self.tally["hits"] += 1
            return value, True
        self.tally["misses"] += 1
        value = self.fetch(key)
        self.put(key, value, count=False)
        return value, False

    def fetch(self, key: bytes) -> bytes:
        """The backing store's value of ``key``: ``miss_ns`` of hashing (it is made, not
        slept for: a miss costs the server CPU)."""
        digest = hashlib.sha256(key).digest()
        deadline = time.perf_counter_ns() + self.miss_ns
        while time.perf_counter_ns() < deadline:
            digest = hashlib.sha256(digest).digest()
        return digest.hex().encode()

    def put(self, key: bytes, value: bytes, count: bool = True) -> None:
        self.data[key] = value
        self.data.move_to_end(key)
        if count:
            self.tally["puts"] += 1
        while len(self.data) > self.capacity:
            self.data.popitem(last=False)

    def delete(self, key: bytes) -> bool:
        self.tally["deletes"] += 1
        return self.data.pop(key, None) is not None

    def summary(self) -> bytes:
        return json.dumps({"keys": len(self.data), **self.tally}).encode()

    def handle(self, method: bytes, key: bytes, body: bytes) -> tuple[int, bytes, int, bytes]:
        """A request to ``/kv/KEY`` (``key`` empty: ``/kv``): status, body, server ns and the
        ``X-Cache`` value (empty: none)."""
        t0 = time.perf_counter_ns()
        cache = b""
        if not key:
            if method != b"GET":
                return 405, b"GET /kv gives the tally", 0, b""
            status, out = 200, self.summary()
        elif method in (b"GET", b"HEAD"):
            out, hit = self.get(key)
            status, cache = 200, b"hit" if hit else b"miss"
        elif method in (b"PUT", b"POST"):
            self.put(key, body)
            status, out = 200, b""
        elif method == b"DELETE":
            status, out = (200, b"") if self.delete(key) else (404, b"no such key")
        else:
            return 405, b"GET, PUT, POST or DELETE", 0, b""
        return status, out, time.perf_counter_ns() - t0, cache


def response(
    status: int,
    body: bytes,
    server_ns: int,
    keep_alive: bool = True,
    queued: int | None = None,
    cache: bytes = b"",
) -> bytes:
    head = (
        b"HTTP/1.1 %d %s\r\n%s%sContent-Length: %d\r\nContent-Type: application/octet-stream\r\n"
        % (
            status,
            REASONS.get(status, b"Error"),
            server_timing_header(server_ns, queued),
            b"X-Cache: %s\r\n" % cache if cache else b"",
            len(body),
        )
    )
    if not keep_alive:
        head += b"Connection: close\r\n"
    return head + b"\r\n" + body


class HttpServerProtocol(asyncio.Protocol):
    """One client connection."""

    def __init__(
        self,
        corrupt: Corrupter,
        stalled: Callable[[], None] | None = None,
        store: KvStore | None = None,
    ) -> None:
        self.corrupt = corrupt
        self.stalled = stalled
        self.store = store or KvStore({})
        self.parser = httptools.HttpRequestParser(self)
        self.url = b""
        self.body: list[bytes] = []
        self.transport: asyncio.Transport | None = None
        self.replies: OrderedReplies | None = None
        self.closing = False
        self.fresh = True  # nothing received yet
        self.h2c: H2cServer | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.Transport, transport)  # uvloop's are not subclasses
        self.replies = OrderedReplies(self.transport.write)
        ssl_object = transport.get_extra_info("ssl_object")
        if ssl_object is not None and ssl_object.selected_alpn_protocol() is not None:
            self.fresh = False  # ALPN chose the protocol: no preface sniffing
            if ssl_object.selected_alpn_protocol() == "h2":
                self.h2c = H2cServer(self.transport, self.corrupt, self.stalled, self.store)

    def data_received(self, data: bytes) -> None:
        if self.h2c is not None:
            self.h2c.data_received(data)
            return
        if self.fresh:  # a connection opening with the HTTP/2 preface speaks HTTP/2 (h2c)
            self.fresh = False
            if data[:14] == H2_PREFACE[: len(data)][:14] and self.transport is not None:
                self.h2c = H2cServer(self.transport, self.corrupt, self.stalled, self.store)
                self.h2c.data_received(data)
                return
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
        if self.stalled:
            self.stalled()
        queued = queue_ns(self.transport)
        keep_alive = self.parser.should_keep_alive()
        method = self.parser.get_method()
        answer = handle(self.url, b"".join(self.body), self.corrupt, method, self.store)
        if isinstance(answer, float):
            self._sleep(answer, keep_alive, queued)
            return
        status, body, server_ns, *cache = answer
        self.replies.now(response(status, body, server_ns, keep_alive, queued, *cache))
        if not keep_alive:
            self._close_when_sent()

    def _sleep(self, seconds: float, keep_alive: bool, queued: int | None) -> None:
        assert self.replies is not None
        replies = self.replies
        slot = replies.later()
        t0 = time.perf_counter_ns()

        def wake() -> None:
            server_ns = time.perf_counter_ns() - t0
            replies.fill(slot, response(200, self.corrupt(b""), server_ns, keep_alive, queued))
            if self.closing:
                self._close_when_sent()

        call_later_precisely(asyncio.get_running_loop(), seconds, wake)


def handle(
    url: bytes,
    body: bytes,
    corrupt: Corrupter,
    method: bytes = b"GET",
    store: KvStore | None = None,
) -> tuple[int, bytes, int] | tuple[int, bytes, int, bytes] | float:
    """The reply to one request: (status, body, server ns), and for the key/value store the
    ``X-Cache`` value; for ``sleep``, the seconds to wait before an empty 200 reply."""
    if store is not None and (url == b"/kv" or url.startswith(b"/kv/")):
        status, out, server_ns, cache = store.handle(method, url[4:].partition(b"?")[0], body)
        return status, corrupt(out) if status == 200 else out, server_ns, cache
    path, _, raw_query = url.decode("latin-1").partition("?")
    kind = path.strip("/")
    query = dict(parse_qsl(raw_query)) if raw_query else {}
    if kind not in KINDS:
        return 404, b"unknown workload", 0
    if kind == "sleep":
        ms = query.get("ms")
        try:
            return max(float(ms) / 1e3 if ms is not None else sleep_seconds(body), 0.0)
        except ValueError:
            return 400, b"bad sleep request", 0
    try:
        size = query.get("reply_bytes") if kind == "payload" else None
        n = query.get("n") if kind == "factorial" else None
        out, server_ns = timed(
            kind, n.encode() if n else body, int(size) if size is not None else None
        )
        return 200, corrupt(out), server_ns
    except (ValueError, struct.error) as exc:
        return 400, f"bad {kind} request: {exc}".encode(), 0


class H2cServer(H2Server):
    """HTTP/2 on a connection that opened with the HTTP/2 preface (h2c with prior knowledge) or
    chose ``h2`` by ALPN: the same URL scheme and replies as HTTP/1.1."""

    def __init__(
        self,
        transport: asyncio.Transport,
        corrupt: Corrupter,
        stalled: Callable[[], None] | None,
        store: KvStore | None = None,
    ) -> None:
        super().__init__(transport)
        self.corrupt = corrupt
        self.stalled = stalled
        self.store = store or KvStore({})

    def answer(self, sid: int, headers: Headers, body: bytes) -> None:
        fields = dict(headers)
        url = fields.get(b":path", b"/")
        if self.stalled:
            self.stalled()
        # the request's END_STREAM came with the latest read: its arrival is that read's stamp
        queued = queue_ns(self.transport)
        answer = handle(url, body, self.corrupt, fields.get(b":method", b"GET"), self.store)
        if not isinstance(answer, float):
            status, out, server_ns, *cache = answer
            self._reply(sid, status, out, server_ns, queued, *cache)
            return
        t0 = time.perf_counter_ns()

        def wake() -> None:
            if not self.closed:
                self._reply(sid, 200, self.corrupt(b""), time.perf_counter_ns() - t0, queued)
                self.flush()

        call_later_precisely(asyncio.get_running_loop(), answer, wake)

    def _reply(
        self,
        sid: int,
        status: int,
        body: bytes,
        server_ns: int,
        queued: int | None,
        cache: bytes = b"",
    ) -> None:
        headers = [
            (b":status", str(status).encode()),
            (b"server-timing", server_timing_value(server_ns, queued)),
            (b"content-length", str(len(body)).encode()),
            (b"content-type", b"application/octet-stream"),
        ]
        if cache:
            headers.append((b"x-cache", cache))
        self.reply(sid, headers, body)


def make_factory(options: dict[str, Any]) -> Any:
    corrupt = Corrupter(options)
    stall = Stall(options)
    stalled = stall.check if stall.active else None
    store = KvStore(options)  # one for the server: every connection's requests share it
    return lambda: HttpServerProtocol(corrupt, stalled, store)


def main() -> None:
    args = parse_server_args("rpcmeter's built-in HTTP/1.1 server")
    serve(args, make_factory(args.options), alpn=("h2", "http/1.1"))


if __name__ == "__main__":
    main()
