"""examples/deployments/run.py: Ctrl-C while it runs stops everything it started and removes
every namespace it made; hosts.sh refuses anyone but root with one line."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from tests.support.hosts import ours, pids_in

pytestmark = pytest.mark.timeout(120)

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "deployments"


@pytest.mark.usefixtures("netns_ok")
def test_ctrl_c_of_the_example_leaves_nothing() -> None:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    run = subprocess.Popen(
        [sys.executable, str(EXAMPLE / "run.py"), "--quick"],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    prefix = f"rpm-{run.pid}-deploy"
    started: list[psutil.Process] = []
    try:
        deadline = time.monotonic() + 60
        while not pids_in(f"{prefix}-h6"):  # rpcmeter runs in host G: the servers are up
            assert run.poll() is None and time.monotonic() < deadline, run.stderr
            time.sleep(0.1)
        time.sleep(1.0)
        started = [psutil.Process(p) for name in ours(prefix) for p in pids_in(name)]
        assert len(started) >= 7  # 5 servers, nginx (and its worker), rpcmeter
        run.send_signal(signal.SIGINT)
        run.wait(60)
    finally:
        if run.poll() is None:
            run.kill()
            run.wait(10)
    assert ours(prefix) == []
    alive = [p for p in started if p.is_running() and p.status() != psutil.STATUS_ZOMBIE]
    assert alive == []


def test_hosts_script_wants_root(tmp_path: Path) -> None:
    if os.geteuid() == 0 and not _can_drop_root():
        pytest.skip("no unprivileged user to run it as")
    cmd = [str(EXAMPLE / "hosts.sh"), "up"]
    if os.geteuid() == 0:
        cmd = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", *cmd]
    done = subprocess.run(cmd, capture_output=True, text=True, check=False)
    assert done.returncode == 2
    assert done.stderr == "hosts.sh: network namespaces need root: run it with sudo\n"


def _can_drop_root() -> bool:
    return subprocess.run(["which", "setpriv"], capture_output=True, check=False).returncode == 0
