"""Build hook (the project itself is described in pyproject.toml).

``pip install`` compiles the client's per-request path with mypyc (mypy's compiler of
type-annotated Python to C extensions): the HTTP/2 connection core and its transport, the
connection slot, the HTTP/2 and gRPC clients and the closed loop. The compiled modules behave as
the Python ones (the same tests pass against both) and cost about a third to a half fewer
instructions a request. It takes a C compiler, Python's headers and about a minute and a quarter
on two cores.

``RPCMETER_COMPILE`` chooses:

- unset (the default): compile, and where that fails (no C compiler, no headers, mypy not
  installable) install the Python modules alone, saying why in pip's output (``pip install -v``);
- ``1``: compile, and stop the install where that fails;
- ``0``: install the Python modules alone.

``compiled_sources.json`` records what each module was compiled from (its SHA-256). An editable
install puts the compiled modules next to their sources; after editing one of them, rpcmeter runs
every compiled module as Python until the next install (:mod:`rpcmeter.compiled`), and says so.
An editable install again over sources that have not changed keeps the compiled modules there.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import sys
from pathlib import Path
from typing import Any

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

COMPILED = [
    "src/rpcmeter/protocols/h2/connection.py",
    "src/rpcmeter/protocols/h2/core.py",
    "src/rpcmeter/protocols/h2/errors.py",
    "src/rpcmeter/protocols/h2/frames.py",
    "src/rpcmeter/protocols/h2/replay.py",
    "src/rpcmeter/protocols/h2/request.py",
    "src/rpcmeter/protocols/h2/state.py",
    "src/rpcmeter/protocols/h2/stream.py",
    "src/rpcmeter/protocols/h2/transport.py",
    "src/rpcmeter/net/connect.py",
    "src/rpcmeter/net/tls_transport.py",
    "src/rpcmeter/drivers/stream_connection.py",
    "src/rpcmeter/drivers/http_connection.py",
    "src/rpcmeter/drivers/http2.py",
    "src/rpcmeter/drivers/grpc_h2.py",
    "src/rpcmeter/drivers/h2client.py",
    "src/rpcmeter/runners/event_loop.py",
    "src/rpcmeter/runners/recorder.py",
]

# what each compiled module was compiled from, and why nothing was where the install went on
# without compiling (rpcmeter.compiled reads both)
SOURCES = Path("src/rpcmeter/compiled_sources.json")
NOT_COMPILED = Path("src/rpcmeter/not_compiled.txt")

# mypy's checks for the build: the compiled modules themselves, on their own annotations. The
# project's configuration (strict, the pydantic plugin) is for `mypy`, run with every dependency
# installed; the build's isolated environment has only the build's requirements, so a module
# it cannot find is untyped here, and the modules not compiled are followed without their errors.
MYPY_FLAGS = ["--config-file", "", "--ignore-missing-imports", "--follow-imports", "silent"]

CHOICE = os.environ.get("RPCMETER_COMPILE", "")


def short(error: BaseException) -> str:
    """An error in one short line: its kind and the start of its message (of a command that
    failed, the program and how it ended, not the whole command line)."""
    text = str(error).strip().splitlines()
    if not text:
        return type(error).__name__
    line = text[0]
    if line.startswith("Command '['") and "]'" in line:
        program = line.removeprefix("Command '['").split("'", 1)[0]
        line = program + line.rsplit("]'", 1)[1]
    return f"{type(error).__name__}: {line[:160]}"


def say(message: str) -> None:
    print(f"rpcmeter build: {message}", file=sys.stderr, flush=True)


# what setuptools runs for pip's questions before a build (the requirements, the metadata): each
# lists the extensions' sources, which finalizes build_ext, but none builds them
METADATA_ONLY = {"egg_info", "dist_info", "sdist"}
MADE: list[Any] = []  # mypyc's extensions, once made


def record_checks() -> Any:
    """``rpcmeter/compiled.py``, loaded by its path (the package itself cannot be imported while
    it is built; that module imports nothing of it): its ``sources`` and ``stale`` read the
    record of the compiled sources."""
    spec = importlib.util.spec_from_file_location("rpcmeter_compiled", "src/rpcmeter/compiled.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


class BuildExt(build_ext):
    """build_ext that asks mypyc for the extensions only for a build (not for the metadata), and
    installs the Python modules alone where compiling fails and ``RPCMETER_COMPILE`` is unset."""

    def finalize_options(self) -> None:
        if set(self.distribution.commands) <= METADATA_ONLY:
            self.skip()
        elif CHOICE == "0":
            self.give_up("RPCMETER_COMPILE=0")
        elif self.up_to_date():
            self.skip()
            say("the compiled modules beside the sources were built from them: kept")
        else:
            self.distribution.ext_modules = self.mypyc_extensions()
        super().finalize_options()

    def run(self) -> None:
        if not self.extensions:
            return
        try:
            super().run()
        except (Exception, SystemExit) as e:  # the C compiler's errors
            for built in self.get_outputs():  # (those it made before it failed)
                Path(built).unlink(missing_ok=True)
            self.give_up(f"the C compiler failed ({short(e)})")
            return
        # recorded only once every extension is built: a failed build leaves no record that
        # would call the extensions of an earlier one fresh
        hashes = {
            path.removeprefix("src/"): hashlib.sha256(Path(path).read_bytes()).hexdigest()
            for path in COMPILED
        }
        self.write(SOURCES, json.dumps(hashes, indent=1, sort_keys=True) + "\n")
        self.write(NOT_COMPILED, None)
        self.drop_old_groups()
        say(f"compiled {len(COMPILED)} modules with mypyc")

    def drop_old_groups(self) -> None:
        """Remove the shared libraries of earlier builds' mypyc groups (named by a hash of what
        they held) that a reused build folder, or an editable install's src/, still holds: a
        wheel would pack them, and nothing imports them."""
        made = {Path(p).name for p in self.get_outputs() if "__mypyc." in Path(p).name}
        if not made:  # (this build's own group is not known: keep everything)
            return
        # only this Python's (another's may serve another editable install of the same tree)
        tags = {name.split("__mypyc", 1)[1] for name in made}  # ".cpython-311-x86_64-...so"
        # (src/'s belong to another install unless this one is in place)
        folders = {Path(self.build_lib), Path("src")} if self.in_place() else {Path(self.build_lib)}
        for folder in folders:
            for old in folder.glob("*__mypyc.*"):
                if old.name not in made and old.name.split("__mypyc", 1)[1] in tags:
                    old.unlink()

    def write(self, path: Path, text: str | None) -> None:
        """``path`` (under src/) with ``text``, or removed: in the build (what a wheel holds),
        and beside the sources for an editable install."""
        # (before build_ext's own options are final, as where it gives up: the build's)
        build_lib = self.build_lib or self.get_finalized_command("build").build_lib
        built = Path(build_lib) / path.relative_to("src")
        for target in {path, built} if self.in_place() else {built}:
            if text is None:
                target.unlink(missing_ok=True)
            else:
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_text(text)

    def skip(self) -> None:
        """Build nothing (and list nothing as built)."""
        self.distribution.ext_modules = []
        self.extensions = []

    def in_place(self) -> bool:
        """Whether the extensions go beside the sources (an editable install, ``--inplace``)."""
        # (setuptools finalizes build_ext once before it sets editable_mode: the command says)
        editable = self.editable_mode or "editable_wheel" in self.distribution.commands
        return bool(editable or self.inplace)

    def up_to_date(self) -> bool:
        """Whether an editable install's extensions beside the sources were built from these very
        sources (installed again for another extra, say): then they stay, uncompiled again."""
        if not self.in_place() or not any(Path("src").glob("*__mypyc.*")):
            return False
        check = record_checks()
        built = check.sources(SOURCES.resolve())
        wanted = {path.removeprefix("src/") for path in COMPILED}
        return set(built) == wanted and not check.stale(SOURCES.resolve())

    def mypyc_extensions(self) -> list[Any]:
        """mypyc's extensions (made once a build: setuptools may finalize build_ext again)."""
        if MADE:
            return MADE
        try:
            from mypyc.build import mypycify

            MADE.extend(mypycify([*MYPY_FLAGS, *COMPILED], opt_level="3"))
            return MADE
        except (Exception, SystemExit) as e:  # mypyc exits on a type error
            self.give_up(f"mypyc could not compile the hot path ({short(e)})")
            return []

    def give_up(self, why: str) -> None:
        """Install the Python modules alone: an editable install's extensions beside the sources
        (this build's or an earlier one's) and their record go too, or they would run."""
        if CHOICE == "1":
            raise SystemExit(
                f"rpcmeter build: {why}; RPCMETER_COMPILE=1 asks for the compiled build"
            )
        self.skip()
        self.write(SOURCES, None)
        self.write(NOT_COMPILED, why + "\n")
        if self.in_place():
            for path in map(Path, COMPILED):
                for built in path.parent.glob(f"{path.stem}.*"):
                    if built.suffix != ".py":
                        built.unlink()
            for group in Path("src").glob("*__mypyc.*"):
                group.unlink()
        if CHOICE != "0":
            say(f"{why}: installing the Python modules alone (RPCMETER_COMPILE=0 skips compiling)")


# one placeholder extension marks the distribution as compiled; BuildExt replaces it with mypyc's
placeholder = [Extension("rpcmeter.protocols.h2.connection", [])]
setup(ext_modules=placeholder, cmdclass={"build_ext": BuildExt})
