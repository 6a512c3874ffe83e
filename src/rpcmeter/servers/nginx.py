"""nginx as an external HTTP/1.1 server for rpcmeter (used by the tests and ``benchmarks/vs_wrk.py``).

:func:`prepare` writes a self-contained configuration into a directory of your choice: one
worker (or ``workers``), ``daemon off``, pid, logs and temporary files inside that directory (nothing needs root),
keep-alive as nginx ships it (a connection ends after ``keepalive_requests`` requests, 1000 by
default: the client must reconnect, as it must against a stock nginx), and these locations:

- ``/noop``: ``200`` with an empty body; ``/``: ``200`` with ``hello``;
- ``/unavailable``: ``503`` (for error counting).

With ``tls`` (a certificate chain and its key), it listens for HTTPS instead; with ``http2``, it
speaks HTTP/2 (h2c with prior knowledge in cleartext, ALPN ``h2`` over TLS); with ``grpc_pass``
(``HOST:PORT`` of a gRPC server), every location is proxied there as gRPC instead.

The returned command line starts nginx on the port given by rpcmeter's ``{port}`` placeholder,
so it can be a suite's ``server.command``::

    [target.server]
    command = ["sh", "-c", "sed s/@PORT@/{port}/ DIR/nginx.conf.in > DIR/nginx.conf && exec nginx ..."]
"""

from __future__ import annotations

import shlex
import shutil
from pathlib import Path

TEMPLATE = """\
worker_processes {workers};
pid {dir}/nginx.pid;
error_log {dir}/error.log warn;
events {{
    worker_connections 4096;
}}
http {{
    access_log off;
    client_body_temp_path {dir}/client_body;
    proxy_temp_path {dir}/proxy;
    fastcgi_temp_path {dir}/fastcgi;
    uwsgi_temp_path {dir}/uwsgi;
    scgi_temp_path {dir}/scgi;
{keepalive}    keepalive_timeout 300s;
{upstream}    server {{
        listen {host}:@PORT@ backlog=4096{ssl}{http2};
{ssl_files}{locations}    }}
}}
"""
LOCATIONS = """\
        location = /noop { return 200 ""; }
        location = /unavailable { return 503; }
        location / { return 200 "hello"; }
"""


def executable() -> str | None:
    """Path of the nginx binary, or None when nginx is not installed."""
    return shutil.which("nginx") or next(
        (p for p in ("/usr/sbin/nginx", "/usr/local/sbin/nginx") if Path(p).exists()), None
    )


def prepare(
    directory: Path,
    host: str = "127.0.0.1",
    tls: tuple[str, str] | None = None,
    *,
    http2: bool = False,
    grpc_pass: str | None = None,
    keepalive_requests: int | None = None,
    workers: int = 1,
) -> list[str]:
    """Write the configuration template into ``directory``; return the server command (with the
    ``{port}`` placeholder). With ``tls`` (certificate chain and key files), it serves HTTPS;
    ``http2``, ``grpc_pass``: see the module doc; ``keepalive_requests`` None keeps nginx's
    default; ``workers``: worker processes (one by default)."""
    nginx = executable()
    if nginx is None:
        raise FileNotFoundError("nginx is not installed")
    directory.mkdir(parents=True, exist_ok=True)
    d = str(directory.resolve())
    ssl_files = (
        f"        ssl_certificate {tls[0]};\n        ssl_certificate_key {tls[1]};\n" if tls else ""
    )
    locations = LOCATIONS
    upstream = ""
    if grpc_pass is not None:  # connections to the gRPC server kept open
        upstream = f"    upstream grpc_server {{\n        server {grpc_pass};\n        keepalive 16;\n    }}\n"
        locations = "        location / { grpc_pass grpc://grpc_server; }\n"
    keepalive = (
        "" if keepalive_requests is None else f"    keepalive_requests {keepalive_requests};\n"
    )
    conf_text = TEMPLATE.format(
        dir=d,
        host=host,
        ssl=" ssl" if tls else "",
        http2=" http2" if http2 or grpc_pass is not None else "",
        ssl_files=ssl_files,
        locations=locations,
        keepalive=keepalive,
        upstream=upstream,
        workers=workers,
    )
    (directory / "nginx.conf.in").write_text(conf_text)
    conf = f"{d}/nginx.conf"
    start = [nginx, "-p", d, "-c", conf, "-e", f"{d}/error.log", "-g", "daemon off;"]
    script = (
        f"sed s/@PORT@/{{port}}/ {shlex.quote(d)}/nginx.conf.in > {shlex.quote(conf)} "
        f"&& exec {shlex.join(start)}"
    )
    return ["sh", "-c", script]
