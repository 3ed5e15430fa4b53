#!/usr/bin/env bash
# The README's set-up line and test line, word for word, on a fresh machine: a container of the local base image
# (Debian bookworm with only Python 3.11, venv, pip and git; scripts/build_base_image.sh) holding a fresh clone of
# this repository's HEAD (or of REV: the lines of its own README, to compare two revisions on the same machine), the
# package index reached over the host's network (its CA bundle mounted, as a machine of this network has it). Prints
# each line's wall time, its CPU (user and system, with the children waited for; and the container's cgroup figure,
# which counts every process, those a PID namespace reaps too) and the test summary (a failing test's report too);
# exits with the first failing line's status.
# Usage: scripts/fresh_machine.sh [--rev REV] [IMAGE]   (needs docker; default IMAGE: llm-ide-base:bookworm)
set -euo pipefail
rev=HEAD
if [ "${1:-}" = "--rev" ]; then rev="$2"; shift 2; fi
image="${1:-llm-ide-base:bookworm}"
repo="$(cd "$(dirname "$0")/.." && pwd)"
work="$(mktemp -d /tmp/llm-ide-fresh.XXXXXX)"
trap 'rm -rf "$work"' EXIT
git clone -q "$repo" "$work/llm-ide"
git -C "$work/llm-ide" checkout -q --detach "$(git -C "$repo" rev-parse --verify "$rev^{commit}")"
# the commands of the README's first bash block under "## Install": the set-up line, then the test line
awk '/^## Install/{on=1} on&&/^```bash/{block=1; next} block&&/^```/{exit} block' "$work/llm-ide/README.md" > "$work/lines.sh"
[ "$(grep -c . "$work/lines.sh")" -ge 2 ] || { echo "fresh_machine.sh: no set-up and test lines in README.md" >&2; exit 1; }
cat > "$work/run.sh" <<'INNER'
set -uo pipefail
cd /work/llm-ide
cgroup_cpu() {  # nanoseconds of CPU every process of the container has used, where its cgroup shows them
  if [ -r /sys/fs/cgroup/cpuacct/cpuacct.usage ]; then cat /sys/fs/cgroup/cpuacct/cpuacct.usage
  elif [ -r /sys/fs/cgroup/cpu.stat ]; then awk '$1 == "usage_usec" {print $2 * 1000}' /sys/fs/cgroup/cpu.stat
  fi
}
n=0
while IFS= read -r line; do
  [ -n "$line" ] || continue
  n=$((n + 1))
  echo "fresh_machine.sh: line $n: $line" >&2
  TIMEFORMAT="%R s wall, %U s user + %S s sys (children waited for)"
  before=$(cgroup_cpu)
  { time { bash -c "set -e; [ -f .venv/bin/activate ] && . .venv/bin/activate; $line" > /tmp/line.out 2>&1;
           status=$?; }; } 2> /tmp/line.time
  after=$(cgroup_cpu) cgroup=""
  [ -z "$before" ] || cgroup="; all the container's processes: $(awk "BEGIN {printf \"%.1f\", ($after - $before) / 1e9}") s of CPU"
  tail -n 15 /tmp/line.out
  echo "fresh_machine.sh: line $n took $(cat /tmp/line.time)$cgroup, exit $status" >&2
  if [ "$status" -ne 0 ]; then  # a failing test's whole report
    sed -n '/^=* FAILURES =*$/,/^=* short test summary info =*$/p' /tmp/line.out | head -n 400
    exit "$status"
  fi
done < /work/lines.sh
INNER
ca=/etc/ssl/certs/ca-certificates.crt
docker run --rm --network host -v "$work:/work" -v "$ca:$ca:ro" -e PIP_CERT="$ca" -e SSL_CERT_FILE="$ca" \
  -e PIP_DISABLE_PIP_VERSION_CHECK=1 "$image" bash /work/run.sh
