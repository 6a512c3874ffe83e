"""Requests made per call: header blocks whose varying fields are appended as literals
(rpcmeter.protocols.h2.fields) decode as the hpack library decodes any block, and
``Request.framed`` gives the frames ``Request.build`` gives."""

from __future__ import annotations

import sys
from collections.abc import Callable

import hpack
import pytest

from rpcmeter.protocols.h2.connection import COMPILED, H2Connection, Request
from rpcmeter.protocols.h2.fields import block_filler, literal_start, literal_value
from rpcmeter.protocols.templates import Values


def test_blocks_with_varying_fields_decode() -> None:
    conn = H2Connection()

    def path(values: Values) -> bytes:
        return b"/kv/%s" % str(values[0]).encode()

    def long_id(values: Values) -> bytes:
        return str(values[1]).encode() * 50  # longer than 127: a length on more bytes

    fields: list[tuple[bytes, bytes | Callable[[Values], bytes]]] = [
        (b":method", b"GET"),
        (b":scheme", b"http"),
        (b":path", path),
        (b":authority", b"h:1"),
        (b"x-id", long_id),
        (b"content-length", lambda values: b"0"),  # its static-table name, an empty value
    ]
    fill = block_filler(fields, lambda run: conn.prepare(run, None).block)
    for values in [(7, "u"), (123456, "abc")]:
        got = hpack.Decoder().decode(fill(values), raw=True)
        assert got == [
            (b":method", b"GET"),
            (b":scheme", b"http"),
            (b":path", path(values)),
            (b":authority", b"h:1"),
            (b"x-id", long_id(values)),
            (b"content-length", b"0"),
        ]
    fixed = block_filler([(b":method", b"GET")], lambda run: conn.prepare(run, None).block)
    assert fixed(()) == conn.prepare([(b":method", b"GET")], None).block
    assert literal_start(b"x-id") + literal_value(b"v") == b"\x10\x04x-id\x01v"


@pytest.mark.parametrize(
    ("block", "body"),
    [
        (b"abc" * 10, b"x" * 20),
        (b"a" * 300, b"y" * 70_000),  # a body of several frames: left to build
        (b"", b""),
        (b"a" * 20_000, b""),  # a block of several frames
        (b"abc", None),
        (b"a" * 20_000, None),
    ],
)
def test_framed_requests_are_built_requests(block: bytes, body: bytes | None) -> None:
    built = Request(block, body)
    built.build(16_384)
    framed = Request.framed(block, body, 16_384)
    if framed.frame_size == 0:
        framed.build(16_384)
    assert framed.parts == built.parts and framed.head_parts == built.head_parts
    assert (framed.size, framed.end_stream, framed.body) == (built.size, True, body)


@pytest.mark.skipif(
    COMPILED or sys.version_info >= (3, 14),
    reason="compiled or on 3.14, Request.framer makes a new request each call (refcounts differ)",
)
def test_a_reframer_makes_a_free_request_again_and_leaves_a_held_one() -> None:
    """``Request.framer(..., reuse=True)``: the request made before last is made again in
    place once nothing holds it; one still held (a stream in flight) is left as it was; each
    gives the frames ``Request.build`` gives; a body of several frames gets a new request."""
    block = b"abc" * 10
    make = Request.framer(block, 16_384, reuse=True)

    def built(body: bytes) -> list[bytes]:
        req = Request(block, body)
        req.build(16_384)
        return req.parts

    first, second = make(b"one"), make(b"second")
    assert first.parts == built(b"one") and second.parts == built(b"second")
    third = make(b"3")  # ``first`` is held here: left alone
    assert third is not first and first.parts == built(b"one") and first.body == b"one"
    del first
    fourth = make(b"four")  # ``second`` is held: a new one
    assert fourth is not second and second.parts == built(b"second")
    fourth_id = id(fourth)
    del second, fourth
    fifth = make(b"fifth!")  # made before last (``third``) is held; ``fourth`` next is free
    assert fifth is not third and fifth.parts == built(b"fifth!")
    sixth = make(b"six")  # ``fourth``, made again in place
    assert sixth.parts == built(b"six") and (sixth.size, sixth.body) == (3, b"six")
    assert id(sixth) == fourth_id  # still held by the framer: the id is its own
    big = make(b"z" * 20_000)  # several DATA frames: built by the connection
    assert big.frame_size == 0 and big.body == b"z" * 20_000
