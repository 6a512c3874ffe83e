"""Where the requests of a loop come from when they are not all the same: data files read once, a
rotation through their entries per loop, and the seeded weighted draw of a mix of calls. No
sockets and no protocol here: the drivers encode what these give.

Data files (``data_file``): a ``.jsonl`` (or ``.ndjson``) file holds one JSON value a line (blank
lines skipped); any other file is one JSON document, an array of entries (sent in turn) or a single
entry. :func:`read_entries` reads one, naming the file and the line of a fault in one line
(``requests.jsonl:17: not JSON: ...``); a missing or empty file is an error too. Each entry is
encoded once, when the suite is loaded; a loop then sends them in turn (:class:`Rotation`),
starting at its own offset, so that loops do not all send the same entry at the same time.

A mix (``kind = "mix"``) draws each request's call with the calls' weights from the loop's own
generator (:class:`Draw`, seeded from the suite's seed, the client and the loop), in blocks, so
the draw costs an index per request.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import accumulate
from pathlib import Path
from typing import Any

from rpcmeter.protocols.templates import Loop

LINE_FORMATS = (".jsonl", ".ndjson")
DRAW_BLOCK = 1024  # calls drawn at a time
TOO_DEEP = "JSON arrays or objects nested too deeply"


class DataError(ValueError):
    """A data file or a mix that cannot be used (one line naming the file and line)."""


@dataclass(frozen=True)
class Entry:
    """One entry of a data file: its value and where it was (``requests.jsonl:17``)."""

    value: Any
    where: str


def read_entries(path: Path, shown: str) -> list[Entry]:
    """The entries of the data file at ``path`` (``shown`` as the suite names it)."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise DataError(f"no such file {shown}") from None
    except IsADirectoryError:
        raise DataError(f"{shown} is a directory, not a data file") from None
    except UnicodeDecodeError as exc:
        raise DataError(f"{shown}: not UTF-8 text (byte offset {exc.start})") from None
    except OSError as exc:
        raise DataError(f"cannot read {shown}: {exc.strerror or exc}") from None
    if path.suffix.lower() in LINE_FORMATS:
        entries = []
        for number, line in enumerate(text.splitlines(), 1):
            if not line.strip():
                continue
            try:
                entries.append(Entry(json.loads(line), f"{shown}:{number}"))
            except json.JSONDecodeError as exc:
                raise DataError(
                    f"{shown}:{number}: not JSON: {exc.msg} (column {exc.colno})"
                ) from None
            except RecursionError:
                raise DataError(f"{shown}:{number}: {TOO_DEEP}") from None
    else:
        if not text.strip():
            raise DataError(f"{shown} is empty")
        try:
            doc = json.loads(text)
        except json.JSONDecodeError as exc:
            raise DataError(
                f"{shown}:{exc.lineno}: not JSON: {exc.msg} (column {exc.colno})"
            ) from None
        except RecursionError:
            raise DataError(f"{shown}: {TOO_DEEP}") from None
        if isinstance(doc, list):
            entries = [Entry(v, f"{shown}[{i}]") for i, v in enumerate(doc)]
        else:
            entries = [Entry(doc, shown)]
    if not entries:
        raise DataError(f"{shown} is empty (no entries)")
    return entries


class Rotation:
    """A loop's turn through ``n`` entries, from an offset of its own: loop ``g`` of ``G`` starts
    at entry ``g * n // G``."""

    __slots__ = ("i", "n")

    def __init__(self, n: int, loop: Loop) -> None:
        self.n = n
        self.i = loop.index * n // loop.total if loop.total else 0

    def next(self) -> int:
        i = self.i
        self.i = i + 1 if i + 1 < self.n else 0
        return i


class Draw:
    """A loop's draw of calls by weight: ``current`` is the call of the request in flight
    (:meth:`next` draws the next one). Blocks of :data:`DRAW_BLOCK` draws come from the loop's
    generator (:meth:`~rpcmeter.protocols.templates.Loop.rng` ``"mix"``)."""

    __slots__ = ("block", "calls", "cum", "current", "i", "rng")

    def __init__(self, weights: Sequence[float], loop: Loop) -> None:
        self.cum = list(accumulate(weights))
        self.calls = range(len(weights))
        self.rng = loop.rng("mix")
        self.block: list[int] = []
        self.i = 0
        self.current = 0
        self.refill()

    def refill(self) -> None:
        self.block = self.rng.choices(self.calls, cum_weights=self.cum, k=DRAW_BLOCK)
        self.i = 0

    def next(self) -> int:
        i = self.i
        if i >= DRAW_BLOCK:
            self.refill()
            i = 0
        self.i = i + 1
        self.current = k = self.block[i]
        return k
