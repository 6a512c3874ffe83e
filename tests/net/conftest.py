"""Hosts of their own (network namespaces, tests/support/hosts.py) for the tests of this folder:
the ``hosts`` fixture makes them, or skips with the reason they cannot be made here."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest

from tests.support.hosts import Hosts, can_make_namespaces, ours


@pytest.fixture(scope="session")
def netns_ok() -> None:
    reason = can_make_namespaces()
    if reason:
        pytest.skip(reason)


@pytest.fixture
def hosts(netns_ok: None) -> Iterator[Callable[[int], Hosts]]:
    """``hosts(n)``: n hosts on a bridge, torn down after the test however it ends; the test
    fails if any namespace of theirs is left."""
    made: list[Hosts] = []

    def make(n: int) -> Hosts:
        made.append(Hosts(n))
        return made[-1]

    yield make
    for h in made:
        h.close()
    left = [name for h in made for name in ours(h.prefix)]
    assert not left, f"namespaces left behind: {left}"
