#!/usr/bin/env bash
# Builds the pinned control plane (etcd, kube-apiserver, kube-controller-manager,
# kube-scheduler) from source into a cache outside the repository.
#
#   deploy/local/build-kube.sh              build if needed, then print the bin dir
#   deploy/local/build-kube.sh --print-dir  only print the bin dir
#
# "Already built" is decided by a stamp: the hash of the pinning modules and the Go
# version that built them, plus the sha256 of every binary. A missing, stale or
# corrupted binary triggers a rebuild.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
kube_version=$(awk '$1 == "require" && $2 == "k8s.io/kubernetes" {print $3}' "$here/kube/go.mod")
etcd_version=$(awk '$1 == "require" && $2 == "go.etcd.io/etcd/server/v3" {print $3}' "$here/etcd/go.mod")
[[ -n $kube_version && -n $etcd_version ]] || { echo "build-kube: cannot read pinned versions from $here/{kube,etcd}/go.mod" >&2; exit 1; }

cache_root=${XDG_CACHE_HOME:-$HOME/.cache}/metalambda/kube
bin_dir=$cache_root/kubernetes-$kube_version-etcd-$etcd_version
binaries=(etcd kube-apiserver kube-controller-manager kube-scheduler)

if [[ ${1:-} == --print-dir ]]; then
  echo "$bin_dir"
  exit 0
fi

# Bump when the way the binaries are built changes (flags, ldflags), to force a rebuild.
recipe=1

inputs_hash() {
  { echo "recipe $recipe"; cat "$here"/kube/go.mod "$here"/kube/go.sum "$here"/etcd/go.mod "$here"/etcd/go.sum; go version; } | sha256sum | cut -d' ' -f1
}

stamp_ok() {
  [[ -f $bin_dir/STAMP ]] || return 1
  [[ $(head -n1 "$bin_dir/STAMP") == "inputs $(inputs_hash)" ]] || return 1
  (cd "$bin_dir" && tail -n +2 STAMP | sha256sum --quiet --check --status -)
}

# build NAME MODULE_DIR PACKAGE [LDFLAGS]: go build with a heartbeat every 20 s,
# since a cold kube-apiserver build takes minutes on two cores.
build() {
  local name=$1 dir=$2 pkg=$3 ldflags=${4:-} log start pid
  log=$(mktemp)
  start=$SECONDS
  echo "build-kube: building $name ($pkg)"
  (cd "$dir" && GOWORK=off GOFLAGS=-mod=readonly go build -v -trimpath -ldflags "-s -w $ldflags" -o "$bin_dir/$name.tmp" "$pkg") >"$log" 2>&1 &
  pid=$!
  while kill -0 "$pid" 2>/dev/null; do
    sleep 1
    if (((SECONDS - start) % 20 == 0)) && kill -0 "$pid" 2>/dev/null; then
      echo "build-kube:   $name: $(grep -vc '^go: downloading' "$log" || true) packages compiled, $((SECONDS - start))s"
    fi
  done
  if ! wait "$pid"; then
    echo "build-kube: building $name failed:" >&2
    tail -n 40 "$log" >&2
    rm -f "$log"
    return 1
  fi
  rm -f "$log"
  mv "$bin_dir/$name.tmp" "$bin_dir/$name"
  echo "build-kube: built $name in $((SECONDS - start))s"
}

if stamp_ok; then
  echo "build-kube: control plane $kube_version, etcd $etcd_version already built in $bin_dir" >&2
  echo "$bin_dir"
  exit 0
fi

command -v go >/dev/null || { echo "build-kube: go is not on PATH" >&2; exit 1; }
mkdir -p "$bin_dir"
rm -f "$bin_dir/STAMP"
echo "build-kube: building Kubernetes $kube_version and etcd $etcd_version into $bin_dir (about 10 minutes cold on 2 cores)" >&2

v=${kube_version#v}
kube_ldflags=""
for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
  kube_ldflags+=" -X $pkg.gitVersion=$kube_version -X $pkg.gitMajor=${v%%.*}"
  kube_ldflags+=" -X $pkg.gitMinor=$(cut -d. -f2 <<<"$v") -X $pkg.gitTreeState=clean"
done

{
  build etcd "$here/etcd" go.etcd.io/etcd/server/v3
  for cmd in kube-apiserver kube-controller-manager kube-scheduler; do
    build "$cmd" "$here/kube" "k8s.io/kubernetes/cmd/$cmd" "$kube_ldflags"
  done
} >&2

{
  echo "inputs $(inputs_hash)"
  (cd "$bin_dir" && sha256sum "${binaries[@]}")
} >"$bin_dir/STAMP.tmp"
mv "$bin_dir/STAMP.tmp" "$bin_dir/STAMP"
echo "build-kube: done" >&2
echo "$bin_dir"
