"""Ctrl-C twice, as a user does, through the command line: the first stops the run; the second,
while rpcmeter stops (or while the forkserver it started in the background still imports the
client code), prints no traceback, and rpcmeter exits with 130, not killed by the signal."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from tests.support.interrupt import ctrl_c_default

pytestmark = [
    pytest.mark.timeout(120),
    pytest.mark.skipif(not sys.platform.startswith("linux"), reason="/proc"),
]


def catches_sigint(pid: int) -> bool:
    """Whether process ``pid`` has its own SIGINT handler (Python's, once it has started)."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return False
    caught = next(line.split()[1] for line in status.splitlines() if line.startswith("SigCgt"))
    return bool(int(caught, 16) & (1 << (signal.SIGINT - 1)))


def forkserver_of(pid: int) -> psutil.Process | None:
    """rpcmeter's forkserver, once its Python handles SIGINT (it imports the client code)."""
    with contextlib.suppress(psutil.Error):
        for p in psutil.Process(pid).children(recursive=True):
            with contextlib.suppress(psutil.Error):
                if "multiprocessing.forkserver" in " ".join(p.cmdline()):
                    return p if catches_sigint(p.pid) else None
    return None


def test_ctrl_c_twice_while_the_forkserver_starts(tmp_path: Path) -> None:
    suite = tmp_path / "s.toml"
    suite.write_text(
        '[target]\ndriver = "rpyc"\ntransport = "unix"\n[workloads.simple]\n'
        "[load]\nduration_s = 1.0\nwarmup = 1\n"
    )
    proc = subprocess.Popen(
        [sys.executable, "-m", "rpcmeter", "run", str(suite), "--no-store"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        start_new_session=True,
        preexec_fn=ctrl_c_default,  # Ctrl-C reaches it even when this test's SIGINT is ignored
    )
    try:
        deadline = time.monotonic() + 60
        while forkserver_of(proc.pid) is None and proc.poll() is None:
            assert time.monotonic() < deadline, "no forkserver"
            time.sleep(0.002)
        os.killpg(proc.pid, signal.SIGINT)  # what a terminal does on Ctrl-C
        time.sleep(0.1)
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGINT)  # ... and again
        _, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    text = err.decode(errors="replace")
    assert "Traceback" not in text, text
    assert proc.returncode == 130, text
    assert text.rstrip().endswith("rpcmeter: interrupted; servers and clients stopped"), text
