#!/usr/bin/env bash
# Makes sure this machine has the system packages the build, the local platform and the
# tests need, and installs the missing ones on a Debian-like host when run as root.
# `make up`, `make test` and .ci/run all start here, so they cannot drift apart.
#
#   hack/setup-host.sh          install what is missing (root, apt-get), or say how
#   hack/setup-host.sh --check  only report; exit 1 when something is missing
#
# When something is missing and cannot be installed from here (not root, no apt-get),
# it stops before anything is built and prints the exact command to run.
set -euo pipefail

check_only=false
[[ ${1:-} == --check ]] && check_only=true

say() { echo "setup: $*"; }

command -v go >/dev/null || { say "Go is required and not on PATH; install Go 1.26 or later (https://go.dev/dl)" >&2; exit 1; }

# command:package pairs. Each command is what the build, the local node, the gateway's
# sandbox or the dashboard's browser tests run; the package is Debian's name for it (npm
# builds the dashboard's assets, chromium is the headless browser of its tests).
required=(
  make:make git:git gcc:gcc sha256sum:coreutils curl:curl python3:python3
  ip:iproute2 unshare:util-linux nsenter:util-linux
  bwrap:bubblewrap npm:npm chromium:chromium
)
missing=()
for pair in "${required[@]}"; do
  command -v "${pair%%:*}" >/dev/null || missing+=("${pair#*:}")
done
# The local node puts pods in network namespaces with the CNI bridge and host-local plugins.
cni_dir=/usr/lib/cni
[[ -x $cni_dir/bridge && -x $cni_dir/host-local ]] || missing+=(containernetworking-plugins)
# One package can provide several commands: name each once, in order.
mapfile -t missing < <(printf '%s\n' ${missing[@]+"${missing[@]}"} | awk 'NF && !seen[$0]++')

if ((${#missing[@]} == 0)); then
  say "system packages: all present"
  exit 0
fi

say "missing system packages: ${missing[*]}"
install_cmd="apt-get update && apt-get install -y ${missing[*]}"
if $check_only; then
  say "install them with: sudo sh -c '$install_cmd'" >&2
  exit 1
fi
if ! command -v apt-get >/dev/null; then
  say "this host has no apt-get; install the equivalents of: ${missing[*]} (the CNI plugins must be in $cni_dir), then run this again" >&2
  exit 1
fi
if ((EUID != 0)); then
  say "installing needs root; run: sudo sh -c '$install_cmd'" >&2
  exit 1
fi
say "apt-get update"
apt-get update -qq
say "apt-get install -y ${missing[*]}"
DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}"
say "installed: ${missing[*]}"
