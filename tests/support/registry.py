"""Tests that install packages from the package registry: skipped, with the reason, where the
registry cannot be reached (a machine without network, a CI runner behind a wall)."""

from __future__ import annotations

import functools
import os
import urllib.error
import urllib.request

import pytest

DEFAULT_INDEX = "https://pypi.org/simple/"


def index_url() -> str:
    """The index the installers use: uv's or pip's setting, else PyPI's."""
    for name in ("UV_INDEX_URL", "UV_DEFAULT_INDEX", "PIP_INDEX_URL"):
        if os.environ.get(name):
            return os.environ[name].rstrip("/") + "/"
    return DEFAULT_INDEX


@functools.cache
def unreachable(project: str) -> str | None:
    """Why ``project``'s page on the index cannot be read (within 10 s), or None."""
    url = index_url() + project + "/"
    try:
        with urllib.request.urlopen(url, timeout=10) as reply:
            reply.read(1)
    except (urllib.error.URLError, OSError, ValueError) as exc:
        reason = getattr(exc, "reason", exc)
        return f"the package registry is unreachable ({url}: {reason})"
    return None


def require(project: str) -> None:
    """Skip the calling test, with the reason, unless the registry answers for ``project``."""
    reason = unreachable(project)
    if reason is not None:
        pytest.skip(reason)
