"""HPACK header blocks as a client connection reads them (RFC 7541): decoded exactly as the
``hpack`` library's ``Decoder`` decodes them (the same header lists, the same dynamic table after
every block, the same errors), at a fraction of its cost, and not decoded again when a block
was seen before and decoding it again cannot mean anything else.

Why: ``hpack`` is pure Python and decodes Huffman strings a nibble at a time, with a debug
log call per header; a reply's block from nginx (``:status``, ``server``, ``date``,
``content-type``, ``content-length``, all but the first Huffman coded and added to the dynamic
table) cost about 30 us to decode, more than the rest of the request. No well-kept compiled HPACK
decoder exists for Python. So:

- :class:`Decoder` decodes a block itself, in one pass over its bytes, with the library's
  static table, entry sizes and checks (and its exception classes), Huffman strings through a
  byte-at-a-time table built from the library's own nibble table (:func:`decode_huffman`) and
  remembered per string (a ``date`` or a ``server`` repeats). The ``hpack`` library stays the
  reference: the tests check that both agree on every block shape (nginx's, Go's, python-hyper
  ``h2``'s, with and without Huffman and indexing, with table size updates, truncated and
  corrupted blocks).
- :class:`HeaderBlocks` keeps what the owner makes of each block (its ``view``), keyed by the
  block's bytes, in one of two caches:

  ``views`` holds the blocks whose decoding left the dynamic table as it was; a block that refers
  to the dynamic table means the same only while the table is the same, so ``views`` is emptied
  whenever a block changes the table (``gen`` counts the times). Go's and ``h2``'s replies, which
  index their headers once and then refer to them, are found here.

  ``effects`` holds the blocks that change the table but do not refer to it (every field a
  static index or a literal with a literal or static name): what they mean depends on their
  bytes alone, and what they do to the table is the same list of insertions (and size updates)
  every time. A block found here has its insertions applied to the table (so the table stays
  exact) and its view returned, without decoding. nginx's replies, which add the same four
  fields to the table on every reply, are found here.

A block that refers to the dynamic table and changes it (Go's reply when its ``date`` changes)
is decoded every time it comes.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from typing import Any

import hpack
from hpack.huffman_table import HUFFMAN_TABLE
from hpack.table import HeaderTable

Headers = list[tuple[bytes, bytes]]
Effects = list[tuple[bytes, bytes] | int]  # what a block did to the table (see Decoder)

STATIC: tuple[tuple[bytes, bytes], ...] = HeaderTable.STATIC_TABLE
N_STATIC = len(STATIC)
ENTRY_OVERHEAD = 32  # RFC 7541, 4.1: an entry's size is its name's and value's lengths + 32
VARINT_MAX_LENGTH = 5  # bytes of an integer, prefix included, as the hpack library allows
DEFAULT_TABLE_SIZE = HeaderTable.DEFAULT_SIZE

# the hpack library's Huffman state machine: 256 states x 16 nibbles of (state, flags, symbol)
_COMPLETE, _EMIT, _FAIL = 1, 2, 4
FAILED = 256  # the state after an invalid code: it stays there


def _byte_table() -> list[tuple[int, bytes, bool]]:
    """The library's nibble table composed into one of bytes: per ``state << 8 | byte``, the
    next state, the symbols emitted, and whether the string may end there."""
    table: list[tuple[int, bytes, bool]] = []
    symbols: dict[bytes, bytes] = {}
    for state in range(257):
        for byte in range(256):
            if state == FAILED:
                table.append((FAILED, b"", False))
                continue
            s1, f1, o1 = HUFFMAN_TABLE[state * 16 + (byte >> 4)]
            s2, f2, o2 = HUFFMAN_TABLE[s1 * 16 + (byte & 15)]
            if (f1 | f2) & _FAIL:
                table.append((FAILED, b"", False))
                continue
            out = (bytes((o1,)) if f1 & _EMIT else b"") + (bytes((o2,)) if f2 & _EMIT else b"")
            table.append((s2, symbols.setdefault(out, out), bool(f2 & _COMPLETE)))
    return table


_TABLE: list[tuple[int, bytes, bool]] = []


def huffman_table() -> list[tuple[int, bytes, bool]]:
    """The byte table of :func:`decode_huffman`, built on first use (65,792 entries: 20-90 ms of
    CPU once per process): :class:`HeaderBlocks` builds it when the first connection is made, so
    that a case without warmup does not pay it in its first reply's latency."""
    if not _TABLE:
        _TABLE.extend(_byte_table())
    return _TABLE


def decode_huffman(data: bytes) -> bytes:
    """A Huffman-coded string (RFC 7541, 5.2) decoded a byte at a time; raises
    ``hpack.HPACKDecodingError`` for an invalid or incomplete code, as the library does."""
    if not data:
        return b""
    table = _TABLE or huffman_table()
    state = 0
    out: list[bytes] = []
    append = out.append
    entry = table[0]
    for byte in data:
        entry = table[state << 8 | byte]
        state = entry[0]
        append(entry[1])
    if state == FAILED:
        raise hpack.HPACKDecodingError("Invalid Huffman string")
    if not entry[2]:
        raise hpack.HPACKDecodingError("Incomplete Huffman string")
    return b"".join(out)


def _integer(data: bytes, pos: int, mask: int) -> tuple[int, int]:
    """The integer (RFC 7541, 5.1) whose prefix (``mask`` of its bits) is at ``pos``; the
    position after it. Errors as the library's ``decode_integer``."""
    try:
        number = data[pos] & mask
        index = 1
        if number == mask:
            shift = 0
            while True:
                byte = data[pos + index]
                index += 1
                if byte >= 128:
                    number += (byte - 128) << shift
                else:
                    number += byte << shift
                    break
                shift += 7
                if index > VARINT_MAX_LENGTH:
                    raise hpack.HPACKDecodingError(
                        f"Variable integer representation is too long: {data[pos:]!r}"
                    )
    except IndexError:
        raise hpack.HPACKDecodingError(
            f"Unable to decode HPACK integer representation from {data[pos:]!r}"
        ) from None
    return number, pos + index


class Decoder:
    """An HPACK decoder with the ``hpack`` library's behaviour (see the module doc): ``decode``
    returns ``(name, value)`` byte pairs and raises the library's exceptions
    (``HPACKDecodingError``, ``InvalidTableIndex``, ``InvalidTableSizeError``,
    ``OversizedHeaderListError``). After each block, :attr:`refers` tells whether it read the
    dynamic table and :attr:`effects` what it did to it (None: nothing; else a list of
    ``(name, value)`` insertions and ``int`` table size updates, in order)."""

    STRINGS = 1024  # Huffman strings remembered (then forgotten all at once)

    def __init__(self, max_header_list_size: int = 65536) -> None:
        self.max_header_list_size = max_header_list_size
        self.max_allowed_table_size = DEFAULT_TABLE_SIZE
        self.entries: deque[tuple[bytes, bytes]] = deque()  # the dynamic table, newest first
        self.size = 0
        self.maxsize = DEFAULT_TABLE_SIZE
        self.strings: dict[bytes, bytes] = {}
        self.refers = False
        self.effects: Effects | None = None

    @property
    def header_table_size(self) -> int:
        return self.maxsize

    @header_table_size.setter
    def header_table_size(self, value: int) -> None:
        self.resize(value)

    def resize(self, value: int) -> None:
        """The table's maximum size, as the library's ``HeaderTable.maxsize`` sets it."""
        old = self.maxsize
        self.maxsize = value
        if value <= 0:
            self.entries.clear()
            self.size = 0
        elif old > value:
            self._shrink()

    def add(self, name: bytes, value: bytes) -> None:
        """Insert an entry, evicting the oldest (an entry larger than the table empties it)."""
        size = len(name) + len(value) + ENTRY_OVERHEAD
        if size > self.maxsize:
            self.entries.clear()
            self.size = 0
            return
        self.entries.appendleft((name, value))
        self.size += size
        if self.size > self.maxsize:
            self._shrink()

    def _shrink(self) -> None:
        entries, size, maxsize = self.entries, self.size, self.maxsize
        while size > maxsize:
            name, value = entries.pop()
            size -= len(name) + len(value) + ENTRY_OVERHEAD
        self.size = size

    def apply(self, effects: Effects) -> None:
        """Do to the table what a block with these ``effects`` did (see :attr:`effects`)."""
        for effect in effects:
            if isinstance(effect, int):
                self.resize(effect)
            else:
                self.add(*effect)

    def _entry(self, index: int) -> tuple[bytes, bytes]:
        if 0 < index <= N_STATIC:
            return STATIC[index - 1]
        dynamic = index - N_STATIC - 1
        if 0 <= dynamic < len(self.entries):
            self.refers = True
            return self.entries[dynamic]
        raise hpack.InvalidTableIndex(f"Invalid table index {index}")

    def _string(self, data: bytes, pos: int) -> tuple[bytes, int]:
        """A string literal (RFC 7541, 5.2) at ``pos``; the position after it."""
        if pos >= len(data):
            raise hpack.HPACKDecodingError("Truncated header block")
        first = data[pos]
        length = first & 0x7F
        if length == 0x7F:
            length, start = _integer(data, pos, 0x7F)
        else:
            start = pos + 1
        end = start + length
        if end > len(data):
            raise hpack.HPACKDecodingError("Truncated header block")
        raw = data[start:end]
        if not first & 0x80:
            return raw, end
        text = self.strings.get(raw)
        if text is None:
            text = decode_huffman(raw)
            if len(self.strings) >= self.STRINGS:
                self.strings.clear()
            self.strings[raw] = text
        return text, end

    def decode(self, data: bytes) -> Headers:
        """The header list of one whole block (see the class doc)."""
        headers: Headers = []
        self.refers = False
        effects: Effects | None = None
        pos, n = 0, len(data)
        inflated = 0
        limit = self.max_header_list_size
        while pos < n:
            first = data[pos]
            if first & 0x80:  # an indexed field
                index = first & 0x7F
                if index == 0x7F:
                    index, pos = _integer(data, pos, 0x7F)
                else:
                    pos += 1
                header = self._entry(index)
            elif first & 0x40 or not first & 0x20:  # a literal field
                indexing = bool(first & 0x40)
                mask = 0x3F if indexing else 0x0F
                index = first & mask
                if index == mask:
                    index, pos = _integer(data, pos, mask)
                else:
                    pos += 1
                if index:
                    name = self._entry(index)[0]
                else:
                    name, pos = self._string(data, pos)
                value, pos = self._string(data, pos)
                header = (name, value)
                if indexing:
                    self.add(name, value)
                    if effects is None:
                        effects = []
                    effects.append(header)
            else:  # a dynamic table size update
                if headers:
                    raise hpack.HPACKDecodingError(
                        "Table size update not at the start of the block"
                    )
                size, pos = _integer(data, pos, 0x1F)
                if size > self.max_allowed_table_size:
                    raise hpack.InvalidTableSizeError("Encoder exceeded max allowable table size")
                self.resize(size)
                if effects is None:
                    effects = []
                effects.append(size)
                continue
            headers.append(header)
            inflated += len(header[0]) + len(header[1]) + ENTRY_OVERHEAD
            if inflated > limit:
                raise hpack.OversizedHeaderListError(
                    f"A header list larger than {limit} has been received"
                )
        if self.maxsize > self.max_allowed_table_size:
            raise hpack.InvalidTableSizeError("Encoder did not shrink table size to within the max")
        self.effects = effects
        return headers


def identity(headers: Headers) -> Any:
    return headers


class HeaderBlocks:
    """The header blocks of one connection and what ``view`` makes of each (see the module doc):
    :meth:`view_of` gives a block's view, from the caches or decoded (raising the ``hpack``
    library's exceptions). The owner may look a block up in :attr:`views` itself (a block found
    there means what it meant, and does nothing to the table); :attr:`gen` counts the times
    :attr:`views` was emptied."""

    def __init__(
        self,
        view: Callable[[Headers], Any] = identity,
        max_header_list_size: int = 65536,
        cache_blocks: int = 256,
    ) -> None:
        self.view = view
        huffman_table()  # built with the first connection, before a case measures anything
        self.decoder = Decoder(max_header_list_size)
        self.cache_blocks = cache_blocks  # blocks remembered in each cache (0: none)
        self.views: dict[bytes, Any] = {}
        self.effects: dict[bytes, tuple[Any, Effects, int]] = {}
        self.gen = 0
        # the latest run of one block's insertions applied again and again: once they add up to
        # the table's size, the table holds nothing else, and applying them again leaves it as
        # it is (``steady``)
        self.run: Effects | None = None
        self.run_size = 0
        self.steady: Effects | None = None

    def view_of(self, block: bytes) -> Any:
        """What ``view`` makes of ``block``, the table updated as decoding it would."""
        view = self.views.get(block)
        if view is not None:
            return view
        known = self.effects.get(block)
        if known is None:
            return self.decode(block)
        view, effects, size = known
        if effects is not self.steady:
            self.decoder.apply(effects)
            self._changed()
            self._ran(effects, size)
        if effects is self.steady:  # it changes nothing now: a view like the others
            self._remember(block, view)
        return view

    def _ran(self, effects: Effects, size: int) -> None:
        """``effects`` (inserting ``size`` bytes of entries; -1: they resize the table too)
        were applied to the table."""
        if effects is self.run:
            self.run_size += size
        else:
            self.run, self.run_size, self.steady = effects, size, None
        if size >= 0 and self.run_size >= self.decoder.maxsize:
            # the table holds only entries of this run, the newest that fit: inserting the
            # same entries again evicts as many of the same, oldest first (RFC 7541, 4.4)
            self.steady = effects

    def _remember(self, block: bytes, view: Any) -> None:
        """Keep ``view`` in :attr:`views` (the block changes nothing in the table as it is)."""
        views = self.views
        if len(views) >= self.cache_blocks:
            self._changed()
        if self.cache_blocks:
            views[block] = view

    def decode(self, block: bytes) -> Any:
        """Decode ``block`` (not looked up), remember its view where it may be reused."""
        decoder = self.decoder
        try:
            headers = decoder.decode(block)
        except hpack.HPACKError:
            self._changed()  # it may have changed the table before it failed
            self.run = self.steady = None
            raise
        view = self.view(headers)
        effects = decoder.effects
        if effects is None:
            self._remember(block, view)
            return view
        self._changed()
        self.steady = None
        size = -1
        if not any(isinstance(e, int) for e in effects):
            size = sum(len(n) + len(v) + ENTRY_OVERHEAD for n, v in effects)  # type: ignore[misc]
        self._ran(effects, size)
        if not decoder.refers and self.cache_blocks:
            if len(self.effects) >= self.cache_blocks:
                self.effects.clear()
            self.effects[block] = (view, effects, size)
        return view

    def _changed(self) -> None:
        """The table changed: the views of blocks that may refer to it are forgotten."""
        if self.views:
            self.views.clear()
            self.gen += 1
