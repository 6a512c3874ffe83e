"""``rpcmeter http URL [URL ...]``: load one URL, or compare several, in oha's, wrk's and
h2load's flags, without a suite file (:mod:`rpcmeter.cli.oneline` makes the suite)."""

from __future__ import annotations

import argparse
import re
import stat
import sys
from pathlib import Path
from typing import Any, TextIO

from rpcmeter.cli import oneline, run
from rpcmeter.errors import UsageError

_TOKEN = re.compile(r"^[!#$%&'*+.^_`|~0-9A-Za-z-]+$")  # an HTTP method or header name (RFC 9110)
DATA_FILES = (".jsonl", ".ndjson")  # -D of these: one request a line, as a suite's data_file


def add_parser(sub: Any) -> None:
    p = sub.add_parser(
        "http",
        help="load an HTTP server at a URL, or compare several URLs (oha, wrk and h2load's flags)",
        description="Load an HTTP server at a URL, or compare several (NAME=URL names one); "
        "the first URL is the baseline, the others run interleaved with it.",
    )
    oneline.brief_errors(p)
    p.add_argument("urls", nargs="+", metavar="URL", help="http://HOST[:PORT]/PATH, or NAME=URL")
    p.add_argument(
        "-c",
        "--connections",
        type=oneline.positive_int,
        default=oneline.DEFAULT_CONNECTIONS,
        metavar="N",
        help=f"connections held open (default {oneline.DEFAULT_CONNECTIONS})",
    )
    p.add_argument(
        "-p",
        "--concurrency",
        type=oneline.positive_int,
        default=1,
        metavar="N",
        help="requests in flight per connection (default 1): HTTP/2 streams, pipelined "
        "requests over HTTP/1.1",
    )
    oneline.add_load_flags(p, ("-c",))
    g = p.add_argument_group("request")
    g.add_argument("-m", "--method", default=None, help="GET (default), or POST with a body")
    g.add_argument(
        "-H",
        "--header",
        dest="headers",
        action="append",
        default=[],
        metavar="'NAME: VALUE'",
        help="a request header, repeatable",
    )
    g.add_argument("-d", "--data", default=None, metavar="TEXT", help="the request body")
    oneline.add_data_file_flag(
        g,
        "the request body from a file; a .jsonl file holds one request a line "
        "(method, path, headers, body), sent in turn",
    )
    g.add_argument(
        "--http2",
        action="store_true",
        help="HTTP/2: h2c with prior knowledge for http://, ALPN h2 for https://",
    )
    g.add_argument(
        "--unix-socket",
        type=Path,
        default=None,
        metavar="PATH",
        help="connect to this Unix socket; the URL gives the path and the Host header "
        "(http:// URLs)",
    )
    oneline.add_tls_flags(
        p.add_argument_group("TLS (https://)"),
        ("--insecure", "-k"),
        "do not check the server's certificate",
    )
    run.add_run_outputs(p)
    p.set_defaults(handler=cmd_http)


class Target:
    """One URL as the suite needs it."""

    def __init__(self, url: str) -> None:
        from urllib.parse import urlsplit

        self.url = url
        if any(ord(c) < 0x21 or ord(c) == 0x7F for c in url):
            raise UsageError(f"{url!r}: a URL holds no spaces or control characters")
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https"):
            raise UsageError(f"{url!r}: not an http:// or https:// URL")
        self.tls = parts.scheme == "https"
        if not parts.hostname or "{" in parts.netloc:
            raise UsageError(f"{url!r}: no host in the URL (placeholders go in its path)")
        if parts.username is not None:
            raise UsageError(f"{url!r}: credentials in a URL: send them as -H 'Authorization: ...'")
        try:
            port = parts.port
        except ValueError:
            raise UsageError(f"{url!r}: the port is not a number from 1 to 65535") from None
        if port == 0:
            raise UsageError(f"{url!r}: the port is not a number from 1 to 65535")
        self.host = parts.hostname
        self.port = port if port is not None else (443 if self.tls else 80)
        self.netloc = parts.netloc  # the Host header, as written
        self.path = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
        host = f"[{self.host}]" if ":" in self.host else self.host
        self.address = f"{host}:{self.port}"

    @property
    def shown(self) -> str:
        return self.netloc + self.path


def _headers(items: list[str]) -> dict[str, str]:
    headers: dict[str, str] = {}
    for item in items:
        name, sep, value = item.partition(":")
        name = name.strip()
        if not sep or not _TOKEN.match(name):
            raise UsageError(f"-H {item!r}: expected 'Name: value'")
        headers[name] = value.strip()
    return headers


def _body(args: argparse.Namespace) -> dict[str, Any]:
    """The options that carry the body: ``body`` or ``data_file``."""
    if args.data is not None and args.data_file is not None:
        raise UsageError("-d/--data and -D/--data-file: give one or the other")
    if args.data is not None:
        return {"body": args.data}
    if args.data_file is None:
        return {}
    path: Path = args.data_file
    if path.suffix in DATA_FILES:
        if not path.is_file():
            raise UsageError(f"-D {path}: no such file")
        return {"data_file": str(path.resolve())}
    try:
        return {"body": path.read_text(encoding="utf-8")}
    except FileNotFoundError:
        raise UsageError(f"-D {path}: no such file") from None
    except UnicodeDecodeError:
        raise UsageError(f"-D {path}: not UTF-8 text (a body is text here)") from None
    except OSError as exc:
        raise UsageError(f"-D {path}: {exc.strerror or exc}") from None


def _unix_socket(path: Path | None, urls: list[Target]) -> str | None:
    """``--unix-socket``'s path, checked before any connection (None without the flag)."""
    if path is None:
        return None
    if any(u.tls for u in urls):
        raise UsageError("--unix-socket: for http:// URLs")
    try:
        mode = path.stat().st_mode
    except OSError as exc:
        raise UsageError(f"--unix-socket {path}: {exc.strerror or exc}") from None
    if not stat.S_ISSOCK(mode):
        raise UsageError(f"--unix-socket {path}: not a socket")
    return str(path.resolve())


def suite_of(args: argparse.Namespace, argv: list[str]) -> tuple[dict[str, Any], str]:
    """The suite document of ``rpcmeter http`` and the command line it came from."""
    named = oneline.targets(args.urls)
    urls = [Target(url) for _, url in named]
    shown = [u.shown for u in urls]
    if len(set(shown)) < len(shown):
        shown = [u.url for u in urls]
    names = oneline.variant_names([n for n, _ in named], shown, "URL")
    options: dict[str, Any] = {}
    body = _body(args)
    method = args.method
    if method is not None and not _TOKEN.match(method):
        raise UsageError(f"-m {method!r}: not an HTTP method")
    options["method"] = (method or ("POST" if body else "GET")).upper()
    headers = _headers(args.headers)
    host = next((v for k, v in headers.items() if k.lower() == "host"), None)
    headers = {k: v for k, v in headers.items() if k.lower() != "host"}
    if headers:
        options["headers"] = headers
    options.update(body)
    if args.http2:
        options["http"] = "2"
    if (args.insecure or args.cacert) and not any(u.tls for u in urls):
        raise UsageError("--insecure and --cacert are for https:// URLs")
    files = oneline.tls_files(args)
    socket = _unix_socket(args.unix_socket, urls)
    loops = args.connections * args.concurrency
    command = oneline.command_line("rpcmeter http", argv)
    raw = oneline.suite_document(args, f"http {' '.join(args.urls)}", command, len(urls))
    raw["target"] = {"driver": "http", "options": options}
    variants: dict[str, Any] = {}
    for name, url in zip(names, urls, strict=True):
        v: dict[str, Any] = {
            "address": socket or url.address,
            "options": {"path": url.path, "host": host or url.netloc},
        }
        if socket:
            v["transport"] = "unix"
        if url.tls:
            tls: dict[str, Any] = {"server_name": url.host}
            if args.insecure:
                tls["verify"] = False
            v["tls"] = {**tls, **files}
        variants[name] = v
    raw["variants"] = variants
    paths = {u.path for u in urls}
    workload = f"{options['method']} {urls[0].path}" if len(paths) == 1 else options["method"]
    raw["workloads"] = {workload: {"kind": "noop"}}
    load = oneline.load_table(args, args.connections, loops)
    if "requests" in load and "warmup" not in load:
        load["warmup"] = min(10, load["requests"])
    raw["load"] = load
    return raw, command


def cmd_http(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    argv = list(getattr(args, "argv", None) or sys.argv[1:])
    raw, command = suite_of(args, argv[1:] if argv[:1] == ["http"] else argv)
    return oneline.run(raw, args, "rpcmeter http", command, out, err)
