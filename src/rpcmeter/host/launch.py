"""Start a command placed (dying with rpcmeter, in its cgroups, on its CPUs) with no Python code
run between ``fork`` and ``exec`` in rpcmeter's own process.

``subprocess.Popen(preexec_fn=...)`` starts the child with ``fork()`` and runs Python in it, so
every ``pthread_atfork`` handler of every library loaded runs around it, in the parent and in the
child: grpcio's stops and restarts its pollers at each such fork, and a child so started has been
seen to fail with grpcio's "epoll_wait error: Bad file descriptor" before it ran its command.
Without ``preexec_fn`` Python starts the child with ``vfork`` and it execs at once: no handler
runs. What must happen in the child before its command runs is done instead by this module, run
by path as a small launcher::

    python -I -S launch.py --status FD [--parent PID] [--procs FILE]... [--cpus 0,1] [--go FD] -- COMMAND...

It asks the kernel to kill it when ``PID`` ends (``prctl PR_SET_PDEATHSIG``), writes its pid to
each cgroup's ``cgroup.procs`` ``FILE``, takes the CPUs, with ``--go`` waits for a byte on that
pipe (rpcmeter's word that its watchdog knows the new process group: end of file instead, and
the command never runs), and then execs the command: the same
process, so the command keeps the pid :func:`spawn` returned, and nothing of the launcher is
left. Where the command cannot be started, the launcher writes the ``errno`` and its message to
the status pipe ``FD`` (closed at a successful ``exec``); :func:`spawn` raises it as the
:class:`OSError` ``Popen`` would have raised.

The module imports only the standard library, so that it runs by path without site-packages;
rpcmeter imports :func:`spawn` and :func:`die_with_parent` from it.
"""

from __future__ import annotations

import ctypes
import os
import sys

TYPE_CHECKING = False  # (not typing's: the launcher imports no more than it runs, below)
if TYPE_CHECKING:
    import subprocess
    from collections.abc import Callable, Sequence
    from typing import Any

_PR_SET_PDEATHSIG = 1
_SIGKILL = 9  # (Linux's; the signal module's import is a tenth of the launcher's start-up)


def die_with_parent(parent: int) -> None:
    """Linux: have the kernel kill this process when the thread that started it ends, so even a
    SIGKILLed rpcmeter leaves no server or client behind. ``parent`` is the expected parent pid
    (if it is already gone, exit now)."""
    if not sys.platform.startswith("linux"):
        return
    try:
        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, _SIGKILL, 0, 0, 0)
    except (OSError, AttributeError):
        return
    if os.getppid() != parent:
        os._exit(1)


def place(procs: Sequence[str], cpus: Sequence[int] | None) -> None:
    """Place the calling process (a launcher before it runs its command: all the command starts
    is placed too): into the cgroups whose ``cgroup.procs`` files are ``procs`` (where it can:
    the caller checks, and says why not) and onto ``cpus``."""
    for path in procs:
        try:
            with open(path, "w") as f:
                f.write(str(os.getpid()))
        except OSError:
            pass
    if cpus:
        os.sched_setaffinity(0, cpus)


def spawn(
    argv: Sequence[str],
    *,
    parent: int | None = None,
    procs: Sequence[str] = (),
    cpus: Sequence[int] | None = None,
    on_start: Callable[[int], None] | None = None,
    **popen: Any,
) -> subprocess.Popen[bytes]:
    """``subprocess.Popen(argv, **popen)``, the process dying with ``parent`` (a pid), in the
    cgroups ``procs`` and on ``cpus`` before ``argv`` runs: through the launcher when any of
    these is asked for. Returns once the command runs (its ``exec`` done); raises the
    :class:`OSError` of a command that could not be started, as ``Popen`` does.
    ``on_start(pid)`` is called as soon as the process exists, through the launcher before the
    command runs (so that a watchdog knows of it before the command can start others)."""
    import subprocess  # (here: the launcher itself has no use for it, and it is slow to import)

    if parent is None and not procs and not cpus:
        proc = subprocess.Popen(list(argv), **popen)
        if on_start is not None:
            on_start(proc.pid)
        return proc
    launcher = [sys.executable, "-I", "-S", os.path.abspath(__file__)]  # no PYTHON* variables
    if parent is not None:
        launcher += ["--parent", str(parent)]
    for path in procs:
        launcher += ["--procs", path]
    if cpus:
        launcher += ["--cpus", ",".join(str(cpu) for cpu in cpus)]
    readable, writable = os.pipe()
    fds = [writable]
    go: tuple[int, int] | None = None
    if on_start is not None:  # the launcher waits for a word on this pipe before the command
        go = os.pipe()
        launcher += ["--go", str(go[0])]
        fds.append(go[0])
    try:
        proc = subprocess.Popen(
            [*launcher, "--status", str(writable), "--", *argv], pass_fds=fds, **popen
        )
    except BaseException:
        os.close(readable)
        if go is not None:
            os.close(go[1])
        raise
    finally:
        for fd in fds:
            os.close(fd)
    try:
        if on_start is not None and go is not None:
            try:
                on_start(proc.pid)
                os.write(go[1], b"g")
            finally:
                os.close(go[1])  # unsaid (on_start failed): the launcher exits, never running it
        with open(readable, "rb") as status:
            report = status.read()  # empty at the command's exec
    except BaseException:  # Ctrl-C while the launcher starts: it goes too
        proc.kill()
        proc.wait()
        raise
    if not report:
        return proc
    proc.wait()
    number, _, message = report.decode(errors="replace").partition(" ")
    raise OSError(int(number), message, argv[0])


def main(args: list[str]) -> int:
    """The launcher (see the module's docstring)."""
    options: dict[str, list[str]] = {}
    while args and args[0] != "--":
        options.setdefault(args[0].lstrip("-"), []).append(args[1])
        args = args[2:]
    command = args[1:]
    status = int(options["status"][0])
    os.set_inheritable(status, False)  # closed at the command's exec: the sign that it runs
    try:
        if "parent" in options:
            die_with_parent(int(options["parent"][0]))
        cpus = [int(cpu) for cpu in options["cpus"][0].split(",")] if "cpus" in options else None
        place(options.get("procs", []), cpus)
        if "go" in options:  # rpcmeter's word that it knows of us (its watchdog, say)
            go = int(options["go"][0])
            if not os.read(go, 1):
                return 1  # rpcmeter is gone, or changed its mind: the command never runs
            os.close(go)
        os.execvp(command[0], command)
    except OSError as exc:
        os.write(status, f"{exc.errno or 0} {exc.strerror or exc}".encode())
    return 127


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
