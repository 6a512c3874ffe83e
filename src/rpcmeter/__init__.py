"""rpcmeter: measure and compare request/response systems.

The library comes first; the ``rpcmeter`` command only parses arguments and calls it::

    from rpcmeter import load_suite, run_suite

    if __name__ == "__main__":  # rpcmeter starts client processes
        result = run_suite(load_suite("examples/rpyc-thread-binding.toml", quick=True))

Names are imported lazily, so that a built-in server importing one submodule starts fast.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from rpcmeter.compiled import prefer_python
from rpcmeter.version import __version__

# before any compiled module is imported: run them as Python after an edit (or when asked)
prefer_python()

_EXPORTS = {
    "Histogram": "rpcmeter.metrics.histogram",
    "RpcmeterError": "rpcmeter.errors",
    "SuiteError": "rpcmeter.errors",
    "RunOptions": "rpcmeter.run.execute",
    "run_suite": "rpcmeter.run.execute",
    "Suite": "rpcmeter.plan.load",
    "load_suite": "rpcmeter.plan.load",
}

__all__ = [
    "Histogram",
    "RpcmeterError",
    "RunOptions",
    "Suite",
    "SuiteError",
    "__version__",
    "load_suite",
    "run_suite",
]

if TYPE_CHECKING:
    from rpcmeter.errors import RpcmeterError, SuiteError
    from rpcmeter.metrics.histogram import Histogram
    from rpcmeter.plan.load import load_suite
    from rpcmeter.run.execute import RunOptions, run_suite
    from rpcmeter.suite.model import Suite


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'rpcmeter' has no attribute {name!r}")
    return getattr(importlib.import_module(module), name)
