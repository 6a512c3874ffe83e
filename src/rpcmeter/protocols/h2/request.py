"""A request encoded once (:class:`Request`): its header block and body, and its frames as parts
joined around a stream id. :meth:`Request.framer` makes many requests of one header block."""

from __future__ import annotations

import struct
import sys
from collections.abc import Callable, Iterable
from typing import Final

import hpack

from rpcmeter.protocols.h2.frames import CONTINUATION, DATA, END_HEADERS, END_STREAM, HEAD, HEADERS

__all__ = ["MIDS_KEPT", "Request", "never_indexed"]

# whether this module runs compiled by mypyc (``RPCMETER_COMPILE=1``, setup.py), not as Python
COMPILED: Final = not __file__.endswith(".py")


class Request:
    """A request encoded once (:meth:`~.connection.H2Connection.prepare`): its header block, its body, and its
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


def never_indexed(headers: Iterable[tuple[bytes, bytes]]) -> list[hpack.HeaderTuple]:
    return [hpack.NeverIndexedHeaderTuple(n, v) for n, v in headers]
