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

Events are callbacks, not returned lists. ``stream.on_end(stream)`` runs when a stream ends.
``stream.error`` is then None, or the :class:`StreamReset` or :class:`H2ConnectionError` that
ended it. A ``listener`` hears of GOAWAY and of the connection's end.

This module holds the requests and the per-frame paths of replies. The connection's fields and
control frames are in :mod:`~rpcmeter.protocols.h2.core`; requests in
:mod:`~rpcmeter.protocols.h2.request`; streams in :mod:`~rpcmeter.protocols.h2.stream`; errors
in :mod:`~rpcmeter.protocols.h2.errors`. How it all works: ``docs/protocols/h2-connection.md``.
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Iterable
from typing import Any, Final

import hpack

from rpcmeter.protocols.h2.core import COMPACT_MAX, INFORMATIONAL, SID_BYTES, H2Core, Handler
from rpcmeter.protocols.h2.errors import (
    H2ConnectionError,
    H2Error,
    H2Unavailable,
    StreamReset,
    bad_block,
)
from rpcmeter.protocols.h2.frames import (
    ACK,
    CONTINUATION,
    DATA,
    DEFAULT_WINDOW,
    END_HEADERS,
    END_STREAM,
    GOAWAY,
    HEAD_LEN,
    HEADERS,
    MAX_STREAM_ID,
    PADDED,
    PING,
    PREFACE,
    PRIORITY_FLAG,
    RST_STREAM,
    SETTINGS,
    WINDOW_UPDATE,
    ErrorCode,
    SettingCode,
    error_name,
    frame,
    stream_id_at,
)
from rpcmeter.protocols.h2.replay import Replay, Replayer
from rpcmeter.protocols.h2.request import Request, never_indexed
from rpcmeter.protocols.h2.state import (
    ConnectionEvent,
    ConnectionState,
    StreamEvent,
    StreamState,
)
from rpcmeter.protocols.h2.stream import Stream, new_stream

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
HEADERS_ENDING: Final = END_HEADERS | END_STREAM
# whether this module runs compiled by mypyc (``RPCMETER_COMPILE=1``, setup.py), not as Python
COMPILED: Final = not __file__.endswith(".py")


class H2Connection(H2Core):
    """The client side of one HTTP/2 connection (see the module doc): its requests, and the
    per-frame paths of their replies (the rest is :class:`~.core.H2Core`'s)."""

    __slots__ = ()

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
