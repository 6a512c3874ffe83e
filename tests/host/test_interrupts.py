"""rpcmeter.host.interrupts: a signal in a deferred section is raised at its end, later ones are held,
and an interrupted program exits with the status it returns (run as ``python -m``, in a process
of its own: an interrupted block leaves SIGINT and SIGTERM ignored)."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

from rpcmeter.host import interrupts as interrupts

PROGRAM = """
import os, signal, sys

from rpcmeter.host import interrupts as interrupts


def main() -> int:
    with interrupts.handled():
        try:
            with interrupts.deferred():
                os.kill(os.getpid(), signal.SIGTERM)
                sum(range(10_000))  # the handler runs: held
                print("held", flush=True)
            print("not raised", flush=True)
        except KeyboardInterrupt:
            print("raised at the end", flush=True)
            os.kill(os.getpid(), signal.SIGINT)  # while stopping: held
            sum(range(10_000))
            print("second held", flush=True)
            try:  # CPython marks the process to die by SIGINT at exit
                exec("raise KeyboardInterrupt")
            except KeyboardInterrupt:
                pass
            return 130
    return 0


sys.exit(main())
"""


def test_a_held_signal_is_raised_once_and_the_exit_status_is_kept(tmp_path: Path) -> None:
    (tmp_path / "prog.py").write_text(textwrap.dedent(PROGRAM))
    proc = subprocess.run(
        [sys.executable, "-m", "prog"], cwd=tmp_path, capture_output=True, text=True, timeout=60
    )
    assert proc.stdout.splitlines() == ["held", "raised at the end", "second held"], proc.stderr
    assert proc.returncode == 130, proc.stderr


def test_without_the_handlers_a_deferred_section_is_a_plain_block() -> None:
    with interrupts.deferred():
        held = interrupts.Held()
        assert not held.active
        held.release()
    assert not interrupts.stopping()
