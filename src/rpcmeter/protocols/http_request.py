"""HTTP requests as the suite writes them, and their bytes: method, path, headers and body, whose
path, header values, body and expected reply body may hold placeholders
(:mod:`rpcmeter.protocols.templates`).

:func:`request_from` checks a table (a target's options, a call of a mix, a line of a data file)
and merges it over the request it refines: ``headers`` add to the ones before, the other keys
replace them. A placeholder in the method or in a header's name is an error (those cannot take
one), as is a key the request does not have.

:func:`h1_filler` compiles a request into one ``%`` format of its HTTP/1.1 bytes
(:class:`~rpcmeter.protocols.templates.BytesFormat`): a request without placeholders is those
bytes (:func:`build_request`), one with placeholders costs one format per request
(``Content-Length`` computed when the body varies). :func:`h2_fields` gives the header list of the
same request over HTTP/2, each value fixed or a template.
"""

from __future__ import annotations

import difflib
import functools
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from typing import Any

from rpcmeter.protocols.templates import (
    BytesFormat,
    Expr,
    Template,
    TemplateError,
    Values,
    distinct,
    parse,
    text_parts,
)

NO_BODY_METHODS = ("GET", "HEAD", "DELETE", "OPTIONS")
REQUEST_KEYS = ("method", "path", "headers", "body", "expect")
# not allowed in HTTP/2 (RFC 9113, 8.2.2); ``host`` becomes ``:authority``
CONNECTION_HEADERS = frozenset(
    {"connection", "keep-alive", "proxy-connection", "transfer-encoding", "upgrade", "host"}
)
HEAD_CHARSET = "latin-1"


class RequestError(ValueError):
    """A request table that does not make a request (one line naming the key)."""


@dataclass(frozen=True)
class HttpRequest:
    """One request: ``body`` is text (a template) or the workload's own bytes; ``expect`` the
    reply body every reply must be (None: no such check)."""

    method: str
    path: Template
    headers: tuple[tuple[str, Template], ...] = ()
    body: Template | bytes = b""
    expect: Template | None = None

    @functools.cached_property
    def exprs(self) -> tuple[Expr, ...]:
        """The request's distinct placeholders (the order of its value tuple)."""
        parts = [self.path, *(v for _, v in self.headers)]
        if isinstance(self.body, Template):
            parts.append(self.body)
        if self.expect is not None:
            parts.append(self.expect)
        return distinct(parts)

    def body_bytes(self) -> bytes | None:
        """The body when it is fixed (None: it varies)."""
        if isinstance(self.body, bytes):
            return self.body
        return None if self.body.exprs else self.body.text.encode("utf-8")

    def has_body(self) -> bool:
        """Whether the request says ``Content-Length`` (a body, or a method that takes one)."""
        body = self.body_bytes()
        return body is None or bool(body) or self.method not in NO_BODY_METHODS


def _shown(value: Any, limit: int = 60) -> str:
    """``value`` as an error shows it: its repr, cut short."""
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _template(value: Any, key: str) -> Template:
    if isinstance(value, bool) or not isinstance(value, str | int | float):
        raise RequestError(f"{key}: expected text (got {_shown(value)})")
    try:
        return parse(str(value))
    except TemplateError as exc:
        raise RequestError(f"{key}: {exc}") from None


def request_from(table: Mapping[str, Any], base: HttpRequest, where: str = "") -> HttpRequest:
    """``base`` refined by ``table`` (see the module doc); RequestError naming ``where`` and
    the key at fault (``where`` ends with a space when a key is not to follow it with a dot:
    ``"requests.jsonl:17: "``)."""
    at = where if not where or where.endswith(" ") else f"{where}."
    for key in table:
        if key not in REQUEST_KEYS:
            close = difflib.get_close_matches(str(key), REQUEST_KEYS, n=1)
            hint = f"did you mean {close[0]!r}? " if close else ""
            raise RequestError(
                f"{at}{key}: a request has no key {key!r} ({hint}its keys: "
                f"{', '.join(REQUEST_KEYS)})"
            )
    req = base
    if "method" in table:
        method = table["method"]
        if not isinstance(method, str) or not method.strip():
            raise RequestError(f"{at}method: expected a method name (got {method!r})")
        if "{{" in method:
            raise RequestError(f"{at}method: a method cannot take a placeholder ({method!r})")
        req = replace(req, method=method.strip().upper())
    if "path" in table:
        path = table["path"]
        if not isinstance(path, str):  # a number would go out as a path no server takes
            raise RequestError(f'{at}path: expected text, e.g. "/items/1" (got {_shown(path)})')
        req = replace(req, path=_template(path, f"{at}path"))
    if "headers" in table:
        headers = table["headers"]
        if not isinstance(headers, Mapping):
            raise RequestError(f"{at}headers: expected a table of header values")
        merged = dict(req.headers)
        for name, value in headers.items():
            if "{{" in str(name):
                raise RequestError(
                    f"{at}headers: a header name cannot take a placeholder ({name!r})"
                )
            merged[str(name)] = _template(value, f"{at}headers.{name}")
        req = replace(req, headers=tuple(merged.items()))
    if "body" in table:
        req = replace(req, body=_template(table["body"], f"{at}body"))
    if "expect" in table:
        expect = table["expect"]
        if not isinstance(expect, Mapping) or set(expect) - {"body"} or "body" not in expect:
            raise RequestError(
                f'{at}expect: expected {{ body = "..." }}, the reply body every reply must be '
                f"(got {expect!r})"
            )
        req = replace(req, expect=_template(expect["body"], f"{at}expect.body"))
    return req


# ---- HTTP/1.1 ------------------------------------------------------------------------------------


def h1_parts(
    req: HttpRequest, host: str, close: bool = False
) -> tuple[list[bytes | Expr], list[bytes | Expr] | None]:
    """The request's HTTP/1.1 head (up to its end, or, when the body varies, up to the
    ``Content-Length`` value) and its varying body (None: fixed, included in the head)."""

    def text(value: str) -> bytes:
        return value.encode(HEAD_CHARSET)

    head: list[bytes | Expr] = [text(f"{req.method} ")]
    head += text_parts(req.path, HEAD_CHARSET)
    head.append(text(f" HTTP/1.1\r\nHost: {host}\r\n"))
    headers = list(req.headers)
    if close and not any(name.lower() == "connection" for name, _ in headers):
        headers.append(("Connection", parse("close")))
    for name, value in headers:
        head.append(text(f"{name}: "))
        head += text_parts(value, HEAD_CHARSET)
        head.append(b"\r\n")
    body = req.body_bytes()
    if body is None:
        assert isinstance(req.body, Template)
        head.append(b"Content-Length: ")
        return head, text_parts(req.body)
    if req.has_body():
        head.append(text(f"Content-Length: {len(body)}\r\n"))
    head += [b"\r\n", body]
    return head, None


def h1_filler(
    req: HttpRequest, host: str, exprs: tuple[Expr, ...], close: bool = False
) -> Callable[[Values], bytes]:
    """``fill(values) -> bytes`` of one request (values in the order of ``exprs``)."""
    head, body = h1_parts(req, host, close)
    fill_head = BytesFormat.of(head, exprs).formatter(HEAD_CHARSET)
    if body is None:
        return fill_head
    fill_body = BytesFormat.of(body, exprs).formatter("utf-8")

    def fill(values: Values) -> bytes:
        b = fill_body(values)
        return b"%s%d\r\n\r\n%s" % (fill_head(values), len(b), b)

    return fill


def build_request(
    method: str, path: str, host: str, headers: Mapping[str, Any], body: bytes
) -> bytes:
    """The bytes of one HTTP/1.1 request without placeholders (``Content-Length`` when there
    is a body or a method that takes one)."""
    req = HttpRequest(
        method,
        Template(path, (path,), ()),
        tuple((str(k), Template(str(v), (str(v),), ())) for k, v in headers.items()),
        body,
    )
    return h1_filler(req, host, ())(())


def expect_filler(req: HttpRequest, exprs: tuple[Expr, ...]) -> Callable[[Values], bytes] | None:
    """``fill(values) -> bytes``: the reply body ``expect`` asks for (None: no such check)."""
    if req.expect is None:
        return None
    return BytesFormat.of(text_parts(req.expect), exprs).formatter("utf-8")


# ---- HTTP/2 --------------------------------------------------------------------------------------

CONTENT_LENGTH = Expr("content-length")  # the place of a varying body's length in h2_fields


def h2_fields(
    req: HttpRequest, authority: str, scheme: bytes = b"http"
) -> list[tuple[bytes, Template | bytes]]:
    """The request's HTTP/2 header list, pseudo-headers first: each value fixed bytes or a
    template; a varying body's ``content-length`` is the template of :data:`CONTENT_LENGTH`."""
    fields: list[tuple[bytes, Template | bytes]] = [
        (b":method", req.method.encode()),
        (b":scheme", scheme),
        (b":path", req.path if req.path.exprs else req.path.text.encode()),
        (b":authority", authority.encode()),
    ]
    for name, value in req.headers:
        if name.lower() not in CONNECTION_HEADERS:
            fields.append((name.lower().encode(), value if value.exprs else value.text.encode()))
    body = req.body_bytes()
    if body is None:
        fields.append((b"content-length", Template("", ("", ""), (CONTENT_LENGTH,))))
    elif req.has_body():
        fields.append((b"content-length", str(len(body)).encode()))
    return fields
