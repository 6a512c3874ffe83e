"""Server builds against a hostile build cache, through the command line: a marker that is
JSON but not a build's record (``[]``) is built again, as a garbled one is; a cache directory
that cannot be written (``.rpcmeter/builds`` read-only) builds without the cache, with a
warning, and the run measures. And a build whose command kills rpcmeter (SIGKILL) the moment
it has started a child of its own leaves nothing behind: the watchdog knew of the build before
its command ran."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from rpcmeter.cli import main
from rpcmeter.host import watchdog as watchdog
from tests.faults.test_read_only_store import SRC, as_reader

pytestmark = pytest.mark.timeout(120)
HOSTILE = Path(__file__).with_name("hostile.py")


COUNTS = [sys.executable, "-c", "open('built.txt', 'a').write('x'); print('built')"]


def write_suite(project: Path, build: list[str] = COUNTS) -> Path:
    """A suite whose server (hostile.py's http server, answering well) names a build (by
    default one that counts its runs in built.txt)."""
    command = [sys.executable, str(HOSTILE), "http", "ok", "--port", "{port}"]
    path = project / "suite.toml"
    path.write_text(
        'name = "b"\nrepeat = 1\n[target]\ndriver = "http"\ntransport = "tcp"\n'
        f"[target.server]\ncommand = {json.dumps(command)}\nbuild = {json.dumps(build)}\n"
        '[workloads.noop]\nkind = "noop"\n[load]\nrequests = 20\nwarmup = 2\n'
        "[resources]\nidle_s = 0\n"
    )
    return path


@pytest.mark.parametrize("marker", ["[]", '{"seconds": "x"}', "7"])
def test_a_marker_that_is_no_build_record_is_built_again(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], marker: str
) -> None:
    path = write_suite(tmp_path)
    out = tmp_path / "out.json"
    assert main(["run", str(path), "--no-store"]) == 0
    (written,) = (tmp_path / ".rpcmeter" / "builds").glob("*.json")
    written.write_text(marker)
    capsys.readouterr()
    assert main(["run", str(path), "--no-store", "-o", str(out)]) == 0
    captured = capsys.readouterr()
    assert "Traceback" not in captured.out + captured.err
    assert (tmp_path / "built.txt").read_text() == "xx"  # built again
    doc = json.loads(out.read_text())
    assert [c["status"] for c in doc["cases"]] == ["ok"]
    assert doc["environment"]["variant_builds"]["default"]["cached"] is False
    assert json.loads(written.read_text())["output_tail"] == "built"  # the marker made anew


def test_a_read_only_cache_builds_without_it(tmp_path: Path) -> None:
    path = write_suite(tmp_path)
    builds = tmp_path / ".rpcmeter" / "builds"
    builds.mkdir(parents=True)
    builds.chmod(0o555)
    out = tmp_path / "out.json"
    try:
        argv = ["run", str(path), "--no-store", "-o", str(out)]
        done = subprocess.run(
            [*as_reader(), sys.executable, "-m", "rpcmeter", *argv],
            capture_output=True,
            text=True,
            timeout=100,
            check=False,
            cwd=tmp_path,
            env={"PYTHONPATH": str(SRC), "PATH": "/usr/bin:/bin"},
        )
    finally:
        builds.chmod(0o755)
    assert "Traceback" not in done.stdout + done.stderr, done.stderr
    assert done.returncode == 0, done.stderr
    assert f"warning: cannot write {builds} (Permission denied): building without the cache" in (
        done.stderr
    )
    assert (tmp_path / "built.txt").read_text() == "x"
    assert list(builds.iterdir()) == []  # nothing written in it
    doc = json.loads(out.read_text())
    assert [c["status"] for c in doc["cases"]] == ["ok"] and doc["cases"][0]["ok"] == 20
    build = doc["environment"]["variant_builds"]["default"]
    assert build["cached"] is False and build["output_tail"] == "built"


def test_a_build_that_kills_rpcmeter_at_once_leaves_nothing_behind(tmp_path: Path) -> None:
    # the build starts a child, then SIGKILLs rpcmeter (its parent) at once: before, rpcmeter
    # told its watchdog of the build only after the command ran, and the child lived on
    build = ["sh", "-c", "sleep 300 & echo $! > child.pid; kill -KILL $PPID; wait"]
    path = write_suite(tmp_path, build)
    proc = subprocess.run(
        [sys.executable, "-m", "rpcmeter", "run", str(path), "--no-store"],
        capture_output=True,
        timeout=100,
        check=False,
        cwd=tmp_path,
        start_new_session=True,
    )
    assert proc.returncode == -signal.SIGKILL, proc.stderr
    deadline = time.monotonic() + 30
    while not (tmp_path / "child.pid").exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    try:
        child = psutil.Process(int((tmp_path / "child.pid").read_text()))
    except psutil.NoSuchProcess:
        return  # stopped already
    _, alive = psutil.wait_procs([child], timeout=5 + watchdog.GRACE_S)
    for p in alive:
        p.kill()
    assert alive == [], "the build's child outlived rpcmeter"
