"""The raw-socket frame protocol: length-prefixed frames over TCP or a Unix socket, spoken by the
raw driver and the built-in raw server.

All integers big-endian; the floor against which frameworks are read::

    request  = length:u32  code:u8  body             length = 1 + len(body)
    reply    = length:u32  status:u8  server_ns:u64  [queue_ns:u64]  body
               length = 9 + len(body), or 17 + len(body) with queue_ns

``code`` names the workload (:data:`rpcmeter.protocols.bodies.OPS`: ``n`` noop, ``e`` echo,
``p`` payload, ``s`` sleep, ``f`` factorial) and ``body`` is its request body as
:mod:`rpcmeter.protocols.bodies` encodes it. ``status`` is 0 for a served request and 1 for a
request the server could not serve (the body then says why). ``server_ns`` is the server's own
compute time for the request in nanoseconds; when its top bit is set (the rest being the compute
time), ``queue_ns`` follows: how long the request waited after it had fully arrived (see
:mod:`rpcmeter.protocols.timing`). Requests may be pipelined; replies come back in order.
"""

from __future__ import annotations

import struct

from rpcmeter.protocols.timing import frame_times

REQUEST_HEAD = struct.Struct(">IB")  # length, code
REPLY_HEAD = struct.Struct(">IBQ")  # length, status, server_ns
REPLY_PREFIX = struct.Struct(">IB")  # length, status
MAX_FRAME = 1 << 30
OK, FAILED = 0, 1


def reply_frame(body: bytes, server_ns: int, status: int = OK, queued: int | None = None) -> bytes:
    times = frame_times(server_ns, queued)
    return REPLY_PREFIX.pack(1 + len(times) + len(body), status) + times + body


def request_frame(code: bytes, body: bytes) -> bytes:
    return REQUEST_HEAD.pack(1 + len(body), code[0]) + body
