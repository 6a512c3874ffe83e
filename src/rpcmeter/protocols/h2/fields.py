"""Header blocks whose values vary per request (a template filled in: ``x-request-id:
{{uuid}}``, an HTTP/2 ``:path``), without running the HPACK encoder per request.

A prepared request's block uses no dynamic table (every field a never-indexed literal or a
static-table reference), so a block is the fields' encodings one after the other. The fixed runs
of fields are encoded once, by the connection's encoder (:meth:`H2Connection.prepare
<rpcmeter.protocols.h2.connection.H2Connection.prepare>`); a varying field is a never-indexed
literal whose start (its name, as the hpack library encodes it) is made once, and whose value
is appended per request as a plain string (its length, then its bytes: RFC 7541, 6.2.3).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import hpack
from hpack.hpack import encode_integer

from rpcmeter.protocols.templates import Values

Fill = Callable[[Values], bytes]  # a varying value, from a request's values
Field = tuple[bytes, bytes | Fill]


def literal_start(name: bytes) -> bytes:
    """The bytes of a never-indexed literal field of ``name`` up to its value's length (the
    hpack library's own encoding of the field with the value ``x``, less that value: an empty
    value could match a static-table entry, ``content-length: ``, and be encoded as its
    index)."""
    field = hpack.NeverIndexedHeaderTuple(name, b"x")
    encoded = bytes(hpack.Encoder().encode([field], huffman=False))
    assert encoded.endswith(b"\x01x"), "a literal with a plain value"
    return encoded[:-2]


def literal_value(value: bytes) -> bytes:
    """A plain (not Huffman-coded) string: its length (7-bit prefix), then its bytes."""
    n = len(value)
    return (bytes((n,)) if n < 127 else bytes(encode_integer(n, 7))) + value


def block_filler(
    fields: Sequence[Field], encode: Callable[[list[tuple[bytes, bytes]]], bytes]
) -> Fill:
    """``fill(values) -> bytes``: the header block of ``fields`` (in order; each value fixed,
    or a function of a request's values); ``encode`` encodes a run of fixed fields (the
    connection's encoder)."""
    parts: list[bytes | tuple[bytes, Fill]] = []
    run: list[tuple[bytes, bytes]] = []
    for name, value in fields:
        if isinstance(value, bytes):
            run.append((name, value))
            continue
        if run:
            parts.append(encode(run))
            run = []
        parts.append((literal_start(name), value))
    if run:
        parts.append(encode(run))
    if all(isinstance(p, bytes) for p in parts):
        block = b"".join(p for p in parts if isinstance(p, bytes))
        return lambda values: block
    if len(parts) == 2 and isinstance(parts[0], bytes) and not isinstance(parts[1], bytes):
        head, (start, value) = parts[0], parts[1]
        prefix = head + start
        return lambda values: prefix + literal_value(value(values))

    def fill(values: Values) -> bytes:
        return b"".join(
            [p if isinstance(p, bytes) else p[0] + literal_value(p[1](values)) for p in parts]
        )

    return fill
