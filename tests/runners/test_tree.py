"""The process-tree launcher: every process of a command's tree is counted, nothing is left."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import psutil
import pytest

from rpcmeter.runners import command, tree
from rpcmeter.runners.command import Batch
from rpcmeter.runners.tree import TreeUsage, become_subreaper
from rpcmeter.suite.model import Runs

# A parent that burns 0.1 s of CPU, a child it waits for that burns 0.3 s, and a grandchild whose
# parent exits at once, so nobody but the subreaper waits for it; it burns 0.4 s after the
# command itself has exited. CPU is burnt by process time, so the amounts hold on a busy machine.
FORKER = textwrap.dedent(
    """
    import os, sys, time

    def burn(cpu_s):
        end = time.process_time() + cpu_s
        while time.process_time() < end:
            pass

    child = os.fork()
    if child == 0:
        if os.fork() == 0:      # the grandchild, orphaned below
            time.sleep(0.2)
            burn(0.4)
            os._exit(0)
        burn(0.3)
        os._exit(0)
    burn(0.1)
    os.waitpid(child, 0)
    """
)


def _run(
    argv: list[str], tmp_path: Path, timeout_s: float = 30.0, linger_s: float = 10.0
) -> TreeUsage:
    """The launcher as rpcmeter runs it: its own process (it owns SIGALRM and reaps children)."""
    out = subprocess.run(
        [
            sys.executable,
            "-S",
            "-P",
            tree.__file__,
            "--timeout",
            str(timeout_s),
            "--linger",
            str(linger_s),
            "--log",
            str(tmp_path / "out.log"),
            "--",
            *argv,
        ],
        capture_output=True,
        text=True,
        check=True,
        timeout=timeout_s + linger_s + 30,
    )
    return TreeUsage(**json.loads(out.stdout))


@pytest.mark.timeout(60)
def test_cpu_of_children_and_orphaned_grandchildren_is_counted(tmp_path: Path) -> None:
    script = tmp_path / "forker.py"
    script.write_text(FORKER)
    usage = _run([sys.executable, str(script)], tmp_path)
    assert usage.error is None and usage.exit_code == 0
    assert usage.subreaper
    assert usage.processes >= 2  # the command, and the orphan reaped on its own
    total = usage.user_s + usage.sys_s
    # 0.8 s burnt in all, plus interpreter start-up; without the orphan it would be about 0.4.
    assert 0.8 * 0.95 <= total <= 0.8 + 1.0, total
    assert usage.max_rss_bytes > 0


@pytest.mark.timeout(60)
def test_timeout_kills_the_whole_tree(tmp_path: Path) -> None:
    pidfile = tmp_path / "pid"
    usage = _run(["sh", "-c", f"sleep 30 & echo $! > {pidfile}; wait"], tmp_path, timeout_s=0.5)
    assert usage.timed_out
    assert usage.exit_code is not None and usage.exit_code < 0
    pid = int(pidfile.read_text())
    time.sleep(0.1)
    assert not psutil.pid_exists(pid) or psutil.Process(pid).status() == psutil.STATUS_ZOMBIE


@pytest.mark.timeout(60)
def test_descendants_outliving_the_command_are_counted_and_killed(tmp_path: Path) -> None:
    pidfile = tmp_path / "pid"
    usage = _run(["sh", "-c", f"sleep 30 & echo $! > {pidfile}; exit 3"], tmp_path, linger_s=0.3)
    assert usage.exit_code == 3
    assert usage.outlived == 1
    assert usage.wall_s < 5
    pid = int(pidfile.read_text())
    assert not psutil.pid_exists(pid) or psutil.Process(pid).status() == psutil.STATUS_ZOMBIE


def test_missing_command_is_reported(tmp_path: Path) -> None:
    usage = _run(["rpcmeter-no-such-command"], tmp_path)
    assert usage.error == "command not found: rpcmeter-no-such-command"


def test_subreaper_is_available_here() -> None:
    pid = os.fork()
    if pid == 0:
        os._exit(0 if become_subreaper() else 1)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0


@pytest.mark.timeout(60)
def test_peak_memory_is_the_commands_own_not_the_launchers(tmp_path: Path) -> None:
    # `sleep` holds about 1.6 MB; spawned by the (Python) launcher it read 13-14 MB
    assert tree.small_parent() is not None  # /bin/sh and /proc, as on any Linux here
    usage = _run(["sleep", "0.05"], tmp_path)
    assert usage.error is None and usage.exit_code == 0 and usage.processes == 1
    assert 0 < usage.max_rss_bytes < 4 * 1024 * 1024
    assert usage.rss_floor_bytes == 0
    assert 0.05 <= usage.wall_s < 1.0
    # a command that holds 64 MB reads that
    big = _run(
        [sys.executable, "-c", "b = bytearray(64 << 20); b[::4096] = b'x' * (16 << 10)"], tmp_path
    )
    assert usage.max_rss_bytes + (60 << 20) < big.max_rss_bytes < 200 << 20


@pytest.mark.timeout(60)
def test_the_command_runs_with_default_signals_and_quick_exits_are_reaped(tmp_path: Path) -> None:
    # a shell ignores SIGINT and SIGQUIT in background commands, and Python (the launcher)
    # SIGPIPE and SIGXFSZ: the command gets none of them ignored
    log = tmp_path / "out.log"
    usage = _run(["sh", "-c", "grep SigIgn /proc/self/status"], tmp_path)
    assert usage.exit_code == 0
    ignored = int(log.read_text().split()[-1], 16)
    assert not ignored & (1 << (2 - 1)) and not ignored & (1 << (3 - 1))  # SIGINT, SIGQUIT
    assert not ignored & (1 << (13 - 1)) and not ignored & (1 << (25 - 1))  # SIGPIPE, SIGXFSZ
    # a command that exits at once is still the launcher's to reap (its status is not lost)
    for _ in range(5):
        quick = _run(["sh", "-c", "exit 3"], tmp_path)
        assert quick.exit_code == 3 and quick.processes == 1


# ---- a case's runs through one launcher (rpcmeter's --serve) -----------------------------------


def _serving(tmp_path: Path) -> command.Launcher:
    return command.Launcher(env=dict(os.environ), cwd=str(tmp_path))


@pytest.mark.timeout(60)
def test_one_starter_serves_every_run_and_the_launcher_adopts_each(tmp_path: Path) -> None:
    log = tmp_path / "out.log"
    runs = Runs(timeout_s=30)
    with _serving(tmp_path) as launcher:
        launcher_pid = launcher.proc.pid
        starters = set()
        for _ in range(4):
            (usage,) = launcher.run(["sh", "-c", "echo $PPID; echo oops >&2"], runs=runs, log=log)
            assert usage.exit_code == 0 and usage.processes == 1 and usage.error is None
            # the run's process was the launcher's before it ran the command: it read its
            # parent's pid then; the log holds this run's output and errors, and nothing else
            assert log.read_text().split() == [str(launcher_pid), "oops"]
            # between runs the launcher's one child is the small shell that starts the runs
            (starter,) = psutil.Process(launcher_pid).children()
            assert starter.name() in ("sh", "dash")
            starters.add(starter.pid)
        assert len(starters) == 1
        # a hook's command line gets a starter of its own; the command's keeps its own
        (usage,) = launcher.run(["true"], runs=runs, log=log)
        assert usage.exit_code == 0
        assert len(psutil.Process(launcher_pid).children()) == 2
        # with a shell, the line runs in the run's process as sh -c would run it
        for _ in range(2):
            line = "echo $PPID; echo oops >&2"
            (usage,) = launcher.run([line], runs=runs, log=log, shell=True)
            assert usage.exit_code == 0 and usage.processes == 1
            assert log.read_text().split() == [str(launcher_pid), "oops"]
    assert not psutil.pid_exists(starters.pop())  # the launcher stops its starters


@pytest.mark.timeout(60)
def test_a_run_that_times_out_takes_its_starter_and_the_next_run_gets_a_new_one(
    tmp_path: Path,
) -> None:
    log = tmp_path / "out.log"
    with _serving(tmp_path) as launcher:
        (slow,) = launcher.run(["sleep", "30"], runs=Runs(timeout_s=0.3), log=log)
        assert slow.timed_out and slow.exit_code is not None and slow.exit_code < 0
        assert psutil.Process(launcher.proc.pid).children() == []
        (quick,) = launcher.run(["sh", "-c", "exit 4"], runs=Runs(timeout_s=30), log=log)
        assert quick.exit_code == 4 and quick.processes == 1 and not quick.timed_out


@pytest.mark.timeout(60)
def test_a_batch_stops_by_its_rule_or_at_a_failed_run(tmp_path: Path) -> None:
    log = tmp_path / "out.log"
    runs = Runs(timeout_s=30)
    with _serving(tmp_path) as launcher:
        # at most `times`; then only while fewer than `least` ran or their time is short
        assert len(launcher.run(["true"], runs=runs, log=log, batch=Batch(5, 5))) == 5
        assert len(launcher.run(["true"], runs=runs, log=log, batch=Batch(50, 3))) == 3
        assert len(launcher.run(["true"], runs=runs, log=log, batch=Batch(4, 0, 1e9))) == 4
        got = launcher.run(["sleep", "0.01"], runs=runs, log=log, batch=Batch(500, 2, 0.05))
        walls = [usage.wall_s for usage in got]
        assert len(walls) >= 2 and sum(walls) >= 0.05
        assert len(walls) == 2 or sum(walls[:-1]) < 0.05  # the last run was still wanted
        # the third run fails: it is the batch's last, with its status and its output in the log
        counter = tmp_path / "n"
        script = f"n=$(($(cat {counter} 2>/dev/null || echo 0) + 1)); echo $n > {counter}; "
        script += 'echo "run $n"; [ $n -lt 3 ]'
        got = launcher.run(["sh", "-c", script], runs=runs, log=log, batch=Batch(10, 10))
        assert [usage.exit_code for usage in got] == [0, 0, 1]
        assert log.read_text() == "run 3\n"


@pytest.mark.timeout(60)
def test_the_command_gets_its_environment_as_given(tmp_path: Path) -> None:
    # the shells that start the runs use names of their own and leave the user's alone
    log = tmp_path / "out.log"
    env = {**os.environ, "pid": "9", "up": "7"}
    with command.Launcher(env=env, cwd=str(tmp_path)) as launcher:
        line = 'echo "$pid $up $#"; env | grep -c rpcmeter_'
        (usage,) = launcher.run([line], runs=Runs(timeout_s=30), log=log, shell=True)
        assert log.read_text() == "9 7 0\n0\n"  # grep found none: status 1
        assert usage.exit_code == 1
