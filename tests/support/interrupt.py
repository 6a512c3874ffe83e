"""Starting a process that Ctrl-C reaches as it would from a terminal."""

from __future__ import annotations

import signal


def ctrl_c_default() -> None:
    """A ``preexec_fn``: SIGINT at its default in the child. A process started with SIGINT
    ignored (any background job of a non-interactive shell, pytest run as one included) passes
    that on to its children, and Python then installs no KeyboardInterrupt handler."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)
