"""Servers built per variant (rpcmeter.host.build): a build runs once, is cached by the hash of
its inputs and rebuilt when they change; a failing build or a missing tool fails its variants in
one line while the others run; a build that runs too long is stopped with all it started.

The "builds" are small Python programs: one that counts its runs and writes the server the
variant then starts (the built-in rpyc server, copied into the build directory)."""

from __future__ import annotations

import contextlib
import json
import sys
import textwrap
from pathlib import Path
from typing import Any

import psutil
import pytest

from rpcmeter.errors import SuiteError
from rpcmeter.host.build import BuildError, BuildRequest, make
from rpcmeter.plan.load import build_suite
from rpcmeter.run.events import RunEvents, RunListener
from rpcmeter.run.execute import RunOptions, run_suite
from tests.run.test_execute import leftovers
from tests.support.synthetic import written

pytestmark = pytest.mark.timeout(120)

# the build: counts its runs in built.txt, and writes server.py (which runs the built-in server)
BUILD = textwrap.dedent(
    """
    import pathlib, sys
    count = pathlib.Path("built.txt")
    count.write_text(str(int(count.read_text()) + 1 if count.exists() else 1))
    source = pathlib.Path("input.txt").read_text()
    pathlib.Path("server.py").write_text(
        "import runpy, sys\\n"
        f"# built from {source!r}\\n"
        "sys.argv = ['rpyc_server', '--transport', 'unix', '--socket', sys.argv[1]]\\n"
        "runpy.run_module('rpcmeter.servers.rpyc_server', run_name='__main__')\\n"
    )
    print("compiled server.py")
    """
)


class Notes(RunListener):
    def __init__(self) -> None:
        self.lines: list[str] = []

    def note(self, message: str) -> None:
        self.lines.append(message)


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """A build directory: the build script and its one input."""
    (tmp_path / "build.py").write_text(BUILD)
    (tmp_path / "input.txt").write_text("version 1")
    return tmp_path


def server(project: Path, build: Any = None, **more: Any) -> dict[str, Any]:
    return {
        "cwd": str(project),
        "build": build if build is not None else [sys.executable, "build.py"],
        "build_inputs": ["input.txt", "build.py"],
        "command": [sys.executable, "server.py", "{socket}"],
        "ready_timeout_s": 10,
        **more,
    }


def suite(variants: dict[str, Any]) -> Any:
    return build_suite(
        {
            "target": {"driver": "rpyc", "transport": "unix"},
            "variants": variants,
            "repeat": 1,
            "workloads": {"simple": {}},
            "load": {"requests": 50, "warmup": 1},
        }
    )


def run(variants: dict[str, Any]) -> tuple[dict[str, Any], list[str]]:
    notes = Notes()
    result = run_suite(suite(variants), RunOptions(events=RunEvents(notes)))
    return written(result), notes.lines


def test_built_once_then_cached_then_rebuilt_when_an_input_changes(project: Path) -> None:
    spec = server(project)
    doc, notes = run({"built": {"server": spec}, "same build": {"server": spec}})
    assert [c["status"] for c in doc["cases"]] == ["ok", "ok"]
    assert (project / "built.txt").read_text() == "1"  # two variants, one build
    builds = doc["environment"]["variant_builds"]
    first = builds["built"]
    assert first["cached"] is False and first["error"] is None
    assert first["inputs"] == 2
    assert "compiled server.py" in first["output_tail"]
    assert first["built_s"] > 0 and builds["same build"]["key"] == first["key"]
    assert any(n.startswith("built: building: ") for n in notes)

    doc, notes = run({"built": {"server": spec}})  # nothing changed: no build
    assert doc["cases"][0]["status"] == "ok"
    assert (project / "built.txt").read_text() == "1"
    again = doc["environment"]["variant_builds"]["built"]
    assert again["cached"] is True and again["key"] != "" and again["built_s"] > 0
    assert any("build cached" in n for n in notes)

    (project / "input.txt").write_text("version 2")  # a changed input: built again
    doc, _ = run({"built": {"server": spec}})
    assert (project / "built.txt").read_text() == "2"
    assert doc["environment"]["variant_builds"]["built"]["cached"] is False
    assert "version 2" in (project / "server.py").read_text()
    assert leftovers() == []


def test_a_failed_build_fails_its_variant_in_one_line_and_the_others_run(project: Path) -> None:
    failing = [sys.executable, "-c", "import sys; print('error: expected `;`'); sys.exit(101)"]
    doc, notes = run({"broken": {"server": server(project, failing)}, "rpyc": {}})
    broken, good = doc["cases"]
    assert broken["status"] == "failed"
    assert broken["reason"].startswith("build failed: error: expected `;` (status 101; log: ")
    assert "\n" not in broken["reason"]
    assert "error: expected `;`" in broken["server_output_tail"]
    assert good["status"] == "ok" and good["ok"] == 50
    assert any(n.startswith("broken: build failed: error: expected `;`") for n in notes)
    assert doc["environment"]["variant_builds"]["broken"]["error"].startswith("error: expected")
    assert not list((project / ".rpcmeter" / "builds").glob("*.json"))  # no success recorded


def test_a_missing_tool_says_so_in_one_line(project: Path) -> None:
    doc, notes = run({"rust-tonic": {"server": server(project, "no-such-cargo build")}})
    assert doc["cases"][0]["reason"] == "build failed: no-such-cargo: not found"
    assert "rust-tonic: build failed: no-such-cargo: not found" in notes


def test_an_input_pattern_that_matches_nothing_fails_the_build(project: Path) -> None:
    spec = {**server(project), "build_inputs": ["src/**/*.rs"]}
    doc, _ = run({"v": {"server": spec}})
    assert doc["cases"][0]["reason"] == (
        f"build failed: build_inputs: 'src/**/*.rs' matches no file in {project}"
    )


def test_the_key_follows_the_inputs_and_nothing_else(project: Path) -> None:
    (project / "src" / "deep").mkdir(parents=True)
    (project / "src" / "deep" / "a.rs").write_text("fn a() {}")
    (project / "notes.md").write_text("not an input")
    req = BuildRequest(("cargo", "build"), project, (), ("src/**/*.rs", "input.txt"), 60.0)
    key, count = req.key()
    assert count == 2
    (project / "notes.md").write_text("changed, but not an input")
    assert req.key()[0] == key
    (project / "src" / "deep" / "a.rs").write_text("fn a() { }")
    assert req.key()[0] != key
    other = BuildRequest(("cargo", "build", "--release"), project, (), req.inputs, 60.0)
    assert other.key()[0] != req.key()[0]  # another command: another build


def test_a_build_over_its_time_is_stopped_with_what_it_started(project: Path) -> None:
    pids = project / "pids.txt"
    script = (
        "import os, subprocess, sys, time\n"
        "child = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)'])\n"
        f"open({str(pids)!r}, 'w').write(str(child.pid))\n"
        "time.sleep(60)\n"
    )
    req = BuildRequest((sys.executable, "-c", script), project, (), (), 1.0)
    with pytest.raises(BuildError, match=r"no result after 1 s \(server.build_timeout_s\)"):
        make(req, lambda _: None)
    child = int(pids.read_text())
    with contextlib.suppress(psutil.NoSuchProcess):  # gone, or a zombie not reaped yet
        assert psutil.Process(child).status() == psutil.STATUS_ZOMBIE
    assert leftovers() == []


def test_build_inputs_need_a_build() -> None:
    with pytest.raises(SuiteError, match="build_inputs: only with build"):
        suite({"v": {"server": {"command": "x {socket}", "build_inputs": ["*.c"]}}})


def test_the_marker_records_the_build(project: Path) -> None:
    req = BuildRequest((sys.executable, "build.py"), project, (), ("input.txt",), 60.0)
    built = make(req, lambda _: None)
    marker = json.loads((project / ".rpcmeter" / "builds" / f"{built.key}.json").read_text())
    assert marker["key"] == built.key and marker["seconds"] == built.built_s
    assert make(req, lambda _: None).cached is True


def test_a_missing_directory_is_named_and_not_made(tmp_path: Path) -> None:
    req = BuildRequest(("make",), tmp_path / "no-such-dir", (), (), 60.0)
    with pytest.raises(BuildError, match=r"server\.cwd: no such directory .*no-such-dir$"):
        make(req, lambda _: None)
    assert not (tmp_path / "no-such-dir").exists()
