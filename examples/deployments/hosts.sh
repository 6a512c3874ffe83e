#!/usr/bin/env bash
# Hosts of their own for examples/deployments: network namespaces on a bridge (in a namespace of
# its own, so nothing is added to this machine's network), at 198.18.0.1-7 (the range RFC 2544
# reserves for benchmarks; never routed):
#
#   NAME-h0  A  198.18.0.1  "bare metal": the factorial server
#   NAME-h1  B  198.18.0.2  the load balancer (nginx)
#   NAME-h2  C  198.18.0.3  replica 1 ... NAME-h5  F  198.18.0.6  replica 4
#   NAME-h6  G  198.18.0.7  the client (rpcmeter)
#
#   sudo examples/deployments/hosts.sh up [NAME]     # NAME defaults to rpm-deploy
#   sudo examples/deployments/hosts.sh down [NAME]   # kill what runs in them, delete them
#
# examples/deployments/run.py makes its own (named after its process) and removes them on every
# way out, Ctrl-C included; this script is for looking around by hand:
#   sudo ip netns exec rpm-deploy-h6 curl -s -d 5 http://198.18.0.1:8080/factorial
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
usage="usage: hosts.sh up|down [NAME]"
[[ $# -ge 1 && $# -le 2 ]] || { echo "$usage" >&2; exit 2; }
if [[ $(id -u) -ne 0 ]]; then
  echo "hosts.sh: network namespaces need root: run it with sudo" >&2
  exit 2
fi
command -v ip >/dev/null || { echo "hosts.sh: needs iproute2 (ip): apt-get install iproute2" >&2; exit 2; }
name="${2:-rpm-deploy}"
case "$1" in
  up) exec python3 "$here/../../tests/support/hosts.py" up "$name" 7 ;;
  down) exec python3 "$here/../../tests/support/hosts.py" down "$name" ;;
  *) echo "$usage" >&2; exit 2 ;;
esac
