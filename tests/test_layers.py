"""The package's layers (docs/architecture.md): its imports form no circle, function-level and
type-checking imports included, and the contracts hold: the result model imports nothing above
the histogram, drivers and servers meet only in the wire formats, runners and reporters stay on
their side of the record and the view."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parent.parent / "src"
PACKAGE = SRC / "rpcmeter"


def module_of(path: Path) -> str:
    parts = list(path.relative_to(SRC).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def exists(name: str) -> bool:
    path = SRC.joinpath(*name.split("."))
    return path.with_suffix(".py").is_file() or (path / "__init__.py").is_file()


def imported(path: Path) -> set[str]:
    """The rpcmeter modules ``path`` imports anywhere in it (a name taken from a package is the
    module of that name when there is one)."""
    out: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            names = [
                f"{node.module}.{a.name}" if exists(f"{node.module}.{a.name}") else node.module
                for a in node.names
            ]
        else:
            continue
        for name in names:
            while name.startswith("rpcmeter") and not exists(name):
                name = name.rpartition(".")[0]
            if name.startswith("rpcmeter"):
                out.add(name)
    return out


GRAPH = {module_of(p): imported(p) - {module_of(p)} for p in sorted(PACKAGE.rglob("*.py"))}


def under(module: str, *prefixes: str) -> bool:
    return any(module == p or module.startswith(p + ".") for p in prefixes)


def test_no_module_imports_itself_back() -> None:
    """No circle of imports (the package itself, whose lazy names import what they name, is
    left out: modules take only ``rpcmeter.version`` for the version)."""
    graph = {m: {i for i in deps if i != "rpcmeter"} for m, deps in GRAPH.items()}
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(module: str) -> None:
        state[module] = 1
        stack.append(module)
        for dep in sorted(graph.get(module, ())):
            if state.get(dep) == 1:
                circle = [*stack[stack.index(dep) :], dep]
                pytest.fail("import circle: " + " -> ".join(circle))
            if dep not in state:
                visit(dep)
        stack.pop()
        state[module] = 2

    for module in graph:
        if module not in state:
            visit(module)
    assert len(graph) > 80  # every module was read


@pytest.mark.parametrize(
    ("modules", "allowed", "forbidden"),
    [
        # the result contract: types, validation and migrations over the histogram
        (("rpcmeter.model",), ("rpcmeter.metrics.histogram",), ()),
        # wire formats know neither side
        (("rpcmeter.protocols",), (), ("rpcmeter.drivers", "rpcmeter.servers")),
        (("rpcmeter.drivers",), (), ("rpcmeter.servers", "rpcmeter.plan.cases", "rpcmeter.model")),
        (("rpcmeter.servers",), (), ("rpcmeter.drivers", "rpcmeter.model")),
        # measuring returns outcomes; recording and what is derived come after
        (
            ("rpcmeter.runners", "rpcmeter.metrics"),
            (),
            (
                "rpcmeter.result.record",
                "rpcmeter.run.execute",
                "rpcmeter.analysis.derived",
                "rpcmeter.result.breakdown",
            ),
        ),
        (("rpcmeter.metrics",), (), ("rpcmeter.model",)),
        # reports read the view; only its builder reads the result
        (
            tuple(
                f"rpcmeter.reporters.{m}"
                for m in ("terminal", "markdown", "csv", "json", "html", "figures", "view")
            ),
            (),
            ("rpcmeter.analysis.derived", "rpcmeter.reporters.build"),
        ),
    ],
)
def test_layers_keep_to_their_contracts(
    modules: tuple[str, ...], allowed: tuple[str, ...], forbidden: tuple[str, ...]
) -> None:
    for module, deps in GRAPH.items():
        if not under(module, *modules):
            continue
        if allowed:
            assert deps <= set(allowed), f"{module} imports {sorted(deps - set(allowed))}"
        bad = sorted(d for d in deps if under(d, *forbidden))
        assert not bad, f"{module} imports {bad}"


# The stages, bottom to top: a package imports only packages on its own floor or below. The
# folders are the stages (docs/architecture.md): what a suite says, the host's side, the plan,
# measuring, the result, what the results say, a run, the history, the reports, the command line.
STAGES: tuple[tuple[str, ...], ...] = (
    ("errors", "names", "text", "compiled", "version", "net"),
    ("suite",),
    ("metrics", "protocols"),
    ("model", "drivers", "host"),
    ("servers", "plan"),
    ("runners",),
    ("result",),
    ("analysis",),
    ("run",),
    ("history",),
    ("reporters",),
    ("publish",),
    ("cli", "__main__"),
)
FLOOR = {name: i for i, names in enumerate(STAGES) for name in names}


def package_of(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else ""


def test_every_package_has_a_floor() -> None:
    packages = {package_of(m) for m in GRAPH} - {""}
    assert packages - set(FLOOR) == set(), "a package with no place in STAGES"
    assert len([p for p in PACKAGE.glob("*.py")]) <= 10  # the folders hold the rest


def test_stages_import_only_downwards() -> None:
    """No package imports one on a higher floor (its own floor and below are fine)."""
    up = sorted(
        f"{m} -> {d}"
        for m, deps in GRAPH.items()
        for d in deps
        if package_of(m) in FLOOR
        and package_of(d) in FLOOR
        and FLOOR[package_of(d)] > FLOOR[package_of(m)]
    )
    assert up == []
