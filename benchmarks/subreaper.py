"""A client's whole CPU time, the processes it leaves behind included.

``getrusage(RUSAGE_CHILDREN)`` counts a process tree only as far as each process was waited for
by its parent. rpcmeter's client processes come from a forkserver that is left to exit on its
own after rpcmeter has: without more, it and the clients it reaped are re-parented to init and
their CPU time never reaches the benchmark. :func:`become_subreaper` makes the benchmark the
process those orphans are re-parented to, and :func:`run_counted` waits for them after each run,
so that their CPU time is counted.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import resource
import subprocess
import time

import psutil

PR_SET_CHILD_SUBREAPER = 36


def become_subreaper() -> None:
    """Orphans of the processes started from here come to this process (Linux 3.4+)."""
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_CHILD_SUBREAPER)")


def children_cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def reap_new(before: set[int], timeout_s: float = 30.0) -> None:
    """Wait for this process's children not in ``before`` (orphans come to a subreaper) to
    exit, and reap them, ``timeout_s`` at most."""
    deadline = time.monotonic() + timeout_s
    while True:
        new = [p.pid for p in psutil.Process().children() if p.pid not in before]
        if not new:
            return
        if time.monotonic() > deadline:
            raise RuntimeError(f"processes {new} still running {timeout_s:g} s after the run")
        for pid in new:
            with contextlib.suppress(ChildProcessError):
                os.waitpid(pid, os.WNOHANG)
        time.sleep(0.02)


def run_counted(command: list[str], cpu: int, timeout_s: float) -> tuple[str, float]:
    """Run ``command`` pinned to CPU ``cpu``: its standard output and the CPU seconds it and
    every process it started used (call :func:`become_subreaper` first)."""
    before = {p.pid for p in psutil.Process().children()}
    cpu0 = children_cpu_s()
    out = subprocess.run(
        ["taskset", "-c", str(cpu), *command],
        capture_output=True,
        text=True,
        check=True,
        timeout=timeout_s,
    ).stdout
    reap_new(before)
    return out, children_cpu_s() - cpu0
