#!/bin/sh
# ghz (github.com/bojand/ghz) from PATH, or from ~/go/bin where `go install` puts it; without it,
# one line that says so and status 127, so that the ghz variants fail with that line.
if command -v ghz >/dev/null 2>&1; then
    exec ghz "$@"
fi
if [ -x "${GOPATH:-$HOME/go}/bin/ghz" ]; then
    exec "${GOPATH:-$HOME/go}/bin/ghz" "$@"
fi
echo "ghz: not found on PATH nor in ${GOPATH:-$HOME/go}/bin (go install github.com/bojand/ghz/cmd/ghz@latest)" >&2
exit 127
