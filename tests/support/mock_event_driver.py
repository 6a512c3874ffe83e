"""An event driver with no server, for unit tests of the event-loop runner.

Each request completes on the next turn of the event loop (``delay_us`` > 0: after that long),
reporting ``server_ns`` as the server's compute time when set (and ``queue_ns`` as its queue
time). ``fail_every`` completes every N-th request
of a connection with ``ReplyError("http_503")``, ``mismatch_every`` with ``ReplyMismatch``;
``fatal_after`` fails every request from that one on with ``ConnectionResetError``. Counters:
``bytes_out`` (10 per request) and ``bytes_in`` (20 per request), warmup included.
"""

from __future__ import annotations

import asyncio
from typing import ClassVar

from rpcmeter.drivers.base import Channel, Done, EventDriver, ReplyError, ReplyMismatch


class MockEventDriver(EventDriver):
    name: ClassVar[str] = "mock-event"
    workloads: ClassVar[frozenset[str]] = frozenset({"noop"})
    reports_server_time: ClassVar[bool] = True

    async def open(self) -> None:
        self.loop = asyncio.get_running_loop()
        self.sent = 0

    def channel(self, index: int) -> Channel:
        opts = self.ctx.options
        delay = float(opts.get("delay_us", 0)) / 1e6
        server_ns = opts.get("server_ns")
        queue_ns = opts.get("queue_ns")
        times = (server_ns, queue_ns) if server_ns is not None else None
        fail_every = int(opts.get("fail_every", 0))
        mismatch_every = int(opts.get("mismatch_every", 0))
        fatal_after = int(opts.get("fatal_after", 0))
        loop = self.loop
        n = 0

        def channel(done: Done) -> None:
            nonlocal n
            n += 1
            self.sent += 1
            error: BaseException | None = None
            if fatal_after and n >= fatal_after:
                error = ConnectionResetError("planned connection loss")
            elif fail_every and n % fail_every == 0:
                error = ReplyError("http_503", "planned failure")
            elif mismatch_every and n % mismatch_every == 0:
                error = ReplyMismatch("planned mismatch")
            if delay:
                loop.call_later(delay, done, times, error)
            else:
                loop.call_soon(done, times, error)

        return channel

    def counters(self) -> dict[str, int]:
        sent = getattr(self, "sent", 0)
        return {"bytes_out": 10 * sent, "bytes_in": 20 * sent}
