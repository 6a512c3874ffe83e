"""Client-side protocol adapters. One module per protocol; see :mod:`rpcmeter.drivers.base`."""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from typing import Any

from rpcmeter.drivers.base import Driver

# name -> "module:Class"; imported lazily so a suite only pays for the driver it uses. The class
# describes the driver to a suite (transports, options, server); a driver with several client
# paths names its default one here
REGISTRY: dict[str, str] = {
    "rpyc": "rpcmeter.drivers.rpyc:RpycDriver",
    "grpc": "rpcmeter.drivers.grpc:GrpcDriver",
    "zmq": "rpcmeter.drivers.zmq:ZmqDriver",
    "http": "rpcmeter.drivers.http:HttpDriver",
    "raw": "rpcmeter.drivers.raw:RawDriver",
}

# a driver with several client paths, one class each: the option that picks one, the value it
# has when not given, and the class of each value
CLIENT_PATHS: dict[str, tuple[str, str, dict[str, str]]] = {
    "http": (
        "http",
        "1.1",
        {"1.1": "rpcmeter.drivers.http:HttpDriver", "2": "rpcmeter.drivers.http2:Http2Driver"},
    ),
    "grpc": (
        "client",
        "h2",
        {
            "h2": "rpcmeter.drivers.grpc:GrpcDriver",
            "grpcio": "rpcmeter.drivers.grpcio:GrpcioDriver",
        },
    ),
}


# the protocol libraries installed as extras (pyproject.toml): top-level module -> (distribution,
# extra). Only a driver's module and its built-in server's import them, so a suite pays for, and
# needs, only the library of the drivers it uses.
EXTRAS: dict[str, tuple[str, str]] = {
    "grpc": ("grpcio", "grpc"),
    "zmq": ("pyzmq", "zmq"),
    "rpyc": ("rpyc", "rpyc"),
}


def install_hint(name: str, exc: ImportError) -> str | None:
    """``driver "zmq" needs pyzmq: pip install 'rpcmeter[zmq]'`` when ``exc`` is a protocol
    library of :data:`EXTRAS` missing, else None."""
    missing = (exc.name or "").partition(".")[0] if isinstance(exc, ModuleNotFoundError) else ""
    if missing not in EXTRAS:
        return None
    distribution, extra = EXTRAS[missing]
    return f"driver \"{name}\" needs {distribution}: pip install 'rpcmeter[{extra}]'"


def driver_class(name: str, options: Mapping[str, Any] | None = None) -> type[Driver]:
    """The driver registered as ``name``, or any importable ``"module:Class"`` (a driver of your
    own); with the target ``options``, the class of the client path they pick
    (:data:`CLIENT_PATHS`: ``http = "2"``, ``client = "grpcio"``). KeyError with a readable
    message when there is no such driver, or when its protocol library is not installed
    (:func:`install_hint`)."""
    spec = REGISTRY.get(name, name if ":" in name else None)
    if spec is None:
        raise KeyError(f"unknown driver {name!r} (expected one of: {', '.join(sorted(REGISTRY))})")
    if options is not None and name in CLIENT_PATHS:
        key, default, paths = CLIENT_PATHS[name]
        spec = paths.get(str(options.get(key, default)), spec)
    module_name, _, class_name = spec.partition(":")
    try:
        cls = getattr(importlib.import_module(module_name), class_name)
    except ImportError as exc:
        hint = install_hint(name, exc)
        raise KeyError(hint or f"cannot load driver {name!r}: {exc}") from None
    except Exception as exc:  # the module's own code may raise anything while it is imported
        kind = "" if isinstance(exc, AttributeError) else f"{type(exc).__name__}: "
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
