"""Environment capture: what a run depends on is recorded."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from rpcmeter import model
from rpcmeter.cli import build_parser
from rpcmeter.metrics import environment
from rpcmeter.plan.load import build_suite
from rpcmeter.protocols.h2 import connection


def test_capture_records_machine_settings() -> None:
    env = model.Environment.model_validate(environment.capture(("rpyc",)))
    doc = env.dump()  # each key written, null where the machine does not tell
    for key in ("kernel", "cpu_governor", "cpuidle_driver", "load_average", "virtualization"):
        assert key in doc
    assert env.packages["rpyc"]
    assert env.load_average is None or len(env.load_average) == 3
    assert env.virtualization is not None
    assert set(env.virtualization.dump()) == {"detect_virt", "hypervisor_flag", "product_name"}


def test_capture_says_whether_the_hot_path_runs_compiled(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """``rpcmeter_compiled`` (and ``--version``'s "(compiled)") is what the HTTP/2 core's own
    module knows of itself: a C extension built by mypyc, or Python."""
    info = environment.capture()
    assert info["rpcmeter_compiled"] is connection.COMPILED
    assert model.Environment.model_validate(info).rpcmeter_compiled is connection.COMPILED
    with pytest.raises(SystemExit):
        build_parser().parse_args(["--version"])
    assert capsys.readouterr().out.strip().endswith("(compiled)") is connection.COMPILED


def test_capture_suite_resolves_names_and_records_variant_packages() -> None:
    suite = build_suite(
        {
            "target": {"host": "127.0.0.1"},
            "variants": {"a": {}, "b": {"host": "localhost"}},
            "workloads": {"simple": {}},
        }
    )
    found = environment.capture_suite(suite, {"a": ("rpyc",), "b": ("rpyc",)})
    extra = model.Environment.model_validate(found)
    assert extra.resolved_hosts is not None and extra.variant_packages is not None
    assert list(extra.resolved_hosts) == ["localhost"]  # addresses need no resolving
    assert extra.resolved_hosts["localhost"]
    assert extra.variant_packages["a"]["rpyc"] == environment.package_version("rpyc")
    assert list(extra.dump()) == ["variant_packages", "resolved_hosts"]
    assert environment.is_address("::1") and not environment.is_address("localhost")


def revision(directory: Path) -> dict[str, Any] | None:
    return environment.git_revision(directory)


def test_git_revision_names_commit_branch_and_changes(tmp_path: Path) -> None:
    if shutil.which("git") is None:
        pytest.skip("git is not installed")

    def git(*args: str) -> str:
        return subprocess.run(
            ["git", "-C", str(tmp_path), "-c", "user.name=t", "-c", "user.email=t@t", *args],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()

    assert environment.git_revision(tmp_path) is None  # not a work tree
    git("init", "-q", "-b", "topic")
    (tmp_path / "bench.toml").write_text("name = 'x'\n")
    git("add", "bench.toml")
    git("commit", "-q", "-m", "one")
    head = git("rev-parse", "HEAD")
    assert revision(tmp_path) == {"commit": head, "branch": "topic", "dirty": False}
    (tmp_path / "bench.toml").write_text("name = 'y'\n")
    assert revision(tmp_path) == {"commit": head, "branch": "topic", "dirty": True}
    git("stash", "-q")
    git("checkout", "-q", "--detach")
    assert revision(tmp_path) == {"commit": head, "branch": None, "dirty": False}
