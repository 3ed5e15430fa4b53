#!/usr/bin/env bash
# Start a Docker engine in the background when none is reachable, and wait until it answers.
# Usage: scripts/start_docker.sh [TIMEOUT_SECONDS]   (log: ${DOCKERD_LOG:-/tmp/dockerd.log})
set -euo pipefail
timeout_s="${1:-60}"
log="${DOCKERD_LOG:-/tmp/dockerd.log}"

if docker info >/dev/null 2>&1; then
  exit 0
fi
if ! command -v dockerd >/dev/null; then
  echo "start_docker.sh: dockerd is not installed (apt-get install docker.io)" >&2
  exit 1
fi
if ! pgrep -x dockerd >/dev/null; then
  echo "start_docker.sh: starting dockerd (log: $log)" >&2
  sudo_cmd=()
  [ "$(id -u)" -ne 0 ] && command -v sudo >/dev/null && sudo_cmd=(sudo -n)
  nohup "${sudo_cmd[@]}" dockerd >"$log" 2>&1 &
fi
for _ in $(seq 1 "$((timeout_s * 2))"); do
  docker info >/dev/null 2>&1 && exit 0
  sleep 0.5
done
echo "start_docker.sh: the Docker engine did not become ready within ${timeout_s}s; last lines of $log:" >&2
tail -n 20 "$log" >&2 || true
exit 1
