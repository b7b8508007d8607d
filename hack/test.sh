#!/usr/bin/env bash
# Runs the test suite in a private TMPDIR, then proves the tests cleaned up after
# themselves: no process still refers to that directory and nothing is left in it.
#
#   hack/test.sh [go test flags and packages]
set -uo pipefail

tmp=$(mktemp -d "${TMPDIR:-/tmp}/metalambda-test.XXXXXX")
netns_before=$(ip netns list 2>/dev/null | sort)
bridges_before=$(ip -o link show type bridge 2>/dev/null | awk -F': ' '{print $2}' | sort)
# The sandbox's cgroups: metalambda-<pid> under the cgroup of the process that
# made them. One whose process is gone was left behind by a sandbox not closed.
dead_cgroups() {
  find /sys/fs/cgroup -maxdepth 6 -type d -name 'metalambda-[0-9]*' 2>/dev/null |
    while read -r dir; do [[ -d /proc/${dir##*-} ]] || echo "$dir"; done | sort
}
cgroups_before=$(dead_cgroups)
echo "test: go test $* (TMPDIR=$tmp)"
TMPDIR=$tmp go test "$@"
rc=$?

leaked=()
for cmdline in /proc/[0-9]*/cmdline; do
  pid=${cmdline#/proc/}; pid=${pid%/cmdline}
  [[ $pid == "$$" ]] && continue
  # A process may exit between the glob and the read: its cmdline is then gone.
  if { tr '\0' ' ' <"$cmdline"; } 2>/dev/null | grep -qF "$tmp"; then
    leaked+=("$pid: $(tr '\0' ' ' <"$cmdline" | cut -c1-160)")
  fi
done
if ((${#leaked[@]})); then
  echo "test: FAIL: processes started by the tests are still running:" >&2
  printf '  %s\n' "${leaked[@]}" >&2
  rc=1
fi
netns_new=$(comm -13 <(echo "$netns_before") <(ip netns list 2>/dev/null | sort))
bridges_new=$(comm -13 <(echo "$bridges_before") <(ip -o link show type bridge 2>/dev/null | awk -F': ' '{print $2}' | sort))
if [[ -n $netns_new || -n $bridges_new ]]; then
  echo "test: FAIL: the tests left network namespaces or bridges behind:" >&2
  echo "$netns_new $bridges_new" | sed 's/^/  /' >&2
  rc=1
fi
# Empty cgroups of exited processes are removed by the next sandbox built on the
# host (reapOrphans); one left here means a sandbox some test did not close: said,
# not failed, until every package closes its own.
cgroups_new=$(comm -13 <(echo "$cgroups_before") <(dead_cgroups))
if [[ -n $cgroups_new ]]; then
  echo "test: WARNING: the tests left empty cgroups of exited processes behind (a sandbox that was not closed):" >&2
  echo "$cgroups_new" | sed 's/^/  /' >&2
fi
left=$(find "$tmp" -mindepth 1 -maxdepth 1 2>/dev/null)
if [[ -n $left ]]; then
  echo "test: FAIL: the tests left files behind in $tmp:" >&2
  echo "$left" | sed 's/^/  /' >&2
  rc=1
else
  rmdir "$tmp"
fi
((rc == 0)) && echo "test: ok, no process, temporary file, network namespace or bridge left behind"
exit "$rc"
