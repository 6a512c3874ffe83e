"""rpcmeter: measure and compare request/response systems.

The library comes first; the ``rpcmeter`` command only parses arguments and calls it::

    from rpcmeter import load_suite, run_suite
    result = run_suite(load_suite("examples/rpyc-thread-binding.toml", quick=True))
"""

from __future__ import annotations

__version__ = "0.1.0"

from rpcmeter.errors import RpcmeterError, SuiteError
from rpcmeter.execute import RunOptions, run_suite
from rpcmeter.metrics.histogram import Histogram
from rpcmeter.suite import Suite, load_suite

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
