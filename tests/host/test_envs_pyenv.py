"""A variant's ``python = "NAME"`` found as users' tools find it: a pyenv shim that fails outside
pyenv's selected versions is passed over for the interpreter among pyenv's versions, and a name
found nowhere says what was tried and how to give a path."""

from __future__ import annotations

import json
import os
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from rpcmeter.cli import main

NAME = "python3.77"  # a version no machine has: only the fake pyenv below knows it


@pytest.fixture
def pyenv(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A pyenv root: a shim of NAME that fails as pyenv's do when no selected version has it,
    and version 3.77.1 with the name (this interpreter under it)."""
    root = tmp_path / "pyenv"
    shim = root / "shims" / NAME
    shim.parent.mkdir(parents=True)
    shim.write_text(
        "#!/bin/sh\n"
        f"echo 'pyenv: {NAME}: command not found' >&2\n"
        "echo 'Note: See pyenv help global for tips on allowing multiple' >&2\n"
        "echo '      Python versions to be found at the same time.' >&2\n"
        "exit 127\n"
    )
    shim.chmod(0o755)
    monkeypatch.setenv("PATH", f"{shim.parent}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("PYENV_ROOT", str(root))
    monkeypatch.setenv("RPCMETER_CACHE", str(tmp_path / "cache"))
    return root


def run(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> tuple[int, dict[str, Any], str]:
    suite = tmp_path / "suite.toml"
    suite.write_text(
        textwrap.dedent(
            f"""
            name = "pyenv"
            repeat = 1
            [target]
            driver = "command"
            command = "{{python}} -c pass"
            [variants.old]
            python = "{NAME}"
            [runs]
            warmup = 0
            count = 1
            """
        )
    )
    out = tmp_path / "result.json"
    code = main(["run", str(suite), "-o", str(out), "--no-store", "--width", "160"])
    return code, json.loads(out.read_text()), capsys.readouterr().err


def test_a_pyenv_shim_gives_way_to_pyenvs_version(
    pyenv: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    real = pyenv / "versions" / "3.77.1" / "bin" / NAME
    real.parent.mkdir(parents=True)
    real.symlink_to(sys.executable)
    code, result, err = run(tmp_path, capsys)
    assert code == 0, err
    (case,) = result["cases"]
    assert case["status"] == "ok", case
    env = result["environment"]["variant_envs"]["old"]
    assert env["python"] == str(real)


def test_a_name_found_nowhere_says_what_was_tried(
    pyenv: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, result, err = run(tmp_path, capsys)
    assert code != 0
    (case,) = result["cases"]
    reason = case["reason"]
    assert f"{pyenv}/shims/{NAME} (a pyenv shim" in reason, reason
    assert f"/versions/*/bin/{NAME}" in reason
    assert f'python = "/path/to/{NAME}"' in reason
    assert "at the same time" not in reason  # not the shim's message cut short
    assert f"environment failed: {reason.removeprefix('environment: ')}" in err
