"""The progress line on stderr while a run goes on, and the live view on a terminal."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TextIO

from rpcmeter import model
from rpcmeter.events import IntervalFigures, RunListener
from rpcmeter.live import LiveView
from rpcmeter.plan import Case
from rpcmeter.text import printable


def case_fraction(case: Case, done: int, seconds: float) -> float:
    """How much of ``case`` is done, 0 to 1: by time for a duration, by count for a request
    count (every loop of every client), 0 when unknown (a whole command's runs)."""
    load = case.load
    if case.kind == "command":
        return 0.0
    if load.duration_s is not None:
        return min(1.0, seconds / load.duration_s)
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
    the run has left (ETA: the time per case so far, cases and the running case's part done,
    times what is left; shown once a tenth of a case is done)."""

    def __init__(
        self, stream: TextIO, clock: Callable[[], float] = time.monotonic, live: bool = False
    ) -> None:
        self.stream = stream
        self.tty = stream.isatty()
        # on a terminal, with ``live``: the line and the last interval's figures (rpcmeter.live)
        self.live = LiveView(stream) if live and self.tty else None
        self.clock = clock
        self.last = 0.0
        self.width = 0
        self.started: float | None = None

    def eta(self, case: Case, total: int, fraction: float) -> str:
        """`` · ETA ...`` for a run ``case.index + fraction`` cases into ``total``, or ""."""
        done = case.index + fraction
        if self.started is None or done < 0.1:
            return ""
        elapsed = self.clock() - self.started
        return f" · ETA {fmt_eta(elapsed / done * (total - done))}"

    def case_started(self, case: Case, total: int) -> None:
        if self.started is None:
            self.started = self.clock()
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
        eta = self.eta(case, total, case_fraction(case, done, seconds))
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

    def run_started(self, result: model.Result) -> None:
        self.began = True
