"""Everything the peer comparisons need, in one folder for a benchmark host without network (a lab
machine, a large host behind a firewall): rpcmeter built for that host's Python (compiled) with
every dependency unpacked beside it, the benchmarks with the Go greeter prebuilt, ghz, wrk and
h2load with the shared libraries they load, and ``run.sh``, which runs ``vs_all.py`` from there
(or, given a script's name first, that script)::

    python benchmarks/bundle.py OUT --python python3.12 [--exclude numpy scipy ...]
    # copy OUT to the host, then there:
    OUT/run.sh --server-cpus 6 10          # every comparison, for each server size
    OUT/run.sh vs_wrk.py --tls --server-cpus 6

``--python``: an interpreter of the host's Python version on this machine, which builds
rpcmeter's wheel (``pip wheel .``: compiled, as an install there would be); the dependencies'
wheels are downloaded for that version (manylinux, x86-64 or this machine's architecture).
``--exclude``: packages the host already has (their wheels are left out; the host's own are
used). Needs Go (the greeter and ghz, built static with ``CGO_ENABLED=0``), wrk and h2load here
(Debian: ``apt-get install wrk nghttp2-client``); a peer not installed here is left out, and its
comparison says so there. nginx is not carried: with several server CPUs the comparisons use
the Go greeter.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import stat
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
GHZ = "github.com/bojand/ghz/cmd/ghz@v0.93.0"
# the C library's own, present on every Linux host (carrying them breaks the loader)
SYSTEM_LIBS = re.compile(r"^(ld-linux|linux-vdso|libc|libm|libdl|libpthread|librt|libresolv)\.")
PLATFORMS = [f"manylinux_2_{n}" for n in (39, 35, 34, 31, 28, 27, 24, 17)] + [
    "manylinux2014",
    "manylinux1",
]

RUN_SH = """#!/bin/sh
# the peer comparisons from this folder (made by rpcmeter's benchmarks/bundle.py)
here="$(cd "$(dirname "$0")" && pwd)"
export PATH="$here/bin:$PATH" LD_LIBRARY_PATH="$here/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export PYTHONPATH="$here/site${PYTHONPATH:+:$PYTHONPATH}"
script=vs_all.py
case "$1" in *.py) script="$1"; shift ;; esac
exec @PYTHON@ "$here/benchmarks/$script" "$@"
"""


class BundleError(Exception):
    """A step that failed, said in one line."""


def run(
    command: list[str],
    cwd: Path | None = None,
    env: dict[str, str] | None = None,
    timeout: float = 1800,
) -> str:
    """Run ``command``; its output, or a BundleError with the last line it said."""
    done = subprocess.run(
        command, capture_output=True, text=True, check=False, cwd=cwd, env=env, timeout=timeout
    )
    if done.returncode != 0:
        said = (done.stderr.strip() or done.stdout.strip() or "?").splitlines()[-1]
        raise BundleError(f"{Path(command[0]).name} {' '.join(command[1:3])}: {said[:200]}")
    out: str = done.stdout
    return out


def python_version(python: str) -> tuple[str, str]:
    """(``3.12``, the machine) of the interpreter ``python``."""
    code = "import sys, platform; print(*sys.version_info[:2], platform.machine())"
    out = run([python, "-c", code])
    major, minor, machine = out.split()
    return f"{major}.{minor}", machine


def requirements(wheel: Path, extra: str) -> list[str]:
    """What ``wheel`` requires, with ``extra``'s requirements (its METADATA's ``Requires-Dist``;
    the other extras' left out)."""
    with zipfile.ZipFile(wheel) as zf:
        (name,) = [n for n in zf.namelist() if n.endswith(".dist-info/METADATA")]
        metadata = zf.read(name).decode()
    wanted = []
    for line in metadata.splitlines():
        if not line.startswith("Requires-Dist:"):
            continue
        requirement, _, marker = line.removeprefix("Requires-Dist:").partition(";")
        if not marker.strip() or re.fullmatch(rf"""\s*extra\s*==\s*["']{extra}["']\s*""", marker):
            wanted.append(requirement.strip())
    return wanted


def wheels(out: Path, python: str, exclude: set[str]) -> None:
    """rpcmeter's wheel and its dependencies' (with the grpc extra) for ``python``'s version,
    unpacked into ``out/site``."""
    version, machine = python_version(python)
    with tempfile.TemporaryDirectory() as tmp:
        built = Path(tmp) / "built"
        run([python, "-m", "pip", "wheel", "-q", "--no-deps", str(ROOT), "-w", str(built)])
        (own,) = built.glob("rpcmeter-*.whl")
        got = Path(tmp) / "wheels"
        got.mkdir()
        shutil.copy2(own, got)
        platform_args = [a for p in PLATFORMS for a in ("--platform", f"{p}_{machine}")]
        run(
            [sys.executable, "-m", "pip", "download", "-q", "--only-binary=:all:",
             "--python-version", version, "--implementation", "cp", *platform_args,
             "-d", str(got), *requirements(own, "grpc")]
        )  # fmt: skip
        site = out / "site"
        site.mkdir(parents=True)
        for wheel in sorted(got.glob("*.whl")):
            name = wheel.name.split("-")[0].lower().replace("_", "-")
            if name in exclude:
                continue
            with zipfile.ZipFile(wheel) as zf:
                zf.extractall(site)
            print(f"  {wheel.name}", file=sys.stderr)


def go_binaries(out: Path) -> None:
    """The Go greeter, where the benchmarks look for it, and ghz in ``out/bin``: static."""
    env = {**os.environ, "CGO_ENABLED": "0"}
    greeter = out / "benchmarks" / "greeter" / "greeter"
    run(["go", "build", "-o", str(greeter), "."], cwd=HERE / "greeter", env=env, timeout=900)
    greeter.touch()  # newer than its sources: the benchmarks use it as built
    run(["go", "install", GHZ], env={**env, "GOBIN": str(out / "bin")}, timeout=900)


def native(out: Path, tools: list[str]) -> list[str]:
    """Copy each of ``tools`` found on PATH into ``out/bin``, and the shared libraries it loads
    (the C library's own left out) into ``out/lib``; the tools not found."""
    missing = []
    for tool in tools:
        path = shutil.which(tool)
        if path is None:
            missing.append(tool)
            continue
        shutil.copy2(path, out / "bin" / tool)
        for line in run(["ldd", path]).splitlines():
            parts = line.split("=>")
            if len(parts) != 2 or not parts[1].strip().startswith("/"):
                continue
            lib = Path(parts[1].split("(")[0].strip())
            if not SYSTEM_LIBS.match(lib.name) and not (out / "lib" / lib.name).exists():
                shutil.copy2(lib.resolve(), out / "lib" / lib.name)
    return missing


def bundle(out: Path, python: str, exclude: set[str]) -> list[str]:
    """Fill ``out`` (new); the peers left out."""
    out.mkdir(parents=True)
    for folder in ("bin", "lib"):
        (out / folder).mkdir()
    shutil.copytree(
        HERE,
        out / "benchmarks",
        ignore=shutil.ignore_patterns("__pycache__", "greeter", "*.pyc"),
    )
    shutil.copytree(
        HERE / "greeter", out / "benchmarks" / "greeter", ignore=shutil.ignore_patterns("greeter")
    )
    print("wheels:", file=sys.stderr)
    wheels(out, python, exclude)
    print("the Go greeter and ghz ...", file=sys.stderr)
    go_binaries(out)
    missing = native(out, ["wrk", "h2load"])
    host_python = f"python{python_version(python)[0]}"
    script = out / "run.sh"
    script.write_text(RUN_SH.replace("@PYTHON@", host_python))
    script.chmod(script.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    return missing


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("out", type=Path, help="the folder to make (must not exist)")
    parser.add_argument("--python", required=True, help="an interpreter of the host's version")
    parser.add_argument("--exclude", nargs="*", default=[], help="packages the host has")
    args = parser.parse_args()
    if args.out.exists():
        parser.error(f"{args.out}: already exists")
    for tool in ("go", "ldd", args.python):
        if shutil.which(tool) is None:
            parser.error(f"needs {tool} on PATH")
    exclude = {name.lower().replace("_", "-") for name in args.exclude}
    try:
        missing = bundle(args.out, args.python, exclude)
    except (BundleError, subprocess.TimeoutExpired, OSError) as exc:
        print(f"bundle: error: {exc}", file=sys.stderr)
        shutil.rmtree(args.out, ignore_errors=True)
        return 1
    size = sum(p.stat().st_size for p in args.out.rglob("*") if p.is_file())
    print(f"{args.out}: {size / 2**20:.0f} MiB; run {args.out}/run.sh there", file=sys.stderr)
    for tool in missing:
        print(f"note: {tool} is not installed here: its comparisons say so there", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
