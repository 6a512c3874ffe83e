"""What a run tells the world as it goes: the events its listeners subscribe to.

A run (:func:`rpcmeter.run.execute.run_suite`) announces itself through one :class:`RunEvents`: the
run started (its result exists, no case yet), a case started, progress within it, a note (one
line: environment preparation), a case finished (recorded in the result), and the run finished
(final: also when interrupted or failed). The history store (:meth:`rpcmeter.history.store.Store.listener`),
the JSON file (:class:`JsonWriter`) and the command line's progress line are listeners; each
overrides the events it cares about (:class:`RunListener` ignores the rest).

Results travel as the typed model (:class:`rpcmeter.model.Result`, :class:`rpcmeter.model.Case`),
frozen: a listener cannot change what the others get. A listener that cannot record a finished
run (a StoreError) does not stop the others: they get the run as failed with that reason, and
the first such error is raised once all have it (:meth:`RunEvents.finish`).

Ctrl-C or SIGTERM never cuts a run's start, a finished case or the run's end in two: each is
told to every listener before the interrupt is raised (:func:`rpcmeter.host.interrupts.deferred`).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

from rpcmeter.analysis.derived import document
from rpcmeter.errors import RpcmeterError
from rpcmeter.host import interrupts as interrupts
from rpcmeter.metrics.histogram import Histogram
from rpcmeter.model import Case as CaseResult
from rpcmeter.model import Result
from rpcmeter.result.document import write_json

if TYPE_CHECKING:
    from rpcmeter.plan.cases import Case


@dataclass(frozen=True)
class IntervalFigures:
    """One settled interval of a running case, as the live view and the exporter take it:
    ``index`` (from 0), where it starts (seconds from the case's start) and how long it is, the
    stage it belongs to (``stage``: which, in words; "" without stages), its replies ok, errors,
    p50 and p99 latency (µs; NaN without replies) and its histogram."""

    index: int
    start_s: float
    seconds: float
    stage: str
    ok: int
    errors: int
    p50_us: float
    p99_us: float
    hist: Histogram | None = None  # its latencies (full precision; None: no replies)
    late: bool = False  # a piece of an interval handed on before: add it, do not show it
    stage_index: int | None = None  # the stage (from 0; None: no stages)

    @property
    def rps(self) -> float:
        return self.ok / self.seconds if self.seconds > 0 else 0.0


class RunListener:
    """Receives a run's events; every method does nothing unless overridden."""

    def run_started(self, result: Result) -> None:
        """The result exists (status ``running``), no case has run yet."""

    def case_started(self, case: Case, total: int) -> None:
        """``case`` (of ``total`` planned) is about to run."""

    def progress(self, case: Case, total: int, done: int, seconds: float) -> None:
        """``done`` requests of ``case`` in ``seconds`` of its measured interval."""

    def interval(self, case: Case, total: int, figures: IntervalFigures) -> None:
        """An interval of ``case``'s time series settled (about once a second while it runs)."""

    def note(self, message: str) -> None:
        """One line about the run's preparation (e.g. a variant's environment)."""

    def case_finished(self, result: Result, case: CaseResult) -> None:
        """``case`` is recorded: it is the last of ``result``'s cases."""

    def run_finished(self, result: Result) -> None:
        """The run is over (complete, interrupted or failed): ``result`` is final."""


L = TypeVar("L", bound=RunListener)


class RunEvents(RunListener):
    """The listeners of one run, called in the order they subscribed."""

    def __init__(self, *listeners: RunListener) -> None:
        self.listeners: list[RunListener] = list(listeners)

    def subscribe(self, listener: L) -> L:
        self.listeners.append(listener)
        return listener

    def run_started(self, result: Result) -> None:
        with interrupts.deferred():  # every listener records it, or none is cut short
            for listener in self.listeners:
                listener.run_started(result)

    def case_started(self, case: Case, total: int) -> None:
        for listener in self.listeners:
            listener.case_started(case, total)

    def progress(self, case: Case, total: int, done: int, seconds: float) -> None:
        for listener in self.listeners:
            listener.progress(case, total, done, seconds)

    def interval(self, case: Case, total: int, figures: IntervalFigures) -> None:
        for listener in self.listeners:
            listener.interval(case, total, figures)

    def note(self, message: str) -> None:
        for listener in self.listeners:
            listener.note(message)

    def case_finished(self, result: Result, case: CaseResult) -> None:
        with interrupts.deferred():
            for listener in self.listeners:
                listener.case_finished(result, case)

    def run_finished(self, result: Result) -> None:
        _, error = self.finish(result)
        if error is not None:
            raise error

    def finish(self, result: Result) -> tuple[Result, RpcmeterError | None]:
        """Every listener gets the final result; after one that cannot record it, the others get
        the run as failed with its reason (when it had completed). Returns the result as the
        last listener got it and the first such error."""
        with interrupts.deferred():
            return self._finish(result)

    def _finish(self, result: Result) -> tuple[Result, RpcmeterError | None]:
        first: RpcmeterError | None = None
        for listener in self.listeners:
            try:
                if isinstance(listener, RunEvents):
                    result, error = listener.finish(result)
                    if error is not None:
                        raise error
                else:
                    listener.run_finished(result)
            except RpcmeterError as exc:
                if first is None:
                    first = exc
                    if result.status == "complete":
                        result = result.model_copy(update={"status": "failed", "reason": str(exc)})
        return result, first


class JsonWriter(RunListener):
    """Keeps the result document at ``path``: written when the run starts (its header, no
    case), rewritten after every case (a crash loses at most
    the case in flight; the cases so far, without the comparisons) and when the run finishes
    (with its comparisons and warnings)."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def run_started(self, result: Result) -> None:
        write_json(result.to_json(), self.path)  # the header, no case yet

    def case_finished(self, result: Result, case: CaseResult) -> None:
        write_json(result.to_json(), self.path)

    def run_finished(self, result: Result) -> None:
        write_json(document(result), self.path)
