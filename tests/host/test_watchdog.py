"""rpcmeter killed outright (SIGKILL: no cleanup of its own runs) leaves no process behind: the
watchdog stops the process groups it started. Each test runs a real ``rpcmeter run``, waits
until the processes of interest exist, SIGKILLs rpcmeter and checks that every process that was
below it is gone."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable
from pathlib import Path

import psutil
import pytest

from rpcmeter.host import watchdog as watchdog
from rpcmeter.servers import nginx

pytestmark = pytest.mark.timeout(120)


def below(pid: int) -> list[psutil.Process]:
    try:
        return list(psutil.Process(pid).children(recursive=True))
    except psutil.Error:
        return []


def kill_and_watch(
    tmp_path: Path,
    suite: str,
    ready: Callable[[list[psutil.Process]], bool],
    *options: str,
) -> list[psutil.Process]:
    """Run ``suite``; once ``ready(processes below rpcmeter)``, SIGKILL rpcmeter; the processes
    that were below it and are still alive 5 s later (killed here, so that none is left)."""
    path = tmp_path / "suite.toml"
    path.write_text(textwrap.dedent(suite))
    proc = subprocess.Popen(
        [sys.executable, "-m", "rpcmeter", "run", str(path), "--no-store", *options],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        start_new_session=True,
        cwd=tmp_path,
    )
    tree: list[psutil.Process] = []
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and proc.poll() is None:
            tree = below(proc.pid)
            if ready(tree):
                break
            time.sleep(0.1)
        else:
            raise AssertionError(f"never ready; stderr: {proc.stderr.read()!r}")  # type: ignore[union-attr]
        time.sleep(0.3)  # whatever starts with them (clients, workers) has started too
        tree = below(proc.pid)
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        _, alive = psutil.wait_procs(tree, timeout=5 + watchdog.GRACE_S)
        return list(alive)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        for p in below(proc.pid):
            p.kill()


def command_line(p: psutil.Process) -> str:
    try:
        return " ".join(p.cmdline())
    except psutil.Error:
        return ""


def named(name: str) -> Callable[[list[psutil.Process]], bool]:
    return lambda tree: any(name in command_line(p) for p in tree)


def leftovers(alive: list[psutil.Process]) -> list[str]:
    out = [f"{p.pid} {command_line(p)}" for p in alive]
    for p in alive:
        with contextlib.suppress(psutil.Error):
            p.kill()
    return out


def nginx_suite(tmp_path: Path) -> str:
    command = nginx.prepare(tmp_path / "nginx")
    return f"""
        [target]
        driver = "http"
        server = {{ command = {json.dumps(command)} }}
        [workloads.noop]
        [load]
        duration_s = 60
        """


RPYC_SUITE = """
        [target]
        driver = "rpyc"
        [workloads.simple]
        [load]
        duration_s = 60
        clients = 2
        """

COMMAND_SUITE = """
        [target]
        driver = "command"
        command = "sh -c 'sleep 57 & sleep 58'"
        [runs]
        warmup = 0
        count = 1
        """


@pytest.mark.parametrize(
    ("suite", "ready", "options"),
    [
        # nginx's master dies with rpcmeter (parent-death signal); its workers would not
        pytest.param(
            nginx_suite,
            "nginx: worker",
            (),
            id="nginx-workers",
            marks=pytest.mark.skipif(
                nginx.executable() is None, reason="nginx is not installed (.ci/run installs it)"
            ),
        ),
        # a command target's tree runs in a session of its own, beside rpcmeter
        pytest.param(lambda _: COMMAND_SUITE, "sleep 58", (), id="command-tree"),
        pytest.param(lambda _: RPYC_SUITE, "rpyc_server", (), id="builtin-server-and-clients"),
        pytest.param(
            lambda _: RPYC_SUITE,
            "client_process",
            ("--cluster", "local:2"),
            id="local-dask-cluster-and-clients",
        ),
    ],
)
def test_nothing_outlives_a_killed_rpcmeter(
    tmp_path: Path, suite: Callable[[Path], str], ready: str, options: tuple[str, ...]
) -> None:
    alive = kill_and_watch(tmp_path, suite(tmp_path), named(ready), *options)
    assert leftovers(alive) == []


def test_registrations_and_the_stop_of_what_is_left(tmp_path: Path) -> None:
    """The protocol: ``+PGID START`` registers, ``-PGID`` unregisters; a group whose leader id
    now belongs to another process (a different start time) is left alone."""
    first = subprocess.Popen(["sh", "-c", "sleep 59 & wait"], start_new_session=True)
    second = subprocess.Popen(["sleep", "59"], start_new_session=True)
    third = subprocess.Popen(["sleep", "59"], start_new_session=True)
    try:
        time.sleep(0.1)
        started = watchdog.start_time(first.pid)
        assert started is not None
        lines = [
            f"+{first.pid} {started}\n",
            f"+{second.pid} {watchdog.start_time(second.pid)}\n",
            f"-{second.pid}\n",
            f"+{third.pid} {(watchdog.start_time(third.pid) or 0) + 1}\n",  # "reused"
            "garbage\n",
        ]
        groups = watchdog.watch(iter(lines))
        assert set(groups) == {first.pid, third.pid}
        grandchild = below(first.pid)
        watchdog.stop_groups(groups, grace_s=1.0)
        assert first.wait(5) == -signal.SIGTERM
        _, alive = psutil.wait_procs(grandchild, timeout=5)
        assert alive == []
        assert second.poll() is None and third.poll() is None  # not registered / not ours
    finally:
        for p in (first, second, third):
            if p.poll() is None:
                os.killpg(p.pid, signal.SIGKILL)
            p.wait()


def test_the_watchdog_runs_only_while_groups_are_registered() -> None:
    dog = watchdog.Watchdog()
    groups = [subprocess.Popen(["sleep", "59"], start_new_session=True) for _ in range(2)]
    try:
        dog.guard(groups[0].pid)
        proc = dog._proc
        assert proc is not None and proc.poll() is None
        dog.guard(groups[1].pid)
        assert dog._proc is proc  # one watchdog for all
        dog.release(groups[0].pid)
        assert proc.poll() is None
        dog.release(groups[1].pid)
        assert proc.poll() == 0 and dog._proc is None  # let go with the last group, reaped
        assert all(g.poll() is None for g in groups)  # released groups are not its to stop
    finally:
        for g in groups:
            g.kill()
            g.wait()
