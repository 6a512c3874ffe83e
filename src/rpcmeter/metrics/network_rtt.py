"""The network's round trip to a TCP address, from the TCP handshake.

A fresh connection's ``connect()`` returns when the server's SYN-ACK has come back for the
client's SYN: that is one round trip of the network between the two kernels, with nothing of the
server's program in it (the kernel answers a SYN before the program accepts the connection), nor
any protocol above TCP. On Linux the figure is the kernel's own measurement of it (``TCP_INFO``'s
``tcpi_rtt`` right after the handshake, in microseconds), which a busy machine's scheduling of
this process does not move; elsewhere, the time from ``connect()`` to the connection's being
writable. rpcmeter takes
:data:`HANDSHAKES` of them before and after each case (one after the other, each closed at once,
the name resolved once beforehand), and keeps the latencies as a histogram
(:class:`NetworkRtt`).

It is not the no-op round trip of :mod:`rpcmeter.result.breakdown`: that is a whole request of the
case's protocol to the server's program and back, so it holds the network's round trip *and*
the server's and the protocol's least cost (waking up, parsing, replying), and through a load
balancer that terminates TCP (nginx, HAProxy) every hop behind it. The handshake only sees as far
as the first kernel that answers it: behind a load balancer, the balancer's.
"""

from __future__ import annotations

import errno
import select
import socket
import struct
import time

from rpcmeter.metrics.histogram import Histogram
from rpcmeter.net.endpoints import Endpoint

HANDSHAKES = 20  # before and after each case
TCP_INFO_LEN = 104  # enough of Linux's struct tcp_info for tcpi_rtt
TCPI_RTT = 68  # its offset: 8 one-byte fields, then 15 u32 before it


def handshake_ns(family: int, address: tuple[str, int], timeout_s: float) -> int:
    """One TCP handshake with ``address``: its round trip in nanoseconds, as the kernel measured
    it (:func:`kernel_rtt_ns`), else from ``connect()`` to the connection's being established.
    Raises OSError (refused, unreachable, timed out)."""
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setblocking(False)
        poller = select.poll()
        poller.register(sock, select.POLLOUT)
        t0 = time.perf_counter_ns()
        err = sock.connect_ex(address)
        if err not in (0, errno.EINPROGRESS):
            raise OSError(err, f"connect to {address[0]}:{address[1]}")
        if err and not poller.poll(timeout_s * 1e3):
            raise TimeoutError(f"no handshake with {address[0]}:{address[1]} in {timeout_s} s")
        t1 = time.perf_counter_ns()
        err = sock.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
        if err:
            raise OSError(err, f"connect to {address[0]}:{address[1]}")
        return kernel_rtt_ns(sock) or t1 - t0
    finally:
        sock.close()


def kernel_rtt_ns(sock: socket.socket) -> int | None:
    """The round trip the kernel measured on ``sock`` (Linux ``TCP_INFO``'s ``tcpi_rtt``, in
    microseconds): right after the handshake, from the SYN's sending to the SYN-ACK's arrival,
    timed where the packets are handled, so it holds no wait of this process for a CPU. None
    where the system does not tell it."""
    if not hasattr(socket, "TCP_INFO"):
        return None
    try:
        info = sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_INFO, TCP_INFO_LEN)
    except OSError:
        return None
    if len(info) < TCPI_RTT + 4:
        return None
    rtt_us: int = struct.unpack_from("I", info, TCPI_RTT)[0]
    return rtt_us * 1000 if rtt_us else None


def handshakes(endpoint: Endpoint, count: int, timeout_s: float = 2.0) -> Histogram:
    """``count`` handshakes with ``endpoint`` (a TCP one), one after the other. Raises OSError."""
    assert endpoint.port is not None, "a TCP endpoint"
    ((family, _, _, _, address),) = socket.getaddrinfo(
        endpoint.host, endpoint.port, type=socket.SOCK_STREAM
    )[:1]
    h = Histogram()
    for _ in range(count):
        h.record(handshake_ns(family, (str(address[0]), int(address[1])), timeout_s))
    return h


def measurable(endpoint: Endpoint) -> bool:
    """Whether the network round trip to ``endpoint`` can be taken (a TCP host and port)."""
    return endpoint.path is None and endpoint.port is not None and endpoint.transport == "tcp"


class NetworkRtt:
    """The handshakes with one case's server, before and after the case."""

    def __init__(self, endpoint: Endpoint, count: int = HANDSHAKES) -> None:
        self.endpoint = endpoint
        self.count = count
        self.before = Histogram()
        self.after = Histogram()

    def measure(self, when: str) -> str | None:
        """Take the handshakes ``when`` (``before`` or ``after``); a reason when they failed."""
        try:
            h = handshakes(self.endpoint, self.count)
        except OSError as exc:
            return f"network round trip ({when} the case) to {self.endpoint.describe()}: {exc}"
        (self.before if when == "before" else self.after).merge(h)
        return None
