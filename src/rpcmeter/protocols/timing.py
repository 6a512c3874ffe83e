"""Server timing: what a server tells the client about each request it served.

Two figures per request, both in nanoseconds on the server's clock:

- ``app``: the time the server spent handling the request (its compute, or a ``sleep``'s wait);
- ``queue``: the time the request waited after it had fully arrived, before its handling began
  (behind other requests of a single-threaded server, say).

How they travel, per protocol (any server sending the same fields is read the same way; a field
that is absent is *unknown*, never zero):

=========  ==================================================================================
HTTP       ``Server-Timing: queue;dur=MS, app;dur=MS`` (milliseconds, any number of decimals);
           without a metric named ``app``, the first ``dur`` is taken as the handling time
gRPC       trailing metadata ``rpcmeter-server-ns`` (handling) and ``rpcmeter-queue-ns``
raw, ZMQ   the 8-byte big-endian ``server_ns`` field of the reply; when its top bit
           (:data:`QUEUE_FOLLOWS`) is set, an 8-byte ``queue_ns`` follows it (the handling time
           is the field without that bit)
rpyc       the service's ``simple_timed`` call answers ``(value, handling_ns, queue_ns)``
=========  ==================================================================================

Drivers return a reply's times as :data:`ServerTime` ``(app_ns, queue_ns)``, ``queue_ns`` None
when the reply carried none (a reply carrying no ``app`` time returns None altogether).

Where the built-in servers take the arrival time from: the kernel's receive timestamp of the last
bytes of the request (``SO_TIMESTAMPNS`` on TCP: see :class:`rpcmeter.servers.aio.StampedTransport`),
(the rpyc server: :class:`rpcmeter.servers.rpyc_server.StampedSocket`), so a request that arrived
while the server was busy computing is charged the wait. The servers whose requests are read by a
library's own threads (gRPC's core, libzmq's I/O thread) cannot see when a request arrived; they
send no queue field (the table in docs/concepts/where-the-time-goes.md says which server reports
what). The ZeroMQ server's ``zmtp`` mode speaks ZMTP itself (:mod:`rpcmeter.protocols.zmtp`) on the
stamped transport, and does; so does the gRPC server's ``server_mode = "h2"``
(:mod:`rpcmeter.servers.grpc_h2_server`).
"""

from __future__ import annotations

import socket
import struct

ServerTime = tuple[int, int | None]  # (handling ns, queue ns or None: not reported)

SERVER_TIME_KEY = "rpcmeter-server-ns"
QUEUE_TIME_KEY = "rpcmeter-queue-ns"
QUEUE_FOLLOWS = 1 << 63
_U64 = struct.Struct(">Q")
_U64_PAIR = struct.Struct(">QQ")

SO_TIMESTAMPNS = getattr(socket, "SO_TIMESTAMPNS", 35)  # Linux; the same value as SCM_TIMESTAMPNS
_TIMESPEC = struct.Struct("@qq")
STAMP_SPACE = socket.CMSG_SPACE(_TIMESPEC.size)  # recvmsg's ancillary buffer for the stamp


def kernel_stamp_ns(ancdata: list[tuple[int, int, bytes]]) -> int:
    """The receive time (``CLOCK_REALTIME``, ns) in the ancillary data of a ``recvmsg`` on a socket
    with ``SO_TIMESTAMPNS`` set (0 when it carries none); compare with ``time.time_ns()``."""
    if not ancdata:
        return 0
    sec, nsec = _TIMESPEC.unpack_from(ancdata[0][2])  # SCM_TIMESTAMPNS, the only one asked for
    return int(sec * 1_000_000_000 + nsec)


def frame_times(app_ns: int, queue_ns: int | None) -> bytes:
    """The ``server_ns`` field of a raw or ZeroMQ reply (and ``queue_ns`` when known)."""
    if queue_ns is None:
        return _U64.pack(app_ns)
    return _U64_PAIR.pack(app_ns | QUEUE_FOLLOWS, max(0, queue_ns))


def read_frame_times(buf: bytes, offset: int = 0) -> tuple[ServerTime, int]:
    """The times at ``offset`` of a reply and how many bytes they took (8 or 16). Raises
    ``struct.error`` when ``buf`` is too short."""
    (field,) = _U64.unpack_from(buf, offset)
    if field & QUEUE_FOLLOWS:
        (queue,) = _U64.unpack_from(buf, offset + 8)
        return (field ^ QUEUE_FOLLOWS, queue), 16
    return (field, None), 8


def server_timing_value(app_ns: int, queue_ns: int | None) -> bytes:
    """The value of an HTTP reply's ``Server-Timing`` header (HTTP/1.1 and HTTP/2 alike)."""
    if queue_ns is None:
        return b"app;dur=%.6f" % (app_ns / 1e6)
    return b"queue;dur=%.6f, app;dur=%.6f" % (queue_ns / 1e6, app_ns / 1e6)


def server_timing_header(app_ns: int, queue_ns: int | None) -> bytes:
    """The ``Server-Timing`` header line (with its CRLF) of an HTTP/1.1 reply."""
    return b"Server-Timing: " + server_timing_value(app_ns, queue_ns) + b"\r\n"


def _dur_ns(metric: bytes) -> int | None:
    at = metric.find(b"dur=")
    if at < 0:
        return None
    end = metric.find(b";", at)
    try:
        return int(float(metric[at + 4 : end if end >= 0 else len(metric)]) * 1e6)
    except ValueError:
        return None


def _metric_ns(value: bytes, name: bytes) -> int | None:
    """The ``dur`` of metric ``name;dur=`` spelled so, where it starts a metric (fast path)."""
    at = value.find(name)
    if at < 0 or (at and value[at - 1] not in b" ,"):
        return None
    start = at + len(name)
    end = len(value)
    for stop in (value.find(b",", start), value.find(b";", start)):
        if 0 <= stop < end:
            end = stop
    try:
        return int(float(value[start:end]) * 1e6)
    except ValueError:
        return None


def parse_server_timing(value: bytes) -> ServerTime | None:
    """The times of a ``Server-Timing`` header value: the ``dur`` of metrics ``app`` and
    ``queue`` (milliseconds); without an ``app`` metric, the first ``dur`` is the handling time.
    None when no metric carries a ``dur``."""
    app = _metric_ns(value, b"app;dur=")  # the built-in servers' spelling: no split needed
    if app is not None:
        return app, _metric_ns(value, b"queue;dur=")
    queue: int | None = None
    first: int | None = None
    for metric in value.split(b","):
        metric = metric.strip()
        dur = _dur_ns(metric)
        if dur is None:
            continue
        name = metric.split(b";", 1)[0].strip().lower()
        if name == b"app":
            app = dur
        elif name == b"queue":
            queue = dur
        elif first is None:
            first = dur
    if app is None:
        app = first
    return None if app is None else (app, queue)


def trailer_times(metadata: object) -> ServerTime | None:
    """The times in a gRPC call's trailing metadata (``(key, value)`` pairs)."""
    app: int | None = None
    queue: int | None = None
    for key, value in metadata or ():  # type: ignore[attr-defined]
        if key == SERVER_TIME_KEY:
            app = int(value)
        elif key == QUEUE_TIME_KEY:
            queue = int(value)
    return None if app is None else (app, queue)
