"""The ``command`` driver: a whole command line is the system under test.

There is no server and no client loop: each case runs the command a number of times as a whole
process tree (:mod:`rpcmeter.runners.command`), and the one workload kind, ``command``, fills the
command line's ``{name}`` placeholders. This module describes the target: its command line, the
placeholders it takes, and the checks of a suite that uses it.

A ``command`` variant in a suite whose target is another driver is a *command client*
(:meth:`~rpcmeter.suite_model.Suite.command_client`): rpcmeter starts the target's server for
it, as for the other variants, and the command (a client of that server: ``{host}``, ``{port}``,
``{socket}``) runs against it; ``requests_per_run`` says how many requests one run makes.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

from rpcmeter.drivers.base import Caller, Driver
from rpcmeter.errors import SuiteError
from rpcmeter.suite_model import Suite

_PLACEHOLDER = re.compile(r"\{\{|\}\}|\{([A-Za-z_][A-Za-z0-9_]*)\}")


def _text(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def placeholders(command: str | Sequence[str]) -> list[str]:
    """Names of the ``{name}`` placeholders in a command line."""
    parts = [command] if isinstance(command, str) else list(command)
    return [m.group(1) for p in parts for m in _PLACEHOLDER.finditer(p) if m.group(1)]


def fill(command: str | Sequence[str], values: Mapping[str, Any]) -> list[str]:
    """Split ``command`` (shell-like, without a shell) and fill its placeholders."""
    parts = shlex.split(command) if isinstance(command, str) else list(command)

    def sub(m: re.Match[str]) -> str:
        if m.group(0) in ("{{", "}}"):
            return m.group(0)[0]
        return _text(values[m.group(1)])

    return [_PLACEHOLDER.sub(sub, p) for p in parts]


def command_of(suite: Suite, variant: str, workload: str) -> tuple[str | list[str] | None, str]:
    """The command line a variant runs for a workload, and the key it came from."""
    w_cmd = suite.workloads[workload].params().get("command")
    if w_cmd is not None:
        return w_cmd, f"workloads.{workload}.command"
    v_cmd = suite.variants[variant].command
    if v_cmd is not None:
        return v_cmd, f"variants.{variant}.command"
    return suite.target.command, "target.command"


# what a command client's command line may hold besides the workload's parameters: where the
# server listens, and how many requests one run makes
CLIENT_PLACEHOLDERS = ("host", "port", "socket", "requests_per_run")


def check_suite(suite: Suite, where: str) -> None:
    """Every command variant and workload has a command line whose placeholders are all known."""
    for wname, w in suite.workloads.items():
        known = {"python", *suite.matrix, *(k for k in w.params() if k != "command")}
        for vname in suite.variants:
            if suite.driver_of(vname) != "command":
                continue
            allowed = known | set(CLIENT_PLACEHOLDERS) if suite.command_client(vname) else known
            command, key = command_of(suite, vname, wname)
            if command is None or command == "" or command == []:
                raise SuiteError(
                    f"{where}: target.command: driver 'command' needs a command line "
                    f"(variant {vname!r}, workload {wname!r})"
                )
            try:
                names = placeholders(command)
                fill(command, dict.fromkeys(names, ""))
            except ValueError as exc:
                raise SuiteError(f"{where}: {key}: cannot split the command line: {exc}") from None
            unknown = [n for n in names if n not in allowed]
            if unknown:
                raise SuiteError(
                    f"{where}: {key}: unknown placeholder {{{unknown[0]}}} "
                    f"(known: {', '.join(sorted(allowed))})"
                )


class CommandDriver(Driver):
    name: ClassVar[str] = "command"
    transports: ClassVar[tuple[str, ...]] = ()  # none: the command is run, not connected to
    workloads: ClassVar[frozenset[str]] = frozenset({"command"})
    open_loop: ClassVar[bool] = False  # each run waits for the previous one: no schedule
    whole_command: ClassVar[bool] = True
    option_keys: ClassVar[frozenset[str] | None] = frozenset()

    def connect(self) -> None:
        raise NotImplementedError("command targets are run by rpcmeter.runners.command")

    def caller(self, thread_index: int) -> Caller:
        raise NotImplementedError("command targets are run by rpcmeter.runners.command")

    @classmethod
    def check_suite(cls, suite: Suite, where: str) -> None:
        check_suite(suite, where)
