"""How an event-loop client polls for replies without sleeping (``load.wait = "spin"``), bounded
or not (``load.spin_us``): :class:`Spin`, shared by the closed loops
(:mod:`rpcmeter.runners.event_loop`) and the open loop (:mod:`rpcmeter.runners.open_loop`)."""

from __future__ import annotations

import asyncio
import time

from rpcmeter.drivers.base import Done
from rpcmeter.protocols.timing import ServerTime


class Spin:
    """Keeps ``loop`` polling without sleeping while it runs: a callback that schedules itself
    again every iteration (``call_soon``), so the loop always has one ready and polls with a zero
    timeout. ``stop`` lets the next iteration end it; ``polls`` counts the iterations.

    With ``spin_us`` (``load.spin_us``) the polling is bounded, as busy-polling stacks bound it:
    once ``spin_us`` microseconds passed since the last :meth:`wake` (a reply came, a request
    went out: :meth:`waking` wraps a loop's completion callback so) with nothing arriving, the
    callback does not schedule itself again and the loop sleeps in its normal wait until the next
    event; the next :meth:`wake` starts polling again. Unbounded, nothing calls :meth:`wake`."""

    __slots__ = ("budget_ns", "idle", "loop", "on", "polls", "until")

    def __init__(self, loop: asyncio.AbstractEventLoop, spin_us: float | None = None) -> None:
        self.loop = loop
        self.on = True
        self.polls = 0
        self.budget_ns = None if spin_us is None else round(spin_us * 1000)
        self.until = time.perf_counter_ns() + (self.budget_ns or 0)
        self.idle = False
        loop.call_soon(self.poll if self.budget_ns is None else self.poll_bounded)

    def poll(self) -> None:
        if self.on:
            self.polls += 1
            self.loop.call_soon(self.poll)

    def poll_bounded(self) -> None:
        if self.on:
            self.polls += 1
            if time.perf_counter_ns() < self.until:
                self.loop.call_soon(self.poll_bounded)
            else:
                self.idle = True

    def wake(self) -> None:
        """Something arrived or went out: poll for ``spin_us`` from now (bounded spin)."""
        assert self.budget_ns is not None
        self.until = time.perf_counter_ns() + self.budget_ns
        if self.idle and self.on:
            self.idle = False
            self.loop.call_soon(self.poll_bounded)

    def waking(self, done: Done) -> Done:
        """``done``, waking a bounded spin first (``done`` itself when the spin is unbounded)."""
        if self.budget_ns is None:
            return done
        wake = self.wake

        def on_reply(server_ns: ServerTime | None, err: BaseException | None) -> None:
            wake()
            done(server_ns, err)

        return on_reply

    def stop(self) -> None:
        self.on = False


def waking(spin: Spin | None, done: Done) -> Done:
    """``done`` as the loops of a client with ``spin`` (None: not spinning) call it."""
    return done if spin is None else spin.waking(done)
