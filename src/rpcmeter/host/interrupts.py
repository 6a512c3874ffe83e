"""Ctrl-C and SIGTERM: one KeyboardInterrupt, and never half a write or half a shutdown.

The command line installs the handlers (:func:`handled`): SIGINT and SIGTERM raise
KeyboardInterrupt in the main thread, which ends the run as ``interrupted``. SIGINT stays
ignored when rpcmeter started with it ignored (a background job of a shell).

A section that must not be cut in two runs inside :func:`deferred`: writing a result document
and renaming it into place, a history store transaction, telling every listener that the run
ended, stopping what the run started. A signal that arrives there is held, and raised as
KeyboardInterrupt when the outermost such section ends.

After the first interrupt every later signal is held, not raised: a second Ctrl-C (or a
SIGTERM after a Ctrl-C) cannot cut short the shutdown that the first one began. The first
such signal is answered with one line (``stopping what it started; please wait``). Each step of
that shutdown has its own time limit (a server's ``stop_timeout_s``, the cluster's close).

Without the handlers installed (rpcmeter used as a library) :func:`deferred` does nothing.
"""

from __future__ import annotations

import contextlib
import os
import signal
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from types import FrameType

Handler = Callable[[int, FrameType | None], object] | int | signal.Handlers | None


@dataclass
class _State:
    installed: bool = False
    depth: int = 0  # how many deferred sections the main thread is in
    pending: bool = False  # a signal arrived while it was held
    stopping: bool = False  # the first interrupt was raised: later signals are held
    said: bool = False  # a later signal was answered: rpcmeter is stopping, please wait

    def reset(self) -> None:
        self.installed, self.depth, self.pending = False, 0, False
        self.stopping = self.said = False


_state = _State()


def _on_signal(signum: int, frame: FrameType | None) -> None:
    if _state.stopping and not _state.said:  # a raw write: a handler may run inside a print
        _state.said = True
        with contextlib.suppress(OSError):
            os.write(2, b"\nrpcmeter: stopping what it started; please wait\n")
    if _state.depth or _state.stopping:
        _state.pending = True
        return
    _state.stopping = True
    raise KeyboardInterrupt


def stopping() -> bool:
    """Whether an interrupt was raised (or is held) since the handlers were installed."""
    return _state.stopping or _state.pending


@contextmanager
def handled() -> Iterator[None]:
    """SIGINT and SIGTERM raise KeyboardInterrupt while inside (see the module's text). An
    interrupted block leaves both ignored, so that the interpreter's exit (the exit handlers
    of libraries, and its finalization, which puts back the default action of every signal
    that has a Python handler) is not cut short either; otherwise the previous handlers come
    back."""
    if _state.installed:  # inside another: that one decides
        yield
        return
    names: list[int] = [signal.SIGTERM]
    if signal.getsignal(signal.SIGINT) is not signal.SIG_IGN:
        names.append(signal.SIGINT)
    before: dict[int, Handler] = {n: signal.getsignal(n) for n in names}
    _state.reset()
    for n in names:
        signal.signal(n, _on_signal)
    _state.installed = True
    try:
        yield
    finally:
        _state.installed = False
        for n, handler in before.items():
            signal.signal(n, signal.SIG_IGN if stopping() else handler)
        if stopping():
            _forget_caught_interrupt()


def _forget_caught_interrupt() -> None:
    """CPython marks the process to end by SIGINT (exit status -2, not the one asked for) when
    a KeyboardInterrupt leaves code that ``exec`` or ``eval`` ran from a string, even when the
    interrupt was caught further up: dataclasses, named tuples and pydantic make classes so,
    and an interrupt while rpcmeter imports them lands there. Each such evaluation clears the
    mark as it starts; this one ends normally."""
    eval("None")


class Held:
    """Signals held from now until :meth:`release` (a :func:`deferred` section that is not a
    block: it may end in another function, e.g. when a run has started)."""

    def __init__(self) -> None:
        self.active = _state.installed and threading.current_thread() is threading.main_thread()
        if self.active:
            _state.depth += 1

    def release(self) -> None:
        """End the section (again: nothing); a signal held meanwhile is raised now, as
        KeyboardInterrupt, when no other section holds signals."""
        if not self.active:
            return
        self.active = False
        _state.depth -= 1
        if not _state.depth and _state.pending and not _state.stopping:
            _state.pending = False
            _state.stopping = True
            raise KeyboardInterrupt


@contextmanager
def deferred() -> Iterator[None]:
    """Hold SIGINT and SIGTERM while inside; one that arrived is raised as KeyboardInterrupt
    when the outermost section ends (also when the section raised: the interrupt wins)."""
    held = Held()
    try:
        yield
    finally:
        held.release()


@contextmanager
def sigint_ignored() -> Iterator[None]:
    """SIGINT ignored while inside (from the main thread; elsewhere nothing changes). A process
    started meanwhile starts with it ignored, and Python then installs no KeyboardInterrupt
    handler there: a terminal's Ctrl-C, sent to the whole process group, is rpcmeter's to
    handle, and such a process would print a traceback. A Ctrl-C meanwhile is lost: keep it
    to the few milliseconds a process takes to start."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    before = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, before)
