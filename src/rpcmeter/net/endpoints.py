"""Where a server listens, and how a written address names it.

The lowest layer of the package beside :mod:`rpcmeter.suite.workloads`: servers, drivers and the suite
checks all speak of endpoints, so the type lives below all of them."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Endpoint:
    """Where a server listens: ``tcp`` host and port, or a ``unix`` socket path."""

    transport: str
    host: str = "127.0.0.1"
    port: int | None = None
    path: str | None = None

    def describe(self) -> str:
        if self.path is not None:
            return f"{self.transport}://{self.path}"
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{self.transport}://{host}:{self.port}"


UNIX_TRANSPORTS = ("unix", "ipc")


def remote_endpoint(address: str, transport: str = "tcp") -> Endpoint:
    """The endpoint of a server rpcmeter does not start: ``host:port`` (``[v6]:port``; an
    optional ``tcp://`` prefix) or a Unix socket path (``/path``, ``unix:path``). A path keeps a
    Unix-like ``transport`` (``ipc``) and is ``unix`` otherwise; a ``host:port`` keeps any other
    transport and is ``tcp`` when ``transport`` is Unix-like. Raises ValueError."""
    text = address.strip()
    if text.startswith("unix:") or text.startswith("/"):
        path = text.removeprefix("unix:").removeprefix("//")
        if not path:
            raise ValueError(f"no socket path in {address!r}")
        return Endpoint(transport if transport in UNIX_TRANSPORTS else "unix", path=path)
    text = text.removeprefix("tcp://")
    host, sep, port_text = text.rpartition(":")
    host = host.removeprefix("[").removesuffix("]")
    if not sep or not host or not port_text.isdigit() or not 0 < int(port_text) < 65536:
        raise ValueError(f"expected 'host:port' or a Unix socket path, got {address!r}")
    return Endpoint(
        "tcp" if transport in UNIX_TRANSPORTS else transport, host=host, port=int(port_text)
    )
