"""Servers built from source, per variant: ``server.build`` run before the variant's first case.

A server spec may name a build (``server.build = "cargo build --release"``), run in the spec's
``cwd`` (relative to the suite file; default: the suite file's directory) with the variant's
environment (``{python}``: its interpreter; ``{suite_dir}``: the suite file's directory). Every
build a run needs is made once, before the first case: variants that name the same build in the
same directory (a server and a command client against it) share it.

A build is skipped when an earlier one of the same command, directory and environment saw the
same files: the key is a hash of those and of every file the ``build_inputs`` glob patterns
match (from ``cwd``; ``**`` crosses directories, ``../proto/*.proto`` reaches out). The
directory keeps a marker per key that built successfully, with the build's output::

    <cwd>/.rpcmeter/builds/<key>.json   written last: the build succeeded (its time, output tail)
    <cwd>/.rpcmeter/builds/<key>.log    the whole output of the build

so removing ``<cwd>/.rpcmeter`` forces the next run to build again. The marker says nothing of
the build's outputs: a build whose outputs were deleted since (``cargo clean``) is rebuilt only
when its inputs change, or when its markers are removed too. Without ``build_inputs`` the key
has no files in it: the build then runs once per directory and command, until its marker goes.

The build runs in a session of its own (stopped as a whole on a timeout, an error or Ctrl-C, and
by :mod:`rpcmeter.host.watchdog` if rpcmeter is killed). One that cannot start or fails fails its
variants in one line (``rust-tonic: build failed: cargo: not found``); the other variants run.
The result records every build: its command, directory, key, whether it was cached, its time
and the tail of its output (``environment.variant_builds``).
"""

from __future__ import annotations

import contextlib
import glob
import hashlib
import json
import os
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rpcmeter.errors import RpcmeterError
from rpcmeter.host.envs import Env, last_error_line, locked
from rpcmeter.host.launch import spawn
from rpcmeter.host.watchdog import WATCHDOG
from rpcmeter.suite.model import ServerSpec, Suite
from rpcmeter.suite.placeholders import fill

BUILD_FORMAT = 1
TAIL_LINES = 20
MARKERS = Path(".rpcmeter") / "builds"
Note = Callable[[str], None]


class BuildError(RpcmeterError):
    """A server could not be built (the tool is missing, the build failed or timed out); fails
    the variants that need the build."""

    def __init__(self, message: str, output_tail: str = "") -> None:
        super().__init__(message)
        self.output_tail = output_tail


@dataclass(frozen=True)
class BuildRequest:
    """One build as a run will make it: the command line (placeholders filled), the directory,
    the extra environment, the input patterns and the time allowed."""

    argv: tuple[str, ...]
    cwd: Path
    env: tuple[tuple[str, str], ...]  # the server spec's variables (and the variant env's)
    inputs: tuple[str, ...]
    timeout_s: float
    bin_dir: str | None = None  # the variant environment's scripts, first on PATH

    def environ(self) -> dict[str, str]:
        """The build's whole environment: this process's, with :attr:`env` and :attr:`bin_dir`."""
        out = {**os.environ, **dict(self.env)}
        if self.bin_dir is not None:
            out["PATH"] = self.bin_dir + os.pathsep + out.get("PATH", os.defpath)
        return out

    def inputs_hash(self) -> tuple[str, int]:
        """A hash of the files ``inputs`` match (names and bytes, in name order) and how many
        there are; a pattern that matches no file is an error."""
        files: set[str] = set()
        for pattern in self.inputs:
            matched = [
                p
                for p in glob.glob(pattern, root_dir=self.cwd, recursive=True)
                if (self.cwd / p).is_file()
            ]
            if not matched:
                raise BuildError(f"build_inputs: {pattern!r} matches no file in {self.cwd}")
            files.update(os.path.normpath(p) for p in matched)
        h = hashlib.sha256()
        for name in sorted(files):
            h.update(name.encode() + b"\0")
            try:
                h.update(hashlib.sha256((self.cwd / name).read_bytes()).digest())
            except OSError as exc:
                raise BuildError(f"build_inputs: cannot read {name}: {exc.strerror}") from None
        return h.hexdigest(), len(files)

    def key(self) -> tuple[str, int]:
        """The build's cache key (and how many input files went into it)."""
        files, count = self.inputs_hash()
        doc = {
            "format": BUILD_FORMAT,
            "argv": list(self.argv),
            "cwd": str(self.cwd),
            "env": dict(self.env),
            "bin_dir": self.bin_dir,
            "files": files,
        }
        return hashlib.sha256(json.dumps(doc, sort_keys=True).encode()).hexdigest()[:20], count

    def describe(self) -> str:
        return shlex.join(self.argv)


@dataclass
class Build:
    """A build as it was made (or found made), or why it failed (``error``): what the result
    records of it."""

    request: BuildRequest
    key: str = ""
    cached: bool = False
    seconds: float = 0.0  # this run's: the build's own time, or the look-up's when cached
    built_s: float | None = None  # the build's own time, when it last ran
    inputs: int = 0
    output_tail: str = ""
    log: str = ""
    error: str | None = None
    variants: list[str] = field(default_factory=list)

    def describe(self) -> dict[str, Any]:
        """What the result records of the build, as JSON values (``environment.variant_builds``;
        :meth:`rpcmeter.result.record.RunRecord.prepared`)."""
        return {
            "command": self.request.describe(),
            "cwd": str(self.request.cwd),
            "key": self.key or None,
            "inputs": self.inputs,
            "cached": self.cached,
            "seconds": round(self.seconds, 3),
            "built_s": round(self.built_s, 3) if self.built_s is not None else None,
            "output_tail": self.output_tail or None,
            "log": self.log or None,
            "error": self.error,
        }


NO_REQUEST = BuildRequest((), Path(), (), (), 0.0)  # a build whose command line could not be filled


def suite_dir(suite: Suite) -> Path:
    return Path(suite.path).resolve().parent if suite.path else Path.cwd()


def server_cwd(suite: Suite, spec: ServerSpec) -> str | None:
    """A server spec's directory: ``cwd`` from the suite file's directory (None: not given)."""
    if spec.cwd is None:
        return None
    return str((suite_dir(suite) / Path(spec.cwd).expanduser()).resolve())


def request_of(suite: Suite, spec: ServerSpec, env: Env | None) -> BuildRequest:
    """The build a server spec asks for (its ``build`` is set)."""
    assert spec.build is not None
    directory = suite_dir(suite)
    cwd = Path(server_cwd(suite, spec) or directory)
    values = {"python": env.python if env else sys.executable, "suite_dir": str(directory)}
    try:
        argv = fill(spec.build, values)
    except KeyError as exc:
        raise BuildError(
            f"server.build: unknown placeholder {{{exc.args[0]}}} (known: python, suite_dir)"
        ) from None
    extra = dict(spec.env)
    if env is not None and env.root is not None:
        extra["VIRTUAL_ENV"] = str(env.root)
    return BuildRequest(
        tuple(argv),
        cwd,
        tuple(sorted(extra.items())),
        tuple(spec.build_inputs),
        spec.build_timeout_s,
        env.bin_dir if env is not None else None,
    )


def _tail(text: str, lines: int = TAIL_LINES) -> str:
    return "\n".join(text.rstrip().splitlines()[-lines:])


def run_build(req: BuildRequest, log: Path) -> float:
    """Run the build, its output to ``log``; its wall time, or :class:`BuildError`."""
    parent = os.getpid()
    start = time.monotonic()
    started: list[int] = []

    def guard(pid: int) -> None:  # before the build's command runs: all it starts is stopped
        started.append(pid)
        WATCHDOG.guard(pid)

    with log.open("wb") as out:
        try:
            proc = spawn(
                req.argv,
                parent=parent,
                on_start=guard,
                cwd=req.cwd,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                env=req.environ(),
                start_new_session=True,
            )
        except OSError as exc:
            for pid in started:  # its launcher ended: nothing of it is left to stop
                WATCHDOG.release(pid)
            if isinstance(exc, FileNotFoundError):
                raise BuildError(f"{req.argv[0]}: not found") from None
            if isinstance(exc, PermissionError):
                raise BuildError(f"{req.argv[0]}: permission denied") from None
            raise
        try:
            code = proc.wait(req.timeout_s)
        except subprocess.TimeoutExpired:
            raise BuildError(
                f"no result after {req.timeout_s:g} s (server.build_timeout_s)",
                _tail(log.read_text(errors="replace")),
            ) from None
        finally:  # on every way out (Ctrl-C too): the build, and helpers it left in its session
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            WATCHDOG.release(proc.pid)
    seconds = time.monotonic() - start
    if code != 0:
        text = log.read_text(errors="replace")
        status = f"status {code}" if code > 0 else f"signal {-code}"
        raise BuildError(f"{last_error_line(text)} ({status}; log: {log})", _tail(text))
    return seconds


def _cached(req: BuildRequest, key: str, count: int, marker: Path, log: Path) -> Build | None:
    """The build its marker records (None: no marker, or one that is not a build's record: a
    corrupt marker is built again)."""
    start = time.monotonic()
    try:
        done = json.loads(marker.read_text())
    except (OSError, ValueError):
        return None
    if not isinstance(done, dict):
        return None
    seconds, tail = done.get("seconds"), done.get("output_tail", "")
    if (
        not isinstance(seconds, int | float)
        or isinstance(seconds, bool)
        or not isinstance(tail, str)
    ):
        return None
    seconds_now = time.monotonic() - start
    return Build(req, key, True, seconds_now, float(seconds), count, tail, str(log))


def make(req: BuildRequest, note: Note) -> Build:
    """Build, or find the build made: see the module documentation. A cache directory that
    cannot be written (read-only) is read, and the build runs without it, with a warning."""
    start = time.monotonic()
    if not req.cwd.is_dir():
        raise BuildError(f"server.cwd: no such directory {req.cwd}")
    key, count = req.key()
    markers = req.cwd / MARKERS
    if markers.exists() and not markers.is_dir():
        raise BuildError(f"cannot write {markers}: not a directory")
    marker, log = markers / f"{key}.json", markers / f"{key}.log"
    with contextlib.ExitStack() as stack:
        try:
            markers.mkdir(parents=True, exist_ok=True)
            stack.enter_context(locked(markers / f"{key}.lock"))
            writable = True
        except OSError as exc:
            writable = False
            note(f"warning: cannot write {markers} ({exc.strerror}): building without the cache")
        found = _cached(req, key, count, marker, log)
        if found is not None:
            note(f"build cached ({req.describe()}, key {key})")
            found.seconds = time.monotonic() - start
            return found
        if not writable:  # its log in a directory of its own, kept only if the build fails
            log = Path(tempfile.mkdtemp(prefix="rpcmeter-build-")) / f"{key}.log"
        note(f"building: {req.describe()} (in {req.cwd})")
        seconds = run_build(req, log)
        tail = _tail(log.read_text(errors="replace"))
        if writable:
            doc = {"key": key, "argv": list(req.argv), "seconds": seconds, "output_tail": tail}
            marker.write_text(json.dumps(doc, indent=1) + "\n")
        else:
            shutil.rmtree(log.parent, ignore_errors=True)
    note(f"built in {seconds:.1f} s")
    kept = str(log) if writable else ""
    return Build(req, key, False, time.monotonic() - start, seconds, count, tail, kept)


def prepare_builds(
    suite: Suite,
    environments: Mapping[str, Env | RpcmeterError],
    managed: Callable[[str], bool],
    note: Callable[[str, str], None],
) -> dict[str, Build]:
    """The build of every variant whose server spec names one (variant -> its build, ``error``
    set when it failed), each distinct build made once. ``managed(variant)``: whether rpcmeter
    starts the variant's server (a remote one is not built); a variant whose environment failed
    is skipped (it fails for that reason)."""
    out: dict[str, Build] = {}
    made: dict[BuildRequest, Build] = {}
    for name in suite.variants:
        spec = suite.server_of(name)
        env = environments.get(name)
        if spec.build is None or not managed(name) or isinstance(env, RpcmeterError):
            continue
        req = NO_REQUEST  # until the command line is filled in
        try:
            req = request_of(suite, spec, env)
            if req not in made:
                made[req] = make(req, lambda message, n=name: note(n, message))  # type: ignore[misc]
            build = made[req]
        except BuildError as exc:
            note(name, f"build failed: {exc}")
            build = Build(req, error=str(exc), output_tail=exc.output_tail)
            if req is not NO_REQUEST:  # the variants that need the same build fail alike
                made[req] = build
        build.variants.append(name)
        out[name] = build
    return out
