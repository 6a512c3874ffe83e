"""A sans-I/O HTTP/2 client connection (RFC 9113): fed bytes, it reports stream events and
queues the bytes to send. No sockets, no event loop, no clock.

Use::

    conn = H2Connection()
    write(conn.initiate())                      # preface, SETTINGS, connection WINDOW_UPDATE
    req = conn.prepare([(b":method", b"POST"), ...], body)   # encoded once
    stream = conn.request(req, on_end)          # a stream id is patched into the frames
    write(conn.data_to_send())
    ...
    conn.receive(data)                          # calls on_end(stream) for each finished stream
    write(conn.data_to_send())                  # ACKs, PING replies, WINDOW_UPDATEs, requests

Events are delivered by calling back, not by returning lists, so a finished stream costs no
event object: ``stream.on_end(stream)`` when the stream ended (``stream.error`` is None, or the
:class:`StreamReset` / :class:`H2ConnectionError` that ended it); ``stream.on_data`` and
``stream.on_headers``, when set, see each DATA payload and header block as it arrives (streaming
calls) instead of the stream buffering them. ``listener`` callbacks report connection events:
``on_goaway`` and ``on_closed``.

What the connection does on its own:

- SETTINGS both ways (the peer's are acknowledged and obeyed: ``MAX_CONCURRENT_STREAMS`` queues
  streams beyond it until one ends; ``INITIAL_WINDOW_SIZE`` adjusts every stream's send window;
  ``MAX_FRAME_SIZE`` splits DATA and header blocks), PING answered, PUSH_PROMISE refused
  (push is disabled in our SETTINGS).
- Flow control both ways: request bodies larger than the connection's or the stream's window are
  sent as far as the windows allow and resumed on WINDOW_UPDATE; received DATA is consumed at
  once (handed to the stream), and WINDOW_UPDATEs are sent when half a window was consumed.
- GOAWAY: no new stream starts (:attr:`H2Connection.accepting` turns False; the owner replaces
  the connection: :class:`rpcmeter.protocols.h2.transport.Session`). After a graceful one (``NO_ERROR``,
  the server having processed streams here), the streams above its last stream id, which the
  server never processed (RFC 9113, 6.8), go back to waiting, for the owner to
  :meth:`~H2Connection.take_waiting` to the new connection: only a stream that received nothing
  and sent nothing but its request is moved; the others, and every stream above the last id of
  a GOAWAY with an error, fail with ``unavailable``. Stream ids advance by 2 and, when they run
  out, ``accepting`` turns False too.
- Header blocks are decoded by the ``hpack`` library. A block byte-identical to an earlier one is
  not decoded again when decoding it cannot change the dynamic table: the cache holds only blocks
  whose decoding left the table as it was, and is emptied whenever a block changed the table (a
  block that refers to dynamic entries decodes the same only while the table is the same).
  ``view`` maps each decoded block (a list of ``(name, value)`` byte pairs) to what the owner
  keeps, once per distinct block.
- Requests are encoded once (:meth:`prepare`): every header as a literal that neither side's
  dynamic table stores (static-table entries as indexes), so the block means the same in any
  state of the peer's table and can be replayed; each request costs one ``join`` of the prepared
  frames around its stream id.
- Errors of the peer (malformed frames, bad HPACK, an oversized header block, floods of frames
  that need a reply) end the connection with a GOAWAY and an :class:`H2ConnectionError` whose
  ``reason`` is a short word (``protocol_error``, ``frame_size_error``, ``header_too_large``,
  ``settings_flood``, ``http1_reply``, ...).
"""

from __future__ import annotations

import struct
from collections import deque
from collections.abc import Callable, Iterable, Sequence
from typing import Any, Protocol

import hpack

PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
HEAD = struct.Struct(">HBBBL")  # length (24 bits: 16 + 8), type, flags, stream id
HEAD_LEN = 9

DATA, HEADERS, PRIORITY, RST_STREAM, SETTINGS, PUSH_PROMISE, PING, GOAWAY = range(8)
WINDOW_UPDATE, CONTINUATION = 8, 9
END_STREAM = ACK = 0x1
END_HEADERS, PADDED, PRIORITY_FLAG = 0x4, 0x8, 0x20

# SETTINGS identifiers
HEADER_TABLE_SIZE, ENABLE_PUSH, MAX_CONCURRENT_STREAMS = 1, 2, 3
INITIAL_WINDOW_SIZE, MAX_FRAME_SIZE, MAX_HEADER_LIST_SIZE = 4, 5, 6

ERROR_CODES = (
    "NO_ERROR",
    "PROTOCOL_ERROR",
    "INTERNAL_ERROR",
    "FLOW_CONTROL_ERROR",
    "SETTINGS_TIMEOUT",
    "STREAM_CLOSED",
    "FRAME_SIZE_ERROR",
    "REFUSED_STREAM",
    "CANCEL",
    "COMPRESSION_ERROR",
    "CONNECT_ERROR",
    "ENHANCE_YOUR_CALM",
    "INADEQUATE_SECURITY",
    "HTTP_1_1_REQUIRED",
)
PROTOCOL_ERROR, INTERNAL_ERROR, FLOW_CONTROL_ERROR = 1, 2, 3
CANCEL = 8
FRAME_SIZE_ERROR, COMPRESSION_ERROR, ENHANCE_YOUR_CALM = 6, 9, 11

MAX_WINDOW = (1 << 31) - 1
MAX_STREAM_ID = (1 << 31) - 1
DEFAULT_WINDOW = 65_535
DEFAULT_FRAME = 16_384
MAX_FRAME_LIMIT = (1 << 24) - 1
RECORD_EVERY = 64  # streams ended between tries to record a reply
REPLAY_MISSES = 64  # replies unlike the recorded one before it is dropped


def error_name(code: int) -> str:
    """The RFC name of an HTTP/2 error code (``0x1`` -> ``PROTOCOL_ERROR``)."""
    return ERROR_CODES[code] if 0 <= code < len(ERROR_CODES) else f"0x{code:x}"


def frame(kind: int, flags: int, stream_id: int, payload: bytes = b"") -> bytes:
    """One whole frame."""
    n = len(payload)
    return HEAD.pack(n >> 8, n & 0xFF, kind, flags, stream_id) + payload


class H2Error(ConnectionError):
    """Base of this module's errors (a ``ConnectionError``: the request did not complete)."""


class H2ConnectionError(H2Error):
    """The connection failed; ``reason`` is a short word (``protocol_error``, ``unavailable``...),
    also the ``kind`` its requests' errors are counted under."""

    def __init__(self, reason: str, message: str, code: int = PROTOCOL_ERROR) -> None:
        super().__init__(f"{reason}: {message}")
        self.reason = reason
        self.kind = reason
        self.code = code


class H2Unavailable(H2ConnectionError):
    """The stream was not processed: above a GOAWAY's last stream id, or never started on a
    connection that closed."""

    def __init__(self, message: str) -> None:
        super().__init__("unavailable", message, 0)


class StreamReset(H2Error):
    """The peer reset the stream (RST_STREAM); ``code`` is the HTTP/2 error code."""

    def __init__(self, code: int) -> None:
        super().__init__(f"stream reset: {error_name(code)}")
        self.code = code
        self.kind = f"rst_stream:{error_name(code)}"


class Listener(Protocol):
    def on_goaway(self, last_stream_id: int, code: int, debug: bytes) -> None: ...

    def on_closed(self, error: BaseException) -> None: ...


class Stream:
    """One request/response exchange. ``headers`` and ``trailers`` hold ``view(block)`` of the
    first and the last header block (None until they arrive); ``chunks`` the DATA payloads
    (unless ``on_data`` takes them; a list once one arrived, a replayed reply's shared tuple); ``received`` counts DATA payload bytes. ``user`` is the
    owner's; ``replay`` the recorded reply its reply was, if any (see ``H2Connection._record``).
    Made by :func:`new_stream`. (No ``__init__`` and no ``__slots__``: making a stream costs no
    Python call, the fields read on every reply are stored on the instance, where reading them is
    quick, and the others stay class defaults until set.)"""

    id = 0
    user: Any = None
    headers: Any = None
    trailers: Any = None
    received = 0
    error: BaseException | None = None
    on_data: Callable[[Stream, bytes], object] | None = None
    on_headers: Callable[[Stream, Any], object] | None = None
    unsent: bytes | None = None  # request body waiting for flow-control window
    local_closed = True  # we sent END_STREAM
    send_window = 0  # kept while we may still send DATA
    consumed = 0  # DATA bytes received since our last WINDOW_UPDATE for the stream
    replay: Replay | None = None  # the recorded reply this stream's reply was (see _record)
    request: Request | None = None  # what it sent, while it may be sent again (see _goaway)
    chunks: Sequence[bytes] = ()
    on_end: Callable[[Stream], object]

    def body(self) -> bytes:
        """Every DATA payload received, joined."""
        return b"".join(self.chunks)


def new_stream(on_end: Callable[[Stream], object], user: Any = None) -> Stream:
    """A stream that calls ``on_end(stream)`` when it ends."""
    stream = Stream()
    stream.on_end = on_end
    stream.user = user
    stream.headers = stream.on_data = stream.on_headers = None
    return stream


class Request:
    """A request encoded once (:meth:`H2Connection.prepare`): its header block, its body, and its
    frames as parts joined around the stream id (rebuilt when the peer's frame size changes)."""

    __slots__ = ("block", "body", "end_stream", "frame_size", "head_parts", "parts", "size")

    def __init__(self, block: bytes, body: bytes | None, end_stream: bool = True) -> None:
        self.block = block
        self.body = body
        self.size = len(body) if body is not None else 0
        self.end_stream = end_stream  # False: the stream stays open for send_data
        self.frame_size = 0
        self.parts: list[bytes] = []  # HEADERS (+ CONTINUATION) + DATA frames, split at ids
        self.head_parts: list[bytes] = []  # header frames alone

    def build(self, frame_size: int) -> None:
        block, body = self.block, self.body
        end = END_STREAM if body is None and self.end_stream else 0
        pieces = [block[i : i + frame_size] for i in range(0, len(block), frame_size)] or [b""]
        parts: list[bytes] = []
        tail = b""
        for i, piece in enumerate(pieces):
            last = i == len(pieces) - 1
            kind = HEADERS if i == 0 else CONTINUATION
            flags = (end if i == 0 else 0) | (END_HEADERS if last else 0)
            head = HEAD.pack(len(piece) >> 8, len(piece) & 0xFF, kind, flags, 0)[:5]
            parts.append(tail + head)
            tail = piece
        self.head_parts = [*parts, tail]
        if body is not None:
            chunks = [body[i : i + frame_size] for i in range(0, len(body), frame_size)] or [b""]
            for i, chunk in enumerate(chunks):
                flags = END_STREAM if i == len(chunks) - 1 and self.end_stream else 0
                n = len(chunk)
                parts.append(tail + HEAD.pack(n >> 8, n & 0xFF, DATA, flags, 0)[:5])
                tail = chunk
        parts.append(tail)
        self.parts = parts
        self.frame_size = frame_size

    @classmethod
    def framed(cls, block: bytes, body: bytes | None, frame_size: int) -> Request:
        """A request of one HEADERS frame and one DATA frame (none when ``body`` is None),
        built for the peer's ``frame_size`` at a fraction of :meth:`build`'s cost (a request
        made per call: a template filled in); left for :meth:`build` when a part needs more
        frames."""
        n, m = len(block), len(body) if body is not None else 0
        if not (frame_size and n <= frame_size and m <= frame_size):
            return cls(block, body)
        req = cls.__new__(cls)
        req.block, req.body, req.size, req.end_stream = block, body, m, True
        req.frame_size = frame_size
        if body is None:
            head = n.to_bytes(3) + b"\x01\x05"  # HEADERS, END_HEADERS | END_STREAM
            req.head_parts = req.parts = [head, block]
            return req
        head = n.to_bytes(3) + b"\x01\x04"  # HEADERS, END_HEADERS
        req.head_parts = [head, block]
        req.parts = [head, block + m.to_bytes(3) + b"\x00\x01", body]  # DATA, END_STREAM
        return req


class Replay:
    """A recorded reply (:meth:`H2Connection._record`)."""

    __slots__ = (
        "chunks",
        "first_len",
        "flow",
        "gen",
        "head",
        "misses",
        "parts",
        "received",
        "size",
        "trail",
    )

    def __init__(
        self,
        parts: list[bytes],
        size: int,
        first_len: int,
        head: Any,
        trail: Any,
        chunks: tuple[bytes, ...],
        flow: int,
        gen: int,
    ) -> None:
        self.parts = parts  # its bytes, split around the stream id of each frame
        self.size = size
        self.first_len = first_len  # the length of its first frame (a quick first check)
        self.head = head
        self.trail = trail
        self.chunks = chunks
        self.received = flow
        self.flow = flow  # DATA bytes (no padding): what it takes of the connection window
        self.gen = gen
        self.misses = 0


def never_indexed(headers: Iterable[tuple[bytes, bytes]]) -> list[hpack.HeaderTuple]:
    return [hpack.NeverIndexedHeaderTuple(n, v) for n, v in headers]


class Informational:
    """What a header block of an informational (1xx) response stands for: it is skipped."""


INFORMATIONAL = Informational()


def identity(headers: list[tuple[bytes, bytes]]) -> Any:
    return headers


class H2Connection:
    """The client side of one HTTP/2 connection (see the module doc)."""

    FLOOD_FRAMES = 1000  # SETTINGS/PING needing a reply, with no stream ending meanwhile
    # slots: with more than 30 fields a plain instance keeps them in a dict of its own, where
    # every read on the per-call path is a slower lookup
    __slots__ = (
        "accepting",
        "blocked",
        "buf",
        "cache",
        "cache_blocks",
        "cache_gen",
        "closed",
        "continuing",
        "decoder",
        "encoder",
        "first_id",
        "goaway_id",
        "last_id",
        "listener",
        "local_frame",
        "max_header_block",
        "next_id",
        "out",
        "peer_frame",
        "peer_header_list",
        "peer_max_streams",
        "peer_window",
        "record_wait",
        "recv_window",
        "replay",
        "replies_owed",
        "resets",
        "send_window",
        "settings_acked",
        "settings_unacked",
        "started",
        "streams",
        "view",
        "waiting",
        "window",
    )

    def __init__(
        self,
        *,
        view: Callable[[list[tuple[bytes, bytes]]], Any] = identity,
        listener: Listener | None = None,
        window: int = 1 << 24,
        max_header_block: int = 65_536,
        first_stream_id: int = 1,
        cache_blocks: int = 256,
        replay: bool = True,
    ) -> None:
        self.cache_blocks = cache_blocks  # distinct header blocks remembered (0: none)
        self.view = view
        self.listener = listener
        self.out: list[bytes] = []
        self.buf = b""
        self.started = False  # the peer's first SETTINGS arrived
        self.closed: BaseException | None = None
        self.goaway_id: int | None = None
        self.accepting = True  # new streams may start here
        self.next_id = self.first_id = first_stream_id
        self.last_id = 0
        self.streams: dict[int, Stream] = {}
        self.waiting: deque[tuple[Stream, Request]] = deque()  # over MAX_CONCURRENT_STREAMS
        self.blocked: deque[Stream] = deque()  # bodies waiting for window
        # the peer's settings
        self.peer_max_streams = 1 << 31
        self.peer_window = DEFAULT_WINDOW
        self.peer_frame = DEFAULT_FRAME
        self.peer_header_list: int | None = None
        self.send_window = DEFAULT_WINDOW  # connection-level, towards the peer
        # ours
        self.window = window  # initial stream window and connection window we keep open
        self.recv_window = DEFAULT_WINDOW
        self.max_header_block = max_header_block
        self.local_frame = DEFAULT_FRAME
        self.settings_acked = 0
        self.settings_unacked = 0
        self.replies_owed = 0  # flood guard
        self.resets: dict[str, int] = {}  # RST_STREAM received, by error name
        self.decoder = hpack.Decoder(max_header_list_size=max_header_block)
        self.encoder = hpack.Encoder()
        self.cache: dict[bytes, Any] = {}
        self.cache_gen = 0  # counts the times the cache was emptied
        self.replay: Replay | None = None  # see _record
        self.record_wait = 1 if replay else 1 << 62
        self.continuing: tuple[int, int, list[bytes]] | None = None  # stream id, flags, pieces

    # ---------------------------------------------------------------------------------------
    # sending
    def initiate(self) -> bytes:
        """The client preface with our SETTINGS and the connection window opened."""
        settings = b"".join(
            struct.pack(">HL", k, v)
            for k, v in (
                (ENABLE_PUSH, 0),
                (MAX_CONCURRENT_STREAMS, 0),
                (INITIAL_WINDOW_SIZE, self.window),
                (MAX_HEADER_LIST_SIZE, self.max_header_block),
            )
        )
        self.settings_unacked += 1
        out = PREFACE + frame(SETTINGS, 0, 0, settings)
        if self.window > DEFAULT_WINDOW:
            out += frame(WINDOW_UPDATE, 0, 0, struct.pack(">L", self.window - DEFAULT_WINDOW))
            self.recv_window = self.window
        return out

    def data_to_send(self) -> bytes:
        out = self.out
        if not out:
            return b""
        data = b"".join(out) if len(out) > 1 else out[0]
        out.clear()
        return data

    def prepare(self, headers: Iterable[tuple[bytes, bytes]], body: bytes | None) -> Request:
        """A request encoded once: pseudo-headers first, then the rest; ``body`` None for a
        request without one (END_STREAM on the HEADERS frame)."""
        return Request(self.encoder.encode(never_indexed(headers), huffman=True), body)

    def request(self, req: Request, on_end: Callable[[Stream], object], user: Any = None) -> Stream:
        """Start a stream sending ``req``; ``on_end(stream)`` is called when it ends (never from
        inside this method). Beyond the peer's MAX_CONCURRENT_STREAMS it waits for a stream to
        end. On a connection that is not :attr:`accepting`, the stream waits too (the owner may
        :meth:`take_waiting` it to another connection); on a closed one, the error it closed with
        is raised."""
        stream = Stream()  # new_stream(on_end, user), without the call
        stream.on_end = on_end
        stream.user = user
        stream.headers = stream.on_data = stream.on_headers = None
        n = req.size
        if (
            n <= self.send_window
            and req.frame_size == self.peer_frame
            and self.accepting
            and not self.waiting
            and len(self.streams) < self.peer_max_streams
            and n <= self.peer_window
            and req.end_stream
        ):  # the fast path of _start: the whole request at once
            self.last_id = sid = self.next_id
            self.next_id = sid + 2
            if sid + 2 > MAX_STREAM_ID:
                self.accepting = False
            self.send_window -= n
            stream.id = sid
            stream.request = req
            self.streams[sid] = stream
            self.out.append(sid.to_bytes(4).join(req.parts))
            return stream
        self.submit(stream, req)
        return stream

    def submit(self, stream: Stream, req: Request) -> None:
        """Start ``stream`` (made by the owner, or taken from another connection) with ``req``."""
        if self.closed is not None:
            raise self.closed
        if len(self.streams) >= self.peer_max_streams or not self.accepting or self.waiting:
            self.waiting.append((stream, req))
        else:
            self._start(stream, req)

    def take_waiting(self) -> list[tuple[Stream, Request]]:
        """Streams that never started (for a connection that replaces this one)."""
        waiting = list(self.waiting)
        self.waiting.clear()
        return waiting

    def _start(self, stream: Stream, req: Request) -> None:
        sid = self.next_id
        if sid > MAX_STREAM_ID:
            self.accepting = False
            self.waiting.appendleft((stream, req))
            return
        self.next_id = sid + 2
        if self.next_id > MAX_STREAM_ID:
            self.accepting = False
        self.last_id = sid
        stream.id = sid
        stream.request = req
        self.streams[sid] = stream
        if req.frame_size != self.peer_frame:
            req.build(self.peer_frame)
        body = req.body
        window = self.peer_window
        stream.local_closed = req.end_stream
        if body is None:
            if not req.end_stream:
                stream.send_window = window
            self.out.append(sid.to_bytes(4, "big").join(req.parts))
            return
        n = len(body)
        if n <= self.send_window and n <= window:  # the whole request at once
            self.send_window -= n
            if not req.end_stream:
                stream.send_window = window - n
            self.out.append(sid.to_bytes(4, "big").join(req.parts))
            return
        stream.send_window = window
        self.out.append(sid.to_bytes(4, "big").join(req.head_parts))
        stream.unsent = body
        self._send_body(stream)

    def open_stream(
        self, req: Request, on_end: Callable[[Stream], object], user: Any = None
    ) -> Stream:
        """Start a stream with ``req``'s headers and leave it open for :meth:`send_data`
        (streaming calls): ``req``'s body, if any, is sent without END_STREAM."""
        return self.request(Request(req.block, req.body, end_stream=False), on_end, user)

    def send_data(self, stream: Stream, data: bytes, end_stream: bool) -> None:
        """Send ``data`` on an open stream, as the windows allow (the rest when they open)."""
        if stream.local_closed:
            raise ValueError(f"stream {stream.id} is closed for sending")
        stream.request = None  # it sent more than its request: it cannot be sent again
        stream.unsent = (stream.unsent or b"") + data
        stream.local_closed = end_stream
        if stream.id and stream not in self.blocked:
            self._send_body(stream)

    def _send_body(self, stream: Stream) -> bool:
        """Send as much of ``stream.unsent`` as the windows allow; True when all went out."""
        data = stream.unsent or b""
        sid = stream.id
        pos = 0
        n = len(data)
        while True:
            size = min(n - pos, self.send_window, stream.send_window, self.peer_frame)
            if size <= 0 and pos < n:
                stream.unsent = data[pos:]
                self.blocked.append(stream)
                return False
            last = pos + size >= n
            flags = END_STREAM if last and stream.local_closed else 0
            if size or flags:
                self.out.append(frame(DATA, flags, sid, data[pos : pos + size]))
            self.send_window -= size
            stream.send_window -= size
            pos += size
            if last:
                stream.unsent = None
                return True

    def _resume(self) -> None:
        blocked = self.blocked
        for _ in range(len(blocked)):
            stream = blocked.popleft()
            if stream.id in self.streams and not self._send_body(stream):
                break  # it went back to the end of the queue: no window left

    def ping(self, payload: bytes = b"rpcmeter") -> None:
        self.out.append(frame(PING, 0, 0, payload[:8].ljust(8, b"\0")))

    def reset(self, stream: Stream, code: int = CANCEL) -> None:
        """Cancel a stream (RST_STREAM, CANCEL by default); its ``on_end`` is not called. A
        stream still waiting to start is dropped: it is never sent."""
        if self.streams.get(stream.id) is stream:
            del self.streams[stream.id]
            self.out.append(frame(RST_STREAM, 0, stream.id, struct.pack(">L", code)))
            self._next_waiting()
        else:
            self.forget(stream)

    def forget(self, stream: Stream) -> bool:
        """Drop ``stream`` from the streams waiting to start (True: it was there)."""
        for i, (waiting, _) in enumerate(self.waiting):
            if waiting is stream:
                del self.waiting[i]
                return True
        return False

    def holds(self, stream: Stream) -> bool:
        """Whether ``stream`` is open here or waiting here to start."""
        return self.streams.get(stream.id) is stream or any(s is stream for s, _ in self.waiting)

    def close(self, code: int = 0) -> None:
        """Say GOAWAY (the owner then closes the socket)."""
        if self.closed is None:
            self.out.append(frame(GOAWAY, 0, 0, struct.pack(">LL", 0, code)))
            self.accepting = False

    # ---------------------------------------------------------------------------------------
    # receiving
    def receive(self, data: bytes) -> None:
        """Process bytes from the peer: streams that end call their ``on_end``."""
        if self.closed is not None:
            return
        if self.buf:
            data = self.buf + data
            self.buf = b""
        if not self.started and not self._check_preface(data):
            return
        n = len(data)
        pos = 0
        unpack = HEAD.unpack_from
        streams = self.streams
        cache = self.cache
        half = self.window >> 1
        while n - pos >= HEAD_LEN:
            hi, lo, kind, flags, sid = unpack(data, pos)
            length = hi << 8 | lo
            end = pos + HEAD_LEN + length
            if length > self.local_frame:
                self._fail(
                    "frame_size_error",
                    f"a frame of {length} bytes (limit {self.local_frame})",
                    FRAME_SIZE_ERROR,
                )
                return
            if end > n:
                break
            sid &= MAX_STREAM_ID
            if self.continuing is not None and kind != CONTINUATION:
                self._fail("protocol_error", f"frame type {kind} inside a header block")
                return
            if kind == DATA:
                stream = streams.get(sid)
                if flags & PADDED:
                    payload = self._unpad(data, pos, end)
                    if payload is None:
                        return
                else:
                    payload = data[pos + HEAD_LEN : end]
                self.recv_window -= length
                if self.recv_window < 0:
                    self._fail("flow_control_error", "DATA beyond the connection window", 3)
                    return
                if stream is None:
                    if not self._gone(sid, "DATA"):
                        return
                else:
                    stream.received += len(payload)
                    on_data = stream.on_data
                    if on_data is None:
                        chunks = stream.chunks
                        if isinstance(chunks, list):
                            chunks.append(payload)
                        else:
                            stream.chunks = [payload]
                    else:
                        on_data(stream, payload)
                    if flags & END_STREAM:
                        if self.replay is None:
                            self.record_wait -= 1
                            if self.record_wait <= 0:
                                self._record(data, end, sid)
                        self._end(stream)
                    else:
                        consumed = stream.consumed + length
                        stream.consumed = consumed
                        if consumed > half:
                            self._stream_window(stream)
                if self.recv_window < half:
                    self._window_update()
            elif kind == HEADERS:
                replay = self.replay
                if replay is not None and length == replay.first_len:
                    if replay.gen == self.cache_gen:
                        stop = self._replays(data, pos, replay)
                        if stop != pos:  # replies that are the recorded one: see _record
                            if self.closed is not None:
                                return
                            if self.recv_window < half:
                                self._window_update()
                            pos = stop
                            continue
                    replay.misses += 1
                    if replay.misses > REPLAY_MISSES or replay.gen != self.cache_gen:
                        self.replay = None
                if flags & (PADDED | PRIORITY_FLAG):
                    payload = self._unpad(data, pos, end)
                    if payload is None:
                        return
                    if flags & PRIORITY_FLAG:
                        payload = payload[5:]
                else:
                    payload = data[pos + HEAD_LEN : end]
                if sid == 0:
                    self._fail("protocol_error", "HEADERS on stream 0")
                    return
                if not flags & END_HEADERS:
                    pass
                elif (
                    (view := cache.get(payload)) is not None
                    and (stream := streams.get(sid)) is not None
                    and stream.on_headers is None
                    and (stream.headers is None or flags & END_STREAM)
                    and view is not INFORMATIONAL
                ):  # the fast path of _headers: a block seen before, on an open stream
                    if stream.headers is None:
                        stream.headers = view
                    else:
                        stream.trailers = view
                    if flags & END_STREAM:
                        del streams[sid]
                        self.replies_owed = 0
                        if self.replay is None:
                            self.record_wait -= 1
                            if self.record_wait <= 0:
                                self._record(data, end, sid)
                        stream.on_end(stream)
                        if self.waiting:
                            self._next_waiting()
                else:
                    self._headers(sid, flags, payload)
                if not flags & END_HEADERS:
                    self.continuing = (sid, flags, [payload])
                    if length > self.max_header_block:
                        self._too_large(length)
                        return
            else:
                self._control(kind, flags, sid, data[pos + HEAD_LEN : end])
            pos = end
            if self.closed is not None:
                return
        if pos < n:
            self.buf = data[pos:]

    def _replays(self, data: bytes, pos: int, replay: Replay) -> int:
        """End the streams of the replies from ``pos`` on that are byte for byte ``replay`` but
        for their stream id (on streams open here, awaiting their first header block, buffering
        their DATA); the position after the last one (``pos`` when there is none). The
        recorded header views, payloads and window use stand for what parsing would give (see
        :meth:`_record`; the caller checked that the cache did not change since)."""
        streams = self.streams
        parts, size, flow = replay.parts, replay.size, replay.flow
        head, trail, chunks, received = replay.head, replay.trail, replay.chunks, replay.received
        last = len(data) - size  # where the last whole reply may start
        window = self.recv_window
        start = pos
        while pos <= last:
            ident = data[pos + 5 : pos + 9]
            sid = int.from_bytes(ident)
            stream = streams.get(sid)
            if (
                stream is None
                or stream.headers is not None
                or stream.on_data is not None
                or stream.on_headers is not None
                or data[pos : pos + size] != ident.join(parts)
            ):
                break
            window -= flow
            if window < 0:
                self.recv_window = window
                self._fail("flow_control_error", "DATA beyond the connection window", 3)
                return pos
            stream.headers = head
            stream.trailers = trail
            stream.chunks = chunks
            stream.received = received
            stream.replay = replay
            del streams[sid]
            stream.on_end(stream)
            if self.waiting:
                self._next_waiting()
            pos += size
            if self.closed is not None:
                break
        self.recv_window = window
        if pos != start:
            self.replies_owed = 0
        return pos

    def _window_update(self) -> None:
        self.out.append(
            frame(WINDOW_UPDATE, 0, 0, struct.pack(">L", self.window - self.recv_window))
        )
        self.recv_window = self.window

    def _record(self, data: bytes, end: int, sid: int) -> None:
        """Remember the reply of stream ``sid`` that ends at ``end`` of ``data`` (the bytes of one
        ``receive``, parsed from 0) when it is a contiguous run of its own frames: HEADERS, DATA
        without padding, and HEADERS or the last DATA ending the stream (or one HEADERS:
        trailers-only), its header blocks in the cache. A later reply whose bytes are the same but for the stream id then
        ends its stream in one comparison: the same header blocks mean the same while the cache
        stands (``cache_gen``), and the same DATA frames the same payloads and window use."""
        self.record_wait = RECORD_EVERY  # the next try, if this one fails (or is outgrown)
        frames: list[tuple[int, int, int, int]] = []  # start, length, type, flags
        pos = 0
        while pos < end:
            length = int.from_bytes(data[pos : pos + 3])
            if int.from_bytes(data[pos + 5 : pos + 9]) & MAX_STREAM_ID == sid:
                frames.append((pos, length, data[pos + 3], data[pos + 4]))
            elif frames:
                return  # another stream's frame inside this reply
            pos += HEAD_LEN + length
        if pos != end or not frames:
            return
        cache = self.cache
        first, last = frames[0], frames[-1]
        head = cache.get(data[first[0] + HEAD_LEN : first[0] + HEAD_LEN + first[1]])
        trail = None
        middle = frames[1:]
        if len(frames) > 1 and last[2] == HEADERS:  # trailers end it
            trail = cache.get(data[last[0] + HEAD_LEN : last[0] + HEAD_LEN + last[1]])
            if last[3] != END_HEADERS | END_STREAM or trail is None:
                return
            middle = frames[1:-1]
        elif len(frames) > 1 and last[3] != END_STREAM:  # else DATA ends it
            return
        if first[2] != HEADERS or first[3] & ~(END_HEADERS | END_STREAM) or head is None:
            return
        if not first[3] & END_HEADERS or (first[3] & END_STREAM and len(frames) > 1):
            return
        chunks = []
        for start, length, kind, flags in middle:
            if kind != DATA or flags & ~(END_STREAM if start == last[0] else 0):
                return
            chunks.append(data[start + HEAD_LEN : start + HEAD_LEN + length])
        parts = []
        prev = first[0]
        for start, _, _, _ in frames:
            parts.append(data[prev : start + 5])
            prev = start + HEAD_LEN
        parts.append(data[prev:end])
        flow = sum(len(c) for c in chunks)
        self.replay = Replay(
            parts, end - first[0], first[1], head, trail, tuple(chunks), flow, self.cache_gen
        )

    def _check_preface(self, data: bytes) -> bool:
        """The server's preface is a SETTINGS frame; an HTTP/1.1 reply is named as such."""
        if data[:5] == b"HTTP/"[: len(data)]:
            if len(data) < 5:
                self.buf = data
                return False
            line = data.split(b"\r\n", 1)[0].decode("latin-1", "replace")[:80]
            self._fail("http1_reply", f"the server answered HTTP/1.x ({line!r}), not HTTP/2")
            return False
        if len(data) >= 4 and data[3] != SETTINGS:
            self._fail(
                "protocol_error", f"the server's first frame is type {data[3]}, not SETTINGS"
            )
            return False
        return True

    def _unpad(self, data: bytes, pos: int, end: int) -> bytes | None:
        start = pos + HEAD_LEN
        if start >= end:
            self._fail("protocol_error", "padded frame without a pad length")
            return None
        pad = data[start]
        if pad >= end - start:
            self._fail("protocol_error", "padding longer than the frame")
            return None
        return data[start + 1 : end - pad]

    def _gone(self, sid: int, what: str) -> bool:
        """A frame for a stream not open here: fine for a closed or reset one; a protocol error
        for stream 0, an idle or a server-initiated one. False when the connection failed."""
        if sid == 0 or sid > self.last_id or not sid & 1:
            self._fail("protocol_error", f"{what} on stream {sid}, which is not open")
            return False
        return True

    def _too_large(self, size: int) -> None:
        self._fail(
            "header_too_large",
            f"a header block of more than {self.max_header_block} bytes ({size})",
            ENHANCE_YOUR_CALM,
        )

    def _headers(self, sid: int, flags: int, block: bytes) -> None:
        view = self.cache.get(block)
        if view is None:
            view = self._decode(block)
            if view is None:
                return
        stream = self.streams.get(sid)
        if stream is None:
            self._gone(sid, "HEADERS")
            return
        if view is INFORMATIONAL:
            if flags & END_STREAM or stream.headers is not None:
                self._fail("protocol_error", f"an informational response ending stream {sid}")
            return
        if stream.headers is None:
            stream.headers = view
        elif not flags & END_STREAM:
            self._fail("protocol_error", f"a second header block without END_STREAM on {sid}")
            return
        else:
            stream.trailers = view
        if stream.on_headers is not None:
            stream.on_headers(stream, view)
        if flags & END_STREAM:
            self._end(stream)

    def _decode(self, block: bytes) -> Any:
        """Decode with hpack; cache the view when the dynamic table did not change."""
        table = self.decoder.header_table
        entries = table.dynamic_entries
        first = entries[0] if entries else None
        count, size = len(entries), table.maxsize
        try:
            headers: list[tuple[bytes, bytes]] = list(self.decoder.decode(block, raw=True))
        except hpack.OversizedHeaderListError:
            self._too_large(len(block))
            return None
        except (hpack.HPACKError, IndexError, ValueError) as exc:
            self._fail("compression_error", f"bad header block: {exc}", COMPRESSION_ERROR)
            return None
        status = headers[0] if headers else (b"", b"")
        code = status[1]
        if status[0] == b":status" and len(code) == 3 and code[:1] == b"1" and code != b"101":
            view: Any = INFORMATIONAL
        else:
            view = self.view(headers)
        cache = self.cache
        if (
            len(entries) == count
            and table.maxsize == size
            and ((entries[0] if entries else None) is first)
        ):
            if len(cache) >= self.cache_blocks:
                cache.clear()
                self.cache_gen += 1
            if self.cache_blocks:
                cache[block] = view
        elif cache:
            cache.clear()  # blocks that refer to the dynamic table may now mean something else
            self.cache_gen += 1
        return view

    def _control(self, kind: int, flags: int, sid: int, payload: bytes) -> None:
        n = len(payload)
        if kind == CONTINUATION:
            cont = self.continuing
            if cont is None or cont[0] != sid:
                self._fail("protocol_error", "CONTINUATION outside a header block")
                return
            cont[2].append(payload)
            total = sum(len(p) for p in cont[2])
            if total > self.max_header_block:
                self._too_large(total)
                return
            if flags & END_HEADERS:
                self.continuing = None
                self._headers(sid, cont[1], b"".join(cont[2]))
        elif kind == SETTINGS:
            if sid:
                self._fail("protocol_error", "SETTINGS on a stream")
            elif flags & ACK:
                if n:
                    self._fail("frame_size_error", "SETTINGS ACK with a payload", FRAME_SIZE_ERROR)
                self.settings_acked += 1
            elif n % 6:
                self._fail("frame_size_error", f"SETTINGS of {n} bytes", FRAME_SIZE_ERROR)
            else:
                self._owe_reply("settings_flood")
                self._settings(payload)
                if self.closed is None:
                    self.started = True
                    self.out.append(frame(SETTINGS, ACK, 0))
        elif kind == PING:
            if sid:
                self._fail("protocol_error", "PING on a stream")
            elif n != 8:
                self._fail("frame_size_error", f"PING of {n} bytes", FRAME_SIZE_ERROR)
            elif not flags & ACK:
                self._owe_reply("ping_flood")
                self.out.append(frame(PING, ACK, 0, payload))
        elif kind == WINDOW_UPDATE:
            if n != 4:
                self._fail("frame_size_error", f"WINDOW_UPDATE of {n} bytes", FRAME_SIZE_ERROR)
                return
            inc = int.from_bytes(payload) & MAX_WINDOW
            if sid == 0:
                if inc == 0:
                    self._fail("protocol_error", "WINDOW_UPDATE of 0")
                    return
                self.send_window += inc
                if self.send_window > MAX_WINDOW:
                    self._fail("flow_control_error", "connection window over 2^31-1", 3)
                    return
            else:
                stream = self.streams.get(sid)
                if stream is None:
                    self._gone(sid, "WINDOW_UPDATE")
                    return
                stream.send_window += inc
                if inc == 0 or stream.send_window > MAX_WINDOW:
                    self._reset_stream(stream, PROTOCOL_ERROR if inc == 0 else 3)
                    return
            if self.blocked:
                self._resume()
        elif kind == RST_STREAM:
            if n != 4:
                self._fail("frame_size_error", f"RST_STREAM of {n} bytes", FRAME_SIZE_ERROR)
                return
            code = int.from_bytes(payload)
            stream = self.streams.get(sid)
            if stream is None:
                self._gone(sid, "RST_STREAM")
                return
            name = error_name(code)
            self.resets[name] = self.resets.get(name, 0) + 1
            stream.error = StreamReset(code)
            self._end(stream)
        elif kind == GOAWAY:
            if sid or n < 8:
                self._fail("protocol_error", "malformed GOAWAY")
                return
            last = int.from_bytes(payload[:4]) & MAX_STREAM_ID
            code = int.from_bytes(payload[4:8])
            self._goaway(last, code, payload[8:])
        elif kind == PUSH_PROMISE:
            self._fail("protocol_error", "PUSH_PROMISE although push is disabled")
        elif kind == PRIORITY and n != 5:
            self._fail("frame_size_error", f"PRIORITY of {n} bytes", FRAME_SIZE_ERROR)
        # unknown frame types are ignored (RFC 9113, 4.1)

    def _owe_reply(self, reason: str) -> None:
        self.replies_owed += 1
        if self.replies_owed > self.FLOOD_FRAMES:
            self._fail(
                reason,
                f"more than {self.FLOOD_FRAMES} frames that need a reply while no stream ended",
                ENHANCE_YOUR_CALM,
            )

    def _settings(self, payload: bytes) -> None:
        for i in range(0, len(payload), 6):
            key, value = struct.unpack_from(">HL", payload, i)
            if key == ENABLE_PUSH:
                if value != 0:
                    self._fail("protocol_error", f"a server sent ENABLE_PUSH {value}")
                    return
            elif key == MAX_CONCURRENT_STREAMS:
                self.peer_max_streams = value
            elif key == INITIAL_WINDOW_SIZE:
                if value > MAX_WINDOW:
                    self._fail("flow_control_error", f"INITIAL_WINDOW_SIZE {value}", 3)
                    return
                delta = value - self.peer_window
                self.peer_window = value
                for stream in self.streams.values():
                    stream.send_window += delta
            elif key == MAX_FRAME_SIZE:
                if not DEFAULT_FRAME <= value <= MAX_FRAME_LIMIT:
                    self._fail("protocol_error", f"MAX_FRAME_SIZE {value}")
                    return
                self.peer_frame = value
            elif key == MAX_HEADER_LIST_SIZE:
                self.peer_header_list = value
        if self.blocked:
            self._resume()
        self._next_waiting()

    def _goaway(self, last: int, code: int, debug: bytes) -> None:
        """The server processes no stream above ``last``: a graceful GOAWAY (``NO_ERROR``, after
        streams were processed here) moves them back to waiting, to be sent again; any other
        fails them."""
        self.accepting = False
        self.goaway_id = last if self.goaway_id is None else min(last, self.goaway_id)
        text = debug.decode("utf-8", "replace")[:100]
        why = f"GOAWAY ({error_name(code)}{': ' + text if text else ''})"
        graceful = code == 0 and last >= self.first_id
        again: list[tuple[Stream, Request]] = []
        for sid in sorted(s for s in self.streams if s > last):
            stream = self.streams[sid]
            req = stream.request
            if graceful and req is not None and stream.headers is None and not stream.received:
                del self.streams[sid]
                if stream in self.blocked:
                    self.blocked.remove(stream)
                stream.unsent = None
                again.append((stream, req))
                continue
            stream.error = H2Unavailable(f"stream {sid} above the last stream id {last} of {why}")
            self._end(stream)
        self.waiting.extendleft(reversed(again))
        if self.listener is not None:
            self.listener.on_goaway(last, code, debug)

    def _stream_window(self, stream: Stream) -> None:
        inc = stream.consumed
        stream.consumed = 0
        self.out.append(frame(WINDOW_UPDATE, 0, stream.id, struct.pack(">L", inc)))

    def _reset_stream(self, stream: Stream, code: int) -> None:
        self.out.append(frame(RST_STREAM, 0, stream.id, struct.pack(">L", code)))
        stream.error = H2ConnectionError(error_name(code).lower(), f"stream {stream.id}", code)
        self._end(stream)

    def _end(self, stream: Stream) -> None:
        del self.streams[stream.id]
        self.replies_owed = 0
        stream.on_end(stream)
        if self.waiting:
            self._next_waiting()

    def _next_waiting(self) -> None:
        waiting = self.waiting
        while waiting and self.accepting and len(self.streams) < self.peer_max_streams:
            stream, req = waiting.popleft()
            self._start(stream, req)

    # ---------------------------------------------------------------------------------------
    # failure
    def _fail(self, reason: str, message: str, code: int = PROTOCOL_ERROR) -> None:
        if self.closed is not None:
            return
        self.out.append(frame(GOAWAY, 0, 0, struct.pack(">LL", 0, code)))
        self.connection_lost(H2ConnectionError(reason, message, code))

    def connection_lost(self, error: BaseException) -> None:
        """The connection is gone: every stream started ends with ``error``; then the listener
        hears of it (``on_closed``: an owner may :meth:`take_waiting` the streams that never
        started, to send them elsewhere), and those it left end with ``error`` too."""
        if self.closed is not None:
            return
        self.closed = error
        self.accepting = False
        streams = list(self.streams.values())
        self.streams.clear()
        for stream in streams:
            stream.error = error
            stream.on_end(stream)
        if self.listener is not None:
            self.listener.on_closed(error)
        waiting = [s for s, _ in self.waiting]
        self.waiting.clear()
        for stream in waiting:
            stream.error = error
            stream.on_end(stream)

    def served(self) -> bool:
        """Whether a stream ended here (more streams started than are open)."""
        started = (self.last_id - self.first_id) // 2 + 1 if self.last_id else 0
        return started > len(self.streams)
