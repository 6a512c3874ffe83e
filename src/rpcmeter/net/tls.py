"""TLS for the TCP drivers and the built-in servers: settings, contexts, run certificates, errors.

A target or a variant turns TLS on with ``tls = true`` or a table (:class:`TlsSettings`)::

    tls = { verify = true, ca_file = "ca.pem", server_name = "api.example",
            cert_file = "client.pem", key_file = "client.key", alpn = ["http/1.1"],
            resume = true }

Verification is on by default; ``verify = false`` is explicit and recorded in the result. With a
server rpcmeter starts (built-in or a ``server.command``) and no ``ca_file``, rpcmeter makes a CA
and a server certificate for the run (:class:`RunCertificates`, with ``trustme``) and the client
trusts that CA. A ``server.command`` receives the paths as ``{ca_file}``, ``{cert_file}`` and
``{key_file}``. With ``cert_file``/``key_file`` the client presents a certificate (mutual TLS);
a built-in server then requires one, issued by the run's CA or by ``client_ca_file``.

A protocol engine asks for a client context with :func:`client_context` (the settings and the
protocols it offers by ALPN) and the name to send and check with :func:`server_name`. Errors of
a handshake become a :class:`TlsError` whose text names the cause in one line
(``tls: certificate verify failed: ...``, see :func:`tls_error`).

Private keys stay in the run's private temporary directory (mode 0700) and are deleted with it;
results carry certificate fingerprints (SHA-256) only.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import os
import shutil
import socket
import ssl
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from pydantic import BaseModel, ConfigDict, Field, StrictBool, ValidationError, field_validator

from rpcmeter.net.tls_buffers import keep_record_buffers
from rpcmeter.net.tls_transport import SOCKET_READ, TlsTransport, set_ready

HANDSHAKE_TIMEOUT_S = 10.0
# the longest wait a setting may ask for (a socket timeout overflows past about 9e9 s)
MAX_WAIT_S = 86_400.0
P = TypeVar("P", bound=asyncio.Protocol)


class TlsSettings(BaseModel):
    """The ``tls`` table of a target or variant (``true``: every key at its default)."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)

    verify: StrictBool = Field(  # true or false: "no" and 0 are no booleans
        True, description="Check the server's certificate and name; false: trust any."
    )
    ca_file: str | None = Field(
        None,
        description="The CA (PEM) that issued the server's certificate; default: the run's own CA, "
        "or the system's for a remote server.",
        examples=["certs/ca.pem"],
    )
    server_name: str | None = Field(
        None,
        description="The name sent (SNI) and checked; default: the host.",
        examples=["api.example.com"],
    )
    cert_file: str | None = Field(
        None,
        description="A certificate (PEM): the client's for mutual TLS, or a built-in server's own.",
        examples=["certs/client.pem"],
    )
    key_file: str | None = Field(
        None, description="The private key (PEM) of cert_file.", examples=["certs/client.key"]
    )
    client_ca_file: str | None = Field(
        None,
        description="Built-in servers: ask clients for a certificate issued by this CA (PEM).",
        examples=["certs/ca.pem"],
    )
    alpn: list[str] | None = Field(
        None,
        description="Protocol names offered by ALPN; default: what the driver speaks.",
        examples=[["h2"]],
    )
    resume: StrictBool = Field(
        False, description="Resume TLS sessions on new connections (a shorter handshake)."
    )
    handshake_timeout_s: float = Field(
        HANDSHAKE_TIMEOUT_S,
        gt=0,
        le=MAX_WAIT_S,
        description="Seconds a TLS handshake may take.",
    )

    @field_validator("alpn")
    @classmethod
    def _alpn(cls, names: list[str] | None) -> list[str] | None:
        """Protocol names as TLS carries them: at most 255 bytes of ASCII each (RFC 7301)."""
        for name in names or ():
            if not name.isascii():
                raise ValueError(f"the protocol name {name!r} is not ASCII")
            if len(name) > 255:
                raise ValueError(f"a protocol name is at most 255 bytes (one has {len(name)})")
        return names


def parse_tls(value: Any) -> TlsSettings | None:
    """``true``/``false``/a table as a suite gives it; raises ValueError with the key at fault
    (``"alpn: ..."``)."""
    if value is None or value is False:
        return None
    if value is True:
        return TlsSettings()
    if isinstance(value, TlsSettings):
        return value
    if not isinstance(value, dict):
        raise ValueError(f"expected true, false or a table (got {value!r})")
    try:
        settings = TlsSettings.model_validate(value)
    except ValidationError as exc:
        err = exc.errors()[0]
        key = ".".join(str(p) for p in err["loc"])
        msg = "unknown key" if err["type"] == "extra_forbidden" else err["msg"]
        msg = msg.removeprefix("Value error, ")
        got = "" if err["type"] == "value_error" else f" (got {err.get('input')!r})"
        raise ValueError(f"{key}: {msg}{got}") from None
    if (settings.cert_file is None) != (settings.key_file is None):
        raise ValueError("cert_file and key_file go together (mutual TLS)")
    if settings.alpn is not None and (not settings.alpn or not all(settings.alpn)):
        raise ValueError(
            f"alpn: expected a non-empty list of protocol names (got {value['alpn']!r})"
        )
    return settings


def check_files(settings: TlsSettings, base: Path | None) -> TlsSettings:
    """The settings with their file paths made absolute (relative to ``base``, the suite's
    directory), each file loaded as the clients and built-in servers load it (:func:`load_files`);
    ValueError naming the key and the file that cannot be read or used."""
    updates: dict[str, str] = {}
    for key in ("ca_file", "cert_file", "key_file", "client_ca_file"):
        path = getattr(settings, key)
        if path is None:
            continue
        p = Path(path).expanduser()
        if not p.is_absolute() and base is not None:
            p = base / p
        if not p.is_file() or not os.access(p, os.R_OK):
            raise ValueError(f"{key}: no readable file {path!r}")
        updates[key] = str(p.resolve())
    load_files(settings.model_copy(update=updates), given=settings)
    return settings.model_copy(update=updates)


class _Encrypted(Exception):
    """A private key that asks for a password (see :func:`load_files`)."""


def _no_password() -> bytes:
    raise _Encrypted


def load_files(settings: TlsSettings, given: TlsSettings | None = None) -> None:
    """Load the certificates and the key of ``settings`` with Python's ssl module, as a client
    and a built-in server will: ValueError naming the key and the file (as ``given`` names it)
    that holds no PEM certificate, no PEM private key, an encrypted key (a password rpcmeter
    cannot ask for) or the key of another certificate."""
    named = given or settings

    def problem(key: str, what: str) -> ValueError:
        return ValueError(f"{key}: {getattr(named, key)!r} {what}")

    for key in ("ca_file", "client_ca_file", "cert_file"):
        path = getattr(settings, key)
        if path is None:
            continue
        try:  # a certificate chain holds certificates as a CA file does
            ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT).load_verify_locations(cafile=path)
        except ssl.SSLError:
            raise problem(key, "holds no PEM certificate") from None
        except OSError as exc:
            raise problem(key, f"cannot be read ({exc.strerror or exc})") from None
    if settings.cert_file is None or settings.key_file is None:
        return
    try:
        ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT).load_cert_chain(
            settings.cert_file, settings.key_file, password=_no_password
        )
    except _Encrypted:
        raise problem(
            "key_file", "is encrypted (rpcmeter cannot ask for its password): decrypt it"
        ) from None
    except ssl.SSLError as exc:
        if exc.reason == "KEY_VALUES_MISMATCH":
            raise problem("key_file", f"is not the key of cert_file {named.cert_file!r}") from None
        raise problem("key_file", "holds no PEM private key") from None
    except OSError as exc:
        raise problem("key_file", f"cannot be read ({exc.strerror or exc})") from None


@dataclass(frozen=True)
class ClientTls:
    """What a client needs for one case (picklable; travels in the driver context)."""

    settings: TlsSettings
    ca_file: str | None  # the user's, or the run CA's
    server_name: str | None  # None: the endpoint's host

    @property
    def resume(self) -> bool:
        return self.settings.resume

    @property
    def handshake_timeout_s(self) -> float:
        return self.settings.handshake_timeout_s


class TlsError(ConnectionError):
    """A TLS handshake failed; the text names the cause (see :func:`tls_error`)."""


# counted and reported as ``tls`` (``connection:tls`` for a lost loop), the text after it
TlsError.__name__ = "tls"
TlsError.__qualname__ = "tls"


def tls_error(exc: BaseException, timeout_s: float | None = None) -> TlsError:
    """One line naming why a handshake failed (``certificate verify failed: ...``)."""
    if isinstance(exc, TlsError):
        return exc
    if isinstance(exc, ssl.SSLCertVerificationError):
        why = exc.verify_message or exc.reason or str(exc)
        return TlsError(f"certificate verify failed: {why}")
    if isinstance(exc, TimeoutError):
        after = f" after {timeout_s:g} s" if timeout_s is not None else ""
        return TlsError(f"handshake timed out{after} (the server does not answer the TLS hello)")
    if isinstance(exc, ssl.SSLError):
        reason = (exc.reason or "").lower().replace("_", " ")
        if reason in ("wrong version number", "packet length too long", "record layer failure"):
            return TlsError(f"{reason}: the server does not speak TLS")
        if "alert" in reason or "certificate required" in reason:
            return TlsError(f"the server refused the handshake: {reason}")
        return TlsError(reason or str(exc))
    if isinstance(exc, ConnectionResetError | EOFError | BrokenPipeError):
        return TlsError(f"connection closed during the handshake: {exc or type(exc).__name__}")
    return TlsError(f"{type(exc).__name__}: {exc}")


class ResumingContext(ssl.SSLContext):
    """A client context that offers the last session it was given (``remember``) to every new
    connection, for any event loop: asyncio and uvloop create their TLS objects with
    :meth:`wrap_bio`, which takes the session here."""

    session: ssl.SSLSession | None = None

    def remember(self, ssl_object: Any) -> None:
        if ssl_object is not None:
            session = ssl_object.session
            if session is not None:
                self.session = session

    def wrap_bio(self, *args: Any, **kwargs: Any) -> ssl.SSLObject:
        if self.session is not None and kwargs.get("session") is None and len(args) < 5:
            kwargs["session"] = self.session
        return super().wrap_bio(*args, **kwargs)

    def wrap_socket(self, *args: Any, **kwargs: Any) -> ssl.SSLSocket:
        if self.session is not None and kwargs.get("session") is None and len(args) < 6:
            kwargs["session"] = self.session
        return super().wrap_socket(*args, **kwargs)


def client_context(tls: ClientTls, alpn: Sequence[str] = ()) -> ssl.SSLContext:
    """A client context for ``tls`` offering ``alpn`` (the suite's ``alpn`` replaces it).

    With ``resume``, the context is a :class:`ResumingContext`: call its ``remember`` with a
    connection's ``ssl_object`` (after a reply, when TLS 1.3 tickets have arrived) and the next
    connections offer that session.

    Its connections keep OpenSSL's record buffers (:mod:`rpcmeter.net.tls_buffers`)."""
    s = tls.settings
    cls = ResumingContext if s.resume else ssl.SSLContext
    ctx = cls(ssl.PROTOCOL_TLS_CLIENT)
    keep_record_buffers(ctx)
    if s.verify:
        if tls.ca_file is not None:
            ctx.load_verify_locations(cafile=tls.ca_file)
        else:
            ctx.load_default_certs(ssl.Purpose.SERVER_AUTH)
    else:
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE
    if s.cert_file is not None:
        ctx.load_cert_chain(s.cert_file, s.key_file)
    protocols = list(s.alpn) if s.alpn is not None else list(alpn)
    if protocols:
        ctx.set_alpn_protocols(protocols)
    return ctx


def server_name(tls: ClientTls, host: str) -> str:
    """The name sent (SNI) and checked against the certificate: ``server_name``, else the host."""
    return tls.server_name or host


def server_context(options: dict[str, Any], alpn: Sequence[str] = ()) -> ssl.SSLContext | None:
    """A built-in server's context from its options' ``tls`` entry (``cert_file``, ``key_file``,
    ``client_ca_file``: require client certificates issued by that CA), or None (cleartext)."""
    conf = options.get("tls")
    if not conf:
        return None
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(conf["cert_file"], conf["key_file"])
    client_cas = conf.get("client_ca_files") or []
    if client_cas:
        for ca in client_cas:
            ctx.load_verify_locations(cafile=ca)
        ctx.verify_mode = ssl.CERT_REQUIRED
    if alpn:
        ctx.set_alpn_protocols(list(alpn))
    return ctx


def fingerprint(pem: bytes | str) -> str:
    """SHA-256 of the (first) certificate in ``pem`` (DER), as lower-case hex."""
    text = pem.decode("ascii") if isinstance(pem, bytes) else pem
    der = ssl.PEM_cert_to_DER_cert(text[: text.index("-----END CERTIFICATE-----") + 25])
    return hashlib.sha256(der).hexdigest()


def file_fingerprint(path: str) -> str | None:
    with contextlib.suppress(OSError, ValueError):
        return fingerprint(Path(path).read_text("ascii"))
    return None


class RunCertificates:
    """A CA and a server certificate made for one run (``trustme``), in a private temporary
    directory: ``ca_file``, ``cert_file`` (the chain), ``key_file``. The server certificate
    names ``localhost``, ``127.0.0.1`` and ``::1`` (and ``names``). :meth:`close` deletes them."""

    def __init__(self, names: Sequence[str] = ()) -> None:
        import trustme

        self.dir = Path(tempfile.mkdtemp(prefix="rpcmeter-tls-"))
        os.chmod(self.dir, 0o700)
        ca = trustme.CA(organization_name="rpcmeter run")
        identities = list(dict.fromkeys(["localhost", "127.0.0.1", "::1", *names]))
        leaf = ca.issue_cert(*identities)
        self.ca_file = str(self.dir / "ca.pem")
        self.cert_file = str(self.dir / "server.pem")
        self.key_file = str(self.dir / "server.key")
        ca.cert_pem.write_to_path(self.ca_file)
        leaf.private_key_pem.write_to_path(self.key_file)
        os.chmod(self.key_file, 0o600)
        with open(self.cert_file, "wb") as f:
            for blob in leaf.cert_chain_pems:
                f.write(blob.bytes())
        self.ca_fingerprint = fingerprint(ca.cert_pem.bytes())
        self.cert_fingerprint = fingerprint(leaf.cert_chain_pems[0].bytes())

    def placeholders(self) -> dict[str, str]:
        """``{ca_file}``, ``{cert_file}``, ``{key_file}`` of a server command."""
        return {"ca_file": self.ca_file, "cert_file": self.cert_file, "key_file": self.key_file}

    def close(self) -> None:
        shutil.rmtree(self.dir, ignore_errors=True)


@dataclass(frozen=True)
class ServerTls:
    """A built-in server's TLS for one case: the run's certificate and key, and the CAs whose
    client certificates it requires (mutual TLS; none: it asks for none)."""

    cert_file: str
    key_file: str
    client_ca_files: tuple[str, ...] = ()

    def option(self) -> dict[str, str | list[str]]:
        """The server's ``tls`` option (read back by :func:`server_context`)."""
        out: dict[str, str | list[str]] = {"cert_file": self.cert_file, "key_file": self.key_file}
        if self.client_ca_files:
            out["client_ca_files"] = list(self.client_ca_files)
        return out


def for_case(
    settings: TlsSettings, run: RunCertificates | None, managed: bool
) -> tuple[ClientTls, ServerTls | None]:
    """The client's TLS for a case and the built-in server's ``tls`` option (None for a server
    rpcmeter does not start). The client trusts ``ca_file`` when given, else the run's CA when
    rpcmeter starts the server, else the system's CAs."""
    ca_file = settings.ca_file
    if ca_file is None and managed and run is not None:
        ca_file = run.ca_file
    client = ClientTls(settings, ca_file, settings.server_name)
    if not managed or run is None:
        return client, None
    cas = (run.ca_file, *([settings.client_ca_file] if settings.client_ca_file else []))
    mutual = settings.cert_file is not None
    return client, ServerTls(run.cert_file, run.key_file, cas if mutual else ())


def probe_handshake(
    tls: ClientTls, host: str, port: int, alpn: Sequence[str] = ()
) -> TlsError | None:
    """Try one handshake with Python's ssl module (to name why another TLS stack failed)."""
    ctx = client_context(tls, alpn)
    timeout = tls.handshake_timeout_s
    try:
        with (
            socket.create_connection((host, port), timeout=timeout) as raw,
            ctx.wrap_socket(raw, server_hostname=server_name(tls, host)) as s,
        ):
            s.settimeout(min(timeout, 1.0))
            try:
                s.recv(1)  # TLS 1.3: a refused client certificate shows here
            except ssl.SSLError:
                raise
            except OSError:
                pass
    except (OSError, ssl.SSLError) as exc:
        return tls_error(exc, timeout)
    return None


def timed_handshake(sock: ssl.SSLSocket, timeout_s: float) -> int:
    """A blocking socket's handshake within ``timeout_s``; its duration (ns). Raises TlsError."""
    sock.settimeout(timeout_s)
    t0 = time.perf_counter_ns()
    try:
        sock.do_handshake()
    except (OSError, ssl.SSLError) as exc:
        raise tls_error(exc, timeout_s) from None
    finally:
        sock.settimeout(None)
    return time.perf_counter_ns() - t0


async def open_tls(
    loop: asyncio.AbstractEventLoop,
    sock: socket.socket,
    context: ssl.SSLContext,
    hostname: str,
    factory: Callable[[], P],
    timeout_s: float,
) -> tuple[TlsTransport, P]:
    """The TLS handshake on a connected non-blocking socket, driven by the loop; then a
    :class:`TlsTransport` running a new ``factory()`` protocol. Raises :class:`TlsError`
    (the socket closed) when the handshake fails or takes longer than ``timeout_s``."""
    incoming, outgoing = ssl.MemoryBIO(), ssl.MemoryBIO()
    tls = context.wrap_bio(incoming, outgoing, server_hostname=hostname)
    fd = sock.fileno()
    deadline = loop.time() + timeout_s

    async def wait(watch: Callable[..., None], unwatch: Callable[[int], object]) -> None:
        ready: asyncio.Future[None] = loop.create_future()
        watch(fd, set_ready, ready)
        try:
            await asyncio.wait_for(ready, max(deadline - loop.time(), 0.0))
        finally:
            unwatch(fd)

    try:
        while True:
            try:
                tls.do_handshake()
                done = True
            except ssl.SSLWantReadError:
                done = False
            out = outgoing.read()
            while out:  # the hello, the client's Finished (and certificate)
                try:
                    out = out[sock.send(out) :]
                except (BlockingIOError, InterruptedError):
                    await wait(loop.add_writer, loop.remove_writer)
            if done:
                break
            await wait(loop.add_reader, loop.remove_reader)
            try:
                data = sock.recv(SOCKET_READ)
            except (BlockingIOError, InterruptedError):
                continue
            if not data:
                raise ConnectionResetError("the server closed the connection")
            incoming.write(data)
    except BaseException as exc:
        sock.close()
        if isinstance(exc, OSError | TimeoutError | EOFError):
            raise tls_error(exc, timeout_s) from None
        raise
    protocol = factory()
    return TlsTransport(loop, sock, tls, incoming, outgoing, protocol), protocol
