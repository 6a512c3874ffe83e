"""Build hook (the project itself is described in pyproject.toml).

With ``RPCMETER_COMPILE=1`` in the environment, ``pip install`` compiles the client's per-request
path with mypyc (mypy's compiler of type-annotated Python to C extensions): the HTTP/2 connection
core and its transport, the connection slot, the HTTP/2 and gRPC clients and the closed loop.
The compiled modules behave as the Python ones (the same tests pass against both) and cost about
a third to a half fewer instructions a request. Without it (the default), everything stays pure
Python. An editable install puts the compiled modules next to their sources: after editing one of
them, install again, or delete ``src/**/*.so`` to run the Python again (rpcmeter warns when a
compiled module is older than its source: ``compiled_sources.json`` records what each was built
from).
"""

import hashlib
import json
import os
from pathlib import Path

from setuptools import setup

COMPILED = [
    "src/rpcmeter/protocols/h2/connection.py",
    "src/rpcmeter/protocols/h2/frames.py",
    "src/rpcmeter/protocols/h2/replay.py",
    "src/rpcmeter/protocols/h2/state.py",
    "src/rpcmeter/protocols/h2/transport.py",
    "src/rpcmeter/connect.py",
    "src/rpcmeter/drivers/http2.py",
    "src/rpcmeter/drivers/grpc_h2.py",
    "src/rpcmeter/drivers/h2client.py",
    "src/rpcmeter/runners/event_loop.py",
]


# what each compiled module was compiled from: rpcmeter warns when a source no longer matches
# (rpcmeter.metrics.environment.stale_compiled)
SOURCES = Path("src/rpcmeter/compiled_sources.json")


def ext_modules() -> list[object]:
    if os.environ.get("RPCMETER_COMPILE", "0") != "1":
        return []
    from mypyc.build import mypycify

    modules = list(mypycify(COMPILED, opt_level="3"))  # (a type error stops here, unrecorded)
    hashes = {
        path.removeprefix("src/"): hashlib.sha256(Path(path).read_bytes()).hexdigest()
        for path in COMPILED
    }
    SOURCES.write_text(json.dumps(hashes, indent=1, sort_keys=True) + "\n")
    return modules


setup(ext_modules=ext_modules())
