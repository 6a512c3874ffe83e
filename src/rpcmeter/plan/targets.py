"""What a suite's ``driver`` names: a protocol driver (:func:`rpcmeter.drivers.driver_class`) or
``command``, a whole command line as the system under test (:func:`target_class`).

A command is no driver: there is no server and no client loop. Each case runs the command a
number of times as a whole process tree (:mod:`rpcmeter.runners.command`, by
:class:`rpcmeter.run.execute.CommandCase`), and the one workload kind, ``command``, fills the command
line's ``{name}`` placeholders. This module describes that target (:class:`CommandTarget`): its
command line, the placeholders it takes, and the checks of a suite that uses it.

A ``command`` variant in a suite whose target is another driver is a *command client*
(:meth:`~rpcmeter.suite.model.Suite.command_client`): rpcmeter starts the target's server for
it, as for the other variants (or measures the server at its ``address``), and the command (a
client of that server: ``{host}``, ``{port}``, ``{socket}``; with TLS ``{ca_file}`` and
``{server_name}``; ``{scheme}`` for a server with URLs) runs against it; ``requests_per_run``
says how many requests one run makes.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar, Literal

from rpcmeter.drivers import REGISTRY, driver_class
from rpcmeter.drivers.base import TargetSpec
from rpcmeter.errors import SuiteError
from rpcmeter.suite.model import Suite
from rpcmeter.suite.placeholders import fill, placeholders

COMMAND = "command"  # the driver name of a whole command


def command_of(suite: Suite, variant: str, workload: str) -> tuple[str | list[str] | None, str]:
    """The command line a variant runs for a workload, and the key it came from."""
    w_cmd = suite.workloads[workload].params().get("command")
    if w_cmd is not None:
        return w_cmd, f"workloads.{workload}.command"
    v_cmd = suite.variants[variant].command
    if v_cmd is not None:
        return v_cmd, f"variants.{variant}.command"
    return suite.target.command, "target.command"


# what every command line may hold besides the workload's parameters and the matrix keys: the
# variant's interpreter, and how many CPUs the command runs on (its pinned CPUs, else all this
# process may use)
BUILTIN_PLACEHOLDERS = ("python", "cpus")
# what a command client's command line may hold besides the workload's parameters: where the
# server listens, how many requests one run makes, and the case's load shape (connections,
# concurrent loops, duration in seconds, requests per loop)
CLIENT_PLACEHOLDERS = (
    "host",
    "port",
    "socket",
    "requests_per_run",
    "connections",
    "concurrency",
    "duration_s",
    "requests",
)
# and with TLS (the variant's ``tls``): the CA file to trust and the name to send and check
TLS_PLACEHOLDERS = ("ca_file", "server_name")


def client_placeholders(suite: Suite, variant: str) -> set[str]:
    """The placeholders a command client's command line may hold besides the workload's
    parameters: :data:`CLIENT_PLACEHOLDERS`, with TLS :data:`TLS_PLACEHOLDERS`, and ``scheme``
    where the server's driver has URLs (``url_scheme``)."""
    names = set(CLIENT_PLACEHOLDERS)
    if suite.variants[variant].requests_per_run is None:  # its report counts the requests
        names.discard("requests_per_run")
    if suite.tls_of(variant) is not None:
        names.update(TLS_PLACEHOLDERS)
    if driver_class(suite.server_driver_of(variant)).url_scheme:
        names.add("scheme")
    return names


def _check_ca_file(suite: Suite, variant: str, names: list[str], key: str, where: str) -> None:
    """``{ca_file}`` against a server rpcmeter does not start needs the suite's ``tls.ca_file``
    (no CA is made for it)."""
    tls, address = suite.tls_of(variant), suite.address_of(variant)
    if "ca_file" in names and tls is not None and tls.ca_file is None and address is not None:
        raise SuiteError(
            f"{where}: {key}: {{ca_file}}: rpcmeter makes no CA for the server at {address} "
            "(not started by it): set tls.ca_file to the CA that issued its certificate"
        )


def _duration(suite: Suite, workload: str) -> float | None:
    """The load duration of a workload's cases (None: they run a count of requests)."""
    over = suite.workloads[workload].load_overrides()
    if "duration_s" in over or "requests" in over:
        duration = over.get("duration_s")
        return float(duration) if duration is not None else None
    return suite.load.duration_s


# a whole command's hooks (Target): commands run around its runs, unmeasured
HOOKS = ("setup", "prepare", "cleanup")


def _names(suite: Suite, command: str | list[str], key: str, where: str) -> list[str]:
    """The placeholders of a command line; a line that cannot be split (without a shell) is a
    suite error."""
    try:
        names = placeholders(command)
        if not suite.target.shell:
            fill(command, dict.fromkeys(names, ""))
    except ValueError as exc:
        raise SuiteError(f"{where}: {key}: cannot split the command line: {exc}") from None
    return names


def check_suite(suite: Suite, where: str) -> None:
    """Every command variant and workload has a command line whose placeholders are all known."""
    for wname, w in suite.workloads.items():
        known = {*BUILTIN_PLACEHOLDERS, *suite.matrix, *(k for k in w.params() if k != "command")}
        for vname in suite.variants:
            if suite.driver_of(vname) != COMMAND:
                continue
            client = suite.command_client(vname)
            allowed = known | client_placeholders(suite, vname) if client else known
            command, key = command_of(suite, vname, wname)
            if command is None or command == "" or command == []:
                raise SuiteError(
                    f"{where}: target.command: driver 'command' needs a command line "
                    f"(variant {vname!r}, workload {wname!r})"
                )
            names = _names(suite, command, key, where)
            for hook in HOOKS:
                given = getattr(suite.target, hook)
                if given is not None:
                    names += _names(suite, given, f"target.{hook}", where)
            unknown = [n for n in names if n not in allowed]
            if unknown:
                needs_tls = client and unknown[0] in TLS_PLACEHOLDERS
                raise SuiteError(
                    f"{where}: {key}: unknown placeholder {{{unknown[0]}}} "
                    f"(known: {', '.join(sorted(allowed))}"
                    + ("; {ca_file} and {server_name} need tls)" if needs_tls else ")")
                )
            if client:
                _check_ca_file(suite, vname, names, key, where)
                if "duration_s" in names and _duration(suite, wname) is None:
                    raise SuiteError(
                        f"{where}: {key}: {{duration_s}}: workload {wname!r} runs a count of "
                        "requests (set load.duration_s)"
                    )


class CommandTarget(TargetSpec):
    """A whole command (see the module doc)."""

    name: ClassVar[str] = COMMAND
    transports: ClassVar[tuple[str, ...]] = ()  # none: the command is run, not connected to
    workloads: ClassVar[frozenset[str]] = frozenset({"command"})
    open_loop: ClassVar[bool] = False  # each run waits for the previous one: no schedule
    whole_command: ClassVar[bool] = True
    option_keys: ClassVar[frozenset[str] | None] = frozenset()

    @classmethod
    def check_suite(cls, suite: Suite, where: str) -> None:
        check_suite(suite, where)


def target_class(name: str, options: Mapping[str, Any] | None = None) -> type[TargetSpec]:
    """What the suite's ``driver`` ``name`` is: :class:`CommandTarget` for ``command``, else the
    protocol driver (the client path ``options`` pick, when given;
    :func:`rpcmeter.drivers.driver_class`). KeyError with a readable message when there is no
    such driver."""
    if name == COMMAND:
        return CommandTarget
    if name not in REGISTRY and ":" not in name:
        known = ", ".join(sorted([*REGISTRY, COMMAND]))
        raise KeyError(f"unknown driver {name!r} (expected one of: {known})")
    return driver_class(name, options)


TargetKind = Literal["server", "remote", "client", "command"]


@dataclass(frozen=True)
class VariantTarget:
    """What a variant's cases run against (:func:`variant_target`): its clients' class (the
    client path its options pick), the class of the driver whose server its cases start, and
    its target kind: ``command`` (a whole command: its driver runs whole commands), ``client``
    (a command client: a whole command run against the server rpcmeter starts for it, placed
    as the clients are; :meth:`~rpcmeter.suite.model.Suite.command_client`), ``remote`` (a
    server rpcmeter does not start) or ``server``."""

    driver: type[TargetSpec]
    server_driver: type[TargetSpec]
    kind: TargetKind


def variant_target(suite: Suite, variant: str) -> VariantTarget:
    """What ``variant`` runs against: the driver whose server its cases start (the target's, for
    a command client; :func:`target_class`), then its clients' class: a command client's is
    :class:`CommandTarget`, another variant's the client path its options pick of that same
    driver (:func:`rpcmeter.drivers.driver_class`)."""
    server_driver = target_class(suite.server_driver_of(variant))
    if suite.command_client(variant):
        return VariantTarget(CommandTarget, server_driver, "client")
    if server_driver.whole_command:  # its own driver: no client path to pick
        return VariantTarget(server_driver, server_driver, "command")
    driver = driver_class(suite.driver_of(variant), suite.options_of(variant))
    kind: TargetKind = "remote" if suite.address_of(variant) is not None else "server"
    return VariantTarget(driver, server_driver, kind)
