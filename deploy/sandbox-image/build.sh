#!/usr/bin/env bash
# Build the ForkGate sandbox runner image from Debian packages, without pulling any image:
# debootstrap a minimal Debian root with python3, gcc and g++, trim it, then `docker import` it.
#
# Usage: deploy/sandbox-image/build.sh [TAG]        (default tag: forkgate/sandbox-runner:1)
# Environment: SUITE (default bookworm), MIRROR (default http://deb.debian.org/debian),
#              FORCE=1 rebuilds even when the tag exists.
set -euo pipefail
TAG="${1:-forkgate/sandbox-runner:1}"
SUITE="${SUITE:-bookworm}"
MIRROR="${MIRROR:-http://deb.debian.org/debian}"

if [ "${FORCE:-0}" != 1 ] && docker image inspect "$TAG" >/dev/null 2>&1; then
  echo "sandbox image $TAG already present"
  exit 0
fi
command -v debootstrap >/dev/null || { echo "debootstrap is missing (apt-get install debootstrap)" >&2; exit 1; }

WORK="$(mktemp -d /var/tmp/forkgate-sandbox-image.XXXXXX)"
trap 'rm -rf "$WORK"' EXIT
ROOT="$WORK/root"

echo "debootstrap $SUITE into $ROOT (this downloads ~100 MB of Debian packages)"
debootstrap --variant=minbase --include=python3,gcc,g++,libc6-dev \
  "$SUITE" "$ROOT" "$MIRROR" >"$WORK/debootstrap.log" 2>&1 || {
  tail -40 "$WORK/debootstrap.log" >&2; exit 1; }

# Trim what a runner never needs: package caches, docs, man pages, locales.
rm -rf "$ROOT"/var/cache/apt/archives/*.deb "$ROOT"/var/lib/apt/lists/* \
  "$ROOT"/usr/share/doc/* "$ROOT"/usr/share/man/* "$ROOT"/usr/share/info/*
find "$ROOT"/usr/share/locale -mindepth 1 -maxdepth 1 ! -name 'C.*' -exec rm -rf {} + 2>/dev/null || true
# An unprivileged runner account (the backend also passes --user 1000:1000 explicitly).
echo 'runner:x:1000:1000:sandbox runner:/work:/usr/sbin/nologin' >>"$ROOT/etc/passwd"
echo 'runner:x:1000:' >>"$ROOT/etc/group"
mkdir -p "$ROOT/work" && chmod 1777 "$ROOT/work"
# Smoke test inside the root before importing it.
chroot "$ROOT" /usr/bin/python3 -c 'import sys; assert sys.version_info >= (3, 11)'
chroot "$ROOT" /usr/bin/gcc --version >/dev/null
chroot "$ROOT" /usr/bin/g++ --version >/dev/null

tar --numeric-owner -C "$ROOT" -c . | docker import \
  --change 'USER 1000:1000' --change 'WORKDIR /work' \
  --change 'ENV PATH=/usr/local/bin:/usr/bin:/bin LANG=C.UTF-8' \
  --message "forkgate sandbox runner ($SUITE: python3 gcc g++)" - "$TAG"
echo "built $TAG"
