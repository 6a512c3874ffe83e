"""A value that takes its time to unpickle: in a load spec's options, it delays a client process
before any of rpcmeter's client code runs, as a busy machine or a slow forkserver does."""

from __future__ import annotations

import time


def _arrive(seconds: float) -> SlowToArrive:
    time.sleep(seconds)
    return SlowToArrive(seconds)


class SlowToArrive:
    def __init__(self, seconds: float) -> None:
        self.seconds = seconds

    def __reduce__(self) -> tuple[object, tuple[float]]:
        return _arrive, (self.seconds,)
