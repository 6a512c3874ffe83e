"""Drivers of one's own that leave out what rpcmeter needs to know about them (suite errors)."""

from __future__ import annotations

from typing import ClassVar

from rpcmeter.drivers.base import Caller, Driver


class Nameless(Driver):
    """Implements the calls, but says neither its name nor its workloads."""

    def connect(self) -> None:
        pass

    def caller(self, thread_index: int) -> Caller:
        return lambda: None

    def close(self) -> None:
        pass


class NoWorkloads(Nameless):
    name: ClassVar[str] = "mine"
