"""Capture of the machine and software a run measured on, as the JSON values the result's
``environment`` holds (:func:`rpcmeter.result.record.new_result` reads them into the model)."""

from __future__ import annotations

import contextlib
import importlib.machinery
import importlib.metadata
import importlib.util
import ipaddress
import os
import platform
import shutil
import socket
import subprocess
import sys
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rpcmeter.compiled import runs_compiled as compiled

if TYPE_CHECKING:
    from rpcmeter.suite.model import Suite

CPU_SYS = Path("/sys/devices/system/cpu")


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def package_version(name: str) -> str | None:
    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return None


def _read(path: Path) -> str | None:
    try:
        return path.read_text().strip() or None
    except OSError:
        return None


def cpu_governors() -> dict[str, list[int]] | None:
    """CPU frequency governor -> the CPUs using it (None where cpufreq is not readable)."""
    out: dict[str, list[int]] = {}
    for cpu in sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else []:
        governor = _read(CPU_SYS / f"cpu{cpu}" / "cpufreq" / "scaling_governor")
        if governor is not None:
            out.setdefault(governor, []).append(cpu)
    return out or None


def virtualization() -> dict[str, Any]:
    """Hints that the machine is virtual: systemd-detect-virt, the CPU's hypervisor flag, the
    DMI product name."""
    detect_virt: str | None = None
    tool = shutil.which("systemd-detect-virt")
    if tool:
        with contextlib.suppress(OSError, subprocess.SubprocessError):
            done = subprocess.run([tool], capture_output=True, text=True, timeout=5, check=False)
            detect_virt = done.stdout.strip() or None
    hypervisor_flag: bool | None = None
    cpuinfo = _read(Path("/proc/cpuinfo"))
    if cpuinfo is not None:
        flags = next((ln for ln in cpuinfo.splitlines() if ln.startswith("flags")), "")
        hypervisor_flag = "hypervisor" in flags.split()
    return {
        "detect_virt": detect_virt,
        "hypervisor_flag": hypervisor_flag,
        "product_name": _read(Path("/sys/class/dmi/id/product_name")),
    }


def load_average() -> list[float] | None:
    try:
        return [round(x, 2) for x in os.getloadavg()]
    except OSError:
        return None


def resolve_host(host: str) -> list[str]:
    """Addresses ``host`` resolves to, in the order a client tries them."""
    try:
        infos = socket.getaddrinfo(host, None, type=socket.SOCK_STREAM)
    except OSError:
        return []
    return list(dict.fromkeys(str(info[4][0]) for info in infos))


def is_address(host: str) -> bool:
    try:
        ipaddress.ip_address(host)
    except ValueError:
        return False
    return True


def capture_suite(suite: Suite, packages: Mapping[str, Iterable[str]]) -> dict[str, Any]:
    """What the run depends on beyond the machine (the environment's ``resolved_hosts`` and
    ``variant_packages``): how every host name of the suite resolves, and the versions of each
    variant's ``packages`` (its driver's) in the environment its processes run in."""
    hosts = {suite.target.host, *(v.host for v in suite.variants.values() if v.host)}
    return {
        "resolved_hosts": {h: resolve_host(h) for h in sorted(hosts) if not is_address(h)},
        "variant_packages": {
            name: {p: package_version(p) for p in packages[name]} for name in suite.variants
        },
    }


def capture(packages: tuple[str, ...] = (), version: str | None = None) -> dict[str, Any]:
    """Host, CPU, OS, Python and package versions, CPU frequency and idle settings, load average
    and virtualisation hints; ``version`` is rpcmeter's own."""
    uname = platform.uname()
    return {
        "host": socket.gethostname(),
        "cpu_model": cpu_model(),
        "cpu_count": os.cpu_count(),
        "cpus_available": sorted(os.sched_getaffinity(0))
        if hasattr(os, "sched_getaffinity")
        else None,
        "os": f"{uname.system} {uname.release}",
        "kernel": uname.release,
        "machine": uname.machine,
        "python": sys.version.split()[0],
        "python_implementation": platform.python_implementation(),
        "rpcmeter": version,
        "rpcmeter_compiled": compiled(),
        "packages": {name: package_version(name) for name in packages},
        "cpu_governor": cpu_governors(),
        "cpuidle_driver": _read(CPU_SYS / "cpuidle" / "current_driver"),
        "cpuidle_governor": _read(CPU_SYS / "cpuidle" / "current_governor_ro")
        or _read(CPU_SYS / "cpuidle" / "current_governor"),
        "load_average": load_average(),
        "virtualization": virtualization(),
    }


def git_revision(directory: str | Path) -> dict[str, Any] | None:
    """The git commit checked out in ``directory``, its branch (None when detached) and whether
    its tracked files have changes; None when the directory is not in a git work tree (or git is
    missing)."""
    import subprocess

    def git(*args: str) -> str | None:
        try:
            proc = subprocess.run(
                ["git", "-C", str(directory), *args],
                capture_output=True,
                text=True,
                timeout=10,
                check=False,
            )
        except (OSError, subprocess.TimeoutExpired):
            return None
        return proc.stdout.strip() if proc.returncode == 0 else None

    commit = git("rev-parse", "HEAD")
    if not commit:
        return None
    status = git("status", "--porcelain", "--untracked-files=no")
    branch = git("symbolic-ref", "--short", "-q", "HEAD") or None
    return {"commit": commit, "branch": branch, "dirty": bool(status)}
