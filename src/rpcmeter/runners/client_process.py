"""A client process started by a cluster load task (:mod:`rpcmeter.runners.distributed`).

The task starts a fresh interpreter (:func:`command`) that runs the same
:func:`~rpcmeter.runners.client.client_main` as a client process of the local runner, so its
load loops have an interpreter (and a GIL) of their own instead of sharing the Dask worker's.
They speak length-prefixed pickles (:func:`write_frame`, :func:`read_frame`):

- task -> client, on stdin: the :class:`~rpcmeter.runners.spec.LoadSpec`, then the commands
  ``("go", start)`` (``start``: the case's start, ns since the epoch) and ``"stop"``; end of
  input means stop.
- client -> task, on stdout: ``("started",)`` first, ``("connected",)`` once connected,
  ``("ready",)`` or ``("error", msg)`` once warmed up, ``("progress", n)`` every
  :data:`PROGRESS_S` once the gate is open, ``("windows", ...)`` once per interval
  (:class:`~rpcmeter.runners.windows.Shipper`), and ``("result", report)`` last. Anything else the
  process prints goes to stderr, which the task keeps for its errors.

The process dies with the task's thread (Linux parent-death signal) and never outlives a case.

On Linux it runs without address-space randomization (:func:`same_layout`), so that all client
processes on a host map the interpreter's code at the same addresses, as the local runner's
client processes do (they are forked from one forkserver). That matters when clients share a
core: measured with 2 client processes on one CPU, independently randomized ones spent 1.3 times
the CPU per request of forked siblings (the branch predictors, indexed by address, stay warm
across context switches only when the code is where the other process had it); with the same
layout they were as fast.
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import os
import pickle
import signal
import struct
import sys
import threading
from typing import IO, Any

PROGRESS_S = 0.1  # how often a running client reports its request count
_HEADER = struct.Struct(">I")
# Started with ``python -c``: the worker's import path first, so that the client imports the
# same rpcmeter (and drivers) as the worker that starts it, as multiprocessing's spawn does.
_BOOT = (
    "import json, sys; sys.path[:] = json.loads(sys.argv[1]); "
    "from rpcmeter.runners.client_process import main; main(int(sys.argv[2]))"
)


def command() -> list[str]:
    """The command line of a client process whose parent is the calling process."""
    return [sys.executable, "-c", _BOOT, json.dumps(sys.path), str(os.getpid())]


def write_frame(stream: IO[bytes], obj: Any) -> None:
    data = pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL)
    stream.write(_HEADER.pack(len(data)) + data)
    stream.flush()


def read_frame(stream: IO[bytes]) -> Any:
    """The next object on ``stream``; raises EOFError at its end (also mid-frame)."""
    header = _read_exactly(stream, _HEADER.size)
    return pickle.loads(_read_exactly(stream, _HEADER.unpack(header)[0]))


def _read_exactly(stream: IO[bytes], n: int) -> bytes:
    data = b""
    while len(data) < n:
        part = stream.read(n - len(data))
        if not part:
            raise EOFError
        data += part
    return data


class ResultPipe:
    """The client's side of stdout: what client_main and the progress thread send, one frame at
    a time; nothing after the result."""

    def __init__(self, stream: IO[bytes]) -> None:
        self.stream = stream
        self.lock = threading.Lock()
        self.closed = False

    def send(self, msg: tuple[Any, ...]) -> None:
        with self.lock:
            if self.closed:
                return
            write_frame(self.stream, msg)
            if msg[0] in ("result", "error"):
                self.closed = True


class Start:
    """The case's start (ns since the epoch), as the ``go`` command gives it (0: not given)."""

    value = 0


def _commands(stream: IO[bytes], go: threading.Event, stop: threading.Event, start: Start) -> None:
    """Stdin: ``go`` (with the case's start) and ``stop`` set their events; the end of input
    (the task is gone or gave up) stops the load and opens the gate so that nothing waits for
    it."""
    try:
        while True:
            cmd = read_frame(stream)
            if cmd == "stop":
                stop.set()
            elif isinstance(cmd, tuple) and cmd[0] == "go":
                start.value = int(cmd[1])
                go.set()
    except (EOFError, OSError, pickle.UnpicklingError):
        pass
    stop.set()
    go.set()


def _publish(
    pipe: ResultPipe, progress: dict[int, int], go: threading.Event, done: threading.Event
) -> None:
    """Report the request count every PROGRESS_S once the gate is open, until the end."""
    while not done.wait(PROGRESS_S):
        if go.is_set():
            try:
                pipe.send(("progress", sum(progress.values())))
            except OSError:
                return


_ADDR_NO_RANDOMIZE = 0x0040000  # personality(2) flag


def same_layout() -> None:
    """Linux: run this program again without address-space randomization (see the module doc;
    the pid, open files and the parent-death signal stay). Nothing when it already runs so, or
    where that cannot be set."""
    if not sys.platform.startswith("linux"):
        return
    try:
        personality = ctypes.CDLL(None, use_errno=True).personality
        persona = personality(0xFFFFFFFF)  # query
        if persona == -1 or persona & _ADDR_NO_RANDOMIZE:
            return
        if personality(persona | _ADDR_NO_RANDOMIZE) == -1:
            return
        os.execv(sys.executable, [sys.executable, *sys.orig_argv[1:]])
    except (OSError, AttributeError):
        return


def main(parent: int) -> None:
    """The client process: read the spec, run client_main, report on stdout, exit."""
    same_layout()
    from rpcmeter.host.launch import die_with_parent

    die_with_parent(parent)  # also when the task's thread ends without stopping us
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the parent's to handle
    out = os.fdopen(os.dup(1), "wb")  # the protocol keeps stdout to itself ...
    os.dup2(2, 1)  # ... and whatever a library prints goes to stderr
    stdin = sys.stdin.buffer
    try:
        spec = read_frame(stdin)
    except EOFError:
        os._exit(1)
    from rpcmeter.runners.client import client_main

    pipe = ResultPipe(out)
    if spec.client_cpus:  # pin the helper threads too (client_main pins its own thread)
        with contextlib.suppress(OSError):
            os.sched_setaffinity(0, spec.client_cpus)
    go, stop, done = threading.Event(), threading.Event(), threading.Event()
    base = spec.ctx.client_index * spec.ctx.threads
    # every slot exists up front: the publisher sums while the loops store
    progress = dict.fromkeys(range(base, base + spec.ctx.threads), 0)
    start = Start()
    threading.Thread(target=_commands, args=(stdin, go, stop, start), daemon=True).start()
    publisher = threading.Thread(target=_publish, args=(pipe, progress, go, done), daemon=True)
    publisher.start()
    status = 0
    try:
        client_main(spec, go, stop, progress, pipe, start)
    except BaseException as exc:
        status = 1
        with contextlib.suppress(OSError):
            pipe.send(("error", f"client {spec.ctx.client_index}: {type(exc).__name__}: {exc}"))
    done.set()
    publisher.join(1.0)
    sys.stderr.flush()
    # no interpreter shutdown: a driver library's exit handlers must not hold the case up
    os._exit(status)
