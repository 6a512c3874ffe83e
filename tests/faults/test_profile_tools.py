"""py-spy installed with rpcmeter is found when its environment's ``bin`` is not on ``PATH``
(``venv/bin/rpcmeter`` run without activating the environment, or a pipx install)."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from rpcmeter.host.envs import find_tool
from rpcmeter.run.profile import Sampler


def test_py_spy_beside_the_interpreter_is_found(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    env_bin = tmp_path / "venv" / "bin"
    env_bin.mkdir(parents=True)
    tool = env_bin / "py-spy"
    tool.write_text("#!/bin/sh\nexit 0\n")
    tool.chmod(0o755)
    empty = tmp_path / "empty"
    empty.mkdir()
    monkeypatch.setenv("PATH", str(empty))
    monkeypatch.setattr(sys, "executable", str(env_bin / "python"))
    assert find_tool("py-spy") == str(tool)
    sampler = Sampler(os.getpid(), tmp_path / "profile", 100)
    assert sampler.tool == "py-spy"
    sampler.start()
    assert sampler.error is None  # not "py-spy is not installed"
    assert sampler.proc is not None
    argv = sampler.proc.args
    assert isinstance(argv, list) and argv[0] == str(tool)
    sampler.proc.wait(timeout=10)


def test_a_tool_on_path_comes_first(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for where in ("path", "venv"):
        (tmp_path / where).mkdir()
        (tmp_path / where / "tool").write_text("#!/bin/sh\n")
        (tmp_path / where / "tool").chmod(0o755)
    monkeypatch.setenv("PATH", str(tmp_path / "path"))
    monkeypatch.setattr(sys, "executable", str(tmp_path / "venv" / "python"))
    assert find_tool("tool") == str(tmp_path / "path" / "tool")
    assert find_tool("no-such-tool") is None
