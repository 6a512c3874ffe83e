"""A server's whole process tree is stopped, also a child that left the server's process group and
session (``setsid``, then its parent exited: the classic daemon): each server runs in a cgroup of
its own, whose processes are stopped with it, after a case and when rpcmeter is killed outright."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import psutil
import pytest

from rpcmeter.host import placement as placement
from rpcmeter.host import watchdog as watchdog
from rpcmeter.servers.process import ServerProcess, new_endpoint

pytestmark = pytest.mark.timeout(120)

# forks a daemon (own session, parent gone: neither in the server's group nor below it), writes
# the daemon's pid to argv[2], then listens on port argv[1]
DAEMONIZING_SERVER = textwrap.dedent(
    """
    import os, socket, sys, time
    port, pidfile = int(sys.argv[1]), sys.argv[2]
    if os.fork() == 0:
        os.setsid()
        if os.fork() == 0:
            with open(pidfile + ".tmp", "w") as f:
                f.write(str(os.getpid()))
            os.rename(pidfile + ".tmp", pidfile)
            time.sleep(60)
        os._exit(0)
    s = socket.socket()
    s.bind(("127.0.0.1", port))
    s.listen()
    time.sleep(60)
    """
)


def cgroups_writable() -> bool:
    group, _ = placement.tracking_cgroup(f"rpcmeter-{os.getpid()}-probe")
    if group is None:
        return False
    group.remove()
    return True


needs_cgroups = pytest.mark.skipif(
    not cgroups_writable(),
    reason="no writable cgroup hierarchy here (not root, or a container without one): a server's "
    "child in a session of its own is then stopped only while it is below the server",
)


def daemon_pid(pidfile: Path) -> int:
    deadline = time.monotonic() + 20
    while not pidfile.exists():
        assert time.monotonic() < deadline, "the server never started its daemon"
        time.sleep(0.02)
    return int(pidfile.read_text())


def gone(pid: int, timeout_s: float) -> bool:
    """True when ``pid`` ends (or is a zombie) within ``timeout_s``; killed here otherwise."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            if psutil.Process(pid).status() == psutil.STATUS_ZOMBIE:
                return True
        except psutil.NoSuchProcess:
            return True
        time.sleep(0.02)
    os.kill(pid, signal.SIGKILL)
    return False


def write_server(tmp_path: Path) -> Path:
    script = tmp_path / "daemonizing_server.py"
    script.write_text(DAEMONIZING_SERVER)
    return script


@needs_cgroups
def test_a_child_in_a_session_of_its_own_is_stopped_with_the_server(tmp_path: Path) -> None:
    pidfile = tmp_path / "daemon.pid"
    endpoint = new_endpoint("tcp")
    command = [sys.executable, str(write_server(tmp_path)), str(endpoint.port), str(pidfile)]
    with ServerProcess(command, endpoint, stop_timeout_s=2.0) as server:
        daemon = daemon_pid(pidfile)
        group = server.cgroup
        assert group is not None and daemon in group.pids()
        assert os.getsid(daemon) != os.getsid(server.pid)
        assert psutil.Process(daemon).ppid() != server.pid
    assert gone(daemon, 5.0)
    assert not group.path.exists()  # the cgroup is removed with the server


@needs_cgroups
def test_a_killed_rpcmeter_leaves_no_daemon_of_its_server(tmp_path: Path) -> None:
    pidfile = tmp_path / "daemon.pid"
    suite = tmp_path / "suite.toml"
    suite.write_text(
        textwrap.dedent(
            f"""
            [target]
            driver = "http"
            server = {{ command = "{{python}} {write_server(tmp_path)} {{port}} {pidfile}" }}
            [workloads.noop]
            [load]
            duration_s = 60
            """
        )
    )
    proc = subprocess.Popen(
        [sys.executable, "-m", "rpcmeter", "run", str(suite), "--no-store"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
        cwd=tmp_path,
    )
    try:
        daemon = daemon_pid(pidfile)
        assert server_cgroups(proc.pid)  # its tracking cgroup (and accounting one, if apart)
    finally:
        proc.kill()
        proc.wait()
    assert gone(daemon, 5 + watchdog.GRACE_S)
    deadline = time.monotonic() + 5 + watchdog.GRACE_S
    while server_cgroups(proc.pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert server_cgroups(proc.pid) == []  # the watchdog removed every cgroup of the server


def server_cgroups(rpcmeter_pid: int) -> list[Path]:
    """The cgroups that rpcmeter process ``rpcmeter_pid`` made for its servers, in every
    hierarchy."""
    found: set[Path] = set()
    for mount, fstype, options in placement._mounts():
        for controller in [None] if fstype == "cgroup2" else options.split(","):
            own = placement._own_cgroup(controller)
            if own is not None:
                parent = Path(mount) / own.lstrip("/")
                found.update(parent.glob(f"rpcmeter-{rpcmeter_pid}-server-*"))
    return sorted(found)
