"""The reference servers' stall at a known moment."""

from __future__ import annotations

import time

import pytest

from rpcmeter.servers.common import Stall

MS = 1_000_000


def test_stall_once_after_the_first_request() -> None:
    stall = Stall({"stall_ms": 80, "stall_after_s": 0.05})
    assert stall.active
    t0 = 10**12
    assert stall.wait_ns(t0) == 0  # the first request starts the clock
    assert stall.wait_ns(t0 + 49 * MS) == 0
    assert stall.wait_ns(t0 + 50 * MS) == 80 * MS
    assert stall.wait_ns(t0 + 70 * MS) == 60 * MS
    assert stall.wait_ns(t0 + 130 * MS) == 0  # over
    assert stall.wait_ns(t0 + 10_000 * MS) == 0  # once only


def test_stall_every() -> None:
    stall = Stall({"stall_ms": 30, "stall_after_s": 0.0, "stall_every_s": 0.1})
    t0 = 10**12
    assert stall.wait_ns(t0) == 30 * MS  # at once, then every 100 ms
    assert stall.wait_ns(t0 + 40 * MS) == 0
    assert stall.wait_ns(t0 + 105 * MS) == 25 * MS
    assert stall.wait_ns(t0 + 1_010 * MS) == 20 * MS


def test_check_sleeps_through_the_window() -> None:
    stall = Stall({"stall_ms": 60, "stall_after_s": 0.0})
    t0 = time.monotonic()
    stall.check()
    assert time.monotonic() - t0 >= 0.055


def test_no_stall_by_default_and_bad_period() -> None:
    assert not Stall({}).active
    with pytest.raises(ValueError):
        Stall({"stall_ms": 100, "stall_every_s": 0.05})
