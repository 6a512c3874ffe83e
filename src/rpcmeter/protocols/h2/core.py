"""The core of an HTTP/2 client connection (:class:`H2Core`): its fields, and what it does on
its own. It answers SETTINGS and PING, and obeys WINDOW_UPDATE, RST_STREAM and GOAWAY. It keeps
the flow-control windows both ways. It starts the streams that wait, ends streams, and fails the
connection on a peer's error. :class:`~rpcmeter.protocols.h2.connection.H2Connection` adds the
requests and the per-frame paths of the replies (DATA, HEADERS, CONTINUATION, the replay).
"""

from __future__ import annotations

import struct
from collections import deque
from collections.abc import Callable
from typing import Any, ClassVar, Final

import hpack

from rpcmeter.protocols.h2.errors import H2ConnectionError, H2Unavailable, StreamReset
from rpcmeter.protocols.h2.frames import (
    ACK,
    CONTINUATION,
    DATA,
    DEFAULT_FRAME,
    DEFAULT_WINDOW,
    END_STREAM,
    GOAWAY,
    HEAD,
    HEAD_LEN,
    HEADERS,
    MAX_FRAME_LIMIT,
    MAX_STREAM_ID,
    MAX_WINDOW,
    PING,
    PRIORITY,
    PUSH_PROMISE,
    RST_STREAM,
    SETTINGS,
    WINDOW_UPDATE,
    ErrorCode,
    FrameType,
    SettingCode,
    error_name,
    frame,
)
from rpcmeter.protocols.h2.header_blocks import HeaderBlocks
from rpcmeter.protocols.h2.replay import Replayer
from rpcmeter.protocols.h2.request import Request
from rpcmeter.protocols.h2.state import (
    ACCEPTING,
    CONNECTION_TRANSITIONS,
    ConnectionEvent,
    ConnectionState,
    StreamEvent,
    StreamState,
    advance,
)
from rpcmeter.protocols.h2.stream import Listener, Stream

__all__ = [
    "COMPACT_MAX",
    "INFORMATIONAL",
    "NO_STREAM_LIMIT",
    "SID_BYTES",
    "H2Core",
    "Handler",
    "identity",
]

# (Final, these and the constants below: compiled, a module's constant is then a C static, or
# a literal inlined, not a lookup in the module's dict each time it is read)
OPEN: Final = StreamState.OPEN
CLOSED: Final = StreamState.CLOSED
# Small ints for the per-request paths: CPython compares (and adds) ints below 2**30 ("compact")
# and plain ints quickly, while an IntEnum member or a larger int (the 31-bit stream id limit,
# 2**31 streams) takes the generic, several times slower, route.
DATA_KIND: Final = int(DATA)
HEADERS_KIND: Final = int(HEADERS)
COMPACT_MAX: Final = (1 << 30) - 1
# more streams than can ever be open at once (2**30 client stream ids in all): a peer's larger
# MAX_CONCURRENT_STREAMS, or none, means no limit
NO_STREAM_LIMIT: Final = COMPACT_MAX
# a stream id's 4 bytes (a quarter quicker than ``int.to_bytes(4)``, whose byte order is parsed
# on every call)
SID_BYTES: Final = struct.Struct(">I").pack


class Informational:
    """What a header block of an informational (1xx) response stands for: it is skipped."""


INFORMATIONAL = Informational()


def identity(headers: list[tuple[bytes, bytes]]) -> Any:
    return headers


Handler = Callable[[bytes, int, int, int, int], int]  # (data, pos, end, flags, sid) -> next pos


class H2Core:
    """The fields of one HTTP/2 client connection and its control frames (see the module doc).
    Not used alone: :class:`~rpcmeter.protocols.h2.connection.H2Connection` adds the handlers
    of DATA, HEADERS and CONTINUATION (``_on_data`` ...) that :meth:`__init__` puts in the table
    of handlers."""

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
    # the handlers of the frames of replies: H2Connection's
    def _on_data(self, data: bytes, pos: int, end: int, flags: int, sid: int) -> int:
        raise NotImplementedError

    def _on_headers(self, data: bytes, pos: int, end: int, flags: int, sid: int) -> int:
        raise NotImplementedError

    def _on_headers_replaying(self, data: bytes, pos: int, end: int, flags: int, sid: int) -> int:
        raise NotImplementedError

    def _on_continuation(self, data: bytes, pos: int, end: int, flags: int, sid: int) -> int:
        raise NotImplementedError

    # ---------------------------------------------------------------------------------------
    # starting streams, and sending their bodies as the windows allow
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

    # ---------------------------------------------------------------------------------------
    # header blocks' views
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

    # ---------------------------------------------------------------------------------------
    # control frames
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
