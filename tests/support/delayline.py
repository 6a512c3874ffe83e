"""A delay line between two network namespaces: ``python -m tests.support.delayline PEER DEV
DELAY_US``, started in one namespace (``ip netns exec A ...``), makes a TUN device ``DEV`` there
and one of the same name in namespace ``PEER``, prints ``ready``, then passes every IP packet
from one device to the other: those from A to PEER after ``DELAY_US`` microseconds, those back
at once. Every packet is held, the TCP handshake's included, so the round trip of anything
crossing the cable grows by the delay (what a TCP proxy cannot do: it answers the handshake
itself). It runs until it is killed; its devices go with it.

Each packet is due at its arrival plus the delay; the line sleeps until shortly before that and
polls the clock for the rest, so that a sleep's late wakeup (tens of microseconds on a busy
machine) does not add to the delay, and it runs at a real-time priority (SCHED_FIFO), so that
the machine's other work does not delay its wakeups either. Packets leave in the order they
came.
"""

from __future__ import annotations

import collections
import contextlib
import ctypes
import fcntl
import os
import select
import signal
import struct
import sys
import time

TUNSETIFF = 0x400454CA
IFF_TUN = 0x0001
IFF_NO_PI = 0x1000
CLONE_NEWNET = 0x40000000
PR_SET_PDEATHSIG = 1
SPIN_S = 0.0003  # poll the clock for the last 300 us before a packet is due


def open_tun(name: str) -> int:
    """A TUN device ``name`` (IP packets, no header) in this thread's network namespace."""
    fd = os.open("/dev/net/tun", os.O_RDWR)
    fcntl.ioctl(fd, TUNSETIFF, struct.pack("16sH", name.encode(), IFF_TUN | IFF_NO_PI))
    return fd


def enter_namespace(name: str) -> None:
    """Move this thread into network namespace ``name`` (``ip netns`` names)."""
    libc = ctypes.CDLL(None, use_errno=True)
    fd = os.open(f"/run/netns/{name}", os.O_RDONLY)
    try:
        if libc.setns(fd, CLONE_NEWNET) != 0:
            raise OSError(ctypes.get_errno(), f"setns {name}")
    finally:
        os.close(fd)


def forward(src: int, dst: int, delay_s: float) -> None:
    """Pass packets read from ``src`` to ``dst``, each ``delay_s`` after it was read."""
    held: collections.deque[tuple[float, bytes]] = collections.deque()
    while True:
        if held:
            wait = held[0][0] - time.perf_counter() - SPIN_S
            readable, _, _ = select.select([src], [], [], max(0.0, wait))
        else:
            readable, _, _ = select.select([src], [], [])
        if readable:
            packet = os.read(src, 65536)
            held.append((time.perf_counter() + delay_s, packet))
        while held:
            due = held[0][0]
            now = time.perf_counter()
            if now < due - SPIN_S:
                break
            while now < due:  # the last few hundred microseconds: poll the clock
                now = time.perf_counter()
            packet = held.popleft()[1]
            # the far device not up (yet): the packet is lost, as on a wire
            with contextlib.suppress(OSError):
                os.write(dst, packet)


def main(argv: list[str]) -> int:
    peer, dev, delay_us = argv[0], argv[1], int(argv[2])
    near = open_tun(dev)
    enter_namespace(peer)  # this thread only; the device opened above stays where it was made
    far = open_tun(dev)
    # real-time priority: a wakeup on time on a busy machine (the spin above is bounded)
    with contextlib.suppress(OSError):
        os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(10))
    print("ready", flush=True)
    if os.fork() == 0:  # the way back, in a process of its own: no GIL shared with the spin
        ctypes.CDLL(None).prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
        forward(far, near, 0.0)
    forward(near, far, delay_us / 1e6)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
