"""The progress line on stderr while a run goes on, and the live view on a terminal."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TYPE_CHECKING, TextIO

from rpcmeter import model
from rpcmeter.plan.cases import Case
from rpcmeter.run.events import IntervalFigures, RunListener
from rpcmeter.text import printable

if TYPE_CHECKING:
    from rpcmeter.reporters.live import LiveView


def case_seconds(case: Case) -> float | None:
    """How long ``case``'s load runs, where that is known: its stages' durations added, or its
    duration; None for a request count or a whole command's runs."""
    load = case.load
    if case.kind == "command":
        return None
    if load.stages:
        return sum(stage.duration_s for stage in load.stages)
    return load.duration_s


def case_fraction(case: Case, done: int, seconds: float) -> float:
    """How much of ``case`` is done, 0 to 1: by time for stages or a duration, by count for a
    request count (every loop of every client), 0 when unknown (a whole command's runs)."""
    load = case.load
    if case.kind == "command":
        return 0.0
    planned_s = case_seconds(case)
    if planned_s:
        return min(1.0, seconds / planned_s)
    planned = load.requests * (load.concurrency or load.threads) * load.clients
    return min(1.0, done / planned) if planned else 0.0


def fmt_eta(seconds: float) -> str:
    s = round(seconds)
    if s < 60:
        return f"{s} s"
    if s < 3600:
        return f"{s // 60} min {s % 60:02d} s"
    return f"{s // 3600} h {s % 3600 // 60:02d} min"


class Progress(RunListener):
    """One live line on stderr: case k of n, the case, requests so far, requests/s and the time
    the run has left (ETA). Where the running case's load lasts a known time (its stages, or a
    duration), the ETA is what is left of it plus, for each case after it, the time a case took
    so far (the cases before it, or this one with what it has left); otherwise the time per case
    so far (cases and the running case's part done) times what is left, shown once a tenth of
    a case is done."""

    def __init__(
        self, stream: TextIO, clock: Callable[[], float] = time.monotonic, live: bool = False
    ) -> None:
        self.stream = stream
        self.tty = stream.isatty()
        # on a terminal, with ``live``: the line and the last interval's figures (rpcmeter.reporters.live)
        self.live: LiveView | None = None
        if live and self.tty:  # imported only here: rich's live display
            from rpcmeter.reporters.live import LiveView

            self.live = LiveView(stream)
        self.clock = clock
        self.last = 0.0
        self.width = 0
        self.started: float | None = None
        self.case_began: float | None = None

    def eta(self, case: Case, total: int, fraction: float, seconds: float | None = None) -> str:
        """`` · ETA ...`` for a run ``case.index + fraction`` cases into ``total`` (``seconds``
        into the running case's load, where known), or ""."""
        if self.started is None:
            return ""
        now = self.clock()
        planned = case_seconds(case)
        if planned is not None and seconds is not None and self.case_began is not None:
            left_here = max(0.0, planned - seconds)
            per_case = (
                (self.case_began - self.started) / case.index
                if case.index
                else now - self.case_began + left_here
            )
            return f" · ETA {fmt_eta(left_here + per_case * (total - case.index - 1))}"
        done = case.index + fraction
        if done < 0.1:
            return ""
        return f" · ETA {fmt_eta((now - self.started) / done * (total - done))}"

    def case_started(self, case: Case, total: int) -> None:
        self.case_began = self.clock()
        if self.started is None:
            self.started = self.case_began
        line = f"[{case.index + 1}/{total}] {printable(case.label())}{self.eta(case, total, 0.0)}"
        if self.live is not None:
            self.live.new_case()
        if self.tty:
            self._show(line)
        else:
            print(line, file=self.stream, flush=True)

    def progress(self, case: Case, total: int, done: int, seconds: float) -> None:
        now = self.clock()
        if not self.tty or now - self.last < 0.2:
            return
        self.last = now
        rate = done / seconds if seconds > 0 else 0.0
        eta = self.eta(case, total, case_fraction(case, done, seconds), seconds)
        if case.kind == "command":
            self._show(
                f"[{case.index + 1}/{total}] {printable(case.label())} · {done:,} runs · {seconds:.1f} s{eta}"
            )
            return
        self._show(
            f"[{case.index + 1}/{total}] {printable(case.label())} · {done:,} requests · "
            f"{rate:,.0f} req/s{eta}"
        )

    def interval(self, case: Case, total: int, figures: IntervalFigures) -> None:
        if self.live is not None:
            self.live.interval(figures)

    def _show(self, line: str) -> None:
        if self.live is not None:
            self.live.line(line)
            return
        pad = max(0, self.width - len(line))
        self.stream.write("\r" + line + " " * pad)
        self.stream.flush()
        self.width = len(line)

    def note(self, message: str) -> None:
        """A line that stays (environment preparation)."""
        self.clear()
        print(f"rpcmeter: {message}", file=self.stream, flush=True)

    def clear(self) -> None:
        if self.live is not None:
            self.live.stop()
        if self.tty and self.width:
            self.stream.write("\r" + " " * self.width + "\r")
            self.stream.flush()
            self.width = 0


class Began(RunListener):
    """Whether the run began (its document and store entry then say how it ended)."""

    began = False

    def __init__(self, on_start: Callable[[], None] = lambda: None) -> None:
        self.on_start = on_start  # called once the run has started (every listener has it)

    def run_started(self, result: model.Result) -> None:
        self.began = True
        self.on_start()
