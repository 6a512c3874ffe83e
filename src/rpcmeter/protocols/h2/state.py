"""The states of an HTTP/2 client connection and of its streams, and the transitions between
them, as tables (the shape of python-hyper h11's ``_state.py`` and h2's state machines): each
state maps the events allowed in it to the state they lead to. An event a state does not list is
a bug of the caller (:class:`InvalidTransition`), not something a peer can cause: the connection
checks what the peer sends before it moves a state.

:class:`~rpcmeter.protocols.h2.connection.H2Connection` moves its own state with
:func:`advance` (connection events are rare). Its per-request paths (a request sent whole, a
reply that ends its stream) store the state the table gives for their one transition directly,
with no lookup; ``tests/h2/test_state.py`` checks them against the table.

Connection::

    IDLE --SEND_PREFACE--> PREFACE_SENT --RECV_SETTINGS--> OPEN
    IDLE, PREFACE_SENT, OPEN --RECV_GOAWAY, SEND_GOAWAY, IDS_EXHAUSTED--> DRAINING
    any --LOST--> CLOSED

``OPEN`` and before: new streams start (before the server's SETTINGS they go out at once, as
RFC 9113 allows). ``DRAINING``: no new stream starts, those open finish. ``CLOSED``: the
connection is gone (``H2Connection.closed`` holds why). Whether the server's SETTINGS arrived is
kept apart (``H2Connection.started``): a client may stop taking streams before it.

Stream (client side; a stream is made idle, waiting to start)::

    IDLE --START--> OPEN --SEND_END--> HALF_CLOSED_LOCAL --RECV_END--> CLOSED
    IDLE --START_ENDED--> HALF_CLOSED_LOCAL (the request sent whole, END_STREAM with it)
    OPEN, HALF_CLOSED_LOCAL --UNPROCESSED--> IDLE (above a graceful GOAWAY's last stream id:
                                                  to be sent again, on another connection)
    OPEN --RECV_END--> CLOSED (the server ended it first; what was left to send is dropped)
    any but CLOSED --RESET, LOST--> CLOSED

``HALF_CLOSED_LOCAL`` counts from the moment END_STREAM is queued (its DATA may still wait for
flow-control window).
"""

from __future__ import annotations

from enum import Enum
from typing import TypeVar

from mypy_extensions import mypyc_attr


class ConnectionState(Enum):
    IDLE = "idle"
    PREFACE_SENT = "preface_sent"
    OPEN = "open"
    DRAINING = "draining"
    CLOSED = "closed"


class ConnectionEvent(Enum):
    SEND_PREFACE = "send_preface"
    RECV_SETTINGS = "recv_settings"
    RECV_GOAWAY = "recv_goaway"
    SEND_GOAWAY = "send_goaway"
    IDS_EXHAUSTED = "ids_exhausted"
    LOST = "lost"


class StreamState(Enum):
    IDLE = "idle"
    OPEN = "open"
    HALF_CLOSED_LOCAL = "half_closed_local"
    CLOSED = "closed"


class StreamEvent(Enum):
    START = "start"
    START_ENDED = "start_ended"
    SEND_END = "send_end"
    RECV_END = "recv_end"
    RESET = "reset"
    UNPROCESSED = "unprocessed"
    LOST = "lost"


C = ConnectionState
CE = ConnectionEvent
_STOP = {CE.RECV_GOAWAY: C.DRAINING, CE.SEND_GOAWAY: C.DRAINING, CE.IDS_EXHAUSTED: C.DRAINING}
CONNECTION_TRANSITIONS: dict[ConnectionState, dict[ConnectionEvent, ConnectionState]] = {
    C.IDLE: {CE.SEND_PREFACE: C.PREFACE_SENT, **_STOP, CE.LOST: C.CLOSED},
    C.PREFACE_SENT: {CE.RECV_SETTINGS: C.OPEN, **_STOP, CE.LOST: C.CLOSED},
    C.OPEN: {CE.RECV_SETTINGS: C.OPEN, **_STOP, CE.LOST: C.CLOSED},
    C.DRAINING: {CE.RECV_SETTINGS: C.DRAINING, **_STOP, CE.LOST: C.CLOSED},
    C.CLOSED: {CE.LOST: C.CLOSED, CE.SEND_GOAWAY: C.CLOSED},
}
# the states in which new streams start
ACCEPTING = frozenset({C.IDLE, C.PREFACE_SENT, C.OPEN})

S = StreamState
SE = StreamEvent
STREAM_TRANSITIONS: dict[StreamState, dict[StreamEvent, StreamState]] = {
    S.IDLE: {
        SE.START: S.OPEN,
        SE.START_ENDED: S.HALF_CLOSED_LOCAL,
        SE.RESET: S.CLOSED,
        SE.LOST: S.CLOSED,
    },
    S.OPEN: {
        SE.SEND_END: S.HALF_CLOSED_LOCAL,
        SE.RECV_END: S.CLOSED,
        SE.RESET: S.CLOSED,
        SE.UNPROCESSED: S.IDLE,
        SE.LOST: S.CLOSED,
    },
    S.HALF_CLOSED_LOCAL: {
        SE.RECV_END: S.CLOSED,
        SE.RESET: S.CLOSED,
        SE.UNPROCESSED: S.IDLE,
        SE.LOST: S.CLOSED,
    },
    S.CLOSED: {},
}

St = TypeVar("St", ConnectionState, StreamState)
Ev = TypeVar("Ev", ConnectionEvent, StreamEvent)


@mypyc_attr(native_class=False)
class InvalidTransition(RuntimeError):
    """An event that the current state does not allow (a bug of the caller)."""


def advance(table: dict[St, dict[Ev, St]], state: St, event: Ev) -> St:
    """The state ``event`` leads to from ``state`` in ``table``."""
    try:
        return table[state][event]
    except KeyError:
        raise InvalidTransition(f"{event.name} in state {state.name}") from None
