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
- Header blocks are decoded by :mod:`rpcmeter.protocols.h2.header_blocks` (the ``hpack``
  library's results, dynamic table and errors, at a fraction of its cost). A block
  byte-identical to an earlier one is not decoded again: ``cache`` holds the views of blocks
  whose decoding leaves the dynamic table as it is, and is emptied whenever a block changed the
  table (a block that refers to dynamic entries decodes the same only while the table is the
  same); blocks that add to the table without referring to it (nginx's) have their insertions
  applied without decoding, and join ``cache`` once the table holds nothing but their own
  entries (adding them again changes nothing). ``view`` maps each decoded block (a list of
  ``(name, value)`` byte pairs) to what the owner keeps, once per distinct block.
- Requests are encoded once (:meth:`prepare`): every header as a literal that neither side's
  dynamic table stores (static-table entries as indexes), so the block means the same in any
  state of the peer's table and can be replayed; each request costs one ``join`` of the prepared
  frames around its stream id.
- Errors of the peer (malformed frames, bad HPACK, an oversized header block, floods of frames
  that need a reply) end the connection with a GOAWAY and an :class:`H2ConnectionError` whose
  ``reason`` is a short word (``protocol_error``, ``frame_size_error``, ``header_too_large``,
  ``settings_flood``, ``http1_reply``, ...).

How it is built: the wire vocabulary (frame types, flags, :class:`~.frames.ErrorCode`) is in
:mod:`~rpcmeter.protocols.h2.frames`; the connection's and each stream's state
(:class:`~.state.ConnectionState`, :class:`~.state.StreamState`) move by the transition tables of
:mod:`~rpcmeter.protocols.h2.state`; :meth:`H2Connection.receive` splits the bytes into frames and
hands each to the handler of its type (``_on_data``, ``_on_headers``, ``_on_settings``, ...); a
header block, whole (HEADERS, or HEADERS and CONTINUATIONs), goes to :meth:`H2Connection._header_block`,
and is decoded, when the cache does not know it, by :meth:`H2Connection.decode_block` alone (the one
place HPACK is read). The replay shortcut is a layer of its own
(:mod:`~rpcmeter.protocols.h2.replay`), put over the HEADERS handler when ``replay`` is on.
"""

from __future__ import annotations

import re
import struct
import sys
from collections import deque
from collections.abc import Callable, Iterable, Sequence
from typing import Any, ClassVar, Final, Protocol

import hpack
from mypy_extensions import mypyc_attr

from rpcmeter.protocols.h2.frames import (
    ACK,
    CONTINUATION,
    DATA,
    DEFAULT_FRAME,
    DEFAULT_WINDOW,
    END_HEADERS,
    END_STREAM,
    GOAWAY,
    HEAD,
    HEAD_LEN,
    HEADERS,
    MAX_FRAME_LIMIT,
    MAX_STREAM_ID,
    MAX_WINDOW,
    PADDED,
    PING,
    PREFACE,
    PRIORITY,
    PRIORITY_FLAG,
    PUSH_PROMISE,
    RST_STREAM,
    SETTINGS,
    WINDOW_UPDATE,
    ErrorCode,
    FrameType,
    SettingCode,
    error_name,
    frame,
    stream_id_at,
)
from rpcmeter.protocols.h2.header_blocks import HeaderBlocks
from rpcmeter.protocols.h2.replay import Replay, Replayer
from rpcmeter.protocols.h2.state import (
    ACCEPTING,
    CONNECTION_TRANSITIONS,
    STREAM_TRANSITIONS,
    ConnectionEvent,
    ConnectionState,
    StreamEvent,
    StreamState,
    advance,
)

__all__ = [  # what the drivers, servers and tests take from here (the vocabulary re-exported)
    "ACK",
    "CONTINUATION",
    "DATA",
    "END_HEADERS",
    "END_STREAM",
    "GOAWAY",
    "HEADERS",
    "PADDED",
    "PING",
    "PREFACE",
    "RST_STREAM",
    "SETTINGS",
    "WINDOW_UPDATE",
    "ErrorCode",
    "H2Connection",
    "H2ConnectionError",
    "H2Error",
    "H2Unavailable",
    "Replay",
    "Request",
    "Stream",
    "StreamReset",
    "error_name",
    "frame",
    "new_stream",
]

# (Final, these and the constants below: compiled, a module's constant is then a C static, or
# a literal inlined, not a lookup in the module's dict each time it is read)
OPEN: Final = StreamState.OPEN
HALF_CLOSED_LOCAL: Final = StreamState.HALF_CLOSED_LOCAL
CLOSED: Final = StreamState.CLOSED
# Small ints for the per-request paths: CPython compares (and adds) ints below 2**30 ("compact")
# and plain ints quickly, while an IntEnum member or a larger int (the 31-bit stream id limit,
# 2**31 streams) takes the generic, several times slower, route.
DATA_KIND: Final = int(DATA)
HEADERS_KIND: Final = int(HEADERS)
HEADERS_ENDING: Final = END_HEADERS | END_STREAM
COMPACT_MAX: Final = (1 << 30) - 1
# more streams than can ever be open at once (2**30 client stream ids in all): a peer's larger
# MAX_CONCURRENT_STREAMS, or none, means no limit
NO_STREAM_LIMIT: Final = COMPACT_MAX
# whether this module runs compiled by mypyc (``RPCMETER_COMPILE=1``, setup.py), not as Python
COMPILED: Final = not __file__.endswith(".py")
MEMORY_REPR = re.compile(r"\s*(?:from\s*)?<memory at 0x[0-9a-fA-F]+>:?")


def bad_block(block: bytes, exc: BaseException) -> str:
    """Why a header block could not be decoded, its first bytes shown (hpack's messages name
    the buffer as ``<memory at 0x...>``: left out)."""
    why = MEMORY_REPR.sub("", str(exc)).strip() or type(exc).__name__
    head = block[:16].hex(" ") + (" ..." if len(block) > 16 else "")
    return f"bad header block of {len(block)} bytes ({head}): {why}"


@mypyc_attr(native_class=False)
class H2Error(ConnectionError):
    """Base of this module's errors (a ``ConnectionError``: the request did not complete)."""


@mypyc_attr(native_class=False)
class H2ConnectionError(H2Error):
    """The connection failed; ``reason`` is a short word (``protocol_error``, ``unavailable``...),
    also the ``kind`` its requests' errors are counted under; ``detail`` the message after it."""

    def __init__(
        self, reason: str, message: str, code: ErrorCode = ErrorCode.PROTOCOL_ERROR
    ) -> None:
        super().__init__(f"{reason}: {message}")
        self.detail = message
        self.reason = reason
        self.kind = reason
        self.code = code


@mypyc_attr(native_class=False)
class H2Unavailable(H2ConnectionError):
    """The stream was not processed: above a GOAWAY's last stream id, or never started on a
    connection that closed."""

    def __init__(self, message: str) -> None:
        super().__init__("unavailable", message, ErrorCode.NO_ERROR)


@mypyc_attr(native_class=False)
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
    """One request/response exchange. ``state`` is its :class:`~.state.StreamState`;
    ``headers`` and ``trailers`` hold ``view(block)`` of the first and the last header block
    (None until they arrive); ``chunks`` the DATA payloads (unless ``on_data`` takes them; a
    tuple of one once one arrived, a list once more did, a replayed reply's shared tuple);
    ``received`` counts DATA payload bytes.
    ``user`` is the owner's; ``replay`` the recorded reply its reply was, if any
    (:mod:`~rpcmeter.protocols.h2.replay`). Made by :func:`new_stream`. (No ``__init__`` and no
    ``__slots__``: making a stream costs no Python call, the fields read on every reply are stored
    on the instance, where reading them is quick, and the others stay class defaults until
    set.)"""

    id = 0
    # (no class default: a class attribute that is an enum member keeps CPython from
    # specializing the reads and stores of the attribute, which then cost 5 times as much)
    state: StreamState
    user: Any = None
    headers: Any = None
    trailers: Any = None
    received = 0
    error: BaseException | None = None
    on_data: Callable[[Stream, bytes], object] | None = None
    on_headers: Callable[[Stream, Any], object] | None = None
    unsent: bytes | None = None  # request body waiting for flow-control window
    send_window = 0  # kept while we may still send DATA
    consumed = 0  # DATA bytes received since our last WINDOW_UPDATE for the stream
    replay: Replay | None = None  # the recorded reply this stream's reply was
    request: Request | None = None  # what it sent, while it may be sent again (see _goaway)
    chunks: Sequence[bytes] = ()
    on_end: Callable[[Stream], object]
    ident = b""  # its id as its frames carry it (4 bytes), once it started

    def body(self) -> bytes:
        """Every DATA payload received, joined."""
        return b"".join(self.chunks)

    def advance(self, event: StreamEvent) -> None:
        """Move to the state ``event`` leads to (:data:`~.state.STREAM_TRANSITIONS`)."""
        self.state = advance(STREAM_TRANSITIONS, self.state, event)


def new_stream(on_end: Callable[[Stream], object], user: Any = None) -> Stream:
    """A stream that calls ``on_end(stream)`` when it ends."""
    stream = Stream()
    stream.on_end = on_end
    stream.user = user
    stream.headers = stream.trailers = stream.on_data = stream.on_headers = None
    stream.error = stream.replay = None
    stream.received = 0
    stream.chunks = ()
    stream.state = StreamState.IDLE
    return stream


class Request:
    """A request encoded once (:meth:`H2Connection.prepare`): its header block, its body, and its
    frames as parts joined around the stream id (rebuilt when the peer's frame size changes)."""

    __slots__ = (
        "block",
        "body",
        "end_stream",
        "fast_frame",
        "frame_size",
        "head_parts",
        "parts",
        "size",
    )

    def __init__(self, block: bytes, body: bytes | None, end_stream: bool = True) -> None:
        self.block = block
        self.body = body
        self.size = len(body) if body is not None else 0
        self.end_stream = end_stream  # False: the stream stays open for send_data
        self.frame_size = 0
        # the peer's frame size it is built for when it ends its stream (0: none), which
        # H2Connection.request's fast path compares in one test
        self.fast_frame = 0
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
        self.fast_frame = frame_size if self.end_stream else 0

    @classmethod
    def framed(cls, block: bytes, body: bytes | None, frame_size: int) -> Request:
        """A request of one HEADERS frame and one DATA frame (none when ``body`` is None),
        built for the peer's ``frame_size`` at a fraction of :meth:`build`'s cost (a request
        made per call: a template filled in); left for :meth:`build` when a part needs more
        frames."""
        return cls.framer(block, frame_size)(body)

    @classmethod
    def framer(
        cls, block: bytes, frame_size: int, reuse: bool = False
    ) -> Callable[[bytes | None], Request]:
        """``make(body)``: :meth:`framed` requests of one header ``block``, whose HEADERS
        frame is made once here, and the header block with the DATA frame's head once per size
        of body. With ``reuse``, ``make(body)`` (a body, never None) makes the request it made
        before last again, in place, when nothing else holds it any more (the stream that sent
        it ended: a loop's requests one at a time), so that a request made per call costs no
        new object; one still held (in flight, waiting) or built anew by a connection whose
        peer changed its frame size is left alone and a new one made."""
        n = len(block)
        if not (frame_size and n <= frame_size):
            return lambda body: cls(block, body)
        head = _HEAD5(n << 8 | int(HEADERS), END_HEADERS)
        head_alone = _HEAD5(n << 8 | int(HEADERS), END_HEADERS | END_STREAM)
        data = int(DATA)
        head_parts = [head, block]
        # a request without __init__'s work; a class compiled by mypyc runs its __init__ on
        # any new object, so there it is made with placeholders, then filled in as here
        new: Callable[[type[Request]], Request] = (
            (lambda c: c(b"", None)) if COMPILED else cls.__new__
        )
        mids: dict[int, bytes] = {}  # by the body's size: the block and the DATA frame's head

        def mid_of(m: int) -> bytes:
            """The block and the DATA frame's head for a body of ``m`` bytes (not kept yet)."""
            mid = block + _HEAD5(m << 8 | data, END_STREAM)
            if len(mids) < MIDS_KEPT:
                mids[m] = mid
            return mid

        def make(body: bytes | None) -> Request:
            if body is None:
                req = cls(block, None)
                req.head_parts = req.parts = [head_alone, block]
                req.frame_size = req.fast_frame = frame_size
                return req
            m = len(body)
            if m > frame_size:
                return cls(block, body)
            req = new(cls)
            req.block, req.body, req.size, req.end_stream = block, body, m, True
            req.frame_size, req.fast_frame, req.head_parts = frame_size, frame_size, head_parts
            req.parts = [head, mids.get(m) or mid_of(m), body]
            return req

        if not reuse or sys.version_info >= (3, 14) or COMPILED:
            # 3.14 counts references it borrows on the stack no more, and compiled code keeps
            # its own, so getrefcount below could call a request free that something still
            # holds: make a new one each call there
            return make
        # the last two made: the older is free once its stream ended, the newer's stream
        # may still be ending (its on_end is what calls for the next request)
        made = [make(b""), make(b"")]
        held = sys.getrefcount

        def remake(body: bytes | None) -> Request:
            req = made[0]
            assert body is not None
            m = len(body)
            # held by ``made``, ``req`` and getrefcount's argument alone: free to make again
            if held(req) > 3 or req.frame_size != frame_size or m > frame_size:
                req = make(body)
            else:
                req.body = body
                req.size = m
                parts = req.parts
                parts[1] = mids.get(m) or mid_of(m)
                parts[2] = body
            made[0] = made[1]
            made[1] = req
            return req

        return remake


# a frame's head up to its stream id: (length << 8 | type, flags)
_HEAD5: Final = struct.Struct(">IB").pack
MIDS_KEPT = 4096  # Request.framer: the sizes of body whose frames' middle part it keeps
# a stream id's 4 bytes (a quarter quicker than ``int.to_bytes(4)``, whose byte order is parsed
# on every call)
SID_BYTES: Final = struct.Struct(">I").pack


def never_indexed(headers: Iterable[tuple[bytes, bytes]]) -> list[hpack.HeaderTuple]:
    return [hpack.NeverIndexedHeaderTuple(n, v) for n, v in headers]


class Informational:
    """What a header block of an informational (1xx) response stands for: it is skipped."""


INFORMATIONAL = Informational()


def identity(headers: list[tuple[bytes, bytes]]) -> Any:
    return headers


Handler = Callable[[bytes, int, int, int, int], int]  # (data, pos, end, flags, sid) -> next pos


class H2Connection:
    """The client side of one HTTP/2 connection (see the module doc)."""

    # SETTINGS/PING needing a reply, with no stream ending meanwhile
    FLOOD_FRAMES: ClassVar[int] = 1000
    # slots: with more than 30 fields a plain instance keeps them in a dict of its own, where
    # every read on the per-call path is a slower lookup
    __slots__ = (
        "accepting",
        "blocked",
        "blocks",
        "buf",
        "cache",
        "cache_blocks",
        "closed",
        "continuing",
        "encoder",
        "first_id",
        "goaway_id",
        "goaway_why",
        "handlers",
        "inline",
        "invariants",
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
        "recv_window",
        "replayer",
        "replies_owed",
        "resets",
        "send_window",
        "settings_acked",
        "settings_unacked",
        "started",
        "state",
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
        inline: bool = True,
    ) -> None:
        self.cache_blocks = cache_blocks  # distinct header blocks remembered (0: none)
        # the frame types whose usual frames receive's loop handles itself (-1: none; every
        # frame goes to the handler of its type, the reference the tests hold the loop to)
        self.inline = (DATA_KIND, HEADERS_KIND) if inline else (-1, -1)
        self.view = view
        self.listener = listener
        self.out: list[bytes] = []
        self.buf = b""
        self.state = ConnectionState.IDLE
        self.accepting = True  # new streams start here: the state is one of ACCEPTING
        self.started = False  # the peer's first SETTINGS arrived
        self.closed: BaseException | None = None  # why, in state CLOSED
        self.goaway_id: int | None = None
        self.goaway_why = ""  # "GOAWAY (CODE: debug text)" once one arrived
        self.next_id = self.first_id = first_stream_id
        self.last_id = 0
        self.streams: dict[int, Stream] = {}
        self.waiting: deque[tuple[Stream, Request]] = deque()  # over MAX_CONCURRENT_STREAMS
        self.blocked: deque[Stream] = deque()  # bodies waiting for window
        # the peer's settings
        self.peer_max_streams = NO_STREAM_LIMIT
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
        self.encoder = hpack.Encoder()
        # header blocks decoded (the hpack library's results and table, faster) and their views
        # remembered: ``cache`` holds those of blocks that change nothing (header_blocks)
        self.blocks = HeaderBlocks(self._view, max_header_block, cache_blocks)
        self.cache: dict[bytes, Any] = self.blocks.views
        self.continuing: tuple[int, int, list[bytes]] | None = None  # stream id, flags, pieces
        # the handler of each frame type (a frame of a type it does not know is ignored)
        handlers: list[Handler] = [self._on_unknown] * 256
        for kind, handler in (
            (DATA, self._on_data),
            (HEADERS, self._on_headers),
            (PRIORITY, self._on_priority),
            (RST_STREAM, self._on_rst_stream),
            (SETTINGS, self._on_settings),
            (PUSH_PROMISE, self._on_push_promise),
            (PING, self._on_ping),
            (GOAWAY, self._on_goaway),
            (WINDOW_UPDATE, self._on_window_update),
            (CONTINUATION, self._on_continuation),
        ):
            handlers[kind] = handler
        self.replayer: Replayer | None = None
        if replay:  # the replay layer over the HEADERS handler
            self.replayer = Replayer()
            handlers[HEADERS] = self._on_headers_replaying
        self.handlers = handlers
        # what receive reads of the connection on every read and never changes: one tuple, one
        # unpacking (not a dozen attribute reads a read)
        self.invariants = (
            HEAD.unpack_from,
            handlers,
            self.streams,
            self.cache,
            self.replayer,
            *self.inline,
            self.local_frame,
        )

    def _move(self, event: ConnectionEvent) -> None:
        """Move the connection's state (:data:`~.state.CONNECTION_TRANSITIONS`)."""
        self.state = advance(CONNECTION_TRANSITIONS, self.state, event)
        self.accepting = self.state in ACCEPTING

    # ---------------------------------------------------------------------------------------
    # sending
    def initiate(self) -> bytes:
        """The client preface with our SETTINGS and the connection window opened."""
        settings = b"".join(
            struct.pack(">HL", k, v)
            for k, v in (
                (SettingCode.ENABLE_PUSH, 0),
                (SettingCode.MAX_CONCURRENT_STREAMS, 0),
                (SettingCode.INITIAL_WINDOW_SIZE, self.window),
                (SettingCode.MAX_HEADER_LIST_SIZE, self.max_header_block),
            )
        )
        self.settings_unacked += 1
        if self.state is ConnectionState.IDLE:
            self._move(ConnectionEvent.SEND_PREFACE)
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
        stream.headers = stream.trailers = stream.on_data = stream.on_headers = None
        stream.error = stream.replay = None
        stream.received = 0
        stream.chunks = ()
        n = req.size
        if (
            req.fast_frame == self.peer_frame  # built for the peer's frames, ending its stream
            and n <= self.send_window
            and self.accepting
            and not self.waiting
            and len(self.streams) < self.peer_max_streams
            and n <= self.peer_window
        ):  # the fast path of _start: the whole request at once
            self.last_id = sid = self.next_id
            self.next_id = sid + 2
            if sid > COMPACT_MAX and sid + 2 > MAX_STREAM_ID:
                self._move(ConnectionEvent.IDS_EXHAUSTED)
            self.send_window -= n
            stream.id = sid
            stream.state = HALF_CLOSED_LOCAL  # START_ENDED
            stream.request = req
            key: Any = sid  # the id made an object once, for the dict and the packing both
            self.streams[key] = stream
            stream.ident = ident = SID_BYTES(key)
            self.out.append(ident.join(req.parts))
            return stream
        stream.state = StreamState.IDLE
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
            self._move(ConnectionEvent.IDS_EXHAUSTED)
            self.waiting.appendleft((stream, req))
            return
        self.next_id = sid + 2
        if self.next_id > MAX_STREAM_ID:
            self._move(ConnectionEvent.IDS_EXHAUSTED)
        self.last_id = sid
        stream.id = sid
        stream.request = req
        key: Any = sid  # the id made an object once, for the dict and the packing both
        self.streams[key] = stream
        stream.ident = ident = SID_BYTES(key)
        if req.frame_size != self.peer_frame:
            req.build(self.peer_frame)
        body = req.body
        window = self.peer_window
        stream.advance(StreamEvent.START_ENDED if req.end_stream else StreamEvent.START)
        if body is None:
            if not req.end_stream:
                stream.send_window = window
            self.out.append(ident.join(req.parts))
            return
        n = len(body)
        if n <= self.send_window and n <= window:  # the whole request at once
            self.send_window -= n
            if not req.end_stream:
                stream.send_window = window - n
            self.out.append(ident.join(req.parts))
            return
        stream.send_window = window
        self.out.append(ident.join(req.head_parts))
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
        if stream.state is not OPEN:
            raise ValueError(f"stream {stream.id} is closed for sending ({stream.state.value})")
        stream.request = None  # it sent more than its request: it cannot be sent again
        stream.unsent = (stream.unsent or b"") + data
        if end_stream:
            stream.advance(StreamEvent.SEND_END)
        if stream not in self.blocked:
            self._send_body(stream)

    def _send_body(self, stream: Stream) -> bool:
        """Send as much of ``stream.unsent`` as the windows allow; True when all went out
        (with END_STREAM once the stream is half closed)."""
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
            flags = END_STREAM if last and stream.state is not OPEN else 0
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

    def reset(self, stream: Stream, code: ErrorCode = ErrorCode.CANCEL) -> None:
        """Cancel a stream (RST_STREAM, CANCEL by default); its ``on_end`` is not called. A
        stream still waiting to start is dropped: it is never sent."""
        if self.streams.get(stream.id) is stream:
            del self.streams[stream.id]
            stream.advance(StreamEvent.RESET)
            self.out.append(frame(RST_STREAM, 0, stream.id, struct.pack(">L", code)))
            self._next_waiting()
        elif self.forget(stream):
            stream.advance(StreamEvent.RESET)

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

    def close(self, code: ErrorCode = ErrorCode.NO_ERROR) -> None:
        """Say GOAWAY (the owner then closes the socket)."""
        if self.closed is None:
            self.out.append(frame(GOAWAY, 0, 0, struct.pack(">LL", 0, code)))
            self._move(ConnectionEvent.SEND_GOAWAY)

    # ---------------------------------------------------------------------------------------
    # receiving: frames, each to the handler of its type
    def receive(self, data: bytes) -> None:
        """Process bytes from the peer: streams that end call their ``on_end``."""
        # read into a local: a handler below may close the connection, and mypyc must not take
        # the checks after each as already known from this one
        closed = self.closed
        if closed is not None:
            return
        if self.buf:
            data = self.buf + data
            self.buf = b""
        if not self.started and not self._check_preface(data):
            return
        n = len(data)
        pos = 0
        unpack, handlers, streams, cache, replayer, data_kind, headers_kind, limit = self.invariants
        continuing = self.continuing  # (read again after every handler: only they set it)
        sid: Any  # (an object: made once, for the streams' dict)
        while n - pos >= HEAD_LEN:
            if COMPILED:
                # the header's fields read from its bytes: native ints, each a read of the
                # buffer (struct's unpack_from is a call, a tuple and objects to unbox, about
                # 800 instructions a frame compiled)
                length = data[pos] << 16 | data[pos + 1] << 8 | data[pos + 2]
                kind = data[pos + 3]
                flags = data[pos + 4]
                sid = stream_id_at(data, pos)
            else:  # interpreted, the one call costs less than the nine reads
                hi, lo, kind, flags, sid = unpack(data, pos)
                length = hi << 8 | lo
            end = pos + HEAD_LEN + length
            if length > limit:
                self._fail(
                    "frame_size_error",
                    f"a frame of {length} bytes (limit {limit})",
                    ErrorCode.FRAME_SIZE_ERROR,
                )
                return
            if end > n:
                break
            if continuing is not None and kind != CONTINUATION:
                self._fail("protocol_error", f"frame type {kind} inside a header block")
                return
            # The frames of every reply, handled here without a call when nothing is unusual
            # (what _on_data and _on_headers + _header_block do for them; anything else, and
            # every error, goes to the handler of its type, which then does it all).
            handler: Handler | None = None
            if kind == data_kind and flags <= END_STREAM:  # no padding
                stream = streams.get(sid)
                if stream is not None and stream.on_data is None and self.recv_window >= length:
                    self.recv_window -= length
                    stream.received += length
                    chunks = stream.chunks
                    if not chunks:  # the first payload: a tuple of one (no list per reply)
                        stream.chunks = (data[pos + HEAD_LEN : end],)
                    elif type(chunks) is list:
                        chunks.append(data[pos + HEAD_LEN : end])
                    else:
                        stream.chunks = [*chunks, data[pos + HEAD_LEN : end]]
                    if not flags:
                        consumed = stream.consumed + length
                        stream.consumed = consumed
                        if consumed > self.window >> 1:
                            self._stream_window(stream)
                        if self.recv_window < self.window >> 1:
                            self._window_update()
                        if self.closed is not None:
                            return
                        pos = end
                        continue
                    # END_STREAM: the stream ends, below
                else:
                    handler = handlers[kind]
            elif kind == headers_kind and flags | END_STREAM == HEADERS_ENDING:
                # (END_HEADERS, END_STREAM or not: no padding, no priority) first what the
                # replay layer's handler does first
                recorded = replayer.recorded if replayer is not None else None
                # (a recorded reply longer than the rest of the read cannot be it: not tried,
                # nor counted as a miss, where a fast server's replies come a read apiece)
                if (
                    recorded is not None
                    and length == recorded.first_len
                    and flags == recorded.first_flags
                    and n - pos >= recorded.size
                ):
                    assert replayer is not None
                    stop = self._replay(replayer, data, pos, recorded)
                    if stop != pos:
                        pos = stop
                        if self.closed is not None:
                            return
                        continue
                view = cache.get(data[pos + HEAD_LEN : end])
                stream = streams.get(sid)
                ends = flags == HEADERS_ENDING
                if (
                    view is not None
                    and stream is not None
                    and stream.on_headers is None
                    and view is not INFORMATIONAL
                    and (stream.headers is None or ends)
                ):
                    if stream.headers is None:
                        stream.headers = view
                    else:
                        stream.trailers = view
                    if not ends:
                        pos = end
                        continue
                    # trailers (or a trailers-only reply): the stream ends, below
                else:
                    handler = self._on_headers  # (the replay was tried)
            else:
                handler = handlers[kind]
            if handler is not None:
                pos = handler(data, pos, end, flags, sid & MAX_STREAM_ID)
                if self.closed is not None:
                    return
                continuing = self.continuing
                continue
            # the frame above ended its stream (_end), and the replay layer hears of it
            assert stream is not None
            del streams[sid]
            stream.state = CLOSED
            self.replies_owed = 0
            stream.on_end(stream)
            if self.waiting:
                self._next_waiting()
            if replayer is not None and replayer.recorded is None:  # Replayer.ended, no call
                replayer.wait -= 1
                if replayer.wait <= 0:
                    replayer.record(self, data, end, stream)
            if kind == data_kind and self.recv_window < self.window >> 1:
                self._window_update()
            if self.closed is not None:
                return
            pos = end
        if pos < n:
            self.buf = data[pos:]

    def _on_data(self, data: bytes, pos: int, end: int, flags: int, sid: int) -> int:
        stream = self.streams.get(sid)
        if flags & PADDED:
            payload = self._unpad(data, pos, end)
            if payload is None:
                return end
        else:
            payload = data[pos + HEAD_LEN : end]
        self.recv_window -= end - pos - HEAD_LEN
        if self.recv_window < 0:
            self._fail(
                "flow_control_error",
                "DATA beyond the connection window",
                ErrorCode.FLOW_CONTROL_ERROR,
            )
            return end
        if stream is None:
            if not self._gone(sid, "DATA"):
                return end
        else:
            stream.received += len(payload)
            on_data = stream.on_data
            if on_data is None:
                chunks = stream.chunks
                if not chunks:
                    stream.chunks = (payload,)
                elif isinstance(chunks, list):
                    chunks.append(payload)
                else:
                    stream.chunks = [*chunks, payload]
            else:
                on_data(stream, payload)
            if flags & END_STREAM:
                if self.replayer is not None:
                    self.replayer.ended(self, data, end, stream)
                self._end(stream)
            else:
                consumed = stream.consumed + end - pos - HEAD_LEN
                stream.consumed = consumed
                if consumed > self.window >> 1:
                    self._stream_window(stream)
        if self.recv_window < self.window >> 1:
            self._window_update()
        return end

    def _on_headers_replaying(self, data: bytes, pos: int, end: int, flags: int, sid: int) -> int:
        """The HEADERS handler under the replay layer: replies that are the recorded one end
        their streams at once (:mod:`~rpcmeter.protocols.h2.replay`); any other is parsed."""
        replayer = self.replayer
        assert replayer is not None
        recorded = replayer.recorded
        if (
            recorded is not None
            and end - pos - HEAD_LEN == recorded.first_len
            and flags == recorded.first_flags
        ):
            stop = self._replay(replayer, data, pos, recorded)
            if stop != pos:
                return stop
        return self._on_headers(data, pos, end, flags, sid)

    def _replay(self, replayer: Replayer, data: bytes, pos: int, recorded: Replay) -> int:
        """At a HEADERS frame at ``pos`` as long as ``recorded``'s first: end the streams of the
        replies from there that are byte for byte ``recorded`` but for their stream id (on
        streams open here, awaiting their first header block, buffering their DATA); the
        position after the last (``pos`` when there is none, and the frame is parsed). The walk
        of :mod:`~rpcmeter.protocols.h2.replay`, here where the streams and the connection are
        this module's own classes (compiled, their fields are read and set as C struct members,
        one call a read)."""
        gen = self.blocks.gen
        if recorded.gen == gen:
            streams = self.streams
            parts, size, flow = recorded.parts, recorded.size, recorded.flow
            head, trail = recorded.head, recorded.trail
            chunks, received = recorded.chunks, recorded.received
            last = len(data) - size  # where the last whole reply may start
            window = self.recv_window
            start = pos
            while pos <= last:
                # the id made an object once, for the dict; the stream's own packed id then
                # stands in the recorded reply's parts
                sid: Any = stream_id_at(data, pos)
                stream = streams.get(sid)
                if (
                    stream is None
                    or stream.headers is not None
                    or stream.on_data is not None
                    or stream.on_headers is not None
                    or data[pos : pos + size] != stream.ident.join(parts)
                ):
                    break
                window -= flow
                if window < 0:
                    self.recv_window = window
                    self._fail(
                        "flow_control_error",
                        "DATA beyond the connection window",
                        ErrorCode.FLOW_CONTROL_ERROR,
                    )
                    return pos
                stream.headers = head
                stream.trailers = trail
                stream.chunks = chunks
                stream.received = received
                stream.replay = recorded
                stream.state = CLOSED  # RECV_END (see rpcmeter.protocols.h2.state)
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
                if self.closed is None and window < self.window >> 1:
                    self._window_update()
                return pos
        replayer.missed(recorded, gen)
        return pos

    def _on_headers(self, data: bytes, pos: int, end: int, flags: int, sid: int) -> int:
        if flags & (PADDED | PRIORITY_FLAG):
            payload = self._unpad(data, pos, end)
            if payload is None:
                return end
            if flags & PRIORITY_FLAG:
                payload = payload[5:]
        else:
            payload = data[pos + HEAD_LEN : end]
        if sid == 0:
            self._fail("protocol_error", "HEADERS on stream 0")
        elif not flags & END_HEADERS:  # CONTINUATIONs follow
            self.continuing = (sid, flags, [payload])
            if len(payload) > self.max_header_block:
                self._too_large(len(payload))
        else:
            ended = self._header_block(sid, flags, payload)
            if ended is not None and self.replayer is not None:
                self.replayer.ended(self, data, end, ended)
        return end

    def _on_continuation(self, data: bytes, pos: int, end: int, flags: int, sid: int) -> int:
        cont = self.continuing
        if cont is None or cont[0] != sid:
            self._fail("protocol_error", "CONTINUATION outside a header block")
            return end
        cont[2].append(data[pos + HEAD_LEN : end])
        total = sum(len(p) for p in cont[2])
        if total > self.max_header_block:
            self._too_large(total)
        elif flags & END_HEADERS:
            self.continuing = None
            self._header_block(sid, cont[1], b"".join(cont[2]))
        return end

    def _header_block(self, sid: int, flags: int, block: bytes) -> Stream | None:
        """A whole header block of stream ``sid`` (``flags`` its HEADERS frame's): the response
        headers, or the trailers that end it. The stream when it ended it, else None."""
        view = self.cache.get(block)
        if view is None:
            view = self.decode_block(block)
            if view is None:
                return None
        stream = self.streams.get(sid)
        if stream is None:
            self._gone(sid, "HEADERS")
            return None
        if view is INFORMATIONAL:
            if flags & END_STREAM or stream.headers is not None:
                self._fail("protocol_error", f"an informational response ending stream {sid}")
            return None
        if stream.headers is None:
            stream.headers = view
        elif not flags & END_STREAM:
            self._fail("protocol_error", f"a second header block without END_STREAM on {sid}")
            return None
        else:
            stream.trailers = view
        if stream.on_headers is not None:
            stream.on_headers(stream, view)
        if flags & END_STREAM:
            self._end(stream)
            return stream
        return None

    def decode_block(self, block: bytes) -> Any:
        """The view of a header block, from :attr:`blocks` (decoded there when it does not know
        the block: the one place HPACK is read); None when the block failed the connection."""
        try:
            return self.blocks.view_of(block)
        except hpack.OversizedHeaderListError:
            self._too_large(len(block))
        except (hpack.HPACKError, IndexError, ValueError) as exc:
            self._fail("compression_error", bad_block(block, exc), ErrorCode.COMPRESSION_ERROR)
        return None

    def _view(self, headers: list[tuple[bytes, bytes]]) -> Any:
        """What ``view`` makes of a decoded block; an informational (1xx) one is skipped."""
        status = headers[0] if headers else (b"", b"")
        code = status[1]
        if status[0] == b":status" and len(code) == 3 and code[:1] == b"1" and code != b"101":
            return INFORMATIONAL
        return self.view(headers)

    @property
    def cache_gen(self) -> int:
        """How many times :attr:`cache` was emptied (a recorded reply's blocks mean what they
        meant while it stands)."""
        return self.blocks.gen

    def _on_settings(self, data: bytes, pos: int, end: int, flags: int, sid: int) -> int:
        n = end - pos - HEAD_LEN
        if sid:
            self._fail("protocol_error", "SETTINGS on a stream")
        elif flags & ACK:
            if n:
                self._fail(
                    "frame_size_error", "SETTINGS ACK with a payload", ErrorCode.FRAME_SIZE_ERROR
                )
            self.settings_acked += 1
        elif n % 6:
            self._fail("frame_size_error", f"SETTINGS of {n} bytes", ErrorCode.FRAME_SIZE_ERROR)
        else:
            self._owe_reply("settings_flood")
            self._settings(data[pos + HEAD_LEN : end])
            if self.closed is None:
                if not self.started:
                    self.started = True
                    self._move(ConnectionEvent.RECV_SETTINGS)
                self.out.append(frame(SETTINGS, ACK, 0))
        return end

    def _on_ping(self, data: bytes, pos: int, end: int, flags: int, sid: int) -> int:
        n = end - pos - HEAD_LEN
        if sid:
            self._fail("protocol_error", "PING on a stream")
        elif n != 8:
            self._fail("frame_size_error", f"PING of {n} bytes", ErrorCode.FRAME_SIZE_ERROR)
        elif not flags & ACK:
            self._owe_reply("ping_flood")
            self.out.append(frame(PING, ACK, 0, data[pos + HEAD_LEN : end]))
        return end

    def _on_window_update(self, data: bytes, pos: int, end: int, flags: int, sid: int) -> int:
        n = end - pos - HEAD_LEN
        if n != 4:
            self._fail(
                "frame_size_error", f"WINDOW_UPDATE of {n} bytes", ErrorCode.FRAME_SIZE_ERROR
            )
            return end
        inc = int.from_bytes(data[pos + HEAD_LEN : end]) & MAX_WINDOW
        if sid == 0:
            if inc == 0:
                self._fail("protocol_error", "WINDOW_UPDATE of 0")
                return end
            self.send_window += inc
            if self.send_window > MAX_WINDOW:
                self._fail(
                    "flow_control_error",
                    "connection window over 2^31-1",
                    ErrorCode.FLOW_CONTROL_ERROR,
                )
                return end
        else:
            stream = self.streams.get(sid)
            if stream is None:
                self._gone(sid, "WINDOW_UPDATE")
                return end
            stream.send_window += inc
            if inc == 0:
                self._reset_stream(stream, ErrorCode.PROTOCOL_ERROR)
                return end
            if stream.send_window > MAX_WINDOW:
                self._reset_stream(stream, ErrorCode.FLOW_CONTROL_ERROR)
                return end
        if self.blocked:
            self._resume()
        return end

    def _on_rst_stream(self, data: bytes, pos: int, end: int, flags: int, sid: int) -> int:
        n = end - pos - HEAD_LEN
        if n != 4:
            self._fail("frame_size_error", f"RST_STREAM of {n} bytes", ErrorCode.FRAME_SIZE_ERROR)
            return end
        code = int.from_bytes(data[pos + HEAD_LEN : end])
        stream = self.streams.get(sid)
        if stream is None:
            self._gone(sid, "RST_STREAM")
            return end
        name = error_name(code)
        self.resets[name] = self.resets.get(name, 0) + 1
        stream.error = StreamReset(code)
        self._end(stream)
        return end

    def _on_goaway(self, data: bytes, pos: int, end: int, flags: int, sid: int) -> int:
        if sid or end - pos - HEAD_LEN < 8:
            self._fail("protocol_error", "malformed GOAWAY")
            return end
        start = pos + HEAD_LEN
        last = int.from_bytes(data[start : start + 4]) & MAX_STREAM_ID
        code = int.from_bytes(data[start + 4 : start + 8])
        self._goaway(last, code, data[start + 8 : end])
        return end

    def _on_push_promise(self, data: bytes, pos: int, end: int, flags: int, sid: int) -> int:
        self._fail("protocol_error", "PUSH_PROMISE although push is disabled")
        return end

    def _on_priority(self, data: bytes, pos: int, end: int, flags: int, sid: int) -> int:
        if end - pos - HEAD_LEN != 5:
            self._fail(
                "frame_size_error",
                f"PRIORITY of {end - pos - HEAD_LEN} bytes",
                ErrorCode.FRAME_SIZE_ERROR,
            )
        return end

    def _on_unknown(self, data: bytes, pos: int, end: int, flags: int, sid: int) -> int:
        return end  # unknown frame types are ignored (RFC 9113, 4.1)

    def _window_update(self) -> None:
        self.out.append(
            frame(WINDOW_UPDATE, 0, 0, struct.pack(">L", self.window - self.recv_window))
        )
        self.recv_window = self.window

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
            kind = data[3]
            name = FrameType(kind).name if kind < len(FrameType) else kind
            self._fail("protocol_error", f"the server's first frame is {name}, not SETTINGS")
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
            ErrorCode.ENHANCE_YOUR_CALM,
        )

    def _owe_reply(self, reason: str) -> None:
        self.replies_owed += 1
        if self.replies_owed > self.FLOOD_FRAMES:
            self._fail(
                reason,
                f"more than {self.FLOOD_FRAMES} frames that need a reply while no stream ended",
                ErrorCode.ENHANCE_YOUR_CALM,
            )

    def _settings(self, payload: bytes) -> None:
        for i in range(0, len(payload), 6):
            key, value = struct.unpack_from(">HL", payload, i)
            if key == SettingCode.ENABLE_PUSH:
                if value != 0:
                    self._fail("protocol_error", f"a server sent ENABLE_PUSH {value}")
                    return
            elif key == SettingCode.MAX_CONCURRENT_STREAMS:
                self.peer_max_streams = min(value, NO_STREAM_LIMIT)
            elif key == SettingCode.INITIAL_WINDOW_SIZE:
                if value > MAX_WINDOW:
                    self._fail(
                        "flow_control_error",
                        f"INITIAL_WINDOW_SIZE {value}",
                        ErrorCode.FLOW_CONTROL_ERROR,
                    )
                    return
                delta = value - self.peer_window
                self.peer_window = value
                for stream in self.streams.values():
                    stream.send_window += delta
            elif key == SettingCode.MAX_FRAME_SIZE:
                if not DEFAULT_FRAME <= value <= MAX_FRAME_LIMIT:
                    self._fail("protocol_error", f"MAX_FRAME_SIZE {value}")
                    return
                self.peer_frame = value
            elif key == SettingCode.MAX_HEADER_LIST_SIZE:
                self.peer_header_list = value
        if self.blocked:
            self._resume()
        self._next_waiting()

    def _goaway(self, last: int, code: int, debug: bytes) -> None:
        """The server processes no stream above ``last``: a graceful GOAWAY (``NO_ERROR``, after
        streams were processed here) moves them back to waiting, to be sent again; any other
        fails them."""
        self._move(ConnectionEvent.RECV_GOAWAY)
        self.goaway_id = last if self.goaway_id is None else min(last, self.goaway_id)
        text = debug.decode("utf-8", "replace")[:100]
        why = self.goaway_why = f"GOAWAY ({error_name(code)}{': ' + text if text else ''})"
        graceful = code == ErrorCode.NO_ERROR and last >= self.first_id
        again: list[tuple[Stream, Request]] = []
        for sid in sorted(s for s in self.streams if s > last):
            stream = self.streams[sid]
            req = stream.request
            if graceful and req is not None and stream.headers is None and not stream.received:
                del self.streams[sid]
                if stream in self.blocked:
                    self.blocked.remove(stream)
                stream.unsent = None
                stream.advance(StreamEvent.UNPROCESSED)
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

    def _reset_stream(self, stream: Stream, code: ErrorCode) -> None:
        self.out.append(frame(RST_STREAM, 0, stream.id, struct.pack(">L", code)))
        stream.error = H2ConnectionError(code.name.lower(), f"stream {stream.id}", code)
        self._end(stream)

    def _end(self, stream: Stream) -> None:
        """``stream`` ended (RECV_END, RESET or LOST: each leads to CLOSED from every state
        that allows it)."""
        del self.streams[stream.id]
        stream.state = CLOSED
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
    def _fail(self, reason: str, message: str, code: ErrorCode = ErrorCode.PROTOCOL_ERROR) -> None:
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
        self._move(ConnectionEvent.LOST)
        streams = list(self.streams.values())
        self.streams.clear()
        for stream in streams:
            stream.error = error
            stream.advance(StreamEvent.LOST)
            stream.on_end(stream)
        if self.listener is not None:
            self.listener.on_closed(error)
        waiting = [s for s, _ in self.waiting]
        self.waiting.clear()
        for stream in waiting:
            stream.error = error
            stream.advance(StreamEvent.LOST)
            stream.on_end(stream)

    def served(self) -> bool:
        """Whether a stream ended here (more streams started than are open)."""
        started = (self.last_id - self.first_id) // 2 + 1 if self.last_id else 0
        return started > len(self.streams)
