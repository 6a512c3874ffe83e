"""Request templates: the placeholders a request may hold, parsed once and filled per request.

A template is text with placeholders in double braces::

    "/kv/{{random_int(1, 1000)}}"          "order-{{request_number}}"          "{{uuid}}"

=========================  =====================================================================
``{{request_number}}``     the request's number, unique across the case: every client, every
                           loop, every Dask worker (:class:`Loop`)
``{{client}}``             the client's index (0, 1, ... across the case)
``{{loop}}``               the loop's index within its client (0 .. ``load.concurrency`` - 1)
``{{uuid}}``               a version-4 UUID, new in every run (see below)
``{{random_int(a, b)}}``   an integer from ``a`` to ``b``, both included
``{{random_string(n)}}``   ``n`` letters and digits
=========================  =====================================================================

The random values come from a generator per loop seeded from the suite's ``seed``, the client and
the loop (:meth:`Loop.rng`), so a run repeats them. ``{{uuid}}`` is the exception: an id must not
repeat from run to run (a server that deduplicates by request id would see replays), so its
generator is seeded from the run's own ``uuid_seed`` (:meth:`Loop.uuid_rng`; drawn at random for
each run and kept in the result) instead of the suite's ``seed``. Within one request, each placeholder has one
value wherever it appears (path, headers, body, ``expect``): :func:`values` evaluates a request's
distinct placeholders once, and every part of the request is formatted from that tuple.

Numbering: loop ``g`` of the case's ``G`` loops (``g = client * loops + loop``) numbers its
``j``-th request (warmup requests included, from 0) ``g + j * G``. Numbers are therefore
distinct across the whole case without any coordination between processes or machines, and with
a count of requests per loop (every loop sending the same number) they are exactly
``0 .. G * (warmup + requests) - 1``. With a duration, or an open loop, they stay distinct but
leave gaps.

Parsing (:func:`parse`) raises :class:`TemplateError` in one line: an unknown placeholder (with
the closest known name), a ``{{`` without its ``}}``, arguments that do not fit. A string without
``{{`` is no template (:func:`is_template`): it is sent as it is, on the pre-encoded path.
"""

from __future__ import annotations

import difflib
import random
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

Value = int | str  # what a placeholder evaluates to
Values = tuple[Value, ...]

NUMERIC = frozenset({"request_number", "client", "loop", "random_int"})
ARITY = {
    "request_number": 0,
    "client": 0,
    "loop": 0,
    "uuid": 0,
    "random_int": 2,
    "random_string": 1,
}
MAX_STRING = 1 << 20  # random_string(n): at most this many characters
_INSIDE = re.compile(r"\s*([A-Za-z_][A-Za-z0-9_]*)\s*(?:\((.*)\))?\s*", re.S)
_ALPHABET = bytes(range(256)).translate(
    None, bytes(c for c in range(256) if not chr(c).isascii() or not chr(c).isalnum())
)  # A-Z a-z 0-9 in byte order


class TemplateError(ValueError):
    """A template that cannot be used (one line: what is wrong and where in the text)."""


@dataclass(frozen=True)
class Expr:
    """One placeholder: its name and integer arguments."""

    name: str
    args: tuple[int, ...] = ()

    @property
    def numeric(self) -> bool:
        """Whether it evaluates to an integer (it may then fill a numeric field)."""
        return self.name in NUMERIC

    def __str__(self) -> str:
        inner = f"{self.name}({', '.join(map(str, self.args))})" if self.args else self.name
        return "{{" + inner + "}}"

    def bounds(self) -> tuple[int, int] | None:
        """The range of an integer placeholder (None: unbounded above or not an integer)."""
        if self.name == "random_int":
            return self.args[0], self.args[1]
        return None


@dataclass(frozen=True)
class Template:
    """A parsed template: ``pieces`` of literal text around ``exprs`` (``len(pieces) ==
    len(exprs) + 1``). Picklable: it travels to the client processes as it is."""

    text: str
    pieces: tuple[str, ...]
    exprs: tuple[Expr, ...]

    @property
    def single(self) -> Expr | None:
        """The placeholder the whole text is (``"{{request_number}}"``), if it is one."""
        if len(self.exprs) == 1 and self.pieces == ("", ""):
            return self.exprs[0]
        return None

    def render(self, values: dict[Expr, Value]) -> str:
        """The text with each placeholder replaced by its value (slow; for checks and errors)."""
        out = [self.pieces[0]]
        for expr, piece in zip(self.exprs, self.pieces[1:], strict=True):
            out += [str(values[expr]), piece]
        return "".join(out)


def is_template(value: object) -> bool:
    """Whether ``value`` is text that holds a placeholder (or tries to)."""
    return isinstance(value, str) and "{{" in value


def parse(text: str) -> Template:
    """The template of ``text`` (TemplateError naming the first fault)."""
    pieces: list[str] = []
    exprs: list[Expr] = []
    pos = 0
    while True:
        start = text.find("{{", pos)
        if start < 0:
            pieces.append(text[pos:])
            break
        end = text.find("}}", start + 2)
        nested = text.find("{{", start + 2)
        if end < 0 or 0 <= nested < end:
            raise TemplateError(f"unbalanced {{{{ at character {start + 1} of {_shown(text)}")
        pieces.append(text[pos:start])
        exprs.append(_expr(text[start + 2 : end], text))
        pos = end + 2
    return Template(text, tuple(pieces), tuple(exprs))


def _shown(text: str) -> str:
    return repr(text if len(text) <= 60 else text[:57] + "...")


def _expr(inner: str, text: str) -> Expr:
    m = _INSIDE.fullmatch(inner)
    name = m.group(1) if m else inner.strip()
    if m is None or name not in ARITY:
        close = difflib.get_close_matches(name, ARITY, n=1, cutoff=0.5)
        hint = f"did you mean {{{{{close[0]}}}}}? " if close else ""
        known = ", ".join(f"{{{{{n}}}}}" for n in ARITY)
        raise TemplateError(
            f"unknown placeholder {{{{{inner.strip()}}}}} in {_shown(text)} ({hint}known: {known})"
        )
    raw = m.group(2)
    args: list[int] = []
    if raw is not None and raw.strip():
        for part in raw.split(","):
            try:
                args.append(int(part.strip()))
            except ValueError:
                raise TemplateError(
                    f"{{{{{inner.strip()}}}}}: arguments are whole numbers (got {part.strip()!r})"
                ) from None
    want = ARITY[name]
    if len(args) != want or (raw is not None and want == 0):
        form = {0: name, 1: f"{name}(n)", 2: f"{name}(a, b)"}[want]
        raise TemplateError(f"{{{{{inner.strip()}}}}}: expected {{{{{form}}}}}")
    if name == "random_int" and args[0] > args[1]:
        raise TemplateError(f"{{{{{inner.strip()}}}}}: a must not be above b")
    if name == "random_string" and not 1 <= args[0] <= MAX_STRING:
        raise TemplateError(f"{{{{{inner.strip()}}}}}: n must be from 1 to {MAX_STRING}")
    return Expr(name, tuple(args))


def distinct(templates: Iterable[Template]) -> tuple[Expr, ...]:
    """The distinct placeholders of ``templates``, in order of first appearance: a request's
    value tuple (:func:`values`) holds one value for each."""
    return tuple(dict.fromkeys(e for t in templates for e in t.exprs))


def sample(expr: Expr) -> Value:
    """A value ``expr`` can take (checks at load: what fits a field)."""
    if expr.name == "random_int":
        return expr.args[0]
    if expr.name == "uuid":
        return "00000000-0000-4000-8000-000000000000"
    if expr.name == "random_string":
        return "a" * expr.args[0]
    return 0


# ---- per loop ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Loop:
    """Who sends: closed loop ``loop`` of client ``client``, in a case of ``clients`` clients of
    ``loops`` loops each, seeded from the suite's ``seed`` (``{{uuid}}``: from the run's
    ``uuid_seed``; None: the suite's ``seed`` too)."""

    client: int = 0
    loop: int = 0
    clients: int = 1
    loops: int = 1
    seed: int = 0
    uuid_seed: str | None = None

    @property
    def index(self) -> int:
        """This loop's index among the case's loops (``g``)."""
        return self.client * self.loops + self.loop

    @property
    def total(self) -> int:
        """The case's loops (``G``)."""
        return self.clients * self.loops

    def rng(self, purpose: str) -> random.Random:
        """The generator of one purpose (``values``, ``mix``) for this loop, seeded from the
        suite's seed, the client and the loop (the same run draws the same values)."""
        return random.Random(f"rpcmeter:{purpose}:{self.seed}:{self.client}:{self.loop}")

    def uuid_rng(self) -> random.Random:
        """The generator of this loop's ``{{uuid}}`` values: seeded from the run's
        ``uuid_seed`` (unique to the run), the client and the loop; without one, from the
        suite's seed like the other values."""
        if self.uuid_seed is None:
            return self.rng("uuid")
        return random.Random(f"rpcmeter:uuid:{self.uuid_seed}:{self.client}:{self.loop}")


class Counter:
    """A loop's request numbers: ``n`` is the next request's; :meth:`advance` after each
    request (see the module doc)."""

    __slots__ = ("n", "step")

    def __init__(self, loop: Loop) -> None:
        self.n = loop.index
        self.step = loop.total

    def advance(self) -> None:
        self.n += self.step


def _uuid(rng: random.Random) -> Callable[[], str]:
    bits = rng.getrandbits

    def uuid() -> str:
        # version 4, variant 10: 4 and 8-b at their places, as uuid.uuid4() but from ``rng``
        h = "%032x" % ((bits(128) & ~(0xF000 << 64) & ~(0xC << 60)) | (0x4000 << 64) | (0x8 << 60))
        return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"

    return uuid


def _random_int(rng: random.Random, a: int, b: int) -> Callable[[], int]:
    span = b - a + 1
    if span > 1 << 52:  # beyond a float's exact integers
        randrange = rng.randrange
        return lambda: a + randrange(span)
    rand = rng.random
    return lambda: a + int(rand() * span)


def _random_string(rng: random.Random, n: int) -> Callable[[], str]:
    randbytes = rng.randbytes
    table = (_ALPHABET * 5)[:256]  # each byte to a letter or digit (62 of them, near uniform)
    trans = bytes.maketrans(bytes(range(256)), table)
    return lambda: randbytes(n).translate(trans).decode("ascii")


def evaluator(
    exprs: Sequence[Expr],
    loop: Loop,
    counter: Counter,
    rng: random.Random,
    uuids: random.Random | None = None,
) -> Callable[[], Values]:
    """A function giving the values of ``exprs`` for the loop's next request: the request
    number read from ``counter`` (which the sender advances), random values drawn from ``rng``
    (the loop's: :meth:`Loop.rng`, shared by every template of the loop, so that no two draw
    the same sequence), UUIDs from ``uuids`` (the loop's :meth:`Loop.uuid_rng`, shared the same
    way; None: from ``rng``)."""
    fns: list[Callable[[], Value]] = []
    for e in exprs:
        if e.name == "request_number":
            fns.append(lambda: counter.n)
        elif e.name == "client":
            fns.append(lambda v=loop.client: v)  # type: ignore[misc]
        elif e.name == "loop":
            fns.append(lambda v=loop.loop: v)  # type: ignore[misc]
        elif e.name == "uuid":
            fns.append(_uuid(rng if uuids is None else uuids))
        elif e.name == "random_int":
            fns.append(_random_int(rng, *e.args))
        else:
            fns.append(_random_string(rng, e.args[0]))
    if len(exprs) == 1 and exprs[0].name == "request_number":
        return lambda: (counter.n,)
    if len(fns) == 1:
        (f,) = fns
        return lambda: (f(),)
    return lambda: tuple([f() for f in fns])


# ---- formatting ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class BytesFormat:
    """Pieces of bytes around placeholders, compiled into one ``%`` format: ``fmt % args``
    with ``args`` picked from a request's value tuple (:meth:`formatter`)."""

    fmt: bytes  # the literal bytes with %% escaped, a %d or %s for each placeholder
    picks: tuple[int, ...]  # for each placeholder, its index in the value tuple
    encode: tuple[bool, ...]  # whether that value is text (encoded) rather than an integer

    @classmethod
    def of(cls, parts: Sequence[bytes | Expr], exprs: Sequence[Expr]) -> BytesFormat:
        """The format of ``parts`` (literal bytes and placeholders, in order); ``exprs`` are the
        request's distinct placeholders (the order of its value tuple)."""
        index = {e: i for i, e in enumerate(exprs)}
        fmt = bytearray()
        picks: list[int] = []
        encode: list[bool] = []
        for part in parts:
            if isinstance(part, Expr):
                fmt += b"%d" if part.numeric else b"%s"
                picks.append(index[part])
                encode.append(not part.numeric)
            else:
                fmt += part.replace(b"%", b"%%")
        return cls(bytes(fmt), tuple(picks), tuple(encode))

    @property
    def constant(self) -> bytes | None:
        """The bytes when there is no placeholder (None otherwise)."""
        return self.fmt.replace(b"%%", b"%") if not self.picks else None

    def formatter(self, charset: str = "utf-8") -> Callable[[Values], bytes]:
        """``fill(values) -> bytes``; text values encoded in ``charset``."""
        fmt, picks, encode = self.fmt, self.picks, self.encode
        if not picks:
            const = fmt.replace(b"%%", b"%")
            return lambda values: const
        if len(picks) == 1:
            (i,) = picks
            if encode[0]:
                return lambda values: fmt % (values[i].encode(charset),)  # type: ignore[union-attr]
            return lambda values: fmt % (values[i],)
        if not any(encode):
            return lambda values: fmt % tuple([values[i] for i in picks])
        pairs = tuple(zip(picks, encode, strict=True))
        return lambda values: (
            fmt
            % tuple(
                [values[i].encode(charset) if text else values[i] for i, text in pairs]  # type: ignore[union-attr]
            )
        )


def text_parts(template: Template, charset: str = "utf-8") -> list[bytes | Expr]:
    """A template as parts for :meth:`BytesFormat.of`: its pieces encoded, its placeholders."""
    parts: list[bytes | Expr] = [template.pieces[0].encode(charset)]
    for expr, piece in zip(template.exprs, template.pieces[1:], strict=True):
        parts += [expr, piece.encode(charset)]
    return [p for p in parts if p != b""]


def text_formatter(template: Template, exprs: Sequence[Expr]) -> Callable[[Values], str]:
    """``fill(values) -> str`` for one template (values picked by ``exprs``' order)."""
    if not template.exprs:
        text = template.text
        return lambda values: text
    single = template.single
    if single is not None:
        i = list(exprs).index(single)
        return lambda values: str(values[i])
    fmt, picks = text_format(template, exprs)
    return lambda values: fmt % tuple([values[i] for i in picks])


def text_format(template: Template, exprs: Sequence[Expr]) -> tuple[str, tuple[int, ...]]:
    """A template's text as one ``%`` format (``%s`` for each placeholder) and, for each
    placeholder, its index in the values (``exprs``' order): ``fmt % tuple(values[i] for i in
    picks)`` is the text."""
    index = {e: i for i, e in enumerate(exprs)}
    fmt = template.pieces[0].replace("%", "%%") + "".join(
        "%s" + p.replace("%", "%%") for p in template.pieces[1:]
    )
    return fmt, tuple(index[e] for e in template.exprs)
