"""Hosts of their own on this one machine: Linux network namespaces on a bridge.

:class:`Hosts` makes N namespaces ("hosts"), each with one interface (``eth0``) on a bridge, at
addresses of the benchmarking range 198.18.0.0/15 (RFC 2544: never routed, reserved for tests of
network devices), runs commands inside them, and always tears everything down: every process
left in them is killed and every namespace deleted, on the way out of a ``with`` block, also
when a test fails, and on SIGTERM/SIGINT of the process that made them.

The bridge lives in a namespace of its own (the "switch"), so nothing is added to, or touched
in, the machine's own namespace: every veth pair is created with its ends directly in the
namespaces it joins, and traffic between the hosts stays on the bridge. Every name starts with
a prefix unique to this process and this set (``rpm-<pid>-<n>``), so parallel runs never
collide, and teardown only touches namespaces with that prefix.

:meth:`Hosts.delay` adds a delay line between two hosts: a "cable" of two TUN devices, one in
each host, with a process in between that holds every packet for a fixed time before passing it
on (:mod:`tests.support.delayline`). Unlike a TCP proxy, which answers the client's handshake
itself and so only delays the data behind it, the cable delays every packet, the SYN and
SYN-ACK of a handshake included: what the client sees is a longer network. (The kernel here has
no ``netem`` qdisc, which would do the same in the kernel.)

Run as a script it is the command behind ``examples/deployments/hosts.sh``::

    python tests/support/hosts.py up NAME N     # N hosts NAME-h0..NAME-h{N-1}, switch NAME-sw
    python tests/support/hosts.py down NAME     # kill what runs in them, delete them
"""

from __future__ import annotations

import contextlib
import ipaddress
import itertools
import os
import shutil
import signal
import subprocess
import sys
import time
import weakref
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

NETNS_DIR = Path("/run/netns")
SUBNET = ipaddress.ip_network("198.18.0.0/24")  # the hosts' addresses: .1, .2, ...
# delay lines: a /30 each in 198.19.0.0/16
_serial = itertools.count()
_live: weakref.WeakSet[Hosts] = weakref.WeakSet()


class HostsError(RuntimeError):
    """Namespaces could not be made (no root, no iproute2, a kernel without them)."""


def ip(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    """Run ``ip ARGS`` and return what it did; :class:`HostsError` naming the command when it
    fails and ``check`` is set."""
    done = subprocess.run(["ip", *args], capture_output=True, text=True, check=False)
    if check and done.returncode:
        reason = (done.stderr or done.stdout).strip().splitlines()
        raise HostsError(f"ip {' '.join(args)}: {reason[-1] if reason else done.returncode}")
    return done


def ours(prefix: str) -> list[str]:
    """Namespaces whose name starts with ``prefix-`` (ours), as ``ip netns list`` shows them."""
    out = ip("netns", "list", check=False).stdout
    names = [line.split()[0] for line in out.splitlines() if line.strip()]
    return sorted(n for n in names if n.startswith(prefix + "-"))


def pids_in(namespace: str) -> list[int]:
    """Processes whose network namespace is ``namespace``."""
    out = ip("netns", "pids", namespace, check=False).stdout
    return [int(p) for p in out.split() if p.isdigit()]


def kill_all_in(namespaces: Sequence[str], grace_s: float = 2.0) -> None:
    """SIGTERM every process in ``namespaces`` (all started there by us), then SIGKILL what
    is still there after ``grace_s``, and wait until none is left."""
    for sig, wait_s in ((signal.SIGTERM, grace_s), (signal.SIGKILL, 5.0)):
        pids = [p for ns in namespaces for p in pids_in(ns)]
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, sig)
        deadline = time.monotonic() + wait_s
        while pids and time.monotonic() < deadline:
            time.sleep(0.05)
            for pid in pids:  # reap our own children; others' exit is seen in pids_in
                with contextlib.suppress(ChildProcessError, OSError):
                    os.waitpid(pid, os.WNOHANG)
            pids = [p for ns in namespaces for p in pids_in(ns)]
        if not pids:
            return


def remove(prefix: str) -> None:
    """Kill everything running in the namespaces of ``prefix`` and delete them (the switch's
    bridge and every veth go with them)."""
    names = ours(prefix)
    kill_all_in(names)
    for name in names:
        ip("netns", "del", name, check=False)


def can_make_namespaces() -> str | None:
    """None when this process can make network namespaces; else a one-line reason."""
    if shutil.which("ip") is None:
        return "network namespaces need iproute2 (`ip`), which is not installed"
    if os.geteuid() != 0:
        return "network namespaces need root"
    probe = f"rpm-{os.getpid()}-probe"
    done = ip("netns", "add", probe, check=False)
    if done.returncode:
        return f"cannot make a network namespace: {done.stderr.strip() or done.returncode}"
    ip("netns", "del", probe, check=False)
    return None


class Hosts:
    """``n`` hosts on one bridge: ``names[i]`` is host i's namespace, ``addresses[i]`` its
    address. Use as a context manager (or call :meth:`close`)."""

    def __init__(self, n: int, prefix: str | None = None) -> None:
        if not 1 <= n <= 200:
            raise ValueError(f"hosts: 1 to 200, not {n}")
        self.prefix = prefix or f"rpm-{os.getpid()}-{next(_serial)}"
        self.switch = f"{self.prefix}-sw"
        self.names = [f"{self.prefix}-h{i}" for i in range(n)]
        hosts = list(SUBNET.hosts())
        self.addresses = [str(hosts[i]) for i in range(n)]
        self.procs: list[subprocess.Popen[Any]] = []
        self._cables = 0
        self._closed = False
        _live.add(self)
        try:
            self._make()
        except BaseException:
            self.close()
            raise

    def _make(self) -> None:
        if ours(self.prefix):
            raise HostsError(f"namespaces {self.prefix}-* exist already")
        for name in [self.switch, *self.names]:
            ip("netns", "add", name)
            ip("-n", name, "link", "set", "lo", "up")
        ip("-n", self.switch, "link", "add", "br0", "type", "bridge")
        ip("-n", self.switch, "link", "set", "br0", "up")
        for i, (name, address) in enumerate(zip(self.names, self.addresses, strict=True)):
            port = f"p{i}"
            # both ends made where they live: nothing appears in the machine's namespace
            ip(
                "-n",
                self.switch,
                "link",
                "add",
                port,
                "type",
                "veth",
                "peer",
                "name",
                "eth0",
                "netns",
                name,
            )
            ip("-n", self.switch, "link", "set", port, "master", "br0", "up")
            ip("-n", name, "addr", "add", f"{address}/{SUBNET.prefixlen}", "dev", "eth0")
            ip("-n", name, "link", "set", "eth0", "up")

    def __enter__(self) -> Hosts:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __len__(self) -> int:
        return len(self.names)

    def argv(self, i: int, cmd: Sequence[str]) -> list[str]:
        """The command line that runs ``cmd`` in host ``i``."""
        return ["ip", "netns", "exec", self.names[i], *cmd]

    def run(self, i: int, cmd: Sequence[str], **kw: Any) -> subprocess.CompletedProcess[str]:
        """Run ``cmd`` in host ``i`` to its end (text output captured unless told otherwise)."""
        kw.setdefault("capture_output", True)
        kw.setdefault("text", True)
        kw.setdefault("timeout", 120)
        return subprocess.run(self.argv(i, cmd), check=False, **kw)

    def start(self, i: int, cmd: Sequence[str], **kw: Any) -> subprocess.Popen[Any]:
        """Start ``cmd`` in host ``i`` (``ip netns exec`` execs it: the process's pid is the
        command's). It is killed, at the latest, by :meth:`close`."""
        proc = subprocess.Popen(self.argv(i, cmd), **kw)
        self.procs.append(proc)
        return proc

    def wait_listening(self, i: int, port: int, timeout_s: float = 30.0) -> None:
        """Wait until something in host ``i`` listens on TCP ``port``."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            out = self.run(i, ["ss", "-Htln", f"sport = :{port}"], timeout=10).stdout
            if out.strip():
                return
            for proc in self.procs:
                if proc.poll() is not None and proc.returncode:
                    raise HostsError(f"{proc.args!r}: exited with status {proc.returncode}")
            time.sleep(0.05)
        raise HostsError(f"nothing listens on {self.addresses[i]}:{port} after {timeout_s} s")

    def delay(self, a: int, b: int, delay_s: float) -> tuple[str, str]:
        """A cable from host ``a`` to host ``b`` whose packets from ``a`` to ``b`` are held
        ``delay_s`` (so every round trip over it is ``delay_s`` longer): returns the addresses
        of ``a`` and ``b`` at its ends; connecting from ``a`` to ``b``'s end crosses it."""
        k = self._cables
        self._cables += 1
        net = ipaddress.ip_network(f"198.19.{k // 64}.{4 * (k % 64)}/30")
        near, far = (str(h) for h in net.hosts())
        dev = f"dl{k}"
        proc = self.start(
            a,
            [
                sys.executable,
                "-m",
                "tests.support.delayline",
                self.names[b],
                dev,
                str(int(delay_s * 1e6)),
            ],
            stdout=subprocess.PIPE,
            text=True,
            cwd=Path(__file__).resolve().parents[2],
        )
        assert proc.stdout is not None
        if proc.stdout.readline().strip() != "ready":
            raise HostsError(f"delay line {dev}: exited with status {proc.wait(10)}")
        for ns, mine, peer in ((self.names[a], near, far), (self.names[b], far, near)):
            ip("-n", ns, "addr", "add", mine, "peer", f"{peer}/32", "dev", dev)
            ip("-n", ns, "link", "set", dev, "up")
        return near, far

    def left(self) -> list[str]:
        """Our namespaces that still exist (empty after :meth:`close`)."""
        return ours(self.prefix)

    def close(self) -> None:
        """Kill everything that runs in the hosts and delete them; safe to call twice."""
        if self._closed:
            return
        self._closed = True
        for proc in self.procs:
            if proc.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    proc.terminate()
        for proc in self.procs:
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(timeout=3)
            if proc.poll() is None:
                proc.kill()
                proc.wait(timeout=5)
            if proc.stdout is not None:
                proc.stdout.close()
        remove(self.prefix)


def _close_all_and_exit(signum: int, frame: object) -> None:
    for hosts in list(_live):
        hosts.close()
    signal.signal(signum, signal.SIG_DFL)
    os.kill(os.getpid(), signum)


@contextlib.contextmanager
def torn_down_on_signals() -> Iterator[None]:
    """Within the block, SIGTERM and SIGINT first tear down every :class:`Hosts` still open,
    then end the process as the signal would have."""
    saved = {s: signal.signal(s, _close_all_and_exit) for s in (signal.SIGTERM, signal.SIGINT)}
    try:
        yield
    finally:
        for s, handler in saved.items():
            signal.signal(s, handler)


def _main(argv: list[str]) -> int:
    usage = "usage: hosts.py up NAME N | down NAME"
    if len(argv) < 2 or argv[0] not in ("up", "down"):
        print(usage, file=sys.stderr)
        return 2
    name = argv[1]
    if argv[0] == "down":
        gone = ours(name)
        remove(name)
        print(f"removed {len(gone)} namespaces {name}-*")
        return 0
    if len(argv) != 3 or not argv[2].isdigit():
        print(usage, file=sys.stderr)
        return 2
    reason = can_make_namespaces()
    if reason:
        print(f"hosts.py: {reason}", file=sys.stderr)
        return 2
    try:
        hosts = Hosts(int(argv[2]), prefix=name)
    except (HostsError, ValueError) as exc:
        print(f"hosts.py: {exc}", file=sys.stderr)
        return 2
    hosts._closed = True  # up: they stay until `down`
    for ns, address in zip(hosts.names, hosts.addresses, strict=True):
        print(f"{ns} {address}")
    return 0


if __name__ == "__main__":
    sys.exit(_main(sys.argv[1:]))
