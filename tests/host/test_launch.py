"""The launcher: a command placed before it runs, started without Python code between fork and
exec in the parent (no fork handler runs), and a command that cannot start raising as Popen."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from rpcmeter.host.launch import spawn

SHOW = "import os; print(os.getpid(), sorted(os.sched_getaffinity(0)))"


def test_the_command_runs_on_the_cpus_asked_as_the_process_spawn_returned() -> None:
    cpu = sorted(os.sched_getaffinity(0))[-1]
    proc = spawn([sys.executable, "-c", SHOW], cpus=[cpu], stdout=subprocess.PIPE)
    out, _ = proc.communicate(timeout=30)
    pid, cpus = out.decode().split(" ", 1)
    assert int(pid) == proc.pid  # the launcher exec'd the command: the same process
    assert cpus.strip() == f"[{cpu}]"
    assert proc.returncode == 0


def test_the_command_writes_itself_into_each_procs_file_before_it_runs(tmp_path: Path) -> None:
    procs = [tmp_path / "a.procs", tmp_path / "b.procs"]
    proc = spawn(
        [sys.executable, "-c", SHOW], procs=[str(p) for p in procs], stdout=subprocess.PIPE
    )
    out, _ = proc.communicate(timeout=30)
    assert [p.read_text() for p in procs] == [str(proc.pid)] * 2
    assert int(out.split()[0]) == proc.pid


@pytest.mark.parametrize(
    ("argv", "kind"),
    [(["/nonexistent/server"], FileNotFoundError), ([os.devnull], PermissionError)],
)
def test_a_command_that_cannot_start_raises_as_popen_does(
    argv: list[str], kind: type[OSError]
) -> None:
    with pytest.raises(OSError) as plain:
        subprocess.Popen(argv)
    with pytest.raises(kind) as launched:
        spawn(argv, cpus=[sorted(os.sched_getaffinity(0))[0]])
    assert type(launched.value) is type(plain.value)
    assert (launched.value.errno, launched.value.strerror, launched.value.filename) == (
        plain.value.errno,
        plain.value.strerror,
        plain.value.filename,
    )


def test_cpus_that_cannot_be_taken_raise_as_the_call_would() -> None:
    with pytest.raises(OSError, match="Invalid argument"):
        spawn(["sleep", "30"], cpus=[(os.cpu_count() or 1) + 4096])


def test_nothing_asked_is_a_plain_popen() -> None:
    proc = spawn([sys.executable, "-c", "print('plain')"], stdout=subprocess.PIPE)
    assert proc.communicate(timeout=30)[0] == b"plain\n"


def test_no_fork_handler_runs_in_the_parent() -> None:
    """Python's fork hooks run only where Python forks to run code in the child (``preexec_fn``),
    as libraries' ``pthread_atfork`` handlers do (grpcio's among them); the launcher starts the
    child without. The hooks are registered in a process of its own (they cannot be removed)."""
    code = textwrap.dedent(
        f"""
        import os, subprocess, sys
        from rpcmeter.host.launch import spawn
        forks = []
        os.register_at_fork(before=lambda: forks.append("before"))
        spawn(["true"], parent=os.getpid(), cpus=[{sorted(os.sched_getaffinity(0))[0]}]).wait()
        print("launched", len(forks))
        subprocess.Popen(["true"], preexec_fn=lambda: None).wait()
        print("preexec_fn", len(forks))
        """
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True
    )
    assert out.stdout.split() == ["launched", "0", "preexec_fn", "1"]  # the hook seen once


def test_the_command_dies_with_its_parent() -> None:
    code = textwrap.dedent(
        """
        import os, time
        from rpcmeter.host.launch import spawn
        print(spawn(["sleep", "60"], parent=os.getpid()).pid, flush=True)
        time.sleep(60)
        """
    )
    middle = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE)
    try:
        assert middle.stdout is not None
        child = int(middle.stdout.readline())
    finally:
        middle.kill()
        middle.wait()
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        try:  # gone, or a zombie until init reaps it
            state = Path(f"/proc/{child}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except FileNotFoundError:
            return
        if state == "Z":
            return
        time.sleep(0.05)
    os.kill(child, signal.SIGKILL)
    pytest.fail("the command outlived its parent")
