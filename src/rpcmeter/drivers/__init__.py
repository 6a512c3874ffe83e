"""Client-side protocol adapters. One module per protocol; see :mod:`rpcmeter.drivers.base`."""

from __future__ import annotations

import importlib

from rpcmeter.drivers.base import Driver

# name -> "module:Class"; imported lazily so a suite only pays for the driver it uses.
REGISTRY: dict[str, str] = {
    "rpyc": "rpcmeter.drivers.rpyc:RpycDriver",
}


def driver_class(name: str) -> type[Driver]:
    """The driver class registered as ``name`` (KeyError with a readable message if unknown)."""
    try:
        spec = REGISTRY[name]
    except KeyError:
        raise KeyError(
            f"unknown driver {name!r} (expected one of: {', '.join(sorted(REGISTRY))})"
        ) from None
    module_name, _, class_name = spec.partition(":")
    cls: type[Driver] = getattr(importlib.import_module(module_name), class_name)
    return cls
