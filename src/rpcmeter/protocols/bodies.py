"""Request and reply bodies of the built-in workloads, shared by the gRPC and ZeroMQ reference
servers and their drivers.

The encoding is deliberately tiny, so a server in any language can implement it in a few lines
(and so the drivers can send the same bytes to any method of any server):

=============  ==========================================  =======================================
workload       request body                                reply body
=============  ==========================================  =======================================
``noop``       empty                                       empty
``echo``       ``request_bytes`` bytes                     the request, unchanged
``payload``    reply size as 4-byte big-endian unsigned,   ``reply_bytes`` bytes
               then filler up to ``request_bytes`` (at     (:func:`rpcmeter.suite.workloads.payload_bytes`)
               least 4 bytes in all)
``sleep``      milliseconds as ASCII decimal (``"1.5"``)   empty
``factorial``  ``n`` as ASCII decimal (``"30000"``)        decimal digits of ``n!`` in ASCII
=============  ==========================================  =======================================

Streaming calls (workload ``stream``, gRPC only): every request message is ``request_bytes``
bytes and every reply message ``reply_bytes`` bytes (:func:`rpcmeter.suite.workloads.payload_bytes`);
the call's header block tells the server how many replies to send and how large
(:data:`STREAM_MESSAGES_KEY`, :data:`STREAM_REPLY_BYTES_KEY`). Server streaming answers its one
request with that many replies; client streaming reads every request and answers once;
bidirectional streaming answers each request with one reply.

How the workload is named travels beside the body: gRPC uses one method per workload
(``/rpcmeter.Bench/Echo``, ...), ZeroMQ and raw frames a one-byte code (:data:`OPS`). Every reply carries
the server's compute time for the request in nanoseconds, and where the server knows it the time
the request waited (:mod:`rpcmeter.protocols.timing`).
"""

from __future__ import annotations

import base64
import functools
import struct
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rpcmeter.errors import ReplyMismatch, SuiteError
from rpcmeter.suite.workloads import (
    EchoParams,
    FactorialParams,
    PayloadParams,
    SleepParams,
    StreamParams,
    WorkloadParams,
    factorial_digits,
    lift_int_digit_limit,
    payload_bytes,
)

if TYPE_CHECKING:
    from collections.abc import Callable

    from rpcmeter.suite.model import Suite

KINDS = ("noop", "echo", "payload", "sleep", "factorial")
OPS: dict[bytes, str] = {
    b"n": "noop",
    b"e": "echo",
    b"p": "payload",
    b"s": "sleep",
    b"f": "factorial",
}
CODES: dict[str, bytes] = {kind: code for code, kind in OPS.items()}
STREAM_MESSAGES_KEY = "rpcmeter-messages"
STREAM_REPLY_BYTES_KEY = "rpcmeter-reply-bytes"
_SIZE = struct.Struct(">I")
_payload = functools.lru_cache(maxsize=64)(payload_bytes)


def request_body(params: WorkloadParams) -> bytes:
    """The request body the built-in servers expect for ``params``."""
    if isinstance(params, EchoParams):
        return payload_bytes(params.request_bytes)
    if isinstance(params, PayloadParams):
        filler = payload_bytes(max(0, params.request_bytes - _SIZE.size))
        return _SIZE.pack(params.reply_bytes) + filler
    if isinstance(params, SleepParams):
        return repr(float(params.ms)).encode("ascii")
    if isinstance(params, FactorialParams):
        return str(params.n).encode("ascii")
    if isinstance(params, StreamParams):
        return payload_bytes(params.request_bytes)
    if params.kind == "noop":
        return b""
    raise ValueError(f"no built-in request body for workload {params.kind!r}")


def expected_reply(params: WorkloadParams, request: bytes) -> bytes:
    """The reply body a correct server sends for ``request`` (what validation compares with)."""
    if isinstance(params, EchoParams):
        return request
    if isinstance(params, PayloadParams | StreamParams):
        return payload_bytes(params.reply_bytes)
    if isinstance(params, FactorialParams):
        lift_int_digit_limit()
        return factorial_digits(params.n)
    return b""


def check(reply: bytes, expected: bytes, kind: str) -> None:
    """Raise :class:`ReplyMismatch` unless ``reply == expected``."""
    if reply != expected:
        raise ReplyMismatch(
            f"{kind}: expected {len(expected)} bytes {expected[:16]!r}..., "
            f"got {len(reply)} bytes {reply[:16]!r}..."
        )


_FORMATS = ("hex", "base64", "text", "file")


def raw_bytes(options: Mapping[str, Any], prefix: str) -> bytes | None:
    """The body given as ``{prefix}_hex``, ``_base64``, ``_text`` or ``_file`` (None: none given)."""
    given = [f for f in _FORMATS if options.get(f"{prefix}_{f}") is not None]
    if not given:
        return None
    if len(given) > 1:
        keys = ", ".join(f"{prefix}_{f}" for f in given)
        raise SuiteError(f"options: give only one of {keys}")
    key = f"{prefix}_{given[0]}"
    value = str(options[key])
    try:
        if given[0] == "hex":
            return bytes.fromhex(value)
        if given[0] == "base64":
            return base64.b64decode(value, validate=True)
        if given[0] == "file":
            return Path(value).read_bytes()
    except (ValueError, OSError) as exc:
        raise SuiteError(f"options.{key}: cannot read {value!r}: {exc}") from None
    return value.encode("utf-8")


def bodies_from_options(
    options: Mapping[str, Any], params: WorkloadParams
) -> tuple[bytes, bytes | None]:
    """Request body and expected reply for drivers that can talk to any server: the raw bodies
    the options give (``request_*``, ``expect_*``), else the workload's built-in ones (the
    expected reply is None when a raw request has no ``expect_*``: nothing to compare with)."""
    raw = raw_bytes(options, "request")
    request = request_body(params) if raw is None else raw
    expect = raw_bytes(options, "expect")
    if expect is None and raw is None:
        expect = expected_reply(params, request)
    return request, expect


def check_variant_options(
    suite: Suite, where: str, driver: str, check: Callable[[Mapping[str, Any]], object]
) -> None:
    """Run ``check(options)`` for every variant that uses ``driver`` (the target's options under
    the variant's), turning its :class:`SuiteError` into one naming the file and the variant."""
    for name, variant in suite.variants.items():
        if suite.driver_of(name) != driver:
            continue
        try:
            check({**suite.target.options, **variant.options})
        except SuiteError as exc:
            raise SuiteError(f"{where}: variants.{name}: {exc}") from None


def check_raw_options(options: Mapping[str, Any]) -> None:
    """The raw request and expected bodies of ``options`` can be read."""
    raw_bytes(options, "request")
    raw_bytes(options, "expect")


def stream_metadata(params: StreamParams) -> tuple[tuple[str, str], ...]:
    """What a streaming call tells the built-in server: how many replies, how large."""
    replies = params.replies_per_stream()
    return ((STREAM_MESSAGES_KEY, str(replies)), (STREAM_REPLY_BYTES_KEY, str(params.reply_bytes)))


# ---- server side ------------------------------------------------------------------------------


def sleep_seconds(body: bytes) -> float:
    """Seconds a ``sleep`` request asks for."""
    return float(body.decode("ascii")) / 1e3


def stream_reply(metadata: Any) -> tuple[int, bytes]:
    """From a streaming call's metadata: the number of replies and the reply message."""
    values = {str(k): str(v) for k, v in metadata or ()}
    replies = int(values.get(STREAM_MESSAGES_KEY, "1"))
    return replies, _payload(int(values.get(STREAM_REPLY_BYTES_KEY, "0")))


def compute(kind: str, body: bytes) -> bytes:
    """The reply body of every workload except ``sleep`` (whose wait the server does itself)."""
    if kind == "echo":
        return body
    if kind == "payload":
        (size,) = _SIZE.unpack_from(body)
        return _payload(size)
    if kind == "factorial":
        return factorial_digits(int(body.decode("ascii")))
    if kind in ("noop", "sleep"):
        return b""
    raise ValueError(f"unknown workload {kind!r}")
