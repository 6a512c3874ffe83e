"""OpenSSL's record buffers kept by rpcmeter's client contexts (rpcmeter.net.tls_buffers)."""

from __future__ import annotations

import ssl

import pytest

from rpcmeter.net import tls_buffers as tls_buffers
from rpcmeter.net.tls import (
    ClientTls,
    ResumingContext,
    RunCertificates,
    TlsSettings,
    client_context,
)
from rpcmeter.net.tls_buffers import keep_record_buffers, record_buffers_kept


def test_the_ssl_module_releases_the_buffers_and_keeping_them_clears_that() -> None:
    context = ssl.create_default_context()
    assert record_buffers_kept(context) is False  # CPython sets SSL_MODE_RELEASE_BUFFERS
    assert keep_record_buffers(context)
    assert record_buffers_kept(context) is True
    assert keep_record_buffers(context)  # already kept: still True, nothing else changed
    assert record_buffers_kept(context) is True
    # another context is its own: untouched
    assert record_buffers_kept(ssl.create_default_context()) is False


def test_client_contexts_keep_their_buffers() -> None:
    run = RunCertificates()
    try:
        for resume in (False, True):
            ctx = client_context(ClientTls(TlsSettings(resume=resume), run.ca_file, None))
            assert isinstance(ctx, ResumingContext) == resume
            assert record_buffers_kept(ctx) is True
    finally:
        run.close()


def test_a_python_of_unknown_layout_changes_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    context = ssl.create_default_context()
    monkeypatch.setattr(tls_buffers, "KNOWN_LAYOUT", ())
    assert keep_record_buffers(context) is False
    assert record_buffers_kept(context) is None
    monkeypatch.undo()
    assert record_buffers_kept(context) is False  # still released


def test_a_pointer_whose_options_are_not_the_contexts_is_not_used(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    found = tls_buffers._functions()
    assert found is not None
    get_options, ctrl = found
    context = ssl.create_default_context()
    # OpenSSL's options at the pointer read agree with the context's: the check passes as is
    assert get_options(ctypes_pointer(context)) == context.options
    monkeypatch.setattr(tls_buffers, "_functions", lambda: (lambda pointer: -1, ctrl))
    assert keep_record_buffers(context) is False
    assert record_buffers_kept(context) is None
    monkeypatch.undo()
    assert record_buffers_kept(context) is False


def ctypes_pointer(context: ssl.SSLContext) -> int:
    reached = tls_buffers._openssl(context)
    assert reached is not None
    return reached[1]
