"""Variants in isolated environments: git revisions, requirements, interpreters, caching, errors.

The package under test is examples/busy_polling_pkg, committed twice into a temporary git
repository: revision 1.0 spins while it waits for input, 1.1 parks. Installing it needs no
download: its build backend (uv_build) is built into uv.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import psutil
import pytest

from rpcmeter.cli import main
from rpcmeter.errors import EnvError
from rpcmeter.host import envs as envs
from rpcmeter.host.envs import EnvRequest, find_uv, prepare
from rpcmeter.suite.model import GitSource

PKG = Path(__file__).resolve().parents[2] / "examples" / "busy_polling_pkg"

pytestmark = pytest.mark.skipif(find_uv() is None, reason="uv is needed to build offline")


def git(repo: Path, *args: str) -> str:
    return subprocess.run(
        ["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@example.org", *args],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()


@pytest.fixture(scope="module")
def repo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A git repository of the package: v1.0 spins (PARK_S = 0), v1.1 parks (1 ms)."""
    path = tmp_path_factory.mktemp("repo") / "busy-polling"
    shutil.copytree(PKG, path, ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))
    init = path / "src" / "busy_polling" / "__init__.py"
    fixed = init.read_text()
    assert "PARK_S = 0.001" in fixed
    git(path, "init", "-q", "-b", "main")
    init.write_text(fixed.replace("PARK_S = 0.001", "PARK_S = 0.0"))
    git(path, "add", "-A")
    git(path, "commit", "-q", "-m", "1.0: workers poll their input in a loop")
    git(path, "tag", "v1.0")
    init.write_text(fixed)
    git(path, "commit", "-q", "-am", "1.1: park for 1 ms between polls")
    git(path, "tag", "v1.1")
    return path


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    path = tmp_path / "cache"
    monkeypatch.setenv("RPCMETER_CACHE", str(path))
    return path


def run_cli(tmp_path: Path, body: str, *extra: str) -> tuple[int, dict[str, Any]]:
    suite = tmp_path / "suite.toml"
    suite.write_text(textwrap.dedent(body))
    out = tmp_path / "result.json"
    code = main(["run", str(suite), "-o", str(out), "--width", "160", *extra])
    return code, json.loads(out.read_text())


def revisions_suite(repo: Path, bad_rev: bool = False) -> str:
    bad = f'\n[variants.broken]\ngit = {{ repo = "{repo}", rev = "no-such-rev" }}\n'
    return f"""
        name = "busy polling by revision"
        repeat = 1
        [target]
        driver = "command"
        command = "python -m busy_polling.flow --workers 2 --items 6 --interval 0.1 --long-input {{long_input}}"
        [variants."1.0"]
        git = {{ repo = "{repo}", rev = "v1.0" }}
        [variants."1.1"]
        git = {{ repo = "{repo}", rev = "v1.1" }}
        {bad if bad_rev else ""}
        [matrix]
        long_input = [true]
        [runs]
        warmup = 0
        count = 5
        """


def cell(result: dict[str, Any], variant: str) -> dict[str, Any]:
    (case,) = [c for c in result["cases"] if c["variant"] == variant]
    return dict(case)


@pytest.mark.timeout(240)
def test_git_revisions_cut_cpu_not_wall_time(
    repo: Path, cache: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, result = run_cli(tmp_path, revisions_suite(repo, bad_rev=True))
    assert code == 0
    spin, park = cell(result, "1.0"), cell(result, "1.1")
    assert spin["status"] == "ok" and park["status"] == "ok", (spin["reason"], park["reason"])
    cpu_ratio = park["command"]["cpu_s"] / spin["command"]["cpu_s"]
    wall_ratio = park["command"]["wall_s"] / spin["command"]["wall_s"]
    assert cpu_ratio < 0.5, cpu_ratio  # parking gives the CPU back
    assert 0.6 < wall_ratio < 1.5, wall_ratio  # and takes about as long
    envs = result["environment"]["variant_envs"]
    assert envs["1.0"]["git_sha"] == git(repo, "rev-parse", "v1.0")
    assert envs["1.1"]["git_sha"] == git(repo, "rev-parse", "v1.1")
    assert envs["1.0"]["packages"]["busy-polling"] == "1.1.0"
    assert envs["1.0"]["virtualenv"] != envs["1.1"]["virtualenv"]
    # the bad revision fails its variant only, with a one-line reason
    broken = cell(result, "broken")
    assert broken["status"] == "failed"
    assert broken["reason"] == f"environment: git: revision 'no-such-rev' not found in {repo}"
    captured = capsys.readouterr()
    assert "1.1: installing" in captured.err
    assert "broken: environment failed: git: revision 'no-such-rev' not found" in captured.err
    (cpu,) = [
        r
        for r in result["comparisons"]["rows"]
        if r["variant"] == "1.1" and r["metric"] == "server_cpu"
    ]
    assert cpu["verdict"] == "faster" and cpu["ci_high"] < 1  # less CPU per run, significantly
    row = next(ln for ln in captured.out.splitlines() if " 1.1 " in ln)
    assert row.rstrip().endswith("less")  # the verdict on CPU
    # a second run reuses both environments: nothing is created or installed again
    markers = {v: Path(envs[v]["virtualenv"]) / "rpcmeter-env.json" for v in ("1.0", "1.1")}
    mtimes = {v: m.stat().st_mtime_ns for v, m in markers.items()}
    code, again = run_cli(tmp_path, revisions_suite(repo), "--set", "runs.count=1")
    assert code == 0
    err = capsys.readouterr().err
    assert "installing" not in err and "creating virtualenv" not in err
    assert err.count("reusing virtualenv") == 2
    assert {v: m.stat().st_mtime_ns for v, m in markers.items()} == mtimes
    assert not again["environment"]["variant_envs"]["1.0"]["created"]


@pytest.mark.timeout(240)
def test_a_moved_branch_gets_a_new_environment(repo: Path, cache: Path, tmp_path: Path) -> None:
    clone = tmp_path / "clone"
    subprocess.run(["git", "clone", "-q", str(repo), str(clone)], check=True)
    notes: list[str] = []
    first = prepare(EnvRequest(git=GitSource(repo=str(clone), rev="main")), notes.append)
    assert first.created and first.git_sha == git(clone, "rev-parse", "HEAD")
    (clone / "NEWS").write_text("moved\n")
    git(clone, "add", "NEWS")
    git(clone, "commit", "-q", "-m", "a later commit")
    second = prepare(EnvRequest(git=GitSource(repo=str(clone), rev="main")), notes.append)
    assert second.created and second.git_sha != first.git_sha and second.root != first.root
    third = prepare(EnvRequest(git=GitSource(repo=str(clone), rev="main")), notes.append)
    assert not third.created and third.root == second.root


def test_failing_install_is_one_clear_line(cache: Path, tmp_path: Path) -> None:
    broken = tmp_path / "broken"
    shutil.copytree(PKG, broken, ignore=shutil.ignore_patterns("__pycache__"))
    shutil.rmtree(broken / "src")  # the build backend finds no module to package
    with pytest.raises(EnvError) as info:
        prepare(EnvRequest(install=("./broken",), base_dir=tmp_path), lambda _: None)
    message = str(info.value)
    assert message.startswith("install failed: ") and "\n" not in message
    assert "(log: " in message
    assert not any((cache / "envs").glob("*/rpcmeter-env.json"))  # nothing half-made is kept
    with pytest.raises(EnvError, match=r"install './missing': no such file or directory"):
        prepare(EnvRequest(install=("./missing",), base_dir=tmp_path), lambda _: None)
    with pytest.raises(EnvError, match=r"python '/no/such/python': no such interpreter"):
        prepare(EnvRequest(python="/no/such/python"), lambda _: None)


@pytest.mark.timeout(240)
def test_builtin_server_runs_in_the_variant_environment(cache: Path, tmp_path: Path) -> None:
    """An rpyc suite whose variant runs in an isolated virtualenv: the reference server runs
    under that virtualenv's interpreter, with rpcmeter and rpyc appended to its path."""
    code, result = run_cli(
        tmp_path,
        f"""
        repeat = 1
        [target]
        driver = "rpyc"
        transport = "unix"
        [variants.host]
        [variants.isolated]
        install = ["{PKG}"]
        [workloads.simple]
        [load]
        requests = 50
        warmup = 5
        """,
    )
    assert code == 0
    for case in result["cases"]:
        assert case["status"] == "ok", case["reason"]
        assert case["ok"] == 50
    env = result["environment"]["variant_envs"]["isolated"]
    assert env["python"].startswith(str(cache))
    assert "rpyc" not in env["packages"]  # the server found it on rpcmeter's path, after its own
    # package versions per variant: as installed in each variant's own environment
    versions = result["environment"]["variant_packages"]
    assert versions["isolated"] == env["packages"]
    assert versions["host"]["rpyc"]


def test_existing_interpreter_is_used_as_is(cache: Path) -> None:
    env = prepare(EnvRequest(python=sys.executable), lambda _: None)
    assert env.python == os.path.abspath(sys.executable) and env.root is None
    assert env.python_version == sys.version.split()[0]
    assert not (cache / "envs").exists()


def test_server_commands_take_the_variant_interpreter(cache: Path, tmp_path: Path) -> None:
    from rpcmeter.host.placement import Cpus
    from rpcmeter.plan.cases import expand, plan_variant
    from rpcmeter.plan.load import build_suite
    from rpcmeter.run.execute import server_command
    from rpcmeter.servers.process import new_endpoint
    from rpcmeter.suite.model import ServerSpec

    suite = build_suite({"workloads": {"simple": {}}})
    (case,) = expand(suite)
    env = prepare(EnvRequest(install=(str(PKG),)), lambda _: None)
    plan = plan_variant(suite, case.variant, Cpus(None, None))
    endpoint = new_endpoint("tcp")
    own = ServerSpec(command="{python} -m myserver --port {port}")
    assert server_command(suite, case, plan, own, endpoint, env=env) == [
        env.python,
        "-m",
        "myserver",
        "--port",
        str(endpoint.port),
    ]
    builtin = server_command(suite, case, plan, suite.target.server, endpoint, env=env)
    assert builtin[:3] == [env.python, "-c", builtin[2]] and "rpcmeter.servers" in builtin[3]


@pytest.mark.timeout(240)
def test_without_uv_venv_and_pip_are_used(
    cache: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    uv = find_uv()
    assert uv is not None
    subprocess.run(
        [uv, "build", "--quiet", "--wheel", "--out-dir", str(tmp_path / "dist"), str(PKG)],
        check=True,
        capture_output=True,
    )
    (wheel,) = (tmp_path / "dist").glob("busy_polling-*.whl")
    monkeypatch.setattr("rpcmeter.host.envs.find_uv", lambda: None)
    notes: list[str] = []
    env = prepare(EnvRequest(install=(str(wheel),)), notes.append)
    assert any("creating virtualenv (venv + pip)" in n for n in notes)
    assert env.created and env.packages["busy-polling"] == "1.1.0"
    assert env.root is not None
    assert "uv =" not in (env.root / "pyvenv.cfg").read_text()  # made by python -m venv
    # uv is found again, but the variant asks for pip: another environment, made the same way
    monkeypatch.undo()
    notes.clear()
    chosen = prepare(EnvRequest(install=(str(wheel),), installer="pip"), notes.append)
    assert notes[0].startswith("creating virtualenv (venv + pip)") and chosen.key != env.key
    assert chosen.packages["busy-polling"] == "1.1.0"
    assert chosen.root is not None and "uv =" not in (chosen.root / "pyvenv.cfg").read_text()


def test_a_step_past_its_time_limit_is_stopped_with_all_it_started(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An installer that outlives its limit is killed with what it started (a build's compilers
    would otherwise go on writing into a checkout being deleted), and the error is one line."""
    monkeypatch.setattr("rpcmeter.host.envs.STEP_TIMEOUT_S", 0.5)
    pidfile = tmp_path / "child"
    script = f"sleep 30 & echo $! > {pidfile}; wait"
    with pytest.raises(EnvError, match=r"^install failed: no result after 0.5 s$"):
        envs._run(["sh", "-c", script], "install failed")
    child = int(pidfile.read_text())
    deadline = time.monotonic() + 5
    while psutil.pid_exists(child) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not psutil.pid_exists(child) or psutil.Process(child).status() == psutil.STATUS_ZOMBIE
