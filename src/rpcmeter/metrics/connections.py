"""What connections cost: TCP connect time, TLS handshake time (resumed handshakes apart) and,
with a new connection per request (``load.reuse = false``), the request's own time on it.

A driver that opens connections itself keeps one :class:`ConnectionCosts` per client process and
records into it (a few clock reads per connection, folded into histograms when a buffer fills);
the client reports it with its result, the runner merges the clients' exactly (histograms add) and
the case document carries it as ``connections`` beside the request latency
(:func:`rpcmeter.result.parts.connections_of`).
"""

from __future__ import annotations

import time
from array import array

import numpy as np

from rpcmeter.metrics.histogram import Histogram

PARTS = ("connect", "handshake", "handshake_resumed", "request")
_BUFFER = 4096


class ConnectionCosts:
    """Histograms (ns) of ``connect``, ``handshake``, ``handshake_resumed`` and ``request``."""

    __slots__ = ("_bufs", "hists", "per_request")

    def __init__(self, per_request: bool = False) -> None:
        self.per_request = per_request  # a new connection per request (load.reuse = false)
        self.hists = {part: Histogram() for part in PARTS}
        self._bufs: dict[str, array[int]] = {part: array("q") for part in PARTS}

    def record(self, part: str, ns: int) -> None:
        buf = self._bufs[part]
        buf.append(ns)
        if len(buf) >= _BUFFER:
            self._fold(part)

    def _fold(self, part: str) -> None:
        buf = self._bufs[part]
        if buf:
            self.hists[part].record_array(np.frombuffer(buf, dtype=np.int64))
            self._bufs[part] = array("q")

    def fold(self) -> None:
        for part in PARTS:
            self._fold(part)

    def reset(self) -> None:
        """Forget what was recorded (the warmup's connections)."""
        self.hists = {part: Histogram() for part in PARTS}
        self._bufs = {part: array("q") for part in PARTS}

    def merge(self, other: ConnectionCosts) -> None:
        other.fold()
        self.per_request = self.per_request or other.per_request
        for part in PARTS:
            self.hists[part].merge(other.hists[part])

    @property
    def connections(self) -> int:
        self.fold()
        return self.hists["connect"].count


def clock() -> int:
    return time.perf_counter_ns()
