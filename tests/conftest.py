"""Settings shared by every test."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

import rpcmeter.suite


@pytest.fixture(autouse=True, scope="session")
def _short_idle_window() -> Iterator[None]:
    """Every case measures the server's idle CPU over a quiet window (1 s by default) before its
    load; tests keep it short unless they set ``resources.idle_s`` themselves."""
    saved = rpcmeter.suite.DEFAULT_IDLE_S
    rpcmeter.suite.DEFAULT_IDLE_S = 0.05
    yield
    rpcmeter.suite.DEFAULT_IDLE_S = saved
