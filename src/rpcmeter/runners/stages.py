"""Load that changes within a case, as arithmetic: the stages of a case (:class:`LoadStage`), the
intervals its time series is cut into (:class:`WindowClock`), the send times of an open loop whose
rate changes (:class:`RateProfile`) and the loops a closed loop runs in each stage
(:func:`loops_in`).

Every time here is in nanoseconds from the case's start: the one start time that every client
of the case (local, or on a cluster's workers) converts to its own clock when the gate opens.
Nothing here reads a clock.
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import accumulate


@dataclass(frozen=True)
class LoadStage:
    """One stage of a case's load: ``duration_s`` seconds of an open loop whose rate (requests/s
    in total over the clients) goes from ``start_rate`` to ``rate`` linearly (``start_rate``
    None: ``rate`` throughout), or of ``concurrency`` closed loops in total."""

    duration_s: float
    rate: float | None = None
    start_rate: float | None = None
    concurrency: int | None = None
    name: str = ""

    @property
    def duration_ns(self) -> int:
        return round(self.duration_s * 1e9)

    @property
    def rates(self) -> tuple[float, float]:
        """(rate at the stage's start, rate at its end), requests/s in total."""
        end = self.rate or 0.0
        return (end if self.start_rate is None else self.start_rate), end

    @property
    def offered(self) -> float:
        """Requests the stage offers in total (its rate integrated over its duration)."""
        a, b = self.rates
        return (a + b) / 2 * self.duration_s

    def label(self, index: int) -> str:
        """What the reports call the stage: its name, else its number (1-based)."""
        return self.name or str(index + 1)


def loops_in(concurrency: int, clients: int, client: int) -> int:
    """Client ``client``'s share of ``concurrency`` loops spread over ``clients`` clients (the
    first ``concurrency % clients`` clients run one more)."""
    return concurrency // clients + (1 if client < concurrency % clients else 0)


def active_spans(
    stages: Sequence[LoadStage], clients: int, client: int, loop: int
) -> list[tuple[int, int]]:
    """When loop ``loop`` of client ``client`` runs in a closed-loop staged case: the
    (start, end) ns of each run of consecutive stages in which it is one of its client's share
    (a loop beyond the share is parked)."""
    spans: list[tuple[int, int]] = []
    start = 0
    for stage in stages:
        end = start + stage.duration_ns
        if loop < loops_in(stage.concurrency or 0, clients, client):
            if spans and spans[-1][1] == start:
                spans[-1] = (spans[-1][0], end)
            else:
                spans.append((start, end))
        start = end
    return spans


class WindowClock:
    """The intervals of a case: ``interval_ns`` long from the case's start, each stage starting
    one of its own (so that no interval spans two stages; a stage's last interval may be
    shorter). Without stages (``stage_ns`` empty) the intervals go on for as long as the case.
    Window ``i`` runs from :meth:`start` to :meth:`end`; time after the last stage counts in the
    last interval (replies still in flight when the stages are over)."""

    def __init__(self, interval_ns: int, stage_ns: Sequence[int] = ()) -> None:
        if interval_ns <= 0:
            raise ValueError("interval_ns must be positive")
        self.interval_ns = interval_ns
        self.stage_starts = [0, *accumulate(stage_ns)]  # and the end of the last
        self.staged = bool(stage_ns)
        bounds: list[int] = []
        stage_of: list[int] = []
        for s, length in enumerate(stage_ns):
            start = self.stage_starts[s]
            n = max(1, math.ceil(length / interval_ns))
            bounds += [start + j * interval_ns for j in range(n)]
            stage_of += [s] * n
        self._bounds = bounds
        self._stage_of = stage_of

    @property
    def windows(self) -> int | None:
        """How many windows a staged case has (None: as many as it lasts)."""
        return len(self._bounds) if self.staged else None

    def index_at(self, offset_ns: int) -> int:
        """The window that time ``offset_ns`` (from the case's start) falls in."""
        if offset_ns <= 0:
            return 0
        if not self.staged:
            return offset_ns // self.interval_ns
        return max(0, bisect.bisect_right(self._bounds, offset_ns) - 1)

    def start(self, index: int) -> int:
        if not self.staged:
            return index * self.interval_ns
        return self._bounds[index]

    def end(self, index: int) -> int:
        """Where window ``index`` ends; the last window of a staged case never ends (it takes
        the replies that come after the stages)."""
        if not self.staged:
            return (index + 1) * self.interval_ns
        return self._bounds[index + 1] if index + 1 < len(self._bounds) else 1 << 62

    def nominal_end(self, index: int) -> int:
        """Where window ``index`` ends on the schedule (the last stage's end for the last one)."""
        if self.staged and index + 1 >= len(self._bounds):
            return self.stage_starts[-1]
        return self.end(index)

    def stage_of(self, index: int) -> int | None:
        """The stage window ``index`` belongs to (None without stages)."""
        if not self.staged:
            return None
        return self._stage_of[min(index, len(self._stage_of) - 1)]

    def stage_windows(self, stage: int) -> range:
        """The windows of stage ``stage``."""
        first = bisect.bisect_left(self._stage_of, stage)
        return range(first, bisect.bisect_right(self._stage_of, stage))


class RateProfile:
    """The send times of one client's open loop over rate stages: slot ``k`` is due when the
    client's rate, integrated from the case's start, reaches ``k + phase`` (a constant rate
    gives ``(k + phase) / rate``; a ramp from ``a`` to ``b`` over ``D`` seconds solves
    ``a t + (b - a) t**2 / (2 D) = x``). ``rates`` are the client's own: (start, end, duration
    in seconds) per stage."""

    def __init__(self, rates: Sequence[tuple[float, float, float]], phase: float = 0.0) -> None:
        self.rates = list(rates)
        self.phase = phase
        counts = [(a + b) / 2 * d for a, b, d in self.rates]
        self.cum = [0.0, *accumulate(counts)]  # slots due before each stage's start
        self.starts_ns = [0.0, *accumulate(d * 1e9 for _, _, d in self.rates)]
        self.duration_ns = self.starts_ns[-1]
        # every slot due before the end of the last stage
        self.slots = max(0, math.ceil(self.cum[-1] - phase))

    def time_of(self, k: int) -> int:
        """When slot ``k`` is due, in ns from the case's start."""
        x = k + self.phase
        s = min(bisect.bisect_right(self.cum, x) - 1, len(self.rates) - 1)
        a, b, d = self.rates[s]
        x -= self.cum[s]
        if a == b:
            t = x / a
        else:
            slope = (b - a) / d
            t = (math.sqrt(max(0.0, a * a + 2 * slope * x)) - a) / slope
        return int(self.starts_ns[s] + t * 1e9)

    def count_at(self, offset_ns: float) -> float:
        """The client's rate integrated from the case's start to ``offset_ns``: the slots due by
        then (plus the phase)."""
        s = min(max(0, bisect.bisect_right(self.starts_ns, offset_ns) - 1), len(self.rates) - 1)
        a, b, d = self.rates[s]
        t = min(max(0.0, (offset_ns - self.starts_ns[s]) / 1e9), d)
        return self.cum[s] + a * t + (b - a) * t * t / (2 * d)

    def rate_at(self, offset_ns: float) -> float:
        """The client's rate (requests/s) at ``offset_ns`` from the case's start."""
        s = min(max(0, bisect.bisect_right(self.starts_ns, offset_ns) - 1), len(self.rates) - 1)
        a, b, d = self.rates[s]
        into = (offset_ns - self.starts_ns[s]) / 1e9
        return a + (b - a) * min(1.0, max(0.0, into / d))

    def due_in(self, stage: int) -> int:
        """How many slots fall in stage ``stage``."""
        lo = max(0, math.ceil(self.cum[stage] - self.phase))
        hi = max(0, math.ceil(self.cum[stage + 1] - self.phase))
        return hi - lo


def clock_of(interval_s: float, stages: Sequence[LoadStage]) -> WindowClock:
    """The window clock of a case: intervals of ``interval_s`` (``math.inf``: one window, the
    whole case) restarting at every stage."""
    interval = 1 << 62 if math.isinf(interval_s) else max(1, round(interval_s * 1e9))
    return WindowClock(interval, [s.duration_ns for s in stages])
