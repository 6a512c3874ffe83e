"""A memory limit for a server rpcmeter did not start (``placement.server_memory`` with a
server at an ``address``) limits nothing: the run says so, as a warning, through the command
line; a limit on a server rpcmeter starts is no such warning."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from rpcmeter.analysis.checks import remote_memory
from rpcmeter.cli import main
from rpcmeter.model import Placement
from rpcmeter.servers.process import ServerProcess, expand_command, new_endpoint
from tests.support.synthetic import completed

pytestmark = pytest.mark.timeout(60)
HOSTILE = Path(__file__).with_name("hostile.py")
SAYS = "placement.server_memory limits nothing for a server rpcmeter did not start"


def test_a_memory_limit_for_a_server_at_an_address_is_a_warning(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    endpoint = new_endpoint("tcp")
    command = [sys.executable, str(HOSTILE), "http", "ok", "--port", "{port}"]
    with ServerProcess(expand_command(command, endpoint, {}), endpoint):
        path = tmp_path / "remote.toml"
        path.write_text(
            'name = "r"\nrepeat = 1\n[target]\ndriver = "http"\n'
            f'address = "127.0.0.1:{endpoint.port}"\n[workloads.noop]\nkind = "noop"\n'
            '[load]\nrequests = 20\nwarmup = 2\n[placement]\nserver_memory = "256M"\n'
            "[resources]\nidle_s = 0\n"
        )
        out = tmp_path / "out.json"
        assert main(["run", str(path), "--no-store", "-o", str(out)]) == 0
    captured = capsys.readouterr()
    assert f"warning: {SAYS}" in " ".join((captured.out + captured.err).split())
    doc = json.loads(out.read_text())
    assert [c["status"] for c in doc["cases"]] == ["ok"]
    assert any(w.startswith(SAYS) for w in doc["warnings"]), doc["warnings"]


def test_a_memory_limit_for_a_server_rpcmeter_starts_is_no_warning() -> None:
    started = Placement(target="server", server_memory_bytes=1 << 28)
    assert (
        remote_memory(
            completed({"environment": {"placement": started.model_dump()}, "cases": [{}]})
        )
        == []
    )
    remote = started.model_copy(update={"target": "remote"})
    (line,) = remote_memory(
        completed({"environment": {"placement": remote.model_dump()}, "cases": [{}]})
    )
    assert line.startswith(SAYS)
