"""Marks shared by the tests."""

from __future__ import annotations

import pytest

# A test whose assertions rest on the machine's timing (real servers, real sleeps, CPU figures).
# A virtual machine's host can stall it for a while: measured here, a third of 1,000 socket round
# trips a second took 3-40 ms instead of 0.05 for minutes on end. Such a test runs again after a
# pause, at most twice; it fails when every attempt fails.
timing_sensitive = pytest.mark.flaky(reruns=2, reruns_delay=10)
