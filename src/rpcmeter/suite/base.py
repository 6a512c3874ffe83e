"""What every part of the suite model shares: its base class, the value types of its fields
(strict: ``"no"`` is no boolean, ``"10"`` no number), and the checks of command lines and host
names."""

from __future__ import annotations

import shlex
import socket
from typing import Annotated

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    StrictBool,
)

from rpcmeter.net.tls import MAX_WAIT_S

MIN_RATE = 1e-3  # requests/s: the lowest offered rate (one request every 1000 s)


def _command_line(value: str | list[str] | None) -> str | list[str] | None:
    """A command line that splits into a program and its arguments (shell quoting balanced)."""
    if value is None:
        return None
    try:
        parts = shlex.split(value) if isinstance(value, str) else value
    except ValueError as exc:
        raise ValueError(f"cannot split the command line: {exc}") from None
    if not parts or not parts[0]:
        raise ValueError("an empty command line")
    return value


def _resolvable(value: str | None) -> str | None:
    """A host name or address this machine can resolve."""
    if value is None:
        return None
    try:
        socket.getaddrinfo(value, None, type=socket.SOCK_STREAM)
    except (OSError, UnicodeError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        raise ValueError(f"not a host name or address ({reason})") from None
    return value


CommandLine = Annotated[str | list[str] | None, AfterValidator(_command_line)]
Host = Annotated[str, AfterValidator(_resolvable)]


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)  # numbers are finite


# the types of the options several drivers and built-in servers read (strict: ``"no"`` or ``0``
# is no boolean, ``"10"`` no number)
Flag = StrictBool
Timeout = Annotated[float, Field(gt=0, le=MAX_WAIT_S, strict=True)]
Count = Annotated[int, Field(ge=0, strict=True)]
Positive = Annotated[int, Field(ge=1, strict=True)]
Amount = Annotated[float, Field(ge=0, strict=True)]
