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
- ``wall_s`` runs from the spawn of the command until the command itself exited;
- ``max_rss_bytes`` is the largest peak resident set of any one process of the tree below the
  launcher (a bound on the tree's peak from below; the kernel keeps no peak of the sum). A process
  inherits, in its peak, the memory of the process it was forked from (the kernel folds the old
  memory's peak into the new program's at ``exec``): spawned by the launcher itself, any command
  would read at least the launcher's own 10-15 MB. So the command is forked by a small parent
  instead: a subshell of ``/bin/sh`` reports its pid and waits, the launcher kills the shell
  and adopts the subshell, which then runs the command in its place (``exec``). The floor is
  then the shell's own peak, about 1.7 MB (``rss_floor_bytes`` stays 0); ``sleep`` reads its real 1.6-1.7 MB. Where
  ``/bin/sh`` is missing the launcher spawns the command itself, and ``rss_floor_bytes`` is its
  own peak: a peak at that floor means "at most this much";
- the CPU time the subshell used before the command started in its process
  (``/proc/PID/schedstat``, ``start_cpu_s``) is taken out of its user and system time, so that
  a command's CPU is its own;
- the command starts with the default dispositions of SIGINT, SIGQUIT, SIGPIPE and SIGXFSZ (the
  launcher, a Python process, ignores SIGPIPE and SIGXFSZ);
- descendants still alive when the command exited are waited for up to ``--linger`` seconds, then
  killed; they are counted and reported as ``outlived``.

On SIGTERM (sent by :mod:`rpcmeter.host.watchdog` when rpcmeter died without stopping it) the launcher
kills the command's tree and exits.

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
from collections.abc import Sequence
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


def _descendants() -> list[int]:
    """Pids of the launcher's living children (orphans adopted included), from /proc."""
    me = os.getpid()
    out = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as f:
                stat = f.read()
        except OSError:
            continue
        fields = stat[stat.rfind(b")") + 2 :].split()
        if len(fields) > 1 and int(fields[1]) == me:
            out.append(int(name))
    return out


def _kill_tree(group: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(group, signal.SIGKILL)
    for pid in _descendants():  # adopted orphans may have left the group
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signal.SIGKILL)


# The command's process is forked by a small shell that the launcher starts with the default
# dispositions of SIGINT, SIGQUIT, SIGPIPE and SIGXFSZ (Python ignores SIGPIPE and SIGXFSZ, and
# ignored signals are inherited): a subshell in the foreground (so it keeps them, where a
# background one would ignore SIGINT and SIGQUIT) reports its pid on fd 3 and waits, reading a
# line on fd 4. The launcher then kills the shell, so that the subshell is orphaned and becomes
# the launcher's to reap, and says go (a launcher gone before that leaves it an end of file: it
# exits). Only then does the subshell ``exec`` the command, or, in shell mode, evaluate the
# command line: what is timed is the command's own start and run, not the shell's.
_SMALL_PARENT = (
    '( read -r pid _ </proc/self/stat && echo "$pid" >&3 && exec 3>&- && read _ <&4 || exit;'
    " exec 4<&-; unset pid; %s ); exit"
)
_SMALL_PARENT_SCRIPT = _SMALL_PARENT % 'exec "$@"'
_SHELL_SCRIPT = _SMALL_PARENT % 'eval "shift; $1"'  # the line runs as sh -c runs it: no $1
DEFAULT_SIGNALS = (signal.SIGINT, signal.SIGQUIT, signal.SIGPIPE, signal.SIGXFSZ)


def small_parent(shell: bool = False) -> list[str] | None:
    """The argv prefix that starts a command from a small process (``/bin/sh``), or None where
    that is not available. With ``shell``, what follows the prefix is one command line that the
    small shell evaluates."""
    if not os.access("/bin/sh", os.X_OK) or not os.path.exists("/proc/self/stat"):
        return None
    return ["/bin/sh", "-c", _SHELL_SCRIPT if shell else _SMALL_PARENT_SCRIPT, "sh"]


def _cpu_s(pid: int) -> float:
    """The CPU time ``pid`` has used so far (``/proc/PID/schedstat``, nanoseconds), 0 where it
    cannot be read."""
    try:
        with open(f"/proc/{pid}/schedstat", "rb") as f:
            return int(f.read().split()[0]) / 1e9
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


def _spawn_from_small_parent(
    prefix: list[str], argv: Sequence[str], actions: list[Any], spawned: list[int], shell: bool
) -> tuple[int, int, int]:
    """Fork ``argv`` from the small parent ``prefix`` (:func:`small_parent`) and kill and reap
    that parent: the command's pid, the parent's (the leader of the command's process group,
    added to ``spawned`` at once), and the fd on which a line lets the command run."""
    pid_read, pid_write = os.pipe()
    go_read, go_write = os.pipe()
    command = list(argv) if shell else [_resolve(argv[0]), *argv[1:]]
    try:
        helper = os.posix_spawn(
            prefix[0],
            [*prefix, *command],
            os.environ,
            file_actions=[
                *actions,
                (os.POSIX_SPAWN_DUP2, pid_write, 3),
                (os.POSIX_SPAWN_DUP2, go_read, 4),
            ],
            setpgroup=0,
            setsigdef=DEFAULT_SIGNALS,
        )
        spawned.append(helper)
    except BaseException:
        os.close(go_write)
        raise
    finally:
        for fd in (pid_write, go_read):
            os.close(fd)
    with os.fdopen(pid_read, "rb") as pipe:
        line = pipe.readline()  # the subshell runs and waits
    with contextlib.suppress(ProcessLookupError):
        os.kill(helper, signal.SIGKILL)
    os.waitpid(helper, 0)
    if not line.strip().isdigit():
        os.close(go_write)
        raise OSError(0, "the shell that starts it failed")
    return int(line), helper, go_write


class Launcher:
    """Runs command trees one after another in this process (the child subreaper): the small
    parent is found once, and SIGTERM kills the tree of the run in progress."""

    def __init__(self) -> None:
        self.subreaper = become_subreaper()
        self.prefixes: dict[bool, list[str] | None] = {}
        self.spawned: list[int] = []
        signal.signal(signal.SIGALRM, _on_alarm)
        signal.signal(signal.SIGTERM, self._terminate)

    def _terminate(self, signum: int, frame: FrameType | None) -> None:  # rpcmeter is gone
        for group in self.spawned:
            _kill_tree(group)
        os._exit(128 + signum)

    def prefix(self, shell: bool) -> list[str] | None:
        if shell not in self.prefixes:
            self.prefixes[shell] = small_parent(shell)
        return self.prefixes[shell]

    def run(
        self, argv: Sequence[str], log_fd: int, timeout_s: float, linger_s: float, shell: bool
    ) -> TreeUsage:
        """Spawn ``argv`` (with ``shell``: one command line for ``/bin/sh``; its output to
        ``log_fd``), reap its whole tree, return the usage."""
        self.spawned = []
        return _run_tree(self, argv, log_fd, timeout_s, linger_s, shell)


def run_tree(
    argv: Sequence[str], log_fd: int, timeout_s: float, linger_s: float, shell: bool = False
) -> TreeUsage:
    """Spawn ``argv`` (its output to ``log_fd``), reap its whole tree, return the usage."""
    return Launcher().run(argv, log_fd, timeout_s, linger_s, shell)


def _run_tree(
    launcher: Launcher,
    argv: Sequence[str],
    log_fd: int,
    timeout_s: float,
    linger_s: float,
    shell: bool,
) -> TreeUsage:
    usage = TreeUsage(subreaper=launcher.subreaper)
    actions = [
        (os.POSIX_SPAWN_OPEN, 0, os.devnull, os.O_RDONLY, 0),
        (os.POSIX_SPAWN_DUP2, log_fd, 1),
        (os.POSIX_SPAWN_DUP2, log_fd, 2),
    ]
    spawned = launcher.spawned
    prefix = launcher.prefix(shell)
    try:
        if prefix is None:
            usage.rss_floor_bytes = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
            command = ["/bin/sh", "-c", argv[0]] if shell else list(argv)
            start = time.perf_counter_ns()
            pid = os.posix_spawnp(
                command[0],
                command,
                os.environ,
                file_actions=actions,
                setpgroup=0,
                setsigdef=DEFAULT_SIGNALS,
            )
            group = pid
        else:
            pid, group, go = _spawn_from_small_parent(prefix, argv, actions, spawned, shell)
            # the process that becomes the command ran a subshell first (it waits now)
            usage.start_cpu_s = _cpu_s(pid)
            start = time.perf_counter_ns()
            os.write(go, b"go\n")  # the command runs now
            os.close(go)
        if group not in spawned:
            spawned.append(group)
    except FileNotFoundError:
        usage.error = f"command not found: {argv[0]}"
        return usage
    except PermissionError:
        usage.error = f"cannot execute {argv[0]}: permission denied"
        return usage
    except OSError as exc:
        usage.error = f"cannot start {argv[0]}: {exc.strerror}"
        return usage
    deadline = time.monotonic() + timeout_s
    linger_deadline: float | None = None
    killed = False
    while True:
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
                usage.outlived = len(_descendants())
            _kill_tree(group)
            killed = True
            linger_deadline = time.monotonic() + 5.0
            continue
        wpid, status, rusage = got
        usage.add(rusage, usage.start_cpu_s if wpid == pid else 0.0)
        if wpid == pid:
            usage.wall_s = (time.perf_counter_ns() - start) / 1e9
            usage.exit_code = os.waitstatus_to_exitcode(status)
            if linger_deadline is None:
                linger_deadline = time.monotonic() + (0.0 if killed else linger_s)
    return usage


def serve(launcher: Launcher, requests: Any, replies: Any) -> None:
    """``--serve``: one run per JSON line read from ``requests`` (``{"argv", "log", "timeout",
    "linger", "shell"}``; the log is emptied first), its usage written as one JSON line to
    ``replies``, until the end of ``requests``. rpcmeter runs a case's runs through one launcher
    so that a run costs a fork and an exec, not the start of an interpreter."""
    for line in requests:
        if not line.strip():
            continue
        req = json.loads(line)
        fd = os.open(req["log"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_APPEND, 0o600)
        try:
            usage = launcher.run(
                req["argv"], fd, req["timeout"], req["linger"], bool(req.get("shell"))
            )
        finally:
            os.close(fd)
        replies.write(json.dumps(asdict(usage)) + "\n")
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
        serve(Launcher(), sys.stdin, sys.stdout)
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
