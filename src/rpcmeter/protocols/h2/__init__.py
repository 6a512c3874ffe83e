"""HTTP/2: a sans-I/O client connection (:mod:`rpcmeter.protocols.h2.connection`) and its asyncio
transport (:mod:`rpcmeter.protocols.h2.transport`)."""

from rpcmeter.protocols.h2.connection import (
    H2Connection,
    H2ConnectionError,
    H2Error,
    H2Unavailable,
    Request,
    Stream,
    StreamReset,
)

__all__ = [
    "H2Connection",
    "H2ConnectionError",
    "H2Error",
    "H2Unavailable",
    "Request",
    "Stream",
    "StreamReset",
]
