"""Raw stream sockets driver: length-prefixed frames over TCP or a Unix socket, no framework.

The frame protocol is documented in :mod:`rpcmeter.protocols.raw` (a 4-byte length, a
workload code, the body; replies carry a status byte and the server's compute time in
nanoseconds). This is the floor: a framework's latency minus this driver's, on the same transport
and connection shape, is what the framework costs.

With ``io = "event"`` connections are driven like HTTP's (:mod:`rpcmeter.drivers.stream`): one
uvloop event loop per client process, ``load.connections`` connections, ``load.concurrency``
closed loops over them (pipelined when there are more loops than connections). With
``io = "blocking"`` every loop is a thread doing a blocking send and receive on its connection
(loops sharing a connection take turns). ``io = "auto"`` (default) picks blocking for one loop
per client and the event loop for more, as ``benchmarks/raw_client_modes.py`` measured (blocking:
1.06x the requests/s of the event loop at 0.8x its CPU per request with one loop; 0.65x the
requests/s with eight). A reply with a non-zero status counts as an error of kind
``raw_error``. Options: ``io``, ``event_loop`` (``uvloop`` or ``asyncio``).

With ``tls`` (:mod:`rpcmeter.net.tls`) the frames travel over TLS on either path (connect and
handshake timed); ``load.reuse = false`` (a connection per request) uses the event loop.
``load.wait = "spin"`` on the blocking path polls the socket with a zero timeout until the reply
is there (:func:`polling_recv`; for at most ``load.spin_us``, then it sleeps) instead of sleeping
in ``recv``; the driver's counter ``polls`` counts the polls.
"""

from __future__ import annotations

import contextlib
import select
import socket
import threading
import time
from collections.abc import Callable
from typing import ClassVar

from rpcmeter.drivers.base import Caller, ReplyError
from rpcmeter.drivers.stream import StreamDriver
from rpcmeter.drivers.stream_connection import StreamConnection, mismatch
from rpcmeter.errors import ConnectionClosed, ProtocolError, RequestLost
from rpcmeter.metrics.connections import ConnectionCosts
from rpcmeter.net.tls import client_context, server_name, timed_handshake
from rpcmeter.protocols.bodies import CODES, expected_reply
from rpcmeter.protocols.raw import MAX_FRAME, REPLY_HEAD, request_frame
from rpcmeter.protocols.timing import QUEUE_FOLLOWS, ServerTime, read_frame_times

HEAD = REPLY_HEAD.size  # 13: length, status, server_ns (21 when queue_ns follows)
UNBOUNDED_NS = 1 << 62  # polling_recv without spin_us: polls until the reply is there


def reply_times(buf: bytes, start: int, server_ns: int) -> tuple[ServerTime, int]:
    """The times of the reply frame at ``start`` (whose ``server_ns`` field was read) and where
    its body begins."""
    if server_ns & QUEUE_FOLLOWS:
        times, size = read_frame_times(buf, start + 5)
        return times, start + 5 + size
    return (server_ns, None), start + HEAD


class RawConnection(StreamConnection):
    """One connection; reply frames parsed in place (an incomplete one waits in a bytearray)."""

    def __init__(self) -> None:
        super().__init__()
        self.buf = bytearray()
        self.need = 0  # bytes buf must hold before parsing it again is worth it

    def data_received(self, data: bytes) -> None:
        self.bytes_in += len(data)
        if self.buf:
            self.buf += data
            if len(self.buf) < self.need:
                return
            data = bytes(self.buf)
            self.buf.clear()
        start = 0
        end = len(data)
        unpack = REPLY_HEAD.unpack_from
        replies = 0
        # replies this read can hold: requests sent from the callbacks below came after it
        outstanding = 1 if self.owner is not None else len(self.pending)
        while end - start >= HEAD:
            length, status, server_ns = unpack(data, start)
            stop = start + 4 + length
            if length < (17 if server_ns & QUEUE_FOLLOWS else 9) or length > MAX_FRAME:
                self.fail(ProtocolError(f"invalid reply frame (length {length})"))
                return
            if stop > end:
                self.need = stop - start
                break
            replies += 1
            if replies > outstanding:
                self.fail(ProtocolError("a reply that answers no request"))
                return
            times, at = reply_times(data, start, server_ns)
            body = data[at:stop] if status or self.wants_body() else None
            start = stop
            if status:
                text = (body or b"").decode("utf-8", "replace")
                self.reply(times, None, ReplyError("raw_error", text))
            else:
                self.reply(times, body, None)
            if self.lost is not None:
                return
        if start < end:
            if end - start < HEAD:
                self.need = HEAD
            self.buf += memoryview(data)[start:]


def read_reply(recv: Callable[[int], bytes]) -> tuple[bytes, int, int]:
    """One whole reply frame from a blocking socket: (frame, status, server_ns). Raises
    ConnectionClosed at the end of the stream and ProtocolError for a malformed frame or bytes
    beyond it (a reply that answers no request)."""
    chunks = [recv(65536)]
    got = len(chunks[0])
    head = chunks[0]
    while True:
        if got >= HEAD:
            if len(head) < HEAD:
                head = b"".join(chunks)
            length, status, server_ns = REPLY_HEAD.unpack_from(head)
            if length < (17 if server_ns & QUEUE_FOLLOWS else 9) or length > MAX_FRAME:
                raise ProtocolError(f"invalid reply frame (length {length})")
            if got >= 4 + length:
                break
        more = recv(65536)
        if not more:
            raise ConnectionClosed("connection closed by the server")
        chunks.append(more)
        got += len(more)
    if got > 4 + length:
        raise ProtocolError("a reply that answers no request")
    frame = chunks[0] if len(chunks) == 1 else b"".join(chunks)
    return frame, status, server_ns


def polling_recv(
    sock: socket.socket, spin_us: float | None = None, polls: list[int] | None = None
) -> Callable[[int], bytes]:
    """``sock.recv`` that first polls the socket with a zero timeout until it is readable instead
    of sleeping in the kernel (``load.wait = "spin"``); over TLS, bytes already decrypted are read
    at once. With ``spin_us`` (``load.spin_us``) it polls for at most that many microseconds,
    then sleeps in ``recv`` as a blocking client does. A hang-up or an error makes the socket
    readable: ``recv`` then reports it as it would. ``polls[0]`` counts the polls."""
    poller = select.poll()
    poller.register(sock, select.POLLIN)
    ready = poller.poll
    recv = sock.recv
    clock = time.perf_counter_ns
    budget_ns = UNBOUNDED_NS if spin_us is None else round(spin_us * 1000)
    tally = polls if polls is not None else [0]
    decrypted: Callable[[], int] | None = getattr(sock, "pending", None)  # an SSLSocket's

    def spin_recv(n: int) -> bytes:
        if decrypted is None or not decrypted():
            count = 1
            if not ready(0):
                until = clock() + budget_ns
                count = 2
                while not ready(0) and clock() < until:
                    count += 1
            tally[0] += count
        return recv(n)

    return spin_recv


class RawDriver(StreamDriver):
    name: ClassVar[str] = "raw"
    builtin_server: ClassVar[str | None] = "rpcmeter.servers.raw_server"
    packages: ClassVar[tuple[str, ...]] = ("uvloop",)
    option_keys: ClassVar[frozenset[str] | None] = frozenset(
        {"io", "event_loop", "corrupt_every", "queue_time"}
    )
    tls: ClassVar[bool] = True
    connection_per_request: ClassVar[bool] = True

    def new_connection(self) -> StreamConnection:
        return RawConnection()

    def encode(self, body: bytes) -> bytes:
        return request_frame(CODES[self.ctx.workload.kind], body)

    # the blocking path (io = "blocking") ------------------------------------------------------
    def uses_event_loop(self) -> bool:
        io = self.ctx.options.get("io", "auto")
        if not self.ctx.reuse:  # a connection per request: the event loop's path
            return True
        if io == "auto":  # measured: blocking is faster for one loop, the event loop for more
            return self.ctx.threads > 1
        return bool(io != "blocking")

    def connect(self) -> None:
        if self.uses_event_loop():
            return
        tls = self.ctx.tls
        self.context = client_context(tls) if tls is not None else None
        self.costs = ConnectionCosts()
        self.socks: list[socket.socket] = [self.open_socket() for _ in range(self.ctx.connections)]
        self.locks = [threading.Lock() for _ in self.socks]
        self.traffic: list[list[int]] = []  # per loop: bytes out, bytes in
        self.polls: list[list[int]] = []  # per loop: its polls (load.wait = "spin")

    def open_socket(self) -> socket.socket:
        """A new connection: the connect, then with TLS the handshake, each timed."""
        ep = self.ctx.endpoint
        tls = self.ctx.tls
        t0 = time.perf_counter_ns()
        if ep.path is not None:
            sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            sock.connect(ep.path)
        else:
            sock = socket.create_connection((ep.host, ep.port))
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.costs.record("connect", time.perf_counter_ns() - t0)
        if self.context is None or tls is None:
            return sock
        wrapped = self.context.wrap_socket(
            sock, server_hostname=server_name(tls, ep.host), do_handshake_on_connect=False
        )
        ns = timed_handshake(wrapped, tls.handshake_timeout_s)
        self.costs.record("handshake_resumed" if wrapped.session_reused else "handshake", ns)
        return wrapped

    def replace_socket(self, index: int, old: socket.socket) -> socket.socket:
        """Connection ``index`` after ``old`` was lost: a new one, once (loops sharing it hold
        its lock while they call this, and find the new one already there)."""
        if self.socks[index] is old:
            with contextlib.suppress(OSError):
                old.close()
            self.socks[index] = self.open_socket()
        return self.socks[index]

    def caller(self, thread_index: int) -> Caller:
        """Loop ``thread_index``'s blocking exchange. A server that closes (or resets) a
        connection which answered before loses the request in flight (``RequestLost``, counted
        as ``connection_closed``); the loop goes on over a new connection, as the event path's
        do (:mod:`rpcmeter.drivers.stream`). On a connection that never answered, the loss ends
        the loop."""
        index = thread_index % len(self.socks)
        lock = self.locks[index]
        shared = self.ctx.threads > len(self.socks)
        body = self.request_body(thread_index)
        data = self.encode(body)
        expect = expected_reply(self.ctx.workload, body) if self.ctx.validate else None
        traffic = [0, 0]
        self.traffic.append(traffic)
        polls = [0]
        self.polls.append(polls)
        spinning = self.ctx.wait == "spin"

        def bound(sock: socket.socket) -> tuple[Callable[[bytes], None], Callable[[int], bytes]]:
            """The socket's send and receive, as this loop calls them."""
            return sock.sendall, polling_recv(
                sock, self.ctx.spin_us, polls
            ) if spinning else sock.recv

        sock = self.socks[index]
        send, recv = bound(sock)
        served = False  # whether the connection this loop uses answered it

        def lost(error: BaseException) -> RequestLost:
            nonlocal sock, send, recv, served
            if not served:
                raise error
            sock = self.replace_socket(index, sock)
            send, recv = bound(sock)
            served = False
            return RequestLost(f"a request in flight: {error}")

        def exchange() -> ServerTime:
            nonlocal served
            try:
                send(data)
                frame, status, server_ns = read_reply(recv)
            except ConnectionClosed as e:
                raise lost(e) from None
            except (ConnectionResetError, BrokenPipeError) as e:
                raise lost(ConnectionClosed(f"connection lost: {e}")) from None
            if not served:
                served = True
            traffic[0] += len(data)
            traffic[1] += len(frame)
            times, at = reply_times(frame, 0, server_ns)
            if status:
                raise ReplyError("raw_error", frame[at:].decode("utf-8", "replace"))
            if expect is not None:
                error = mismatch(frame[at:], expect)
                if error is not None:
                    raise error
            return times

        if not shared:
            return exchange

        def exchange_in_turn() -> ServerTime:
            with lock:
                return exchange()

        return exchange_in_turn

    def counters(self) -> dict[str, int]:
        if self.uses_event_loop():
            return super().counters()
        traffic = getattr(self, "traffic", [])
        out = {"bytes_out": sum(t[0] for t in traffic), "bytes_in": sum(t[1] for t in traffic)}
        if self.ctx.wait == "spin":
            out["polls"] = sum(p[0] for p in getattr(self, "polls", []))
        return out

    def close(self) -> None:
        if self.uses_event_loop():
            super().close()
            return
        for sock in getattr(self, "socks", []):
            with contextlib.suppress(OSError):
                sock.close()
