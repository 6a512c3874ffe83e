"""A case's figures over time: every client cuts its tallies into intervals (windows) and ships
them to the parent once per interval; the parent merges them into the case's time series and its
stages' figures (:class:`Timeline`), and tells its listeners each interval as it settles.

In a client, each loop's :class:`~rpcmeter.runners.recorder.Recorder` folds into the tally of the
window it is in; between its batches (where it already publishes progress and checks the clock)
a loop that has crossed a window's end closes the window: the window goes to the client's
:class:`Windows` box and is added to the loop's totals. Nothing is added per request. A thread
loop closes a window after the batch whose end crossed it, and that batch counts in it (a
batch lasts 10 to 20 ms, and one near a window's end is cut short to end about there, unless
the server stalls); an event loop closes its window at the window's end (a timer). A :class:`Shipper` thread sends the box's
windows to the parent shortly after each window ends (``GRACE_NS``), with the client's CPU time
so far, when it read it and how far its windows are closed (``through``); the windows left at the
end go with the client's report, with when its loops ended.

The parent's :class:`Timeline` merges the windows of all clients by index. A window is settled
once every client has shipped past it: it is then added to its stage's figures (full precision),
kept compact for the result (its histogram coarsened to :data:`SERIES_BITS` sub-bucket bits and
encoded; at most :data:`MAX_WINDOWS` of them, adjacent ones of a stage merged pairwise beyond
that, so the memory of a case that runs for hours stays flat) and handed to the listeners
(``on_window``: the live view, the Prometheus exporter). A piece that comes after its window
settled (a loop blocked in a long call) is merged in all the same and handed on as ``late``.

An interval is as long as the time it covers: the case's last one ends when the last client's
loops ended (a second's last few straggling replies make a short interval, not a whole second
of them). The clients' CPU goes to the intervals it was spent in: the CPU a client used between
two readings is spread over the windows between them, by how much of each that time covers.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from rpcmeter.metrics.histogram import Histogram
from rpcmeter.runners.recording import SUMMARY, Interval, Series, StageTally, Window
from rpcmeter.runners.stages import WindowClock

GRACE_NS = 60_000_000  # a client ships a window this long after its end (its loops' batches)
MAX_WINDOWS = 3600  # windows kept per case; beyond, adjacent windows of a stage merge pairwise
SERIES_BITS = 6  # sub-bucket bits of a window's stored histogram (a bucket spans 1/32 of it)

CpuFn = Callable[[], tuple[float, float]]  # the client's user and system CPU seconds so far


# ---- in a client ----------------------------------------------------------------------------


class Windows:
    """A client's windows, closed by its loops and not shipped yet, by index; ``base_ns`` is the
    case's start on this client's clock (``time.perf_counter_ns``)."""

    def __init__(self, clock: WindowClock, base_ns: int) -> None:
        self.clock = clock
        self.base_ns = base_ns
        self.lock = threading.Lock()
        self.pending: dict[int, Window] = {}

    def index_at(self, now_ns: int) -> int:
        return self.clock.index_at(now_ns - self.base_ns)

    def end_of(self, index: int) -> int:
        """When window ``index`` ends, on this client's clock."""
        return self.base_ns + self.clock.end(index)

    def put(self, index: int, window: Window) -> None:
        with self.lock:
            have = self.pending.get(index)
            if have is None:
                self.pending[index] = window
            else:
                have.add(window)

    def take(self) -> dict[int, Window]:
        with self.lock:
            out, self.pending = self.pending, {}
        return out


class Shipper:
    """Sends a client's closed windows (``("windows", {index: Window}, through, (user_s,
    sys_s), at_ns)``: ``at_ns`` when it read its CPU time, from the case's start) ``GRACE_NS``
    after each window's end, until :meth:`stop`."""

    def __init__(self, windows: Windows, send: Callable[[tuple[Any, ...]], None], cpu: CpuFn):
        self.windows = windows
        self.send = send
        self.cpu = cpu
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="rpcmeter-windows", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        w = self.windows
        index = 0
        while True:
            due = w.end_of(index) + GRACE_NS
            if self._stop.wait(max(0.0, (due - time.perf_counter_ns()) / 1e9)):
                return
            index = w.index_at(time.perf_counter_ns() - GRACE_NS)  # the window now running
            try:
                cpu, at_ns = self.cpu(), time.perf_counter_ns() - w.base_ns
                self.send(("windows", w.take(), index, cpu, at_ns))
            except (OSError, ValueError):  # the parent is gone: the client stops on its own
                return

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()


# ---- in the parent --------------------------------------------------------------------------


@dataclass(frozen=True)
class WindowEvent:
    """An interval handed to the listeners: window ``index`` of ``stage``, from ``start_s`` for
    ``seconds`` (of the case), its tally (full precision) and whether it is a ``late`` piece of a
    window handed on before (add it; do not show it as an interval of its own)."""

    index: int
    stage: int | None
    start_s: float
    seconds: float
    tally: Window
    late: bool = False


OnWindow = Callable[[WindowEvent], None]


class Timeline:
    """The parent's side: the windows of every client merged into the case's time series and
    stages (see the module doc). ``clients`` is how many clients ship; :meth:`add` takes a
    client's message, :meth:`finish` its report's last windows and CPU."""

    def __init__(self, clock: WindowClock, clients: int, on_window: OnWindow | None = None):
        self.clock = clock
        self.on_window = on_window
        self.open: dict[int, Window] = {}
        self.cpu: dict[int, tuple[float, float]] = {}  # window -> clients' CPU in it
        self.through = dict.fromkeys(range(clients), 0)  # client -> windows shipped before
        self.last_cpu = dict.fromkeys(range(clients), (0.0, 0.0))
        self.cpu_at = dict.fromkeys(range(clients), 0)  # client -> when it last read its CPU
        self.ended: dict[int, int] = {}  # client -> when its loops ended (from the case's start)
        self.done: set[int] = set()
        self.settled_through = 0
        self.intervals: list[Interval] = []
        self.stages: dict[int, StageTally] = {}
        self.total = StageTally()  # every window (the stages' sum)
        self.seen = 0  # one past the highest window any client shipped

    # what comes in
    def add(
        self,
        client: int,
        pieces: dict[int, Window],
        through: int,
        cpu: tuple[float, float] | None,
        at_ns: int | None = None,
    ) -> None:
        """A client's shipment: its windows, how far they are closed, its CPU so far and when
        it read it (ns from the case's start; None: unknown, the CPU goes to the window before
        ``through``)."""
        self._pieces(pieces)
        self.seen = max(self.seen, through)
        if cpu is not None:
            self._cpu(client, max(0, through - 1), cpu, at_ns)
        self.through[client] = max(self.through.get(client, 0), through)
        self._settle(min(self.through.values()))

    def finish(
        self,
        client: int,
        pieces: dict[int, Window],
        cpu: tuple[float, float] | None,
        ended_ns: int | None = None,
    ) -> None:
        """A client's last windows, its CPU at the end and when its loops ended (ns from the
        case's start; None: unknown): it ships nothing more."""
        self._pieces(pieces)
        last = max([self.through.get(client, 0) - 1, *pieces, 0])
        if ended_ns is not None:
            self.ended[client] = ended_ns
        if cpu is not None:
            self._cpu(client, last, cpu, ended_ns)
        self.seen = max(self.seen, last + 1)
        self.through[client] = 1 << 62
        self.done.add(client)
        if len(self.done) == len(self.through):
            self.close_all()
        else:
            self._settle(min(self.through.values()))

    def close_all(self, ran_through: bool = False) -> None:
        """Settle every window seen (the clients are done, or gone); CPU spread past the last
        window (read after the loops ended) counts in it. ``ran_through``: every client ran its
        whole load, so every stage ran, even a last one in which no request fell (a client ships
        no empty window): all the clock's windows are settled."""
        upto = max(self.seen, self.settled_through, max(self.open, default=-1) + 1)
        if ran_through and self.clock.windows is not None:
            upto = max(upto, self.clock.windows)
        for index in [i for i in self.cpu if i >= upto > 0]:
            user, system = self.cpu.pop(index)
            self._cpu_in(upto - 1, user, system)
        self._settle(upto)

    def _pieces(self, pieces: dict[int, Window]) -> None:
        for index, piece in sorted(pieces.items()):
            self.seen = max(self.seen, index + 1)
            if index < self.settled_through:
                self._late(index, piece)
            else:
                have = self.open.get(index)
                if have is None:
                    self.open[index] = piece
                else:
                    have.add(piece)

    def _cpu(
        self, client: int, index: int, cpu: tuple[float, float], at_ns: int | None = None
    ) -> None:
        """The CPU ``client`` used since its last reading: spread over the windows from that
        reading to this one (at ``at_ns``), by how much of each window that time covers; all in
        window ``index`` when the time of the reading is unknown."""
        user0, sys0 = self.last_cpu.get(client, (0.0, 0.0))
        self.last_cpu[client] = cpu
        du, ds = max(0.0, cpu[0] - user0), max(0.0, cpu[1] - sys0)
        if at_ns is None:
            self._cpu_in(index, du, ds)
            return
        since = self.cpu_at.get(client, 0)
        self.cpu_at[client] = max(since, at_ns)
        for window, share in self._spans(since, at_ns):
            self._cpu_in(window, du * share, ds * share)

    def _spans(self, since_ns: int, until_ns: int) -> list[tuple[int, float]]:
        """The windows from ``since_ns`` to ``until_ns`` (ns from the case's start), each with
        the share of that time it covers; the window at ``since_ns`` alone when it is no time."""
        clock = self.clock
        first = clock.index_at(since_ns)
        if until_ns <= since_ns:
            return [(first, 1.0)]
        out = []
        for window in range(first, clock.index_at(until_ns) + 1):
            lo, hi = max(since_ns, clock.start(window)), min(until_ns, clock.end(window))
            if hi > lo:
                out.append((window, (hi - lo) / (until_ns - since_ns)))
        return out or [(first, 1.0)]

    def _cpu_in(self, index: int, du: float, ds: float) -> None:
        """CPU seconds (user, system) spent in window ``index``."""
        if index < self.settled_through:  # the window went on without it: its stage takes it
            stage = self.stages.setdefault(self.clock.stage_of(index) or 0, StageTally())
            stage.cpu_user_s += du
            stage.cpu_sys_s += ds
            self.total.cpu_user_s += du
            self.total.cpu_sys_s += ds
            return
        u, s = self.cpu.get(index, (0.0, 0.0))
        self.cpu[index] = (u + du, s + ds)

    # settling
    def _settle(self, upto: int) -> None:
        while self.settled_through < upto:
            index = self.settled_through
            self.settled_through += 1
            tally = self.open.pop(index, None) or Window()
            user, system = self.cpu.pop(index, (0.0, 0.0))
            stage_index = self.clock.stage_of(index)
            stage = self.stages.setdefault(stage_index or 0, StageTally())
            for into in (stage, self.total):
                into.tally.add(tally)
                into.cpu_user_s += user
                into.cpu_sys_s += system
            stage.settled += 1
            start, end = self.clock.start(index), self._end(index)
            self.intervals.append(_interval(index, index, start, end, stage_index, tally))
            self.intervals[-1].cpu_s = user + system
            if len(self.intervals) > MAX_WINDOWS:
                self._thin()
            if self.on_window is not None:
                self.on_window(
                    WindowEvent(index, stage_index, start / 1e9, (end - start) / 1e9, tally)
                )

    def _end(self, index: int) -> int:
        """Where window ``index`` ends: on the schedule, but the case's last window (once every
        client has ended) when the last client's loops ended."""
        end = self.clock.nominal_end(index)
        ended = max(self.ended.values(), default=None)
        every = len(self.done) == len(self.through) and len(self.ended) == len(self.through)
        if ended is None or not every or index + 1 < self.seen:
            return end
        return max(ended, self.clock.start(index) + 1)

    def _late(self, index: int, piece: Window) -> None:
        stage_index = self.clock.stage_of(index)
        for into in (self.stages.setdefault(stage_index or 0, StageTally()), self.total):
            into.tally.add(piece)
        for n, kept in enumerate(self.intervals):
            if kept.first <= index <= kept.last:
                merged = kept.decoded()
                merged.merge(piece.hist)
                rebuilt = _interval(
                    kept.first, kept.last, kept.start_ns, kept.end_ns, kept.stage, piece, merged
                )
                rebuilt.requests += kept.requests
                rebuilt.ok += kept.ok
                rebuilt.sent += kept.sent
                rebuilt.late += kept.late
                rebuilt.cpu_s = kept.cpu_s
                for kind, count in kept.errors.items():
                    rebuilt.errors[kind] = rebuilt.errors.get(kind, 0) + count
                self.intervals[n] = rebuilt
                break
        if self.on_window is not None:
            start = self.clock.start(index)
            seconds = (self._end(index) - start) / 1e9
            self.on_window(WindowEvent(index, stage_index, start / 1e9, seconds, piece, late=True))

    def _thin(self) -> None:
        """Merge adjacent intervals of a stage pairwise (the time series' resolution halves)."""
        out: list[Interval] = []
        pending: Interval | None = None
        for interval in self.intervals:
            if pending is None:
                pending = interval
                continue
            if pending.stage == interval.stage:
                out.append(_merged(pending, interval))
                pending = None
            else:
                out.append(pending)
                pending = interval
        if pending is not None:
            out.append(pending)
        self.intervals = out

    # what goes out
    def finished_stages(self) -> list[int]:
        """The stages whose every window is settled (all of them measured)."""
        return [
            s
            for s, tally in sorted(self.stages.items())
            if self.clock.staged and tally.settled == len(self.clock.stage_windows(s))
        ]

    def series(self) -> Series:
        """What the time line holds now, as the outcome carries it."""
        return Series(self.clock, self.intervals, self.stages, self.finished_stages(), self.total)


def start_windows(clock: WindowClock, gate: Any) -> tuple[Windows, Shipper]:
    """A client's window box on the case's start (``gate.base_ns``, known once the gate opened)
    and the thread that ships it through the client's connection."""
    windows = Windows(clock, gate.base_ns)
    return windows, Shipper(windows, gate.conn.send, gate.cpu_s)


def stop_quietly(shipper: Shipper | None) -> None:
    """Stop a shipper if there is one (twice is fine)."""
    if shipper is not None:
        with contextlib.suppress(RuntimeError):
            shipper.stop()


def _interval(
    first: int,
    last: int,
    start_ns: int,
    end_ns: int,
    stage: int | None,
    tally: Window,
    hist: Histogram | None = None,
) -> Interval:
    """A window kept compact: its counts, latency summary and coarsened histogram."""
    h = tally.hist if hist is None else hist
    coarse = h.coarsened(SERIES_BITS) if h.count else None
    summary = h.summary_us() if h.count else {}
    return Interval(
        first=first,
        last=last,
        start_ns=start_ns,
        end_ns=end_ns,
        stage=stage,
        requests=tally.requests,
        ok=tally.ok,
        errors=dict(tally.errors),
        sent=tally.sent,
        late=tally.late,
        cpu_s=0.0,
        summary={k: summary[k] for k in SUMMARY if k in summary},
        histogram=coarse.to_dict() if coarse is not None else None,
    )


def _merged(a: Interval, b: Interval) -> Interval:
    """Two adjacent intervals of a stage as one."""
    hist = a.decoded()
    hist.merge(b.decoded())
    out = _interval(a.first, b.last, a.start_ns, b.end_ns, a.stage, Window(), hist)
    out.requests, out.ok = a.requests + b.requests, a.ok + b.ok
    out.sent, out.late, out.cpu_s = a.sent + b.sent, a.late + b.late, a.cpu_s + b.cpu_s
    out.errors = dict(a.errors)
    for kind, count in b.errors.items():
        out.errors[kind] = out.errors.get(kind, 0) + count
    return out


class StageTimer:
    """Calls ``on_stage(i)`` at the start of each stage ``i`` of ``clock`` (the case's start is
    ``start_epoch_ns``, ns since the epoch), from a thread of its own, until :meth:`stop`."""

    def __init__(
        self, clock: WindowClock, start_epoch_ns: int, on_stage: Callable[[int], None]
    ) -> None:
        self.starts = clock.stage_starts[:-1] if clock.staged else []
        self.base_ns = time.perf_counter_ns() + (start_epoch_ns - time.time_ns())
        self.on_stage = on_stage
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="rpcmeter-stages", daemon=True)
        if self.starts:
            self._thread.start()

    def _run(self) -> None:
        for i, offset in enumerate(self.starts):
            wait = (self.base_ns + offset - time.perf_counter_ns()) / 1e9
            if self._stop.wait(max(0.0, wait)):
                return
            self.on_stage(i)

    def stop(self) -> None:
        self._stop.set()
        if self._thread.ident is not None:
            self._thread.join()


def wait_until_epoch(epoch_ns: int) -> None:
    """Sleep until ``epoch_ns`` (ns since the epoch)."""
    left = (epoch_ns - time.time_ns()) / 1e9
    if left > 0:
        time.sleep(left)
