#!/usr/bin/env bash
# Build the small local base image used by the docker environment and its tests (no registry needed):
# debootstrap a minimal Debian bookworm with python3, venv, pip, git, then `docker import` it.
# Cached by name: does nothing when the image already exists (pass --force to rebuild).
# Usage: scripts/build_base_image.sh [--force] [IMAGE]   (default IMAGE: llm-ide-base:bookworm; needs root)
set -euo pipefail
force=0
if [ "${1:-}" = "--force" ]; then force=1; shift; fi
image="${1:-llm-ide-base:bookworm}"
suite="${SUITE:-bookworm}"
mirror="${DEBIAN_MIRROR:-http://deb.debian.org/debian}"

if [ "$force" -eq 0 ] && docker image inspect "$image" >/dev/null 2>&1; then
  echo "build_base_image.sh: $image already exists"
  exit 0
fi
command -v debootstrap >/dev/null || { echo "build_base_image.sh: debootstrap is not installed (apt-get install debootstrap)" >&2; exit 1; }
[ "$(id -u)" -eq 0 ] || { echo "build_base_image.sh: debootstrap needs root" >&2; exit 1; }

rootfs="$(mktemp -d /tmp/llm-ide-rootfs.XXXXXX)"
trap 'rm -rf "$rootfs"' EXIT
echo "build_base_image.sh: debootstrap $suite into $rootfs" >&2
debootstrap --variant=minbase --include=python3,python3-venv,python3-pip,git,ca-certificates,procps \
  "$suite" "$rootfs" "$mirror" >"$rootfs.log" 2>&1 || { tail -n 30 "$rootfs.log" >&2; exit 1; }
rm -f "$rootfs.log"
rm -rf "$rootfs"/var/cache/apt/archives/*.deb "$rootfs"/var/lib/apt/lists/*
tar -C "$rootfs" -c . | docker import \
  --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
  --change 'ENV LANG=C.UTF-8' \
  --change 'CMD ["/bin/bash"]' \
  - "$image" >/dev/null
echo "build_base_image.sh: built $image ($(docker image inspect -f '{{.Size}}' "$image") bytes)"
