"""Which build of the hot path runs: the compiled modules, or their Python after an edit or when
``RPCMETER_PYTHON=1`` asks for it."""

from __future__ import annotations

import hashlib
import importlib
import importlib.machinery
import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from rpcmeter import __version__, cli, compiled

ROOT = Path(__file__).resolve().parent.parent
# the tests of the compiled modules, run again as Python when the compiled build is installed
HOT_PATH_TESTS = [
    "tests/h2",
    "tests/drivers/test_http2.py",
    "tests/drivers/test_grpc_h2.py",
    "tests/drivers/test_tls.py",
    "tests/drivers/test_http.py",
    "tests/drivers/test_stream.py",
    "tests/drivers/test_raw.py",
    "tests/faults/test_buffers.py",
    "tests/faults/test_server_ends_connections.py",
    "tests/runners/test_event_loop.py",
    "tests/runners/test_open_loop_schedule.py",
]
needs_build = pytest.mark.skipif(
    not compiled.sources(),
    reason="the Python build is installed (RPCMETER_COMPILE=0, or no C compiler)",
)


def _built_tree(tmp_path: Path, *names: str) -> dict[str, Path]:
    """A src/ tree as setup.py leaves it: modules, an "extension" beside each (not one that
    loads: importing it fails), the record of their sources."""
    pkg = tmp_path / "src" / "pkg"
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    hashes, made = {}, {}
    for name in names:
        source = pkg / f"{name}.py"
        source.write_text(f"WHO = {name!r}\n")
        (pkg / (name + importlib.machinery.EXTENSION_SUFFIXES[0])).write_bytes(b"\x7fELF")
        hashes[f"pkg/{name}.py"] = hashlib.sha256(source.read_bytes()).hexdigest()
        made[name] = source
    (pkg / "compiled_sources.json").write_text(json.dumps(hashes))
    return made


def _record(tmp_path: Path) -> Path:
    return tmp_path / "src" / "pkg" / "compiled_sources.json"


def test_stale_names_a_module_edited_after_its_build(tmp_path: Path) -> None:
    source = _built_tree(tmp_path, "hot")["hot"]
    record = _record(tmp_path)
    assert compiled.sources(record) == {"pkg/hot.py": source}
    assert compiled.stale(record) == []
    source.write_text("WHO = 'edited'\n")
    assert compiled.stale(record) == ["pkg/hot.py"]
    # without its built extension the edited source is what runs: nothing is stale
    for built in source.parent.iterdir():
        if built.name.startswith("hot.") and built.suffix != ".py":
            built.unlink()
    assert compiled.sources(record) == {}
    assert compiled.stale(record) == []
    assert compiled.stale(tmp_path / "missing.json") == []
    record.write_text("not json")
    assert compiled.stale(record) == []


@pytest.fixture
def pkg_path(tmp_path: Path) -> Iterator[Path]:
    sys.path.insert(0, str(tmp_path / "src"))
    yield tmp_path
    sys.path.remove(str(tmp_path / "src"))
    for name in [n for n in sys.modules if n == "pkg" or n.startswith("pkg.")]:
        del sys.modules[name]


def test_one_edited_module_runs_every_compiled_module_as_python(pkg_path: Path) -> None:
    made = _built_tree(pkg_path, "hot", "other")
    record = _record(pkg_path)
    assert compiled.prefer_python(record, environ={}) is None  # fresh: the extensions run
    made["hot"].write_text("WHO = 'edited'\n")
    finder = compiled.prefer_python(record, environ={})
    assert finder is not None and sys.meta_path[0] is finder
    assert finder.edited == ["pkg/hot.py"] and compiled.running_python() is finder
    try:
        # the path's finder would take the extensions, which fail to load
        hot, other = (importlib.import_module(f"pkg.{n}") for n in ("hot", "other"))
        assert (hot.WHO, other.WHO) == ("edited", "other")
        assert hot.__file__ == str(made["hot"]) and other.__file__ == str(made["other"])
    finally:
        sys.meta_path.remove(finder)


def test_rpcmeter_python_runs_a_fresh_build_as_python(pkg_path: Path) -> None:
    made = _built_tree(pkg_path, "hot")
    finder = compiled.prefer_python(_record(pkg_path), environ={compiled.PYTHON_ENV: "1"})
    assert finder is not None and finder.edited == []  # asked for, nothing edited
    try:
        assert importlib.import_module("pkg.hot").__file__ == str(made["hot"])
    finally:
        sys.meta_path.remove(finder)
    # nothing compiled: nothing to do, asked or not
    assert compiled.prefer_python(pkg_path / "none.json", {compiled.PYTHON_ENV: "1"}) is None


def test_cli_warns_of_a_stale_compiled_module(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    _built_tree(tmp_path, "hot")["hot"].write_text("WHO = 'edited'\n")
    finder = compiled.SourceFirst({}, compiled.stale(_record(tmp_path)))
    monkeypatch.setattr(compiled, "running_python", lambda: finder)
    # the warning comes first, whatever the command then does (here: fail, no history yet)
    assert cli.main(["history", "--store", str(tmp_path / "runs.db")]) == 2
    err = capsys.readouterr().err.splitlines()
    assert "warning: 1 compiled module(s) older than their edited source (pkg/hot.py)" in err[0]
    assert "every compiled module runs as Python" in err[0]
    assert "no history database" in err[1]


def test_not_compiled_is_the_installs_reason(tmp_path: Path) -> None:
    note = tmp_path / "not_compiled.txt"
    assert compiled.not_compiled(note) is None
    note.write_text("the C compiler failed (CompileError: no cc)\n")
    assert compiled.not_compiled(note) == "the C compiler failed (CompileError: no cc)"
    note.write_text("\n")
    assert compiled.not_compiled(note) is None


@pytest.mark.parametrize(
    ("runs_compiled", "why", "edited", "says"),
    [
        (True, None, None, "(compiled)"),
        (
            False,
            "RPCMETER_COMPILE=0",
            None,
            "(Python: the install did not compile: RPCMETER_COMPILE=0)",
        ),
        (False, None, ["rpcmeter/net/connect.py"], "(Python: compiled modules' sources edited"),
        (False, None, [], "(Python: RPCMETER_PYTHON=1)"),
        (False, None, None, f"rpcmeter {__version__}\n"),
    ],
)
def test_version_says_which_build_runs(
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    runs_compiled: bool,
    why: str | None,
    edited: list[str] | None,
    says: str,
) -> None:
    """``edited``: None where the compiled modules were not put aside, else the finder's list
    (empty: RPCMETER_PYTHON=1 asked for the Python)."""
    finder = None if edited is None else compiled.SourceFirst({}, edited)
    monkeypatch.setattr(compiled, "runs_compiled", lambda: runs_compiled)
    monkeypatch.setattr(compiled, "not_compiled", lambda: why)
    monkeypatch.setattr(compiled, "running_python", lambda: finder)
    with pytest.raises(SystemExit):
        cli.build_parser().parse_args(["--version"])
    assert says in capsys.readouterr().out


def _which(env: dict[str, str], path: Path | None = None) -> list[str]:
    """Whether the HTTP/2 core runs compiled, and where rpcmeter.net.connect came from, in a fresh
    interpreter."""
    code = (
        "from rpcmeter.protocols.h2 import connection; import rpcmeter.net.connect as c; "
        "print(connection.COMPILED, c.__file__)"
    )
    full = {**os.environ, **env}
    if path is not None:
        full["PYTHONPATH"] = str(path)
    out = subprocess.run(
        [sys.executable, "-c", code], env=full, capture_output=True, text=True, check=True
    )
    return out.stdout.split()


@needs_build
def test_the_installed_build_runs_compiled_unless_asked_for_python() -> None:
    assert _which({compiled.PYTHON_ENV: ""})[0] == "True"
    compiled_flag, connect = _which({compiled.PYTHON_ENV: "1"})
    assert compiled_flag == "False" and connect.endswith("connect.py")
    for value, says in (("", "(compiled)"), ("1", "(Python: RPCMETER_PYTHON=1)")):
        version = subprocess.run(
            [sys.executable, "-m", "rpcmeter", "--version"],
            env={**os.environ, compiled.PYTHON_ENV: value},
            capture_output=True,
            text=True,
            check=True,
        )
        assert version.stdout.strip().endswith(says)


@needs_build
def test_an_edited_copy_of_the_installed_build_runs_as_python(tmp_path: Path) -> None:
    """The real extensions, copied with their sources; one source edited."""
    root = compiled.RECORD.parent.parent
    shutil.copytree(
        root / "rpcmeter", tmp_path / "rpcmeter", ignore=shutil.ignore_patterns("__pycache__")
    )
    for group in root.glob("*__mypyc.*"):  # the extensions' shared library
        shutil.copy2(group, tmp_path)
    env = {compiled.PYTHON_ENV: ""}
    flag, connect = _which(env, tmp_path)
    assert flag == "True" and Path(connect).parent == tmp_path / "rpcmeter" / "net"
    assert not connect.endswith(".py")
    with (tmp_path / "rpcmeter" / "net" / "connect.py").open("a") as f:
        f.write("\n# edited\n")
    assert _which(env, tmp_path) == ["False", str(tmp_path / "rpcmeter" / "net" / "connect.py")]
    warned = subprocess.run(
        [sys.executable, "-m", "rpcmeter", "history", "--store", str(tmp_path / "runs.db")],
        env={**os.environ, **env, "PYTHONPATH": str(tmp_path)},
        capture_output=True,
        text=True,
    )
    assert warned.returncode == 2
    assert "(rpcmeter/net/connect.py): every compiled module runs as Python" in warned.stderr


@needs_build
def test_the_python_build_passes_the_hot_path_tests() -> None:
    """The default build is compiled, so the suite tests the compiled modules; their Python (what
    an install without a C compiler runs) passes the tests of the hot path too."""
    run = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *HOT_PATH_TESTS],
        cwd=ROOT,
        env={**os.environ, compiled.PYTHON_ENV: "1"},
        capture_output=True,
        text=True,
        timeout=280,
    )
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-2000:]
    assert " passed" in run.stdout.splitlines()[-1]
