"""The replay shortcut: an optional layer over the connection's frame parser
(:class:`~rpcmeter.protocols.h2.connection.H2Connection` with ``replay=True``, the default).

A server answering the same call sends the same reply bytes but for the stream id. Now and then
(every :data:`RECORD_EVERY` streams ended while nothing is recorded) the layer records a reply
that ended its stream (:meth:`Replayer.record`): a contiguous run of its own frames (HEADERS,
DATA without padding, and HEADERS or the last DATA ending the stream, or one HEADERS:
trailers-only), its header blocks in the connection's block cache. At each HEADERS frame of the
recorded first frame's length and flags (in the connection's read loop: where the rest of the
read can hold the recorded reply), the connection's ``_replay`` compares the bytes from there with
the recording around each stream id; each reply that is the same ends its stream in that one
comparison, with the recorded header views, payloads and window use (the same header blocks mean
the same while the cache stands, ``blocks.gen``, and the same DATA frames the same payloads). A
recording that misses :data:`REPLAY_MISSES` times, or outlives the cache, is dropped.

Without the layer every frame is parsed; ``tests/h2/test_connection.py`` checks, with
hypothesis, that both end every stream the same way and use the window the same.
"""

from __future__ import annotations

from typing import Any, Protocol

from rpcmeter.protocols.h2.frames import (
    DATA,
    END_HEADERS,
    END_STREAM,
    HEAD_LEN,
    HEADERS,
    MAX_STREAM_ID,
)

RECORD_EVERY = 64  # streams ended between tries to record a reply
REPLAY_MISSES = 64  # replies unlike the recorded one before it is dropped


class Replay:
    """A recorded reply."""

    __slots__ = (
        "chunks",
        "first_flags",
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
        first_flags: int,
        head: Any,
        trail: Any,
        chunks: tuple[bytes, ...],
        flow: int,
        gen: int,
    ) -> None:
        self.parts = parts  # its bytes, split around the stream id of each frame
        self.size = size
        self.first_len = first_len  # the length and flags of its first frame (a quick first
        self.first_flags = first_flags  # check: a trailers block may be as long, not so flagged)
        self.head = head
        self.trail = trail
        self.chunks = chunks
        self.received = flow
        self.flow = flow  # DATA bytes (no padding): what it takes of the connection window
        self.gen = gen
        self.misses = 0


class Generation(Protocol):
    """What counts the times the connection's block cache was emptied (``gen``)."""

    @property
    def gen(self) -> int: ...


class Replaying(Protocol):
    """What the layer reads of the connection under it (the walk that replays, which moves its
    streams and window, is the connection's own: ``H2Connection._replay``)."""

    cache: dict[bytes, Any]

    @property
    def blocks(self) -> Generation: ...


class Replayer:
    """The layer's state on one connection: the recorded reply, if any, and the streams to end
    before the next try to record one."""

    __slots__ = ("recorded", "wait")

    def __init__(self) -> None:
        self.recorded: Replay | None = None
        self.wait = 1

    def ended(self, conn: Replaying, data: bytes, end: int, stream: Any) -> None:
        """``stream`` ended with the frame that ends at ``end`` of ``data`` (the bytes of one
        ``receive``, parsed from 0)."""
        if self.recorded is None:
            self.wait -= 1
            if self.wait <= 0:
                self.record(conn, data, end, stream)

    def missed(self, recorded: Replay, gen: int) -> None:
        """``recorded`` was tried at a reply that was not it, with the block cache at ``gen``:
        dropped after :data:`REPLAY_MISSES` such tries, or once the cache outlives it."""
        recorded.misses += 1
        if recorded.misses > REPLAY_MISSES or recorded.gen != gen:
            self.recorded = None

    def record(self, conn: Replaying, data: bytes, end: int, stream: Any) -> None:
        """Record the reply of ``stream`` (ended) that ends at ``end`` of ``data`` when it can be
        replayed (see the module doc)."""
        self.wait = RECORD_EVERY  # the next try, if this one fails (or is outgrown)
        sid = stream.id
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
        cache = conn.cache
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
        if first[3] & END_STREAM and stream.trailers is not None:
            return  # that block was its trailers: its headers came in an earlier read
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
        self.recorded = Replay(
            parts,
            end - first[0],
            first[1],
            first[3],
            head,
            trail,
            tuple(chunks),
            flow,
            conn.blocks.gen,
        )
