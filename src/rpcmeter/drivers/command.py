"""The ``command`` driver: a whole command line is the system under test.

There is no server and no client loop: each case runs the command a number of times as a whole
process tree (:mod:`rpcmeter.runners.command`), and the one workload kind, ``command``, fills the
command line's ``{name}`` placeholders. This class only describes the target to the suite checks.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, ClassVar

from rpcmeter.drivers.base import Caller, Driver

if TYPE_CHECKING:
    from rpcmeter.suite_model import Suite


class CommandDriver(Driver):
    name: ClassVar[str] = "command"
    transports: ClassVar[tuple[str, ...]] = ()  # none: the command is run, not connected to
    workloads: ClassVar[frozenset[str]] = frozenset({"command"})
    open_loop: ClassVar[bool] = False  # each run waits for the previous one: no schedule
    option_keys: ClassVar[frozenset[str] | None] = frozenset()

    def connect(self) -> None:
        raise NotImplementedError("command targets are run by rpcmeter.runners.command")

    def caller(self, thread_index: int) -> Caller:
        raise NotImplementedError("command targets are run by rpcmeter.runners.command")

    @classmethod
    def check_suite(cls, suite: Suite, where: str) -> None:
        from rpcmeter.runners.command import check_suite

        check_suite(suite, where)
