"""The test hosts themselves: they reach each other over the bridge, commands run inside them,
nothing of theirs is left after a failure, and the machine's own interfaces are not touched."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from tests.support.hosts import Hosts, ip, ours

pytestmark = pytest.mark.timeout(60)

CONNECT = "import socket,sys; socket.create_connection((sys.argv[1], int(sys.argv[2])), 5)"


def links() -> set[str]:
    """The names of the interfaces in the machine's own namespace."""
    return {line.split(":")[1].strip() for line in ip("-o", "link").stdout.splitlines()}


def test_hosts_reach_each_other_and_are_gone_after_a_failure(
    hosts: Callable[[int], Hosts],
) -> None:
    links_before = links()
    h = hosts(3)
    assert len(set(h.names)) == 3 and all(n.startswith(h.prefix + "-") for n in h.names)
    server = h.start(2, ["python3", "-c", "import socket,time; s=socket.create_server("
                         f"('{h.addresses[2]}', 7000)); time.sleep(60)"])  # fmt: skip
    h.wait_listening(2, 7000)
    assert h.run(0, ["python3", "-c", CONNECT, h.addresses[2], "7000"]).returncode == 0
    # the host's own loopback is its own: nothing listens on 7000 there
    assert h.run(0, ["python3", "-c", CONNECT, "127.0.0.1", "7000"]).returncode != 0
    assert links() <= links_before  # nothing added to the machine's namespace
    with pytest.raises(RuntimeError, match="a test that fails"), h:
        raise RuntimeError("a test that fails")
    assert server.poll() is not None  # killed on the way out
    assert ours(h.prefix) == []


def test_two_sets_of_hosts_do_not_collide(hosts: Callable[[int], Hosts]) -> None:
    a, b = hosts(1), hosts(1)
    assert a.prefix != b.prefix and a.addresses == b.addresses  # the same address, apart
