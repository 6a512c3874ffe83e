"""Blocking calls through an event driver's channels, for tests written against callers."""

from __future__ import annotations

import asyncio
from typing import Any

from rpcmeter.drivers.base import Caller, EventDriver
from rpcmeter.protocols.timing import ServerTime
from rpcmeter.runners.event_loop import new_event_loop


class BlockingCalls:
    """Opens ``driver`` on a private event loop; ``caller(t)`` makes one call through channel
    ``t`` and returns its server time (or raises its error), like a blocking driver's caller.
    Other attributes are the driver's."""

    def __init__(self, driver: EventDriver) -> None:
        self.driver = driver
        self.loop = new_event_loop()
        try:
            self.loop.run_until_complete(driver.open())
        except BaseException:
            self.close()
            raise

    def caller(self, thread_index: int) -> Caller:
        channel = self.driver.channel(thread_index)
        loop = self.loop

        def call() -> ServerTime | None:
            reply: asyncio.Future[tuple[ServerTime | None, BaseException | None]] = (
                loop.create_future()
            )
            channel(lambda server_ns, err: reply.set_result((server_ns, err)))
            server_ns, err = loop.run_until_complete(asyncio.wait_for(reply, 30))
            if err is not None:
                raise err
            return server_ns

        return call

    def counters(self) -> dict[str, int]:
        return self.driver.counters()

    def close(self) -> None:
        try:
            self.driver.close()
            self.loop.run_until_complete(asyncio.sleep(0.01))
        finally:
            self.loop.close()

    def __getattr__(self, name: str) -> Any:
        return getattr(self.driver, name)
