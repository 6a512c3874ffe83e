"""Capture of the machine and software a run measured on."""

from __future__ import annotations

import importlib.metadata
import os
import platform
import socket
import sys
from pathlib import Path
from typing import Any

import rpcmeter


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


def capture(packages: tuple[str, ...] = ()) -> dict[str, Any]:
    """Host, CPU, OS, Python and package versions."""
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
        "rpcmeter": rpcmeter.__version__,
        "packages": {name: package_version(name) for name in packages},
    }
