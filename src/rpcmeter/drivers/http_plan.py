"""The HTTP driver's requests that vary: placeholders in ``path``, ``headers``, ``body`` and
``expect``, a ``data_file`` of requests, and mixes (``kind = "mix"``), for HTTP/1.1 and HTTP/2.

Options (a target's or a variant's, beside the driver's others):

- ``path``, ``headers`` values and ``body`` may hold placeholders
  (:mod:`rpcmeter.protocols.templates`): ``path = "/kv/{{random_int(1, 1000)}}"``;
- ``data_file = "requests.jsonl"``: one request a line, a table of any of ``method``, ``path``,
  ``headers`` and ``body`` over the options' request (:mod:`rpcmeter.protocols.request_data`),
  sent in turn by every loop from an offset of its own;
- ``expect = { body = "..." }``: the body every reply must have (placeholders filled with the
  request's values); a reply with another body counts as ``mismatch``.

A mix's calls are tables of the same keys (over the options' request; ``method`` is ``GET``, or
``POST`` for a call with a body, unless given; every call needs a ``path``). The data files are
read when the suite is loaded (:func:`prepare_suite`; an error names the file and line), and
handed to the clients with the variant's prepared mapping. Each client compiles its
:class:`~rpcmeter.drivers.varying.Plan` once (:func:`http_plan`); a request without any of these
stays the driver's one pre-encoded request.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rpcmeter.drivers.varying import Call, Plan
from rpcmeter.errors import SuiteError
from rpcmeter.protocols.bodies import request_body
from rpcmeter.protocols.http_request import (
    REQUEST_KEYS,
    HttpRequest,
    RequestError,
    request_from,
)
from rpcmeter.protocols.request_data import DataError, Entry, read_entries
from rpcmeter.protocols.templates import Template, is_template, parse
from rpcmeter.suite.workloads import MixParams, PayloadParams, WorkloadParams

if TYPE_CHECKING:
    from rpcmeter.suite.model import Suite

DATA_KEY = "data_files"  # DriverContext.prepared[DATA_KEY]: data file name -> its entries
OPTION_KEYS = frozenset({"data_file", "expect"})  # beside the driver's request options
UNSET = Template("", ("",), ())  # a mix call's path before it is given

Data = Callable[[str], tuple[Entry, ...]]  # a data file's entries, by its name in the suite


def default_path(w: WorkloadParams) -> str:
    if isinstance(w, PayloadParams):
        return f"/payload?reply_bytes={w.reply_bytes}"
    return f"/{w.kind}"


def default_method(w: WorkloadParams, opts: Mapping[str, Any]) -> str:
    default = "GET" if w.kind == "noop" else "POST"
    return str(opts.get("method") or default).upper()


def _options_table(opts: Mapping[str, Any]) -> dict[str, Any]:
    return {k: opts[k] for k in REQUEST_KEYS if opts.get(k) is not None}


def varies(opts: Mapping[str, Any], w: WorkloadParams) -> bool:
    """Whether requests of ``w`` with these options need a plan (else: one fixed request)."""
    if isinstance(w, MixParams) or opts.get("data_file") is not None:
        return True
    if opts.get("expect") is not None:
        return True
    headers = opts.get("headers") or {}
    texts = [opts.get("method"), opts.get("path"), opts.get("body")]
    if isinstance(headers, dict):  # a placeholder in a name too: the plan names the fault
        texts += [*headers, *headers.values()]
    return any(is_template(t) for t in texts)


def _lines(data: Data, name: Any, base: HttpRequest, where: str) -> list[HttpRequest]:
    if not isinstance(name, str):
        raise RequestError(f"{where}data_file: expected a file name (got {name!r})")
    try:
        entries = data(name)
        out = []
        for entry in entries:
            if not isinstance(entry.value, Mapping):
                raise RequestError(
                    f"{entry.where}: expected a table of {', '.join(REQUEST_KEYS[:4])} "
                    f"(got {str(entry.value)[:40]!r})"
                )
            out.append(request_from(entry.value, base, f"{entry.where}: "))
    except (DataError, RequestError) as exc:
        raise type(exc)(f"{where}data_file: {exc}") from None
    return out


def http_plan(opts: Mapping[str, Any], w: WorkloadParams, data: Data) -> Plan[HttpRequest] | None:
    """The requests of workload ``w`` with these options (None: one fixed request, the
    driver's own path). RequestError or DataError naming the key or line at fault."""
    if not varies(opts, w):
        return None
    table = _options_table(opts)
    if not isinstance(w, MixParams):
        try:
            body = request_body(w)
        except ValueError:
            body = b""
        req = HttpRequest(default_method(w, opts), parse(default_path(w)), (), body)
        req = request_from(table, req, "options")
        entries = [req]
        if opts.get("data_file") is not None:
            entries = _lines(data, opts["data_file"], req, "options.")
        _one_kind_of_reply(entries, "options.")
        return Plan((Call("", 1.0, tuple(entries)),))
    base = request_from(table, HttpRequest("GET", UNSET), "options")
    calls = []
    for i, (name, weight, call) in enumerate(
        zip(w.names(), w.weights(), w.requests(), strict=True)
    ):
        at = f"calls[{i}]"
        own = {k: v for k, v in call.items() if k != "data_file"}
        req = request_from(own, base, at)
        if "method" not in own and "method" not in table and req.body != b"":
            req = replace(req, method="POST")
        entries = [req]
        if call.get("data_file") is not None:
            entries = _lines(data, call["data_file"], req, f"{at}.")
        for e in entries:
            if e.path == UNSET:
                raise RequestError(f"{at}.path: every call of a mix needs a path ({name!r})")
        calls.append(Call(name, weight, tuple(entries)))
    _one_kind_of_reply([e for c in calls for e in c.entries], "calls: ")
    return Plan(tuple(calls), mix=True)


def _one_kind_of_reply(entries: list[HttpRequest], where: str) -> None:
    """HEAD requests (whose replies have no body) are not mixed with others on a connection."""
    heads = [e.method == "HEAD" for e in entries]
    if any(heads) and not all(heads):
        raise RequestError(
            f"{where}method: HEAD requests (replies without a body) cannot be mixed with "
            "other methods"
        )


def data_names(opts: Mapping[str, Any], w: WorkloadParams) -> list[str]:
    """The data files the options and the workload name."""
    names = [opts.get("data_file")]
    if isinstance(w, MixParams):
        names += [c.get("data_file") for c in w.calls]
    return [n for n in names if isinstance(n, str)]


def suite_base(suite: Suite, where: str) -> Path:
    path = Path(suite.path or where)
    return path.resolve().parent if path.is_file() else Path.cwd()


def file_data(base: Path, known: Mapping[str, tuple[Entry, ...]] | None = None) -> Data:
    """The entries of a data file: from ``known`` (what the suite's load read), else read
    from ``base`` (a relative name)."""

    def data(name: str) -> tuple[Entry, ...]:
        if known is not None and name in known:
            return known[name]
        path = Path(name).expanduser()
        return tuple(read_entries(path if path.is_absolute() else base / path, name))

    return data


def prepare_suite(suite: Suite, where: str, driver: str) -> None:
    """Read every data file the variants of ``driver`` name (each once) and compile each
    workload's plan once, so that a fault is a suite error before any server starts; the
    entries go to the clients as ``prepared[variant]["data_files"]``."""
    base = suite_base(suite, where)
    read: dict[str, tuple[Entry, ...]] = {}

    def data(name: str) -> tuple[Entry, ...]:
        if name not in read:
            read[name] = file_data(base)(name)
        return read[name]

    for vname, variant in suite.variants.items():
        if suite.driver_of(vname) != driver:
            continue
        opts = {**suite.target.options, **variant.options}
        for wname, w in suite.workloads.items():
            if w.kind == "idle":
                continue
            params = suite.workload_params(wname)
            try:
                http_plan(opts, params, data)
            except (RequestError, DataError) as exc:
                text = str(exc)
                if text.startswith("calls["):
                    raise SuiteError(f"{where}: workloads.{_quoted(wname)}.{text}") from None
                raise SuiteError(f"{where}: variants.{_quoted(vname)}: {text}") from None
            names = data_names(opts, params)
            if names:
                mine = suite.prepared.setdefault(vname, {}).setdefault(DATA_KEY, {})
                mine.update({n: read[n] for n in names})


def _quoted(name: str) -> str:
    return f'"{name}"' if " " in name or "." in name else name
