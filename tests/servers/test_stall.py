"""The reference servers' stall at a known moment."""

from __future__ import annotations

import time

import pytest

from rpcmeter.servers.common import Stall


def timed(stall: Stall) -> float:
    t0 = time.monotonic()
    stall.check()
    return time.monotonic() - t0


def test_stall_once_after_the_first_request() -> None:
    stall = Stall({"stall_ms": 80, "stall_after_s": 0.05})
    assert stall.active
    assert timed(stall) < 0.01  # the first request starts the clock
    time.sleep(0.07)  # 20 ms into the stall
    assert timed(stall) == pytest.approx(0.06, abs=0.03)
    assert timed(stall) < 0.01  # over
    time.sleep(0.1)
    assert timed(stall) < 0.01  # once only


def test_stall_every() -> None:
    stall = Stall({"stall_ms": 30, "stall_after_s": 0.0, "stall_every_s": 0.1})
    assert timed(stall) == pytest.approx(0.03, abs=0.02)  # at once, then every 100 ms
    time.sleep(0.1 - 0.03 + 0.005)
    assert timed(stall) == pytest.approx(0.025, abs=0.02)


def test_no_stall_by_default_and_bad_period() -> None:
    assert not Stall({}).active
    with pytest.raises(ValueError):
        Stall({"stall_ms": 100, "stall_every_s": 0.05})
