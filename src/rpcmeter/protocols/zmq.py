"""ZeroMQ as rpcmeter's built-in service speaks it, shared by the ZeroMQ driver and server: the
address of an endpoint, the frames, and the server modes the options may ask for.

A request is one frame: a one-byte workload code (:data:`rpcmeter.protocols.bodies.OPS`) followed
by the body of :mod:`rpcmeter.protocols.bodies`. The reply is one frame: the server's compute time
for the request in nanoseconds as an 8-byte big-endian unsigned integer, followed by the reply
body; a server that knows how long the request waited after it arrived sets the top bit of that
integer and puts the wait (``queue_ns``, 8 bytes) after it (:mod:`rpcmeter.protocols.timing`).
The ZMTP wire beneath is :mod:`rpcmeter.protocols.zmtp`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from rpcmeter.net.endpoints import Endpoint
from rpcmeter.protocols import zmtp


def address(endpoint: Endpoint) -> str:
    """ZeroMQ address of an endpoint: ``tcp://HOST:PORT`` or ``ipc://PATH``."""
    return endpoint.describe()


SERVER_MODES = ("libzmq", "zmtp")


def server_mode(options: Mapping[str, Any]) -> str:
    """The server mode the options ask for. Raises ``ValueError`` naming the option when they
    make no sense."""
    mode = options.get("server_mode", "libzmq")
    if mode not in SERVER_MODES:
        raise ValueError(f"server_mode: expected one of {', '.join(SERVER_MODES)} (got {mode!r})")
    workers = options.get("server_workers", 1)
    if not isinstance(workers, int) or workers < 1:
        raise ValueError(f"server_workers: expected an integer >= 1 (got {workers!r})")
    if mode == "zmtp" and workers > 1:
        raise ValueError(f"server_workers: the zmtp server mode serves on one loop (got {workers})")
    limit = options.get("max_message_bytes", zmtp.DEFAULT_MAX_MESSAGE_BYTES)
    if not isinstance(limit, int) or limit < 1:
        raise ValueError(f"max_message_bytes: expected an integer >= 1 (got {limit!r})")
    return str(mode)
