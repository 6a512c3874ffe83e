"""Stop the process groups rpcmeter started when rpcmeter itself dies without cleaning up.

rpcmeter stops its servers and command launchers on every way out it sees (the end of a case,
Ctrl-C, SIGTERM, an error). A SIGKILL, or a crash of the interpreter, runs none of that. Each
server's leader then dies with its parent (``PR_SET_PDEATHSIG``), but that signal is not
inherited: the leader's own children (nginx's workers, a forking server's workers, a command
launcher's command) would live on, re-parented to init.

So while rpcmeter has process groups running, it also runs this watchdog: ``python -S -P
watchdog.py``, in a session of its own (a Ctrl-C at the terminal is not for it), reading its
standard input, a pipe only rpcmeter holds. It starts with the first group and exits when the
last one has been stopped. rpcmeter writes ``+PGID START [PROCS]`` when it starts a group
(``PROCS``: the ``cgroup.procs`` files of the group's own cgroups, when it has any, separated by
tabs) and ``-PGID``
when it has stopped it. When the pipe reaches end of file (rpcmeter exited, however it exited,
or let the watchdog go), the watchdog sends SIGTERM to every group still registered and every
process in its cgroup (those that started sessions of their own too), SIGKILL after
:data:`GRACE_S` to those still alive, removes the cgroups and exits. ``START`` is the leader's start time
(``/proc/PID/stat`` field 22): a group whose leader id now belongs to another process is left
alone.

The module imports only the standard library, so that the watchdog starts in 20-40 ms.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterable

GRACE_S = 2.0
PROCS_SEP = "\t"  # between a group's cgroup.procs files


def start_time(pid: int) -> int | None:
    """The start time of process ``pid`` in clock ticks since boot, or None when it is gone."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            stat = f.read()
    except OSError:
        return None
    return int(stat[stat.rfind(b")") + 2 :].split()[19])


def group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # alive, and not ours to signal
        pass
    return True


def cgroup_pids(procs: str | None) -> list[int]:
    """The processes in the cgroup whose ``cgroup.procs`` file is ``procs``."""
    if not procs:
        return []
    try:
        with open(procs) as f:
            return [int(pid) for pid in f.read().split()]
    except (OSError, ValueError):
        return []


# pgid: (leader's start time, the cgroup.procs files of its cgroups)
Groups = dict[int, tuple[int | None, tuple[str, ...]]]


def signal_groups(groups: Groups, signum: int) -> None:
    for pgid, (started, procs) in groups.items():
        for pid in {pid for path in procs for pid in cgroup_pids(path)}:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signum)
        now = start_time(pgid)
        if now is not None and started is not None and now != started:
            continue  # the leader's id was reused by an unrelated process
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pgid, signum)


def watch(stream: Iterable[str]) -> Groups:
    """Follow registrations on ``stream`` (lines) until end of file; the groups left."""
    groups: Groups = {}
    for line in stream:
        fields = line.rstrip("\n").split(" ", 2)
        with contextlib.suppress(ValueError, IndexError):
            pgid = int(fields[0][1:])
            if fields[0].startswith("+"):
                started = int(fields[1]) if len(fields) > 1 and fields[1].isdigit() else None
                procs = fields[2].split(PROCS_SEP) if len(fields) > 2 else []
                groups[pgid] = (started, tuple(path for path in procs if path))
            elif fields[0].startswith("-"):
                groups.pop(pgid, None)
    return groups


def stop_groups(groups: Groups, grace_s: float = GRACE_S) -> None:
    """SIGTERM to every group (and its cgroup), SIGKILL to those still alive after ``grace_s``;
    then the emptied cgroups are removed."""
    if not groups:
        return

    def alive(pgid: int) -> bool:
        return group_alive(pgid) or any(cgroup_pids(path) for path in groups[pgid][1])

    signal_groups(groups, signal.SIGTERM)
    deadline = time.monotonic() + grace_s
    while time.monotonic() < deadline and any(alive(g) for g in groups):
        time.sleep(0.02)
    signal_groups({g: s for g, s in groups.items() if alive(g)}, signal.SIGKILL)
    deadline = time.monotonic() + grace_s
    for _, procs in groups.values():
        for path in procs:
            while cgroup_pids(path) and time.monotonic() < deadline:
                time.sleep(0.01)
            with contextlib.suppress(OSError):
                os.rmdir(os.path.dirname(path))


def main() -> int:
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    stop_groups(watch(sys.stdin))
    return 0


class Watchdog:
    """The rpcmeter side: a watchdog runs while at least one group is registered (it is started
    by the first :meth:`guard` and let go when the last group is released), so that no process
    of rpcmeter's outlives the run that needed it."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._proc: subprocess.Popen[bytes] | None = None
        self._groups: set[int] = set()
        self._owner = os.getpid()  # a forked child starts with a copy: not its watchdog

    def _forget_if_forked(self) -> None:
        if self._owner != os.getpid():  # a forked child: the parent's registrations are not its
            self._owner, self._proc, self._groups = os.getpid(), None, set()

    def _start(self) -> subprocess.Popen[bytes] | None:
        if not sys.platform.startswith("linux"):
            return None
        try:
            return subprocess.Popen(
                [sys.executable, "-S", "-P", os.path.abspath(__file__)],
                stdin=subprocess.PIPE,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                start_new_session=True,
                bufsize=0,
            )
        except OSError:
            return None

    def _say(self, proc: subprocess.Popen[bytes] | None, line: str) -> None:
        if proc is not None and proc.stdin is not None:
            with contextlib.suppress(OSError):
                proc.stdin.write(line.encode())

    def guard(self, pgid: int, *cgroup_procs: str) -> None:
        """Stop group ``pgid`` (and the processes in the cgroups whose ``cgroup.procs`` files are
        ``cgroup_procs``) if this process dies before :meth:`release`."""
        started = start_time(pgid)
        with self._lock:
            self._forget_if_forked()
            if self._proc is None:
                self._proc = self._start()
            self._groups.add(pgid)
            self._say(
                self._proc,
                f"+{pgid} {started if started is not None else '-'} {PROCS_SEP.join(cgroup_procs)}\n",
            )

    def release(self, pgid: int) -> None:
        """Group ``pgid`` was stopped (or is no longer ours to stop)."""
        with self._lock:
            self._forget_if_forked()
            if pgid not in self._groups:
                return
            self._groups.discard(pgid)
            self._say(self._proc, f"-{pgid}\n")
            if self._groups:
                return
            proc, self._proc = self._proc, None
        _let_go(proc)


def _let_go(proc: subprocess.Popen[bytes] | None) -> None:
    """Close the watchdog's pipe (it stops whatever is still registered, then exits) and reap it."""
    if proc is None:
        return
    if proc.stdin is not None:
        with contextlib.suppress(OSError):
            proc.stdin.close()
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(GRACE_S + 3)


WATCHDOG = Watchdog()


if __name__ == "__main__":
    sys.exit(main())
