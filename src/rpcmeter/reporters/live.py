"""The live view of a running case on a terminal (``rpcmeter run``, unless ``--no-live`` or the
output is not a terminal): under the progress line, the last interval's requests/s, p50 and p99
latency and errors, each with a sparkline of the intervals before it, redrawn with rich's
:class:`~rich.live.Live` about once a second (at each interval of the case's time series,
:meth:`rpcmeter.run.events.RunListener.interval`) and with the progress line. It draws from the
parent's events only: the clients do nothing more for it.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Iterable
from typing import TextIO

from rich.console import Console, Group
from rich.live import Live
from rich.text import Text

from rpcmeter.run.events import IntervalFigures
from rpcmeter.text import printable

HISTORY = 40  # intervals a sparkline shows
BARS = "▁▂▃▄▅▆▇█"


def sparkline(values: Iterable[float]) -> str:
    """``values`` as bars from the lowest (▁) to the highest (█) of them; a gap for NaN."""
    vs = list(values)
    finite = [v for v in vs if math.isfinite(v)]
    if not finite:
        return ""
    lo, hi = min(finite), max(finite)
    span = hi - lo
    out = []
    for v in vs:
        if not math.isfinite(v):
            out.append(" ")
        elif span <= 0:
            out.append(BARS[0] if hi == 0 else BARS[len(BARS) // 2])
        else:
            out.append(BARS[min(len(BARS) - 1, int((v - lo) / span * len(BARS)))])
    return "".join(out)


def _ms(us: float) -> str:
    return "-" if not math.isfinite(us) else f"{us / 1e3:.3f}" if us < 1e4 else f"{us / 1e3:,.1f}"


class LiveView:
    """The live lines of one terminal: :meth:`line` sets the progress line, :meth:`interval`
    adds a settled interval of the running case, :meth:`new_case` forgets the last case's,
    :meth:`stop` takes the view off the screen (it comes back with the next line)."""

    def __init__(self, stream: TextIO) -> None:
        self.console = Console(file=stream, force_terminal=True, highlight=False)
        self.live: Live | None = None
        self.progress = ""
        self.last: IntervalFigures | None = None
        self.rps: deque[float] = deque(maxlen=HISTORY)
        self.p50: deque[float] = deque(maxlen=HISTORY)
        self.p99: deque[float] = deque(maxlen=HISTORY)
        self.errors: deque[float] = deque(maxlen=HISTORY)
        self._figures: tuple[IntervalFigures, Text] | None = None  # the last, drawn

    def new_case(self) -> None:
        self.last = None
        for d in (self.rps, self.p50, self.p99, self.errors):
            d.clear()

    def line(self, text: str) -> None:
        self.progress = text
        self._draw()

    def interval(self, figures: IntervalFigures) -> None:
        if figures.late:  # counted where it is kept; the view shows intervals as they settle
            return
        self.last = figures
        self.rps.append(figures.rps)
        self.p50.append(figures.p50_us)
        self.p99.append(figures.p99_us)
        self.errors.append(float(figures.errors))
        self._draw()

    def _draw(self) -> None:
        if self.live is None:
            self.live = Live(console=self.console, auto_refresh=False, transient=True)
            self.live.start()
        self.live.update(self.renderable(), refresh=True)

    def renderable(self) -> Group:
        """The progress line, and under it the last interval's figures: lines of plain text
        made anew only when an interval comes (the progress line changes up to five times as
        often; a rich table laid out at every redraw took 1.8 ms of CPU, these lines 0.4)."""
        if self.last is not None and (self._figures is None or self._figures[0] is not self.last):
            self._figures = (self.last, self._figure_lines(self.last))
        parts = [Text(self.progress)]
        if self.last is not None and self._figures is not None:
            parts.append(self._figures[1])
        return Group(*parts)

    def _figure_lines(self, f: IntervalFigures) -> Text:
        where = f"{f.start_s:.1f}-{f.start_s + f.seconds:.1f} s"
        if f.stage:
            where += f" · {printable(f.stage)}"
        out = Text()
        out.append(f"  last interval: {where}", style="dim")
        rows = (
            ("req/s", f"{f.rps:,.0f}", self.rps),
            ("p50 ms", _ms(f.p50_us), self.p50),
            ("p99 ms", _ms(f.p99_us), self.p99),
            ("errors", f"{f.errors:,}", self.errors),
        )
        width = max(len(value) for _, value, _ in rows)
        for name, value, history in rows:
            style = "red" if name == "errors" and f.errors else ""
            out.append(f"\n  {name:<6}  ")
            out.append(value.rjust(width), style=style)
            out.append(f"  {sparkline(history)}")
        return out

    def stop(self) -> None:
        if self.live is not None:
            self.live.stop()
            self.live = None
