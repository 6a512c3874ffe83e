"""Processes rpcmeter starts: no traceback from a child on Ctrl-C or a broken pipe, temporary
server files removed on every exit path rpcmeter sees."""

from __future__ import annotations

import os
import signal
import sys
from pathlib import Path

import pytest

from rpcmeter.drivers.base import DriverContext
from rpcmeter.net.endpoints import Endpoint
from rpcmeter.runners import client
from rpcmeter.runners.closed_loop import run_closed_loop
from rpcmeter.servers.process import ServerProcess, new_endpoint, stop_all
from rpcmeter.suite.workloads import SimpleParams
from tests.support.load import spec_and_hooks

pytestmark = pytest.mark.timeout(60)


def blocked_signals(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("SigBlk:"):
            return int(line.split()[1], 16)
    raise AssertionError("no SigBlk")


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="/proc")
def test_clients_start_with_ctrl_c_blocked() -> None:
    # a Ctrl-C while clients import their code must not kill them with a traceback
    masks: list[int] = []
    out = run_closed_loop(
        *spec_and_hooks(
            "tests.support.mock_driver:MockDriver",
            DriverContext(Endpoint("tcp"), SimpleParams(), {}),
            clients=2,
            requests=5,
            duration_s=None,
            warmup=0,
            timeout_s=30,
            on_start=lambda pids: masks.extend(blocked_signals(p) for p in pids),
        )
    )
    assert out.failure is None
    assert len(masks) == 2 and all(m & (1 << (signal.SIGINT - 1)) for m in masks), masks
    assert not signal.pthread_sigmask(signal.SIG_BLOCK, set())  # ours is as it was


def test_client_of_a_parent_that_is_gone_exits_quietly(monkeypatch: pytest.MonkeyPatch) -> None:
    def broken(*args: object) -> None:
        raise BrokenPipeError(32, "Broken pipe")

    exits: list[int] = []
    monkeypatch.setattr(client, "client_main", broken)
    monkeypatch.setattr(os, "_exit", exits.append)
    client.client_process(None, None, None, None, None)  # type: ignore[arg-type]
    assert exits == [1]


def test_stop_all_removes_temporary_files() -> None:
    endpoint = new_endpoint("unix")
    assert endpoint.path is not None
    server = ServerProcess(
        [sys.executable, "-m", "rpcmeter.servers.raw_server", "--transport", "unix",
         "--socket", endpoint.path, "--options", "{}"],
        endpoint,
    )  # fmt: skip
    server.start()
    log, directory = server.log_path, Path(endpoint.path).parent
    assert log.exists() and directory.exists()
    stop_all()  # what Ctrl-C, SIGTERM and the end of a run do
    assert not server.alive()
    assert not log.exists() and not directory.exists()


def ignored_signals(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("SigIgn:"):
            return int(line.split()[1], 16)
    raise AssertionError("no SigIgn")


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="/proc")
@pytest.mark.timeout(150)  # a whole rpcmeter run up to its first case, on a busy machine
def test_ctrl_c_test_reaches_rpcmeter_when_pytest_ignores_sigint(tmp_path: Path) -> None:
    # pytest as a background job of a non-interactive shell starts with SIGINT ignored, and its
    # children inherit that: the Ctrl-C test's rpcmeter must not
    from tests.run.test_execute import start_run

    before = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        proc, _ = start_run(tmp_path, "ctrl-c-while-ignored")
    finally:
        signal.signal(signal.SIGINT, before)
    try:
        assert not ignored_signals(proc.pid) & (1 << (signal.SIGINT - 1))
        os.killpg(proc.pid, signal.SIGINT)
        _, err = proc.communicate(timeout=30)
        assert proc.returncode == 130, err.decode(errors="replace")
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
