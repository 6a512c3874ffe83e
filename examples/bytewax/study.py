"""What study 003's dataflows do, whatever bytewax's API: their items, the pace of a slow
(``long_input``) source, and the light and heavy maps. The ``flow_v0*.py`` files wire these into
the API of one range of bytewax versions; this module does not import bytewax.

A source emits ``items`` items; a slow one makes each wait ``interval`` seconds after the previous
one (the study: 20 items, 0.25 s) and, while it waits, answers "nothing yet" at once (``None``;
the flows return an empty batch where the API asks for a list) instead of blocking: how often a
worker asks again is what the study measures.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable


def flag(value: object) -> bool:
    """A boolean from a command line's ``true``/``false`` (rpcmeter writes booleans so)."""
    if isinstance(value, str):
        return value.strip().lower() in ("1", "true", "yes", "on")
    return bool(value)


class Paced:
    """One source partition: ``items`` random digits, each ``interval`` s after the previous."""

    def __init__(self, items: int, interval: float) -> None:
        self.left = items
        self.interval = interval
        self.last = time.time()

    def poll(self) -> int | None:
        """The next item, None while it is not ready (never blocks); StopIteration at the end."""
        if self.left <= 0:
            raise StopIteration
        if self.interval > 0:
            now = time.time()
            if now - self.last < self.interval:
                return None
            self.last = now
        self.left -= 1
        return random.randrange(0, 10)


def minus_one(x: int) -> int:
    return x - 1


def heavy_minus_one(x: int) -> int:
    """The study's heavy map: CPU and memory (a list of a million ints summed) for each item."""
    sum(list(range(1_000_000)))
    return x - 1


def stringy(x: int) -> str:
    return f"<dance>{x}</dance>"


def mapper(heavy_map: object) -> Callable[[int], int]:
    return heavy_minus_one if flag(heavy_map) else minus_one


def pace(long_input: object, interval: float) -> float:
    return float(interval) if flag(long_input) else 0.0
