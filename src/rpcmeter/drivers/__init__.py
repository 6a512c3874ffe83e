"""Client-side protocol adapters. One module per protocol; see :mod:`rpcmeter.drivers.base`."""

from __future__ import annotations

import importlib

from rpcmeter.drivers.base import Driver

# name -> "module:Class"; imported lazily so a suite only pays for the driver it uses.
REGISTRY: dict[str, str] = {
    "rpyc": "rpcmeter.drivers.rpyc:RpycDriver",
    "grpc": "rpcmeter.drivers.grpc:GrpcDriver",
    "zmq": "rpcmeter.drivers.zmq:ZmqDriver",
    "http": "rpcmeter.drivers.http:HttpDriver",
    "raw": "rpcmeter.drivers.raw:RawDriver",
    "command": "rpcmeter.drivers.command:CommandDriver",
}


def driver_class(name: str) -> type[Driver]:
    """The driver registered as ``name``, or any importable ``"module:Class"`` (a driver of your
    own). KeyError with a readable message when there is no such driver."""
    spec = REGISTRY.get(name, name if ":" in name else None)
    if spec is None:
        raise KeyError(f"unknown driver {name!r} (expected one of: {', '.join(sorted(REGISTRY))})")
    module_name, _, class_name = spec.partition(":")
    try:
        cls = getattr(importlib.import_module(module_name), class_name)
    except Exception as exc:  # the module's own code may raise anything while it is imported
        kind = "" if isinstance(exc, ImportError | AttributeError) else f"{type(exc).__name__}: "
        raise KeyError(f"cannot load driver {name!r}: {kind}{exc}") from None
    if not (isinstance(cls, type) and issubclass(cls, Driver)):
        raise KeyError(f"{name!r} is not a Driver subclass")
    if not isinstance(getattr(cls, "name", None), str) or not cls.name:
        raise KeyError(
            f'driver {name!r} has no name: set its class attribute, e.g. name = "{class_name.lower()}"'
        )
    if not cls.workloads:
        raise KeyError(
            f"driver {name!r} declares no workload it can send: set its class attribute, "
            'e.g. workloads = frozenset({"noop", "echo"})'
        )
    return cls
