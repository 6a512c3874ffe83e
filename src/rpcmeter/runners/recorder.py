"""A loop's :class:`Recorder`: its preallocated sample buffers and their folds into its tallies
(:mod:`rpcmeter.runners.recording`), and how a mix's loop keeps each sample's call
(:func:`tagging`, :func:`tagged_caller`).

A module of its own, so that the compiled build (``setup.py``) compiles the recorder with the
closed loop (:mod:`rpcmeter.runners.event_loop`): the position and the buffers a reply's
callback reads and sets are then a native object's fields, not a Python object's slots (the
position boxed at every set).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from rpcmeter.drivers.base import Caller, Done
from rpcmeter.errors import describe, error_kind
from rpcmeter.metrics.histogram import Histogram
from rpcmeter.protocols.timing import ServerTime
from rpcmeter.runners.recording import (
    BUFFER,
    UNUSED,
    CallTally,
    Tally,
    ThreadStats,
    Window,
    is_fatal,
    mix_of,
    samples,
)


class Recorder:
    """Preallocated sample buffers of one loop (or one event loop), folded into histograms when
    full: latencies in ``buf`` (with ``uncorrected``, an open loop's latencies from the actual
    send in ``ubuf``, at the same index); with server time (:meth:`served`), of the same
    request (same index ``spos``) the server-reported compute time in ``sbuf``, its queue time
    in ``qbuf`` (-1: not reported) and the latency minus both in ``nbuf``.

    The buffers fold into the tally of the interval the loop is in (``window``, index
    ``index``); :meth:`close` ends that interval: it is added to the loop's totals (``stats``)
    and handed to ``windows`` (the client's box, :class:`~rpcmeter.runners.windows.Windows`),
    if there is one."""

    def __init__(
        self,
        stats: ThreadStats,
        server_time: bool,
        calls: Sequence[str] = (),
        uncorrected: bool = False,
        windows: Any = None,
    ) -> None:
        self.stats = stats
        self.buf = samples(BUFFER)
        self.ubuf = samples(BUFFER if uncorrected else 0)
        self.pos = 0
        size = BUFFER if server_time else 0
        self.sbuf = samples(size)
        self.nbuf = samples(size)
        self.qbuf = samples(size)
        self.spos = 0
        # a mix: the call of each latency in buf (same index), and each call's tally (the
        # case's, not its intervals')
        self.kbuf = samples(BUFFER if calls else 0, "B")
        self.kpos = 0
        if calls and not stats.calls:
            stats.calls = [CallTally(name) for name in calls]
        # without a window box, the loop's totals are its one window
        self.window: Tally = self.new_window() if windows is not None else stats
        self.index = 0
        self.windows = windows
        self._sent = self._late = 0

    def new_window(self) -> Window:
        """A window with histograms for what this loop records only (the others the shared
        :data:`UNUSED`): a window a second per loop allocates no more than it fills."""
        timed = len(self.sbuf) > 0
        return Window(
            server_hist=Histogram() if timed else UNUSED,
            net_hist=Histogram() if timed else UNUSED,
            queue_hist=Histogram() if timed else UNUSED,
            uhist=Histogram() if len(self.ubuf) else UNUSED,
        )

    def served(self, latency: int, server: ServerTime) -> None:
        """Keep the server's times of a reply whose latency was ``latency`` (ns)."""
        app, queue = server
        s = self.spos
        self.sbuf[s] = app
        if queue is None:
            self.qbuf[s] = -1
            self.nbuf[s] = latency - app
        else:
            self.qbuf[s] = queue
            self.nbuf[s] = latency - app - queue
        self.spos = s + 1

    def fold(self) -> None:
        w = self.window
        if self.pos:
            latencies = np.frombuffer(self.buf, dtype=np.int64, count=self.pos)
            w.hist.record_array(latencies)
            if len(self.ubuf):
                w.uhist.record_array(np.frombuffer(self.ubuf, dtype=np.int64, count=self.pos))
            w.ok += self.pos
            if self.kpos:
                assert self.kpos == self.pos, "one call per latency"
                tags = np.frombuffer(self.kbuf, dtype=np.uint8, count=self.kpos)
                for k, call in enumerate(self.stats.calls):
                    mine = latencies[tags == k]
                    call.hist.record_array(mine)
                    call.ok += len(mine)
                self.kpos = 0
            self.pos = 0
        if self.spos:
            w.server_hist.record_array(np.frombuffer(self.sbuf, dtype=np.int64, count=self.spos))
            w.net_hist.record_array(np.frombuffer(self.nbuf, dtype=np.int64, count=self.spos))
            queued = np.frombuffer(self.qbuf, dtype=np.int64, count=self.spos)
            w.queue_hist.record_array(queued[queued >= 0])
            self.spos = 0

    def close(self, index: int | None = None) -> None:
        """End the current interval (what the buffers hold is not folded: it goes to the next
        one) and start interval ``index`` (None: the loop is done)."""
        w, stats, closing = self.window, self.stats, self.index
        if index is not None:
            self.index = index
        if not isinstance(w, Window):  # no window box: the totals are the one window
            return
        w.sent, w.late = stats.sent - self._sent, stats.late - self._late
        self._sent, self._late = stats.sent, stats.late
        stats.add(w)
        if self.windows is not None and (w.requests or w.sent):
            self.windows.put(closing, w)
        self.window = self.new_window()

    def finish(self) -> None:
        """Fold what the buffers hold and close the last interval: ``stats`` has it all."""
        self.fold()
        self.close()

    def done(self) -> int:
        """Requests answered or failed so far (the progress line's count)."""
        w = self.window
        return self.stats.requests + (w.requests if w is not self.stats else 0) + self.pos

    def error(self, exc: BaseException, fatal_types: tuple[type[BaseException], ...]) -> bool:
        """Count an error; True when it is fatal for this loop's connection."""
        kind = error_kind(exc)
        fatal = is_fatal(exc, fatal_types)
        if fatal and not isinstance(exc, OSError | EOFError) and not getattr(exc, "kind", None):
            kind = "connection_closed"  # a driver's own fatal type that names no kind
        errors = self.window.errors
        errors[kind] = errors.get(kind, 0) + 1
        self.stats.first_error.setdefault(kind, str(exc)[:200])
        if fatal:
            self.stats.fatal = (describe(exc) if kind == error_kind(exc) else f"{kind}: {exc}")[
                :300
            ]
        return fatal

    def call_error(self, call: int, exc: BaseException) -> None:
        """Count an error of a mix's call ``call`` too (beside :meth:`error`)."""
        tally = self.stats.calls[call]
        kind = error_kind(exc)
        tally.errors[kind] = tally.errors.get(kind, 0) + 1
        tally.first_error.setdefault(kind, str(exc)[:200])


def tagging(mix: Any, rec: Recorder, done: Done) -> Done:
    """``done`` of a mix's loop: before it records a reply, the request's call is kept at the
    same place (``rec.kbuf``), or its error counted for that call."""
    kbuf = rec.kbuf

    def on_reply(server_ns: ServerTime | None, err: BaseException | None) -> None:
        if err is None:
            kpos = rec.kpos
            kbuf[kpos] = mix.current
            rec.kpos = kpos + 1
        else:
            rec.call_error(mix.current, err)
        done(server_ns, err)

    return on_reply


def tagged_caller(call: Caller, rec: Recorder) -> Caller:
    """A mix's caller on a thread loop, each call's reply or error kept for its call (as
    :func:`tagging`)."""
    mix = mix_of(call)
    if mix is None:
        return call
    kbuf = rec.kbuf

    def tagged() -> object:
        try:
            out = call()
        except Exception as exc:
            rec.call_error(mix.current, exc)
            raise
        kpos = rec.kpos
        kbuf[kpos] = mix.current
        rec.kpos = kpos + 1
        return out

    return tagged
