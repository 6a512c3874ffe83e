"""``rpcmeter --version``, ``--help`` and every command's ``--help`` load no measurement,
statistics or plotting code: a one-line tool answers at once."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from rpcmeter.cli import build_parser

# what only a command that measures, compares or draws may load
HEAVY = (
    "numpy",
    "scipy",
    "matplotlib",
    "pydantic",
    "distributed",
    "grpc",
    "google.protobuf",
    "rich",
    "uvloop",
    "rpcmeter.model",
    "rpcmeter.analysis.compare",
    "rpcmeter.run.execute",
    "rpcmeter.history.store",
)

PROBE = """
import contextlib, io, json, sys
from rpcmeter.cli import main
with contextlib.redirect_stdout(io.StringIO()):
    try:
        main(sys.argv[1:])
    except SystemExit:
        pass
print(json.dumps(sorted(sys.modules)))
"""


def _commands() -> list[list[str]]:
    import argparse

    found: list[list[str]] = []

    def walk(parser: argparse.ArgumentParser, path: list[str]) -> None:
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                for name, sub in action.choices.items():
                    found.append([*path, name])
                    walk(sub, [*path, name])

    walk(build_parser(), [])
    return found


def _loaded(argv: list[str]) -> set[str]:
    out = subprocess.run(
        [sys.executable, "-c", PROBE, *argv], capture_output=True, text=True, timeout=120
    )
    assert out.returncode == 0, out.stderr
    return set(json.loads(out.stdout.splitlines()[-1]))


@pytest.mark.parametrize("argv", [["--version"], ["--help"]])
def test_version_and_help_load_nothing_heavy(argv: list[str]) -> None:
    loaded = _loaded(argv)
    assert "rpcmeter.cli.app" in loaded  # the probe ran the command line
    assert [m for m in HEAVY if m in loaded] == []


def test_every_commands_help_loads_nothing_heavy() -> None:
    commands = _commands()
    assert ["run"] in commands and ["compare"] in commands  # the walk found the commands
    for command in commands:
        loaded = _loaded([*command, "--help"])
        assert [m for m in HEAVY if m in loaded] == [], command
