"""A driver with no server, for unit tests of the runners.

Each call sleeps ``sleep_us`` (0: returns at once). With ``log_dir`` set, every thread writes the
monotonic start time (ns) of each of its calls, one per line and warmup calls first, to
``log_dir/<client>-<thread>.log`` when the driver closes. ``fail_every`` raises a ValueError every
N-th call; ``mismatch_every`` raises ReplyMismatch; ``fatal_after`` raises ConnectionResetError
from that call on.
"""

from __future__ import annotations

import os
import time
from typing import ClassVar

from rpcmeter.drivers.base import Caller, Driver, ReplyMismatch


class MockDriver(Driver):
    name: ClassVar[str] = "mock"
    transports: ClassVar[tuple[str, ...]] = ("tcp", "unix")
    workloads: ClassVar[frozenset[str]] = frozenset({"simple", "noop"})

    def connect(self) -> None:
        self.logs: dict[int, list[int]] = {}

    def caller(self, thread_index: int) -> Caller:
        opts = self.ctx.options
        sleep_s = float(opts.get("sleep_us", 0)) / 1e6
        fail_every = int(opts.get("fail_every", 0))
        mismatch_every = int(opts.get("mismatch_every", 0))
        fatal_after = int(opts.get("fatal_after", 0))
        log = self.logs.setdefault(thread_index, [])
        clock = time.perf_counter_ns
        n = 0

        def call() -> object:
            nonlocal n
            n += 1
            log.append(clock())
            if sleep_s:
                time.sleep(sleep_s)
            if fatal_after and n >= fatal_after:
                raise ConnectionResetError("planned connection loss")
            if fail_every and n % fail_every == 0:
                raise ValueError("planned failure")
            if mismatch_every and n % mismatch_every == 0:
                raise ReplyMismatch("planned mismatch")
            return None

        return call

    def close(self) -> None:
        log_dir = self.ctx.options.get("log_dir")
        if not log_dir:
            return
        for t, times in self.logs.items():
            path = os.path.join(str(log_dir), f"{self.ctx.client_index}-{t}.log")
            with open(path, "w") as f:
                f.write("\n".join(str(x) for x in times))
