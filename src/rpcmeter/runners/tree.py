"""Run one command as a process tree and account for every process in it.

``python -m rpcmeter.runners.tree [options] -- COMMAND...`` is the launcher rpcmeter starts for
every run of a command target. It makes itself a *child subreaper* (Linux ``prctl
PR_SET_CHILD_SUBREAPER``), so processes orphaned inside the tree (a worker whose parent exited
without waiting for it, a double-forked helper) are re-parented to the launcher instead of init.
The launcher then reaps every process of the tree with ``wait4`` and adds up the resource usage
each one reports:

- ``wait4`` returns a process's own user and system CPU *plus* that of the descendants it waited
  for itself, so nothing is counted twice, and descendants nobody waited for are reaped (and
  counted) by the launcher;
- ``wall_s`` runs from the go to the run's process (it runs ``exec`` then) until the
  command itself exited;
- ``max_rss_bytes`` is the largest peak resident set of any one process of the tree below the
  launcher (a bound on the tree's peak from below; the kernel keeps no peak of the sum). A process
  inherits, in its peak, the memory of the process it was forked from (the kernel folds the old
  memory's peak into the new program's at ``exec``): spawned by the launcher itself, any command
  would read at least the launcher's own 10-15 MB. So the command is forked by a small parent
  instead, a :class:`Starter`: a ``/bin/sh`` started once for a command line, whose subshell
  forks the run's process; that process reports its pid, kills the subshell (so the launcher
  adopts it) and waits for the go, then runs the command in its place (``exec``). The floor is
  then the shell's own peak, about 1.7 MB (``rss_floor_bytes`` stays 0); ``sleep`` reads its
  real 1.6-1.7 MB. Where ``/bin/sh`` is missing the launcher spawns the command itself, and
  ``rss_floor_bytes`` is its own peak: a peak at that floor means "at most this much";
- the CPU time the run's process used before the command started in it
  (``/proc/PID/schedstat``, ``start_cpu_s``) is taken out of its user and system time, so that
  a command's CPU is its own;
- the command starts with the default dispositions of SIGINT, SIGQUIT, SIGPIPE and SIGXFSZ (the
  launcher, a Python process, ignores SIGPIPE and SIGXFSZ);
- descendants still alive when the command exited are waited for up to ``--linger`` seconds, then
  killed; they are counted and reported as ``outlived``.

On SIGTERM (sent by :mod:`rpcmeter.host.watchdog` when rpcmeter died without stopping it) the launcher
kills the command's tree and its starters, and exits; at the end of its input it stops its
starters.

The launcher prints one JSON object on its standard output; the command's own output goes to
``--log``. Its own start-up and CPU are not part of any figure.
"""

from __future__ import annotations

import argparse
import contextlib
import ctypes
import json
import os
import resource
import shutil
import signal
import sys
import time
from collections.abc import Sequence, Set
from dataclasses import asdict, dataclass
from types import FrameType
from typing import Any

PR_SET_CHILD_SUBREAPER = 36


class _Deadline(Exception):
    pass


@dataclass
class TreeUsage:
    """What one run of a command tree used."""

    wall_s: float = 0.0
    user_s: float = 0.0
    sys_s: float = 0.0
    max_rss_bytes: int = 0
    exit_code: int | None = None
    processes: int = 0
    outlived: int = 0
    timed_out: bool = False
    subreaper: bool = False
    rss_floor_bytes: int = 0
    start_cpu_s: float = 0.0  # CPU of env and the waiting shell, before the command: not counted
    error: str | None = None

    def add(self, usage: Any, before_s: float = 0.0) -> None:
        """Count a reaped process's ``rusage``, less ``before_s`` of CPU it spent before the
        command started in it (taken from user and system time in their proportion: the kernel
        splits a process's CPU time that way too)."""
        user, system = usage.ru_utime, usage.ru_stime
        total = user + system
        if before_s > 0 and total > 0:
            kept = max(0.0, 1 - before_s / total)
            user, system = user * kept, system * kept
        self.user_s += user
        self.sys_s += system
        self.max_rss_bytes = max(self.max_rss_bytes, int(usage.ru_maxrss) * 1024)
        self.processes += 1


def become_subreaper() -> bool:
    """Adopt orphaned descendants (Linux 3.4+); False where the call is not available."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return bool(libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0)
    except (OSError, AttributeError):
        return False


def _on_alarm(signum: int, frame: FrameType | None) -> None:
    raise _Deadline


def _wait_any(deadline: float) -> tuple[int, int, Any] | None:
    """Block until some child exits (its pid, status, rusage), or None at ``deadline``; raises
    ChildProcessError when there are no children left."""
    remaining = deadline - time.monotonic()
    if remaining <= 0:
        return None
    signal.setitimer(signal.ITIMER_REAL, remaining)
    try:
        return os.wait4(-1, 0)
    except _Deadline:
        return None
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)


def _read(path: str) -> bytes:
    """The contents of a small ``/proc`` file (one read: no buffering, no checks)."""
    fd = os.open(path, os.O_RDONLY)
    try:
        return os.read(fd, 65536)
    finally:
        os.close(fd)


def _children(spare: Set[int] = frozenset()) -> list[int]:
    """Pids of the launcher's children (orphans adopted included) but ``spare``: from
    ``/proc/PID/task/PID/children`` (one small read; the launcher has one thread), or where the
    kernel has no such file, from every process's ``/proc/PID/stat``."""
    me = os.getpid()
    try:
        children = map(int, _read(f"/proc/{me}/task/{me}/children").split())
        return [pid for pid in children if pid not in spare]
    except OSError:
        pass
    out = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            stat = _read(f"/proc/{name}/stat")
        except OSError:
            continue
        fields = stat[stat.rfind(b")") + 2 :].split()
        if len(fields) > 1 and int(fields[1]) == me and int(name) not in spare:
            out.append(int(name))
    return out


def _kill_tree(group: int, spare: Set[int] = frozenset()) -> None:
    """Kill process group ``group`` and every child of the launcher but ``spare``."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(group, signal.SIGKILL)
    for pid in _children(spare):  # adopted orphans may have left the group
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signal.SIGKILL)


# The command's process is forked by a small shell, the *starter*, that the launcher starts once
# for a command line, with the default dispositions of SIGINT, SIGQUIT, SIGPIPE and SIGXFSZ
# (Python ignores SIGPIPE and SIGXFSZ, and ignored signals are inherited), in a process group of
# its own. For each line read on fd 5 it forks a subshell, which forks the run's process: both in
# the foreground, so they keep those dispositions (a background one would ignore SIGINT and
# SIGQUIT). The run's process reports its pid on fd 3 and kills its parent, so that it is
# orphaned and becomes the launcher's to reap; the starter, done waiting for that parent, writes
# an empty line on fd 3. The run's process waits for a line on fd 4 (an end of file, the
# launcher gone, makes it exit), and only then runs ``exec`` for the command or, in shell mode,
# evaluates the command line: what is timed is the command's own start and run, not the shells'.
# A run thus costs two forks of a small shell, not the start of one.
_STARTER = (
    "while read -r _ <&5; do ( for rpcmeter_up in /proc/self/task/*; do :; done;"
    " ( for rpcmeter_pid in /proc/self/task/*; do :; done;"
    ' echo "${rpcmeter_pid##*/}" >&3 && kill -9 "${rpcmeter_up##*/}" && read _ <&4 || exit;'
    " exec 2>&6 3>&- 4<&- 5<&- 6>&-; unset rpcmeter_up rpcmeter_pid; %s ); exit ); echo >&3;"
    " done"
)
_STARTER_SCRIPT = _STARTER % 'exec "$@"'
_SHELL_SCRIPT = _STARTER % 'eval "shift; $1"'  # the line runs as sh -c runs it: no $1
DEFAULT_SIGNALS = (signal.SIGINT, signal.SIGQUIT, signal.SIGPIPE, signal.SIGXFSZ)


def small_parent(shell: bool = False) -> list[str] | None:
    """The argv prefix that starts a :class:`Starter` (``/bin/sh``), or None where that is not
    available. With ``shell``, what follows the prefix is one command line that the small shell
    evaluates."""
    if not os.access("/bin/sh", os.X_OK) or not os.path.exists("/proc/self/task"):
        return None
    return ["/bin/sh", "-c", _SHELL_SCRIPT if shell else _STARTER_SCRIPT, "sh"]


def _cpu_s(pid: int) -> float:
    """The CPU time ``pid`` has used so far (``/proc/PID/schedstat``, nanoseconds), 0 where it
    cannot be read."""
    try:
        return int(_read(f"/proc/{pid}/schedstat").split()[0]) / 1e9
    except (OSError, ValueError, IndexError):
        return 0.0


def _resolve(command: str) -> str:
    """The executable ``command`` names (looked up on PATH without a slash), or OSError."""
    path = command if "/" in command else shutil.which(command)
    if path is None or not os.path.exists(path):
        raise FileNotFoundError(command)
    if os.path.isdir(path) or not os.access(path, os.X_OK):
        raise PermissionError(command)
    return path


class Starter:
    """The small shell that forks the runs of one command line (see ``_STARTER``), its output
    to ``log_fd``; a child of the launcher, and the leader of the process group of its runs."""

    def __init__(self, prefix: list[str], argv: Sequence[str], log_fd: int, shell: bool) -> None:
        command = list(argv) if shell else [_resolve(argv[0]), *argv[1:]]
        # made in this order, each pipe's end is above the fds the ones before it go to
        pid_read, pid_write = os.pipe()
        go_read, self.go_fd = os.pipe()
        ask_read, self.ask = os.pipe()
        ours = (pid_write, go_read, ask_read)
        try:
            self.pid = os.posix_spawn(
                prefix[0],
                [*prefix, *command],
                os.environ,
                file_actions=[
                    (os.POSIX_SPAWN_OPEN, 0, os.devnull, os.O_RDONLY, 0),
                    (os.POSIX_SPAWN_DUP2, log_fd, 1),
                    (os.POSIX_SPAWN_OPEN, 2, os.devnull, os.O_WRONLY, 0),  # "Killed", and such
                    (os.POSIX_SPAWN_DUP2, pid_write, 3),
                    (os.POSIX_SPAWN_DUP2, go_read, 4),
                    (os.POSIX_SPAWN_DUP2, ask_read, 5),
                    # the run's standard error (log_fd may be 3 to 5 by now; 1 is the log)
                    (os.POSIX_SPAWN_DUP2, 1, 6),
                ],
                setpgroup=0,
                setsigdef=DEFAULT_SIGNALS,
            )
        except BaseException:
            for fd in (pid_read, self.go_fd, self.ask):
                os.close(fd)
            raise
        finally:
            for fd in ours:
                os.close(fd)
        self.replies = os.fdopen(pid_read, "rb")
        self.reaped = False

    def fork(self) -> int:
        """A new process of the run, the launcher's child now, waiting for :meth:`go`: its pid;
        OSError where the starter failed."""
        os.write(self.ask, b"\n")
        line = self.replies.readline()  # the run's process, before it orphans itself
        done = self.replies.readline()  # the starter, its parent gone
        if not line.strip().isdigit() or done != b"\n":
            raise OSError(0, "the shell that starts it failed")
        return int(line)

    def go(self) -> None:
        """Let the process of :meth:`fork` run the command."""
        os.write(self.go_fd, b"go\n")

    def close(self) -> None:
        """Kill the starter (and what is left in its group), reap it, close its pipes."""
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.pid, signal.SIGKILL)
        if not self.reaped:
            with contextlib.suppress(ChildProcessError):
                os.waitpid(self.pid, 0)
            self.reaped = True
        self.replies.close()
        for fd in (self.go_fd, self.ask):
            with contextlib.suppress(OSError):
                os.close(fd)


class Launcher:
    """Runs command trees one after another in this process (the child subreaper): the small
    parent is found once, a :class:`Starter` serves all the runs of a command line (the few
    command lines used last keep theirs), and SIGTERM kills the tree of the run in progress."""

    KEEP = 4  # starters kept: a case's command and its hooks

    def __init__(self) -> None:
        self.subreaper = become_subreaper()
        self.prefixes: dict[bool, list[str] | None] = {}
        self.starters: dict[tuple[Any, ...], Starter] = {}
        self.group: int | None = None  # the process group of the run in progress
        signal.signal(signal.SIGALRM, _on_alarm)
        signal.signal(signal.SIGTERM, self._terminate)

    def _terminate(self, signum: int, frame: FrameType | None) -> None:  # rpcmeter is gone
        for starter in self.starters.values():
            _kill_tree(starter.pid)
        if self.group is not None:
            _kill_tree(self.group)
        os._exit(128 + signum)

    def prefix(self, shell: bool) -> list[str] | None:
        if shell not in self.prefixes:
            self.prefixes[shell] = small_parent(shell)
        return self.prefixes[shell]

    def starter(self, argv: Sequence[str], log_fd: int, shell: bool) -> Starter | None:
        """The starter of ``argv`` writing to ``log_fd`` (started now if there is none), or None
        where there is no small parent."""
        prefix = self.prefix(shell)
        if prefix is None:
            return None
        log = os.fstat(log_fd)
        key = (shell, tuple(argv), log.st_dev, log.st_ino)
        starter = self.starters.pop(key, None)
        if starter is None:
            while len(self.starters) >= self.KEEP:
                self.starters.pop(next(iter(self.starters))).close()
            starter = Starter(prefix, argv, log_fd, shell)
        self.starters[key] = starter  # the one used last is the last to go
        return starter

    def drop(self, starter: Starter) -> None:
        """Close ``starter`` and forget it."""
        for key, kept in list(self.starters.items()):
            if kept is starter:
                del self.starters[key]
        starter.close()

    def spare(self) -> set[int]:
        """The starters' pids: children of the launcher, but no run's."""
        return {starter.pid for starter in self.starters.values()}

    def run(
        self, argv: Sequence[str], log_fd: int, timeout_s: float, linger_s: float, shell: bool
    ) -> TreeUsage:
        """Spawn ``argv`` (with ``shell``: one command line for ``/bin/sh``; its output to
        ``log_fd``), reap its whole tree, return the usage."""
        try:
            return _run_tree(self, argv, log_fd, timeout_s, linger_s, shell)
        finally:
            self.group = None

    def close(self) -> None:
        """Stop every starter."""
        while self.starters:
            self.starters.pop(next(iter(self.starters))).close()

    def __enter__(self) -> Launcher:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def run_tree(
    argv: Sequence[str], log_fd: int, timeout_s: float, linger_s: float, shell: bool = False
) -> TreeUsage:
    """Spawn ``argv`` (its output to ``log_fd``), reap its whole tree, return the usage."""
    with Launcher() as launcher:
        return launcher.run(argv, log_fd, timeout_s, linger_s, shell)


def _start(
    launcher: Launcher, argv: Sequence[str], log_fd: int, shell: bool, usage: TreeUsage
) -> tuple[int, int, int]:
    """Start a run of ``argv``: the pid of the command, its process group, and the time
    (``perf_counter_ns``) its clock starts. From a starter (one fresh one if the kept one has
    failed), or where there is none, spawned by the launcher itself."""
    for attempt in range(2):
        starter = launcher.starter(argv, log_fd, shell)
        if starter is None:
            break
        try:
            pid = starter.fork()
        except OSError:
            launcher.drop(starter)
            if attempt:
                raise
            continue
        launcher.group = starter.pid
        # the process that becomes the command ran two shells' forks first (it waits now)
        usage.start_cpu_s = _cpu_s(pid)
        start = time.perf_counter_ns()
        starter.go()  # the command runs now
        return pid, starter.pid, start
    usage.rss_floor_bytes = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    command = ["/bin/sh", "-c", argv[0]] if shell else list(argv)
    start = time.perf_counter_ns()
    pid = os.posix_spawnp(
        command[0],
        command,
        os.environ,
        file_actions=[
            (os.POSIX_SPAWN_OPEN, 0, os.devnull, os.O_RDONLY, 0),
            (os.POSIX_SPAWN_DUP2, log_fd, 1),
            (os.POSIX_SPAWN_DUP2, log_fd, 2),
        ],
        setpgroup=0,
        setsigdef=DEFAULT_SIGNALS,
    )
    launcher.group = pid
    return pid, pid, start


def _run_tree(
    launcher: Launcher,
    argv: Sequence[str],
    log_fd: int,
    timeout_s: float,
    linger_s: float,
    shell: bool,
) -> TreeUsage:
    usage = TreeUsage(subreaper=launcher.subreaper)
    try:
        pid, group, start = _start(launcher, argv, log_fd, shell, usage)
    except FileNotFoundError:
        usage.error = f"command not found: {argv[0]}"
        return usage
    except PermissionError:
        usage.error = f"cannot execute {argv[0]}: permission denied"
        return usage
    except OSError as exc:
        usage.error = f"cannot start {argv[0]}: {exc.strerror}"
        return usage
    starters = {starter.pid: starter for starter in launcher.starters.values()}
    deadline = time.monotonic() + timeout_s
    linger_deadline: float | None = None
    killed = False
    while True:
        # done when the command is reaped and no child is left but the starters
        if usage.exit_code is not None and not _children(set(starters)):
            break
        try:
            got = _wait_any(linger_deadline if linger_deadline is not None else deadline)
        except ChildProcessError:
            break
        if got is None:  # the run timed out, or descendants outlived the linger time
            if killed:
                break
            if linger_deadline is None:
                usage.timed_out = True
            else:
                usage.outlived = len(_children(set(starters)))
            # the run's group is its starter's: the starter goes with it
            _kill_tree(group, set(starters) - {group})
            killed = True
            linger_deadline = time.monotonic() + 5.0
            continue
        wpid, status, rusage = got
        if wpid in starters:  # a starter died (killed with its run's group): not the run's
            starters.pop(wpid).reaped = True
            continue
        usage.add(rusage, usage.start_cpu_s if wpid == pid else 0.0)
        if wpid == pid:
            usage.wall_s = (time.perf_counter_ns() - start) / 1e9
            usage.exit_code = os.waitstatus_to_exitcode(status)
            if linger_deadline is None:
                linger_deadline = time.monotonic() + (0.0 if killed else linger_s)
    for starter in list(launcher.starters.values()):
        if starter.reaped or (starter.pid == group and killed):
            launcher.drop(starter)
    return usage


def failed(usage: TreeUsage) -> bool:
    """Whether the run failed: the launcher could not start it, it timed out or it exited with a
    non-zero status (or by a signal)."""
    return bool(usage.error or usage.timed_out or usage.exit_code)


def serve(launcher: Launcher, requests: Any, replies: Any) -> None:
    """``--serve``: runs for each JSON line read from ``requests``, until the end of it; their
    usages written as one JSON line to ``replies``, a list. A request is ``{"argv", "log",
    "timeout", "linger", "shell"}`` for one run (the log is emptied before each) and, for a batch
    of runs one after another, ``"times"`` (at most this many), ``"least"`` and ``"until_s"``
    (stop once at least ``least`` ran and their wall time adds up to ``until_s``); a batch also
    stops at a failed run (:func:`failed`). rpcmeter runs a case's runs through one launcher, in
    batches where it can, so that a run costs two forks of a small shell and no message."""
    for line in requests:
        if not line.strip():
            continue
        req = json.loads(line)
        times = req.get("times", 1)
        least, until_s = req.get("least", times), req.get("until_s", 0.0)
        usages: list[dict[str, Any]] = []
        total_s = 0.0
        fd = os.open(req["log"], os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        try:
            while len(usages) < times and (len(usages) < least or total_s < until_s):
                if os.fstat(fd).st_size:  # (truncating costs a journal entry, even when empty)
                    os.ftruncate(fd, 0)
                usage = launcher.run(
                    req["argv"], fd, req["timeout"], req["linger"], bool(req.get("shell"))
                )
                usages.append(vars(usage))
                total_s += usage.wall_s
                if failed(usage):
                    break
        finally:
            os.close(fd)
        replies.write(json.dumps(usages) + "\n")
        replies.flush()


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m rpcmeter.runners.tree")
    parser.add_argument("--timeout", type=float, default=600.0)
    parser.add_argument("--linger", type=float, default=10.0)
    parser.add_argument("--log", default=os.devnull)
    parser.add_argument("--shell", action="store_true", help="COMMAND is one line for /bin/sh")
    parser.add_argument(
        "--serve", action="store_true", help="run what standard input asks, a JSON line a run"
    )
    parser.add_argument("command", nargs=argparse.REMAINDER)
    args = parser.parse_args(argv)
    if args.serve:
        with Launcher() as launcher:
            serve(launcher, sys.stdin, sys.stdout)
        return 0
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        parser.error("no command given")
    fd = os.open(args.log, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    try:
        usage = run_tree(command, fd, args.timeout, args.linger, args.shell)
    finally:
        os.close(fd)
    sys.stdout.write(json.dumps(asdict(usage)) + "\n")
    sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
