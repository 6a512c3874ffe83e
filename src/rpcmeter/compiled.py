"""Which build of the client's per-request path runs: the modules mypyc compiled at install
(setup.py), or their Python.

setup.py leaves ``compiled_sources.json`` beside this module when it compiles: each compiled
module's source (``rpcmeter/net/connect.py``...) and the SHA-256 of the text it was compiled from.
An editable install keeps the extensions next to the sources, and Python imports an extension
before its source; so after an edit, the extension would still run, not the edit. Here, when any
compiled module's source no longer matches its record, or ``RPCMETER_PYTHON=1`` asks for it,
every compiled module is imported from its source instead (all of them: compiled modules call
each other's code directly, and one of them as Python among compiled ones would still run the
others' compiled copy of it). :func:`prefer_python` is called once, by the package's
``__init__``, before any of them is imported.

This module imports nothing of rpcmeter's.
"""

from __future__ import annotations

import hashlib
import importlib.abc
import importlib.machinery
import importlib.util
import json
import os
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from types import ModuleType

RECORD = Path(__file__).resolve().with_name("compiled_sources.json")
# written by setup.py where the install went on without compiling: why
NOT_COMPILED = RECORD.with_name("not_compiled.txt")
PYTHON_ENV = "RPCMETER_PYTHON"  # "1": run the compiled modules as Python


def _hashes(record: Path) -> dict[str, str]:
    try:
        hashes = json.loads(record.read_text())
    except (OSError, ValueError):
        return {}
    return {str(k): str(v) for k, v in hashes.items()} if isinstance(hashes, dict) else {}


def sources(record: Path = RECORD) -> dict[str, Path]:
    """The compiled modules whose extension is there, by source path under the install's root
    (``rpcmeter/net/connect.py``...), with their source; none when nothing was compiled (or the
    record is unreadable)."""
    root = record.parent.parent
    found = {}
    for rel in _hashes(record):
        source = root / rel
        built = (source.with_name(source.stem + s) for s in importlib.machinery.EXTENSION_SUFFIXES)
        if any(path.exists() for path in built):
            found[rel] = source
    return found


def stale(record: Path = RECORD) -> list[str]:
    """The compiled modules whose source was edited after the build (``rpcmeter/net/connect.py``...).
    Only modules whose extension is still there count; none when nothing was compiled."""
    hashes = _hashes(record)
    edited = []
    for rel, source in sources(record).items():
        try:
            now = hashlib.sha256(source.read_bytes()).hexdigest()
        except OSError:
            continue
        if now != hashes[rel]:
            edited.append(rel)
    return sorted(edited)


def not_compiled(note: Path = NOT_COMPILED) -> str | None:
    """Why the install went on without compiling (``RPCMETER_COMPILE=0``, the C compiler failed
    ...), where it did; None otherwise."""
    try:
        return note.read_text().strip() or None
    except OSError:
        return None


class SourceFirst(importlib.abc.MetaPathFinder):
    """Imports the named modules from their Python source, ahead of the path's own finders
    (which would take the extension beside it). ``edited``: the compiled modules whose source
    changed since the build (``rpcmeter/net/connect.py``...), none where ``RPCMETER_PYTHON=1``
    asked for the Python."""

    def __init__(self, modules: Mapping[str, Path], edited: Sequence[str] = ()) -> None:
        self.modules = dict(modules)
        self.edited = list(edited)

    def find_spec(
        self, fullname: str, path: Sequence[str] | None, target: ModuleType | None = None
    ) -> importlib.machinery.ModuleSpec | None:
        source = self.modules.get(fullname)
        if source is None:
            return None
        return importlib.util.spec_from_file_location(fullname, source)


def prefer_python(
    record: Path = RECORD, environ: Mapping[str, str] = os.environ
) -> SourceFirst | None:
    """Put a :class:`SourceFirst` for every compiled module first on ``sys.meta_path`` when any
    of them is stale or ``RPCMETER_PYTHON=1``; the finder, or None when the compiled build runs
    (or there is none)."""
    modules = sources(record)
    edited = stale(record) if modules else []
    if not modules or (environ.get(PYTHON_ENV) != "1" and not edited):
        return None
    finder = SourceFirst(
        {rel.removesuffix(".py").replace("/", "."): s for rel, s in modules.items()}, edited
    )
    sys.meta_path.insert(0, finder)
    return finder


def running_python() -> SourceFirst | None:
    """The finder :func:`prefer_python` put on ``sys.meta_path`` (the compiled modules run as
    Python, and it says why), or None."""
    return next((f for f in sys.meta_path if isinstance(f, SourceFirst)), None)


def runs_compiled() -> bool:
    """Whether rpcmeter's per-request path runs compiled (mypyc, at install: setup.py) rather than
    as Python: its HTTP/2 core is then a C extension. False where the build is Python, and where
    the compiled modules run as Python (an edited source, ``RPCMETER_PYTHON=1``)."""
    spec = importlib.util.find_spec("rpcmeter.protocols.h2.connection")
    return spec is not None and spec.origin is not None and not spec.origin.endswith(".py")
