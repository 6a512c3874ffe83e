"""OpenSSL's record buffers kept for the life of a connection, as wrk keeps them.

CPython's ``ssl`` module sets ``SSL_MODE_RELEASE_BUFFERS`` on every context it makes: OpenSSL
then frees a connection's read buffer after each record it has read, and its write buffer after
each record it has written, and allocates them again for the next one (about 17 KiB each). For
a client that sends one request and reads one reply at a time, that is two allocations and two
frees a request, in OpenSSL and in the C library: about 1,260 instructions of the 22,700 a
request costs the HTTPS/1.1 floor client (``benchmarks/vs_wrk.py``), measured with callgrind
against the Go greeter. wrk keeps its buffers (h2load sets the mode, as CPython does).

:func:`keep_record_buffers` clears that mode on a context, before it makes connections (each
takes its context's mode when it is made). The ``ssl`` module has no call for it: this module
reaches OpenSSL's ``SSL_CTX_ctrl`` through :mod:`ctypes`, with the ``SSL_CTX`` pointer read from
the context object, whose C struct (``PySSLContext`` in CPython's ``Modules/_ssl.c``) begins with
it after the object header (uvloop and other extensions read it there too). Before it changes
anything it checks that the pointer is the context's: OpenSSL's options at that pointer must be
the context's ``options``. Where that cannot be checked or does not hold (another Python, no
shared library to reach, a layout it does not know) it changes nothing and says so by returning
False: the connection works as before and costs what it did.

Memory: the buffers are allocated once per connection and stay; only what a record fills is
touched. 2,000 idle HTTPS connections that each made one small request used 34.2 KiB of resident
memory each with the buffers kept and 35.7 KiB with them released.
"""

from __future__ import annotations

import _ssl
import ctypes
import functools
import ssl
import sys
from collections.abc import Callable

# OpenSSL's ssl.h
SSL_CTRL_MODE = 33
SSL_CTRL_CLEAR_MODE = 78
SSL_MODE_RELEASE_BUFFERS = 0x10

# the CPython versions whose PySSLContext is known to begin with the SSL_CTX pointer
KNOWN_LAYOUT = ((3, 11), (3, 12), (3, 13), (3, 14))


@functools.cache
def _functions() -> tuple[Callable[..., int], Callable[..., int]] | None:
    """OpenSSL's ``SSL_CTX_get_options`` and ``SSL_CTX_ctrl``, as the ``ssl`` module links them
    (None: not reachable)."""
    try:
        lib = ctypes.CDLL(getattr(_ssl, "__file__", None))
        get_options = lib.SSL_CTX_get_options
        ctrl = lib.SSL_CTX_ctrl
    except (OSError, AttributeError, TypeError):  # no library to open, or no such function
        return None
    get_options.restype = ctypes.c_uint64
    get_options.argtypes = [ctypes.c_void_p]
    ctrl.restype = ctypes.c_long
    ctrl.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_long, ctypes.c_void_p]
    return get_options, ctrl


def _openssl(context: ssl.SSLContext) -> tuple[Callable[..., int], int] | None:
    """OpenSSL's ``SSL_CTX_ctrl`` and ``context``'s ``SSL_CTX`` pointer, checked; None where
    they cannot be reached or the check fails."""
    if sys.implementation.name != "cpython" or sys.version_info[:2] not in KNOWN_LAYOUT:
        return None
    functions = _functions()
    if functions is None:
        return None
    get_options, ctrl = functions
    pointer = ctypes.c_void_p.from_address(id(context) + object.__basicsize__).value
    if not pointer or get_options(pointer) != context.options:
        return None
    return ctrl, pointer


def record_buffers_kept(context: ssl.SSLContext) -> bool | None:
    """Whether ``context``'s connections keep their record buffers (None: not known)."""
    reached = _openssl(context)
    if reached is None:
        return None
    ctrl, pointer = reached
    return not ctrl(pointer, SSL_CTRL_MODE, 0, None) & SSL_MODE_RELEASE_BUFFERS


def keep_record_buffers(context: ssl.SSLContext) -> bool:
    """Clear ``SSL_MODE_RELEASE_BUFFERS`` on ``context`` (see the module's text); True when the
    mode is clear now, False when nothing was changed."""
    reached = _openssl(context)
    if reached is None:
        return False
    ctrl, pointer = reached
    mode = ctrl(pointer, SSL_CTRL_MODE, 0, None)
    if mode & SSL_MODE_RELEASE_BUFFERS:
        mode = ctrl(pointer, SSL_CTRL_CLEAR_MODE, SSL_MODE_RELEASE_BUFFERS, None)
    return not mode & SSL_MODE_RELEASE_BUFFERS
