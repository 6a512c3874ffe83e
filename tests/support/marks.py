"""Marks shared by the tests."""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

import pytest

T = TypeVar("T", bound=Callable[..., object])

# A test whose assertions rest on the machine's timing (real servers, real sleeps, CPU figures).
# A virtual machine's host can stall it for a while: measured here, a third of 1,000 socket round
# trips a second took 3-40 ms instead of 0.05 for minutes on end. Such a test runs again after a
# pause, at most twice; it fails when every attempt fails.
RERUN = pytest.mark.flaky(reruns=2, reruns_delay=10)


def timing_sensitive(test: T) -> T:
    """Mark ``test`` as timing-sensitive: ``pytest -m timing_sensitive`` selects it (``-m "not
    timing_sensitive"`` leaves it out), and it is rerun as above."""
    marked: T = pytest.mark.timing_sensitive(RERUN(test))
    return marked
