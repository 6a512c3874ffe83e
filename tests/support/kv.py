"""The built-in HTTP server's key/value store for tests that count what reached it: the server
started as a process of the test's own (a run stops the servers it knows of; this one stays
up, so its store can be read after the run) and its tally (``GET /kv``)."""

from __future__ import annotations

import contextlib
import http.client
import json
import socket
import subprocess
import time
from collections.abc import Iterator

from rpcmeter.drivers import driver_class
from rpcmeter.net.endpoints import Endpoint
from rpcmeter.servers.process import new_endpoint


@contextlib.contextmanager
def kv_server(timeout_s: float = 20.0, transport: str = "tcp") -> Iterator[Endpoint]:
    ep = new_endpoint(transport)
    proc = subprocess.Popen(driver_class("http").server_command(ep, {}))
    try:
        deadline = time.monotonic() + timeout_s
        while True:
            try:
                if ep.path is not None:
                    with socket.socket(socket.AF_UNIX) as s:
                        s.connect(ep.path)
                else:
                    socket.create_connection((ep.host, ep.port or 0), timeout=1).close()
                break
            except OSError:
                assert proc.poll() is None and time.monotonic() < deadline, "no server"
                time.sleep(0.05)
        yield ep
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def tally(ep: Endpoint) -> dict[str, int]:
    """The store's tally: keys held, hits, misses, puts, deletes."""
    conn = http.client.HTTPConnection(ep.host, ep.port, timeout=10)
    try:
        conn.request("GET", "/kv")
        got: dict[str, int] = json.loads(conn.getresponse().read())
    finally:
        conn.close()
    return got
