"""HPACK decoding for the client (:mod:`rpcmeter.protocols.h2.header_blocks`) agrees with the
``hpack`` library's decoder, the reference, on every block shape real servers send (nginx's,
Go's, python-hyper ``h2``'s), on corrupted and truncated blocks, and through its caches."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import hpack
import pytest
from hpack.hpack import encode_integer
from hpack.huffman import HuffmanEncoder
from hpack.huffman_constants import REQUEST_CODES, REQUEST_CODES_LENGTH
from hpack.huffman_table import decode_huffman as reference_huffman
from hypothesis import given, settings
from hypothesis import strategies as st

from rpcmeter.protocols.h2.header_blocks import Decoder, HeaderBlocks, decode_huffman

HUFFMAN = HuffmanEncoder(REQUEST_CODES, REQUEST_CODES_LENGTH)
Headers = list[tuple[bytes, bytes]]

# real replies, captured from a connection (one per line): nginx 1.22 (h2c, GET /: every field
# but :status a literal added to the dynamic table, Huffman coded), the Go greeter's net/http
# (h2c, GET /noop: added once, then referred to by index) and grpc-go (head, trailers)
NGINX = bytes.fromhex(
    "887689aa6355e580ae212e1f6196df3dbf4a09c5349fba82009c5021b810dc0094c5a37f"
    "5f87497ca58ae819aa5c0135"
)
GO_FIRST = bytes.fromhex(
    "885f87497ca58ae819aa5c01306196df3dbf4a09c5349fba82009c5021b8166e01e53168df"
)
GO_AGAIN = bytes.fromhex("88c0bfbe")
GO_NEW_DATE = bytes.fromhex("88c0bf6196df3dbf4a09c5349fba82009c5021b8166e01f53168df")
GRPC_GO_HEAD = bytes.fromhex("885f8b1d75d0620d263d4c4d6564")
GRPC_GO_TRAIL = bytes.fromhex("40889acac8b21234da8f013040899acac8b5254207317f00")
GRPC_GO_AGAIN = (bytes.fromhex("88c0"), bytes.fromhex("bfbe"))


def reference(blocks: list[bytes], table_size: int | None = None) -> list[Any]:
    """What the hpack library makes of each block in turn, with its table after it (or the
    class of the error that stopped it)."""
    dec = hpack.Decoder(max_header_list_size=4096)
    out: list[Any] = []
    for b in blocks:
        try:
            headers = [tuple(h) for h in dec.decode(b, raw=True)]
        except hpack.HPACKError as exc:
            out.append(type(exc))
            break
        out.append((headers, list(dec.header_table.dynamic_entries), dec.header_table_size))
    return out


def through(decode: Callable[[bytes], Headers], table: Decoder, blocks: list[bytes]) -> list[Any]:
    """What ``decode`` makes of each block in turn, with ``table`` after it (or the class of
    the error that stopped it)."""
    out: list[Any] = []
    for b in blocks:
        try:
            headers = decode(b)
        except hpack.HPACKError as exc:
            out.append(type(exc))
            break
        out.append((headers, list(table.entries), table.header_table_size))
    return out


def ours(blocks: list[bytes]) -> list[Any]:
    dec = Decoder(max_header_list_size=4096)
    return through(dec.decode, dec, blocks)


def cached(blocks: list[bytes], cache_blocks: int = 256) -> list[Any]:
    """Through :class:`HeaderBlocks` (the view is the header list itself)."""
    hb = HeaderBlocks(list, max_header_list_size=4096, cache_blocks=cache_blocks)
    return through(hb.view_of, hb.decoder, blocks)


def agree(blocks: list[bytes]) -> list[Any]:
    want = reference(blocks)
    assert ours(blocks) == want
    assert cached(blocks) == want
    assert cached(blocks, cache_blocks=1) == want
    return want


# ---------------------------------------------------------------------------------------------
# Huffman


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=64))
def test_huffman_strings_decode_as_the_library_decodes_them(text: bytes) -> None:
    assert decode_huffman(HUFFMAN.encode(text)) == text


@settings(max_examples=500, deadline=None)
@given(st.binary(max_size=24))
def test_any_bytes_decode_or_fail_as_the_library_does(data: bytes) -> None:
    try:
        want: Any = reference_huffman(data)
    except hpack.HPACKDecodingError:
        want = hpack.HPACKDecodingError
    try:
        got: Any = decode_huffman(data)
    except hpack.HPACKDecodingError:
        got = hpack.HPACKDecodingError
    assert got == want


def test_bad_huffman_codes_are_errors() -> None:
    with pytest.raises(hpack.HPACKDecodingError, match="Incomplete"):
        decode_huffman(b"\x00")  # '0' then 3 bits of padding that are not all ones
    with pytest.raises(hpack.HPACKDecodingError):
        decode_huffman(b"\xff\xff\xff\xff")  # EOS inside the string


# ---------------------------------------------------------------------------------------------
# blocks of real servers


def test_real_servers_blocks_decode_as_the_library_decodes_them() -> None:
    nginx = agree([NGINX] * 30)  # fills the table, then the same block again and again
    assert nginx[0][0][2] == (b"date", b"Thu, 26 Nov 2026 11:11:02 GMT")
    assert len(nginx[-1][1]) > 70  # the table is full of nginx's four fields
    go = agree([GO_FIRST, GO_AGAIN, GO_AGAIN, GO_NEW_DATE, GO_AGAIN, GO_AGAIN])
    assert go[1][0] == go[0][0] and go[4][0] != go[1][0]  # the new date is entry 62 now
    grpc = agree([GRPC_GO_HEAD, GRPC_GO_TRAIL, *GRPC_GO_AGAIN * 5])
    assert grpc[-1][0] == [(b"grpc-status", b"0"), (b"grpc-message", b"")]


def date_literal(second: int) -> bytes:
    """nginx's ``date`` field (static name 33, added to the table), Huffman coded."""
    value = f"Thu, 26 Nov 2026 11:11:{second % 60:02d} GMT".encode()
    return bytes([0x40 | 33]) + string(value, huffman=True)


def nginx_block(second: int) -> bytes:
    start = NGINX.index(bytes.fromhex("6196"))
    return NGINX[:start] + date_literal(second) + NGINX[start + 24 :]


def test_nginx_with_a_date_that_changes_every_second() -> None:
    assert nginx_block(2) == NGINX
    blocks = [nginx_block(s) for s in (1, 1, 1, 2, 2, 3) for _ in range(25)]
    want = agree(blocks)
    assert want[-1][0][2] == (b"date", b"Thu, 26 Nov 2026 11:11:03 GMT")


# ---------------------------------------------------------------------------------------------
# every representation, generated


def literal(name: bytes | int, value: bytes, kind: str, huffman: bool) -> bytes:
    """One literal field: ``kind`` ``index`` (added to the table), ``plain`` (not added) or
    ``never`` (never indexed); ``name`` an index or a string."""
    prefix, bits = {"index": (0x40, 6), "plain": (0x00, 4), "never": (0x10, 4)}[kind]
    out = bytearray()
    if isinstance(name, int):
        head = encode_integer(name, bits)
        head[0] |= prefix
        out += head
    else:
        out.append(prefix)
        out += string(name, huffman)
    return bytes(out + string(value, huffman))


def string(text: bytes, huffman: bool) -> bytes:
    data = HUFFMAN.encode(text) if huffman else text
    length = encode_integer(len(data), 7)
    if huffman:
        length[0] |= 0x80
    return bytes(length) + data


def indexed(index: int) -> bytes:
    head = encode_integer(index, 7)
    head[0] |= 0x80
    return bytes(head)


def size_update(size: int) -> bytes:
    head = encode_integer(size, 5)
    head[0] |= 0x20
    return bytes(head)


NAMES = st.sampled_from([b"server", b"date", b"x-a", b"grpc-status", b"content-length"])
VALUES = st.sampled_from([b"", b"0", b"200", b"nginx/1.22.1", b"text/plain", b"v" * 200])
FIELD = st.one_of(
    st.builds(indexed, st.integers(1, 61)),  # static
    st.builds(indexed, st.integers(62, 70)),  # dynamic (or out of range)
    st.builds(
        literal,
        st.one_of(st.integers(1, 66), NAMES),
        VALUES,
        st.sampled_from(["index", "plain", "never"]),
        st.booleans(),
    ),
)
BLOCK = st.tuples(
    st.lists(FIELD, min_size=1, max_size=6), st.sampled_from([None, 0, 100, 256, 4096, 5000])
).map(lambda t: (b"" if t[1] is None else size_update(t[1])) + b"".join(t[0]))


@settings(max_examples=200, deadline=None)
@given(st.lists(BLOCK, min_size=1, max_size=12), st.integers(1, 4))
def test_generated_blocks_repeated_agree_with_the_library(blocks: list[bytes], times: int) -> None:
    """Every representation (indexed static and dynamic, literals added, not added or never
    indexed, names by index or as strings, Huffman or not, table size updates, too large
    ones), each block sent ``times`` times in a row as a server repeating a reply would: the
    decoder and both caches give the library's headers, table and errors."""
    agree([b for b in blocks for _ in range(times)])


INDEPENDENT = st.lists(  # fields that do not refer to the dynamic table, some added to it
    st.one_of(
        st.builds(indexed, st.integers(1, 61)),
        st.builds(
            literal,
            st.one_of(st.integers(1, 61), NAMES),
            VALUES,
            st.sampled_from(["index", "index", "plain", "never"]),
            st.booleans(),
        ),
    ),
    min_size=1,
    max_size=5,
).map(b"".join)


@settings(max_examples=150, deadline=None)
@given(
    st.sampled_from([size_update(256), size_update(512), size_update(1000), size_update(0), b""]),
    st.lists(INDEPENDENT, min_size=2, max_size=3),
    st.lists(
        st.tuples(st.integers(0, 2), st.sampled_from([1, 2, 30, 60]), st.booleans()),
        min_size=2,
        max_size=8,
    ),
    st.lists(st.integers(62, 80), min_size=1, max_size=3),
)
def test_blocks_that_add_to_the_table_repeated_until_it_is_steady(
    first: bytes, pool: list[bytes], runs: list[tuple[int, int, bool]], refs: list[int]
) -> None:
    """nginx's way, generalised: blocks that add fields without referring to the table, each
    seen once, then repeated many times in a row (the table fills with them and then stays the
    same), runs of different blocks in any order, some followed by a block that refers to the
    table (Go's way): the same headers and table as the library's after every block."""
    refer = b"".join(indexed(i) for i in refs)
    blocks = [first + indexed(8), *pool]
    for which, times, then_refer in runs:
        blocks += [pool[which % len(pool)]] * times + ([refer] if then_refer else [])
    agree([*blocks, refer])


def test_a_steady_table_left_for_another_block_and_back() -> None:
    """A table full of one block's fields (steady), then another block's fields (a block seen
    before), then the first block again: its fields are added again (the table is not steady
    any more)."""
    one = literal(54, b"one", "index", False)  # server: one
    two = literal(54, b"two", "index", False)
    refer = indexed(62) + indexed(63)
    agree([two] + [one] * 120 + [two, one, refer, two, two, one, refer])


@settings(max_examples=200, deadline=None)
@given(
    st.lists(BLOCK, min_size=1, max_size=4),
    st.integers(0, 200),
    st.integers(0, 255),
    st.booleans(),
)
def test_corrupted_and_truncated_blocks_fail_as_the_library_fails(
    blocks: list[bytes], where: int, byte: int, cut: bool
) -> None:
    last = blocks[-1]
    i = where % len(last)
    blocks[-1] = last[:i] if cut else last[:i] + bytes([byte]) + last[i + 1 :]
    agree(blocks)


@settings(max_examples=50, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.lists(st.tuples(NAMES, VALUES), min_size=1, max_size=5),
            st.booleans(),
            st.booleans(),
        ),
        min_size=1,
        max_size=10,
    ),
    st.sampled_from([0, 64, 256, 4096]),
)
def test_the_h2_librarys_encoder_decodes_alike(
    replies: list[tuple[Headers, bool, bool]], table_size: int
) -> None:
    """python-hyper's encoder (used by ``h2`` servers), indexing freely, with and without Huffman,
    never-indexed fields, a table size it announces: the same headers and table."""
    enc = hpack.Encoder()
    enc.header_table_size = table_size
    blocks = []
    for headers, never, huffman in replies:
        items = [hpack.NeverIndexedHeaderTuple(n, v) if never else (n, v) for n, v in headers]
        blocks += [enc.encode(items, huffman=huffman) for _ in range(2)]  # refers the 2nd time
    want = agree(blocks)
    assert [w[0] for w in want] == [list(h) for h, _, _ in replies for _ in range(2)]


def test_errors_are_the_librarys() -> None:
    assert ours([indexed(62)]) == [hpack.InvalidTableIndex]  # nothing in the dynamic table
    assert ours([indexed(0)]) == [hpack.InvalidTableIndex]
    assert ours([literal(b"x", b"v" * 5000, "plain", False)]) == [hpack.OversizedHeaderListError]
    assert ours([size_update(5000)]) == [hpack.InvalidTableSizeError]
    assert ours([indexed(2) + size_update(10)]) == [hpack.HPACKDecodingError]
    too_long = bytes([0x80 | 0x7F, *[0xFF] * 5, 0x7F])  # an integer of 7 bytes
    assert ours([too_long]) == reference([too_long]) == [hpack.HPACKDecodingError]
    assert ours([literal(b"x", b"value", "plain", False)[:-1]]) == [hpack.HPACKDecodingError]


# ---------------------------------------------------------------------------------------------
# the caches


def test_a_repeated_nginx_block_is_decoded_once_and_the_table_kept_exact() -> None:
    blocks = HeaderBlocks(list)
    decodes = 0
    real = blocks.decoder.decode

    def counting(data: bytes) -> Headers:
        nonlocal decodes
        decodes += 1
        return real(data)

    blocks.decoder.decode = counting  # type: ignore[method-assign]
    lib = hpack.Decoder()
    for _ in range(40):
        assert blocks.view_of(NGINX) == [tuple(h) for h in lib.decode(NGINX, raw=True)]
        assert list(blocks.decoder.entries) == list(lib.header_table.dynamic_entries)
    assert decodes == 1
    # the table holds nothing but nginx's fields now: adding them again changes nothing, so the
    # block is a view like those that change nothing (for the connection's quick paths)
    assert blocks.steady is not None and list(blocks.views) == [NGINX]
    # a Go-style block that refers to the table is remembered while the table stays as it is
    again = indexed(62) + indexed(64)  # content-length, date
    first = blocks.view_of(again)
    assert first == [tuple(h) for h in lib.decode(again, raw=True)]
    assert blocks.views[again] == first
    gen = blocks.gen
    assert blocks.view_of(NGINX) == [tuple(h) for h in lib.decode(NGINX, raw=True)]
    assert blocks.views[again] == first and blocks.gen == gen  # a steady table: unchanged
    # a new date changes the table: views that may refer to it are forgotten
    assert blocks.view_of(nginx_block(3)) == [
        tuple(h) for h in lib.decode(nginx_block(3), raw=True)
    ]
    assert blocks.views == {} and blocks.steady is None and decodes == 3
    assert blocks.view_of(again) == [tuple(h) for h in lib.decode(again, raw=True)] != first
    assert list(blocks.decoder.entries) == list(lib.header_table.dynamic_entries)
