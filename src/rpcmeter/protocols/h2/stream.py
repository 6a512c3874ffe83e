"""A stream of an HTTP/2 connection (:class:`Stream`, made by :func:`new_stream`), and what an
owner of connections hears of them (:class:`Listener`)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Protocol

from rpcmeter.protocols.h2.replay import Replay
from rpcmeter.protocols.h2.request import Request
from rpcmeter.protocols.h2.state import STREAM_TRANSITIONS, StreamEvent, StreamState, advance

__all__ = ["Listener", "Stream", "new_stream"]


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
