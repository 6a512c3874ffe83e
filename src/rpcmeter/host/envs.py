"""Environments of variants: an existing interpreter, an isolated virtualenv with requirements,
or a project at a git revision installed into an isolated virtualenv.

A variant sets any of::

    python = "/path/to/python"          # an interpreter (or a virtualenv directory) to use as is,
                                        # or the base interpreter of the virtualenv below
    install = ["pkg==1.2.3", "./dir"]   # requirements installed into an isolated virtualenv
    git = { repo = "PATH-OR-URL", rev = "REV", subdir = "..." }
                                        # that revision checked out and installed into it
    installer = "pip"                   # venv and pip even where uv is found (default "auto")

Relative paths (``./dir``, ``../x``, a relative ``repo``) are taken from the suite file's
directory. Virtualenvs are made with ``uv`` when it is available (``uv venv``, ``uv pip
install``) and with ``python -m venv`` and ``pip`` otherwise, or when the variant says
``installer = "pip"`` (rpcmeter's own pip installing into the new environment when it is recent
enough, else the environment's own). They are cached, keyed by their content: the base
interpreter and its version, the requirements (a local directory by a hash of its files), the git
commit a revision resolves to (a branch that moved gets a new environment; an unchanged revision
reuses the old one) and the installer when it is not the default. Cache layout, under
``$RPCMETER_CACHE``, else ``$XDG_CACHE_HOME/rpcmeter``, else ``~/.cache/rpcmeter``::

    git/<hash of the repository>/   a bare mirror of each repository, fetched when needed
    envs/<key>/                     one virtualenv per key; ``rpcmeter-env.json`` (written last)
                                    marks it complete
    envs/<key>.log                  the output of the last creation (kept when it fails)

A variant whose environment cannot be made (no such interpreter, unknown revision, failed
install) fails with a one-line :class:`~rpcmeter.errors.EnvError`; the other variants still run.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rpcmeter.errors import EnvError
from rpcmeter.suite.model import GitSource, Suite, Variant

ENV_FORMAT = 1
STEP_TIMEOUT_S = 7200.0  # one preparation step: a project built from source (Rust, C++) on a
# small machine can take the best part of an hour
MARKER = "rpcmeter-env.json"
Note = Callable[[str], None]

_PROBE = (
    "import sys, json, importlib.metadata as m\n"
    "print(json.dumps({'executable': sys.executable, 'version': sys.version.split()[0],\n"
    " 'base': getattr(sys, '_base_executable', sys.executable), 'prefix': sys.prefix,\n"
    " 'packages': {d.metadata['Name']: d.version for d in m.distributions()\n"
    "              if d.metadata['Name']}}))\n"
)
_SKIP_DIRS = {".git", "__pycache__", ".venv", "build", "dist", ".mypy_cache", ".pytest_cache"}


def cache_root() -> Path:
    """Where rpcmeter keeps git mirrors and virtualenvs."""
    if os.environ.get("RPCMETER_CACHE"):
        return Path(os.environ["RPCMETER_CACHE"]).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "rpcmeter"


@dataclass(frozen=True)
class EnvRequest:
    """What a variant asks for (see the module documentation)."""

    python: str | None = None
    install: tuple[str, ...] = ()
    git: GitSource | None = None
    base_dir: Path = Path()
    installer: str = "auto"  # "pip": venv and pip even where uv is found

    @classmethod
    def of_variant(cls, variant: Variant, base_dir: Path) -> EnvRequest | None:
        if variant.python is None and not variant.install and variant.git is None:
            return None
        return cls(variant.python, tuple(variant.install), variant.git, base_dir, variant.installer)

    @property
    def isolated(self) -> bool:
        return bool(self.install) or self.git is not None

    def describe(self) -> str:
        parts = []
        if self.git is not None:
            parts.append(f"git {self.git.repo}@{self.git.rev}")
        if self.install:
            parts.append("install " + " ".join(self.install))
        if self.python:
            parts.append(f"python {self.python}")
        if self.installer != "auto":
            parts.append(f"installer {self.installer}")
        return ", ".join(parts)


@dataclass
class Env:
    """A prepared environment: the interpreter to run, and the virtualenv when rpcmeter made one."""

    python: str
    root: Path | None = None
    key: str | None = None
    created: bool = False
    git_sha: str | None = None
    python_version: str = ""
    packages: dict[str, str] = field(default_factory=dict)
    seconds: float = 0.0
    source: str = ""

    @property
    def bin_dir(self) -> str:
        return os.path.dirname(self.python)

    def activation(self, base: Mapping[str, str] | None = None) -> dict[str, str]:
        """The variables that make ``python`` (and the env's scripts) the ones found first, like
        an activated virtualenv: ``PATH`` with the interpreter's directory first, and
        ``VIRTUAL_ENV``."""
        path = (os.environ if base is None else base).get("PATH", os.defpath)
        out = {"PATH": self.bin_dir + os.pathsep + path}
        if self.root is not None:
            out["VIRTUAL_ENV"] = str(self.root)
        return out

    def environ(self, base: Mapping[str, str] | None = None) -> dict[str, str]:
        """A whole environment (``base``, default this process's) with :meth:`activation`."""
        env = dict(os.environ if base is None else base)
        env.pop("PYTHONHOME", None)
        return {**env, **self.activation(env)}

    def describe(self) -> dict[str, Any]:
        """What the result records of this environment, as JSON values
        (``environment.variant_envs``; :meth:`rpcmeter.result.record.RunRecord.variant_envs`)."""
        return {
            "source": self.source,
            "python": self.python,
            "python_version": self.python_version,
            "virtualenv": str(self.root) if self.root else None,
            "key": self.key,
            "git_sha": self.git_sha,
            "created": self.created,
            "prepare_s": round(self.seconds, 3),
            "packages": dict(self.packages),
        }


# ---- helpers ------------------------------------------------------------------------------------


def find_uv() -> str | None:
    """The ``uv`` executable: on PATH, next to this interpreter, or from the ``uv`` package."""
    found = find_tool("uv")
    if found:
        return found
    try:
        import uv  # type: ignore[import-not-found,unused-ignore]

        return str(uv.find_uv_bin())
    except (ImportError, FileNotFoundError, AttributeError):
        return None


def _pip_takes_python() -> bool:
    """Whether this interpreter has a pip that installs into another one (``--python``, 22.3+)."""
    import importlib.metadata

    try:
        major, minor = (int(p) for p in importlib.metadata.version("pip").split(".")[:2])
    except (importlib.metadata.PackageNotFoundError, ValueError):
        return False
    return (major, minor) >= (22, 3)


def last_error_line(text: str) -> str:
    """The installer's last error line, with the first ``cause:`` under it (uv says there why:
    ``error: No solution found ...`` then ``cause: Because pkg==1.0 has no wheels with a matching
    Python ABI tag ...``)."""
    lines = [ln.strip() for ln in text.strip().splitlines() if ln.strip()]
    for i in range(len(lines) - 1, -1, -1):
        low = lines[i].lower()
        if low.startswith(("error", "fatal", "×")) or "error:" in low:
            cause = next((ln for ln in lines[i + 1 :] if ln.startswith("cause:")), None)
            line = (
                lines[i] if cause is None else f"{lines[i]}: {cause.removeprefix('cause:').strip()}"
            )
            return line[:240]
    return lines[-1][:240] if lines else "no output"


def _run(cmd: Sequence[str], what: str, log: Path | None = None, cwd: Path | None = None) -> str:
    """Run a preparation step; its output goes to ``log``; EnvError naming ``what`` on failure.

    The step runs in a session of its own, and whatever ends it early (its time limit,
    :data:`STEP_TIMEOUT_S`; Ctrl-C; an error) kills all it started: a build's compilers too, not
    only the installer that started them."""
    try:
        proc = subprocess.Popen(
            list(cmd),
            cwd=cwd,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env={**os.environ, "GIT_TERMINAL_PROMPT": "0"},
            start_new_session=True,
        )
    except FileNotFoundError:
        raise EnvError(f"{what}: {cmd[0]} not found") from None
    try:
        out, err = proc.communicate(timeout=STEP_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        raise EnvError(f"{what}: no result after {STEP_TIMEOUT_S:g} s") from None
    finally:
        if proc.returncode is None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.communicate()
    if log is not None:
        with log.open("a", encoding="utf-8") as f:
            f.write(f"$ {' '.join(cmd)}\n{out}{err}\n")
    if proc.returncode != 0:
        where = f" (log: {log})" if log is not None else ""
        raise EnvError(f"{what}: {last_error_line(err or out)}{where}")
    return out


@contextlib.contextmanager
def locked(path: Path) -> Iterator[None]:
    """An exclusive lock (another rpcmeter preparing the same thing waits)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def _short(path: Path) -> str:
    home = os.path.expanduser("~")
    text = str(path)
    return "~" + text[len(home) :] if text.startswith(home + os.sep) else text


def probe_python(python: str) -> dict[str, Any]:
    """Executable, version, base interpreter and installed distributions of an interpreter."""
    out = _run([python, "-c", _PROBE], f"python {python}")
    data: dict[str, Any] = json.loads(out)
    return data


def resolve_python(spec: str, base_dir: Path) -> str:
    """An interpreter path from a name, a path (relative to the suite) or a venv dir.

    A name is looked up as users' tools look it up: on PATH (a pyenv shim stands for the
    interpreter it runs, when pyenv has selected a version that has it), then in pyenv's
    versions (``$(pyenv root)/versions/*/bin/NAME``, the newest first), then ``uv python
    find``. Where none is found, the EnvError says what was tried and how to give a path."""
    path = Path(spec).expanduser()
    if os.sep in spec or spec.startswith("."):
        path = path if path.is_absolute() else base_dir / path
        if path.is_dir():
            path = path / "bin" / "python"
        if path.is_file() and os.access(path, os.X_OK):
            return str(path.absolute())
        raise EnvError(f"python {spec!r}: no such interpreter ({path})")
    tried: list[str] = []
    found = shutil.which(spec)
    if found is not None:
        root = pyenv_root_of(found)
        if root is None:
            return found
        real = _pyenv_shim_target(found)  # the version pyenv selected, when it has the name
        if real is not None:
            return real
        tried.append(f"{found} (a pyenv shim: fails outside pyenv's selected versions)")
    else:
        tried.append("PATH: not there")
        root = pyenv_root()
    if root is not None:
        pattern = root / "versions" / "*" / "bin" / spec
        versions = sorted(root.glob(f"versions/*/bin/{spec}"), key=_version_key, reverse=True)
        for candidate in versions:
            if os.access(candidate, os.X_OK):
                return str(candidate)
        tried.append(_short(pattern))
    uv = find_uv()
    if uv is not None:
        want = spec.removeprefix("python") if spec[6:7].isdigit() else spec
        request = ["python", "find", "--no-project", want] if want else []
        if request:
            try:
                out = subprocess.run(
                    [uv, *request], capture_output=True, text=True, timeout=30, check=False
                )
            except (OSError, subprocess.TimeoutExpired):
                out = None
            where = out.stdout.strip() if out is not None and out.returncode == 0 else ""
            if where and os.access(where, os.X_OK):
                return where
            tried.append(f"uv python find {want}")
    raise EnvError(
        f"python {spec!r}: not found (tried {'; '.join(tried)}): give its path, "
        f'python = "/path/to/{spec}"'
    )


def pyenv_root() -> Path | None:
    """pyenv's root (``$PYENV_ROOT``, else ``~/.pyenv``), when there is one."""
    root = Path(os.environ.get("PYENV_ROOT") or "~/.pyenv").expanduser()
    return root if (root / "versions").is_dir() else None


def pyenv_root_of(executable: str) -> Path | None:
    """pyenv's root when ``executable`` is one of its shims (None otherwise)."""
    shims = Path(executable).parent
    root, named = shims.parent, os.environ.get("PYENV_ROOT")
    marks = (root / "versions").is_dir() or (root / "bin" / "pyenv").exists()
    if shims.name != "shims" or not (marks or (named and Path(named).expanduser() == root)):
        return None
    return root


def _pyenv_shim_target(shim: str) -> str | None:
    """The interpreter a pyenv shim runs now (None when pyenv has no selected version with it)."""
    try:
        out = subprocess.run(
            [shim, "-c", "import sys; print(sys.executable)"],
            capture_output=True,
            text=True,
            timeout=30,
            stdin=subprocess.DEVNULL,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    path = out.stdout.strip()
    return path if out.returncode == 0 and path and os.path.isabs(path) else None


def _version_key(path: Path) -> tuple[tuple[int, str], ...]:
    """Sorts pyenv's version directories (``3.10.13`` above ``3.10.9``)."""
    name = path.parent.parent.name
    return tuple(
        (int(p), "") if p.isdigit() else (-1, p) for p in name.replace("-", ".").split(".")
    )


def _is_local(entry: str) -> bool:
    return entry.startswith((".", "/", "~"))


def content_hash(path: Path) -> str:
    """A hash of a file, or of a directory's files (names and bytes; build output skipped)."""
    h = hashlib.sha256()
    if path.is_file():
        h.update(path.read_bytes())
        return h.hexdigest()
    for root, dirs, files in os.walk(path):
        dirs[:] = sorted(d for d in dirs if d not in _SKIP_DIRS and not d.endswith(".egg-info"))
        for name in sorted(files):
            if name.endswith((".pyc", ".pyo")):
                continue
            full = Path(root) / name
            h.update(str(full.relative_to(path)).encode() + b"\0")
            with contextlib.suppress(OSError):
                h.update(full.read_bytes())
    return h.hexdigest()


def _requirements(req: EnvRequest) -> tuple[list[str], list[str]]:
    """Installer arguments and their key parts (local paths made absolute and hashed)."""
    args: list[str] = []
    keys: list[str] = []
    for entry in req.install:
        if _is_local(entry):
            path = Path(entry).expanduser()
            path = path if path.is_absolute() else (req.base_dir / path)
            if not path.exists():
                raise EnvError(f"install {entry!r}: no such file or directory ({path})")
            args.append(str(path.resolve()))
            keys.append(f"path:{path.resolve()}:{content_hash(path)}")
        else:
            args.append(entry)
            keys.append(entry)
    return args, keys


# ---- git --------------------------------------------------------------------------------------


def _repo_url(git: GitSource, base_dir: Path) -> str:
    if "://" in git.repo or git.repo.startswith("git@"):
        return git.repo
    path = Path(git.repo).expanduser()
    path = path if path.is_absolute() else base_dir / path
    if not path.exists():
        raise EnvError(f"git repo {git.repo!r}: no such directory ({path})")
    return str(path.resolve())


def _rev_parse(mirror: Path, rev: str) -> str | None:
    proc = subprocess.run(
        ["git", "--git-dir", str(mirror), "rev-parse", "--verify", "--quiet", f"{rev}^{{commit}}"],
        capture_output=True,
        text=True,
        stdin=subprocess.DEVNULL,
    )
    return proc.stdout.strip() if proc.returncode == 0 else None


def resolve_git(git: GitSource, base_dir: Path, cache: Path, note: Note) -> tuple[str, Path]:
    """The commit ``git.rev`` names now, and the mirror holding it (fetched when needed)."""
    if shutil.which("git") is None:
        raise EnvError("git: the git command is not installed")
    url = _repo_url(git, base_dir)
    mirror = cache / "git" / hashlib.sha256(url.encode()).hexdigest()[:16]
    with locked(mirror.with_suffix(".lock")):
        if not (mirror / "HEAD").exists():
            note(f"cloning {url}")
            shutil.rmtree(mirror, ignore_errors=True)
            _run(["git", "clone", "--mirror", "--quiet", url, str(mirror)], f"git clone {url}")
        else:
            is_full_sha = len(git.rev) == 40 and all(c in "0123456789abcdef" for c in git.rev)
            if not (is_full_sha and _rev_parse(mirror, git.rev)):
                _run(
                    ["git", "--git-dir", str(mirror), "fetch", "--quiet", "--prune", "origin"],
                    f"git fetch {url}",
                )
        sha = _rev_parse(mirror, git.rev)
    if sha is None:
        raise EnvError(f"git: revision {git.rev!r} not found in {url}")
    return sha, mirror


def _checkout(mirror: Path, sha: str, dest: Path, log: Path) -> None:
    _run(["git", "clone", "--quiet", "--no-checkout", str(mirror), str(dest)], "git clone", log)
    _run(["git", "-C", str(dest), "checkout", "--quiet", "--detach", sha], "git checkout", log)
    if (dest / ".gitmodules").exists():
        _run(
            ["git", "-C", str(dest), "submodule", "update", "--init", "--recursive", "--quiet"],
            "git submodule update",
            log,
        )


# ---- virtualenvs --------------------------------------------------------------------------------


def _create(
    root: Path,
    base_python: str,
    install: list[str],
    git: tuple[GitSource, str, Path] | None,
    log: Path,
    note: Note,
    installer: str = "auto",
) -> None:
    uv = find_uv() if installer == "auto" else None
    own_pip = not uv and _pip_takes_python()
    tool = "uv" if uv else "venv + pip"
    note(f"creating virtualenv ({tool}) in {_short(root)}")
    python = str(root / "bin" / "python")
    pip_args = ["install", "--disable-pip-version-check"]
    if uv:
        _run([uv, "venv", "--quiet", "--python", base_python, str(root)], "virtualenv", log)
        pip = [uv, "pip", "install", "--python", python]
    elif own_pip:  # this interpreter's pip installs into the new env: no pip bootstrap there
        _run([base_python, "-m", "venv", "--without-pip", str(root)], "virtualenv", log)
        pip = [sys.executable, "-m", "pip", "--python", python, *pip_args]
    else:
        _run([base_python, "-m", "venv", str(root)], "virtualenv", log)
        pip = [python, "-m", "pip", *pip_args]

    def install_cmd(args: list[str]) -> list[str]:
        return [*pip, *args]

    with tempfile.TemporaryDirectory(prefix="rpcmeter-src-", ignore_cleanup_errors=True) as tmp:
        targets, shown = list(install), list(install)
        if git is not None:
            source, sha, mirror = git
            checkout = Path(tmp) / "src"
            note(f"checking out {source.repo}@{sha[:12]}")
            _checkout(mirror, sha, checkout, log)
            project = checkout / source.subdir if source.subdir else checkout
            if not project.is_dir():
                raise EnvError(f"git: no directory {source.subdir!r} at {sha[:12]}")
            targets.append(str(project))
            shown.append(f"{source.repo}@{sha[:12]}")
        if targets:
            note(f"installing {', '.join(shown)}")
            _run(install_cmd(targets), "install failed", log)


def prepare(req: EnvRequest, note: Note, cache: Path | None = None) -> Env:
    """Make (or reuse) the environment ``req`` asks for."""
    start = time.monotonic()
    cache = cache_root() if cache is None else cache
    python = resolve_python(req.python, req.base_dir) if req.python else sys.executable
    if not req.isolated:
        info = probe_python(python)
        return Env(
            python=python,
            python_version=info["version"],
            packages=info["packages"],
            seconds=time.monotonic() - start,
            source=req.describe(),
        )
    info = probe_python(python)
    install_args, install_keys = _requirements(req)
    git: tuple[GitSource, str, Path] | None = None
    git_key: dict[str, Any] | None = None
    if req.git is not None:
        sha, mirror = resolve_git(req.git, req.base_dir, cache, note)
        git = (req.git, sha, mirror)
        git_key = {"repo": _repo_url(req.git, req.base_dir), "sha": sha, "subdir": req.git.subdir}
    key_doc = {
        "format": ENV_FORMAT,
        "python": os.path.realpath(info["base"]),
        "python_version": info["version"],
        "install": install_keys,
        "git": git_key,
        **({"installer": req.installer} if req.installer != "auto" else {}),
    }
    key = hashlib.sha256(json.dumps(key_doc, sort_keys=True).encode()).hexdigest()[:20]
    envs = cache / "envs"
    root = envs / key
    log = envs / f"{key}.log"
    created = False
    with locked(envs / f"{key}.lock"):
        if not (root / MARKER).exists():
            shutil.rmtree(root, ignore_errors=True)
            log.write_text("")
            try:
                _create(root, python, install_args, git, log, note, req.installer)
            except BaseException:
                shutil.rmtree(root, ignore_errors=True)
                raise
            env_info = probe_python(str(root / "bin" / "python"))
            marker = {"key": key_doc, "created_at": time.time(), "packages": env_info["packages"]}
            (root / MARKER).write_text(json.dumps(marker, indent=1) + "\n")
            created = True
        else:
            note(f"reusing virtualenv {_short(root)}")
    marker_doc = json.loads((root / MARKER).read_text())
    env = Env(
        python=str(root / "bin" / "python"),
        root=root,
        key=key,
        created=created,
        git_sha=git[1] if git else None,
        python_version=info["version"],
        packages=marker_doc.get("packages", {}),
        seconds=time.monotonic() - start,
        source=req.describe(),
    )
    if created:
        note(f"environment ready in {env.seconds:.1f} s")
    return env


def prepare_variants(suite: Suite, note: Callable[[str, str], None]) -> dict[str, Env | EnvError]:
    """The environment of every variant that asks for one (variant name -> Env or the error)."""
    base_dir = Path(suite.path).resolve().parent if suite.path else Path.cwd()
    out: dict[str, Env | EnvError] = {}
    for name, variant in suite.variants.items():
        req = EnvRequest.of_variant(variant, base_dir)
        if req is None:
            continue
        note(name, f"preparing environment: {req.describe()}")
        try:
            out[name] = prepare(req, lambda msg, n=name: note(n, msg))  # type: ignore[misc]
        except EnvError as exc:
            note(name, f"environment failed: {exc}")
            out[name] = exc
    return out


# ---- servers in a variant's environment ---------------------------------------------------------

_BOOT = (
    "import sys, json, runpy; mod = sys.argv[1]; sys.path.extend(json.loads(sys.argv[2])); "
    "sys.argv = [mod] + sys.argv[3:]; runpy.run_module(mod, run_name='__main__', alter_sys=True)"
)


def host_paths() -> list[str]:
    """Where this rpcmeter and its dependencies are imported from."""
    own = str(Path(__file__).resolve().parents[2])  # the directory holding the package
    site = [p for p in sys.path if p.endswith(("site-packages", "dist-packages"))]
    return list(dict.fromkeys([own, *site]))


def in_env(command: Sequence[str], env: Env) -> list[str]:
    """A built-in server command (``sys.executable -m MODULE ...``) run by ``env``'s interpreter.

    The environment's own packages come first; rpcmeter and its dependencies are appended to the
    import path after them, so a server module runs against the variant's versions of the library
    under test (``rpyc``, ``grpcio``, ...). Compiled dependencies need the same Python minor
    version as rpcmeter's. Other commands are returned unchanged."""
    cmd = list(command)
    if len(cmd) >= 3 and cmd[0] == sys.executable and cmd[1] == "-m":
        return [env.python, "-c", _BOOT, cmd[2], json.dumps(host_paths()), *cmd[3:]]
    return cmd


def find_tool(name: str) -> str | None:
    """The program ``name`` on ``PATH``, else beside this interpreter: a tool installed with
    rpcmeter (py-spy) is in the environment's ``bin`` directory, not on ``PATH`` when rpcmeter
    runs as ``venv/bin/rpcmeter`` without activating the environment, or from pipx."""
    return shutil.which(name) or shutil.which(name, path=os.path.dirname(sys.executable))
