"""The server's memory limit (``placement.server_memory``) through its cgroup: a server that stays
under it runs as before, with the limit recorded; one that allocates past it is killed by the
OOM killer and its case fails with that reason (during the case, or before it was ready); where
no cgroup can be made, the run says so in one line and runs unlimited."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

import pytest

from rpcmeter.errors import SuiteError
from rpcmeter.host import placement as placement
from rpcmeter.plan.load import build_suite
from rpcmeter.result.parts import cgroup_of, placement_of, with_cgroups
from rpcmeter.run.execute import run_suite
from tests.run.test_execute import leftovers
from tests.support.synthetic import written

pytestmark = pytest.mark.timeout(120)

LIMIT = 64 << 20
BUILTIN = [sys.executable, "-m", "rpcmeter.servers.rpyc_server", "--transport", "unix"]
BUILTIN += ["--socket", "{socket}"]
# listens, then on the first connection allocates (and touches) 16 MiB at a time, without end
HOG_ON_CONNECT = (
    "import socket, sys\n"
    "s = socket.socket(socket.AF_UNIX); s.bind(sys.argv[1]); s.listen()\n"
    "c, _ = s.accept()\n"
    "hog = []\n"
    "while True:\n"
    "    hog.append(b'x' * (16 << 20))\n"
)
# allocates before it listens: never ready
HOG_AT_START = "hog = []\nwhile True:\n    hog.append(b'x' * (16 << 20))\n"


def can_limit_memory() -> str | None:
    """Why this machine cannot make a memory cgroup here (None: it can)."""
    group, reason = placement.create_memory_cgroup(f"rpcmeter-{os.getpid()}-probe", LIMIT, None)
    if group is None:
        return reason
    group.remove()
    return None


def suite(variants: dict[str, Any], memory: Any = LIMIT, **more: Any) -> Any:
    return build_suite(
        {
            "target": {"driver": "rpyc", "transport": "unix", "server": {"ready_timeout_s": 10}},
            "variants": variants,
            "repeat": 1,
            "workloads": {"simple": {}},
            "load": {"requests": 100, "warmup": 1},
            "placement": {"server_memory": memory},
            **more,
        }
    )


needs_cgroup = pytest.mark.skipif(
    (why := can_limit_memory()) is not None, reason=f"no memory cgroup here: {why}"
)


@needs_cgroup
def test_a_server_over_its_limit_fails_its_case_with_the_oom_reason() -> None:
    hog = {"command": [sys.executable, "-c", HOG_ON_CONNECT, "{socket}"]}
    result = written(run_suite(suite({"hog": {"server": hog}, "fine": {}})))
    hogged, fine = result["cases"]
    assert hogged["status"] == "failed"
    assert hogged["reason"].startswith("server killed by the OOM killer (1 process) at its ")
    assert "memory limit of 64 MiB (placement.server_memory)" in hogged["reason"]
    assert fine["status"] == "ok" and fine["ok"] == 100
    assert 0 < fine["memory"]["server_mean_rss_bytes"] <= fine["memory"]["server_peak_rss_bytes"]
    recorded = result["environment"]["placement"]
    assert recorded["server_memory_bytes"] == LIMIT
    group = recorded.get("server_memory_cgroup") or recorded["server_cgroup"]
    assert group["memory_bytes"] == LIMIT
    assert not os.path.exists(group["path"])  # removed at the end of the run
    assert leftovers() == []


@needs_cgroup
def test_a_server_killed_before_it_is_ready_says_why() -> None:
    hog = {"command": [sys.executable, "-c", HOG_AT_START]}
    result = written(run_suite(suite({"hog": {"server": hog}})))
    (case,) = result["cases"]
    assert case["status"] == "failed"
    assert case["reason"].startswith("server killed by the OOM killer")
    assert case["reason"].endswith("(placement.server_memory) before it was ready")


def test_without_a_cgroup_the_run_says_so_in_one_line() -> None:
    result = written(run_suite(suite({"rpyc": {}}, memory="64M", resources={"cgroup": False})))
    assert result["cases"][0]["status"] == "ok"
    notes = result["environment"]["placement"]["cgroup_notes"]
    assert notes == ["server memory limit not applied: resources.cgroup is false"]


@pytest.mark.parametrize(
    ("given", "size"),
    [
        ("512M", 512 << 20),
        ("512m", 512 << 20),
        ("1.5G", 3 << 29),
        ("512MiB", 512 << 20),
        (1 << 30, 1 << 30),
        ("2048K", 2 << 20),
    ],
)
def test_sizes(given: Any, size: int) -> None:
    assert suite({"rpyc": {}}, memory=given).placement.server_memory == size


@pytest.mark.parametrize(
    ("given", "message"),
    [
        ("512X", 'expected a size such as "512M"'),
        ("100", "at least 1M"),
        (True, 'expected bytes or a size such as "512M"'),
    ],
)
def test_bad_sizes_name_the_key(given: Any, message: str) -> None:
    with pytest.raises(SuiteError, match=r"placement\.server_memory: .*" + message):
        suite({"rpyc": {}}, memory=given)


def test_a_variant_cannot_set_its_own_limit() -> None:
    with pytest.raises(SuiteError, match=r"variants\.v\.placement\.server_memory: a memory limit"):
        suite({"v": {"placement": {"server_memory": "64M"}}}, memory=None)


# ---- the cgroup files, on hierarchies laid out in a temporary directory --------------------------


def fake_hierarchy(
    monkeypatch: pytest.MonkeyPatch, root: Path, fstype: str, options: str, controllers: str = ""
) -> None:
    """``root`` as the only cgroup file system, this process in its top cgroup."""
    root.mkdir(parents=True, exist_ok=True)
    if fstype == "cgroup2":
        (root / "cgroup.controllers").write_text(controllers)
    monkeypatch.setattr(placement, "_mounts", lambda: [(str(root), fstype, options)])
    monkeypatch.setattr(placement, "_own_cgroup", lambda controller: "/")


def test_v2_the_limit_joins_the_cpu_quota_cgroup(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake_hierarchy(monkeypatch, tmp_path, "cgroup2", "rw", "cpu memory pids")
    quota, reason = placement.create_cgroup("run-server", 1.0)
    assert quota is not None and reason == ""
    assert (tmp_path / "run-server" / "cpu.max").read_text() == "100000 100000"
    group, reason = placement.create_memory_cgroup("run-memory", LIMIT, quota)
    assert group is quota and group.memory == LIMIT and reason == ""
    assert (tmp_path / "run-server" / "memory.max").read_text() == str(LIMIT)
    assert (tmp_path / "cgroup.subtree_control").read_text() == "+memory"
    (tmp_path / "run-server" / "memory.events").write_text("low 0\nmax 4\noom 2\noom_kill 2\n")
    assert group.oom_kills() == 2
    assert cgroup_of(group).memory_bytes == LIMIT


def test_v2_without_a_quota_the_limit_has_a_cgroup_of_its_own(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake_hierarchy(monkeypatch, tmp_path, "cgroup2", "rw", "cpu memory")
    group, _ = placement.create_memory_cgroup("run-memory", LIMIT, None)
    assert group is not None and group.version == 2 and group.cpus is None
    assert (tmp_path / "run-memory" / "memory.max").read_text() == str(LIMIT)
    assert group.oom_kills() is None  # no memory.events: unknown, not 0


def test_v2_without_the_memory_controller_says_so(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake_hierarchy(monkeypatch, tmp_path, "cgroup2", "rw", "cpu pids")
    group, reason = placement.create_memory_cgroup("run-memory", LIMIT, None)
    assert group is None
    assert reason == f"cgroup v2 at {tmp_path} has no memory controller"
    assert not (tmp_path / "run-memory").exists()


def test_v1_the_limit_is_in_the_memory_hierarchy(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake_hierarchy(monkeypatch, tmp_path / "memory", "cgroup", "rw,memory")
    group, _ = placement.create_memory_cgroup("run-memory", LIMIT, None)
    assert group is not None and group.version == 1
    assert (tmp_path / "memory" / "run-memory" / "memory.limit_in_bytes").read_text() == str(LIMIT)
    (group.path / "memory.oom_control").write_text("oom_kill_disable 0\nunder_oom 0\noom_kill 3\n")
    assert group.oom_kills() == 3
    quotas = placement.CpuQuotas(server_memory=group, memory_limit=LIMIT)
    recorded = with_cgroups(placement_of(placement.Cpus([0], [1])), quotas)
    assert recorded.server_memory_bytes == LIMIT
    assert recorded.server_memory_cgroup is not None
    assert recorded.server_memory_cgroup.memory_bytes == LIMIT
