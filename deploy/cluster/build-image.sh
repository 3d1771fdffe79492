#!/usr/bin/env bash
# Build the forkgate/certd image without pulling anything: a Debian root made with debootstrap
# plus a Python wheelhouse that pip downloads on the host. Nothing inside the build uses the
# network. The image holds certd (+ witness), redis-server and nginx (the gRPC load balancer).
#
#   sudo deploy/cluster/build-image.sh                 # -> forkgate/certd:dev
#   TAG=forkgate/certd:0.1.0 SUITE=bookworm sudo -E deploy/cluster/build-image.sh
#
# Needs: debootstrap, docker (engine running), the repo's .venv (make setup). Takes minutes.
set -euo pipefail

TAG=${TAG:-forkgate/certd:dev}
SUITE=${SUITE:-bookworm}          # its python3 must match the host's for the wheelhouse (3.11)
MIRROR=${MIRROR:-http://deb.debian.org/debian}
REPO=$(cd "$(dirname "$0")/../.." && pwd)
PIP=${PIP:-$REPO/.venv/bin/pip}
WORK=${WORK:-$(mktemp -d /tmp/forkgate-image.XXXXXX)}
ROOT=$WORK/rootfs
CACHE=${CACHE:-/var/cache/forkgate-debootstrap}

echo "[1/4] Debian $SUITE root (host, $MIRROR)"
mkdir -p "$CACHE"
if [ ! -x "$ROOT/usr/bin/python3" ]; then   # a WORK dir kept from a failed run is reused
  debootstrap --variant=minbase --cache-dir="$CACHE" \
    --include=python3,python3-venv,redis-server,nginx-core,ca-certificates \
    "$SUITE" "$ROOT" "$MIRROR"
fi
PYVER=$(chroot "$ROOT" python3 -c 'import platform; print(platform.python_version())')

echo "[2/4] wheelhouse for forkgate[server] on Python $PYVER (host, PyPI)"
rm -rf "$WORK/wheelhouse"
"$PIP" wheel --quiet --no-deps --wheel-dir "$WORK/wheelhouse" "$REPO"
DEPS=$("$REPO/.venv/bin/python" - "$REPO/pyproject.toml" <<'PY'
import sys, tomllib
p = tomllib.load(open(sys.argv[1], "rb"))["project"]
print("\n".join(p["dependencies"] + p["optional-dependencies"]["server"]))
PY
)
mapfile -t DEPS <<<"$DEPS"
# pip evaluates python_full_version markers with the host's interpreter, not --python-version:
# name what the image's 3.11.2 needs that a newer host would skip (redis -> async-timeout).
DEPS+=("async-timeout>=4.0.3")
"$PIP" download --quiet --dest "$WORK/wheelhouse" --only-binary=:all: \
  --python-version "$PYVER" --implementation cp \
  --platform manylinux2014_x86_64 --platform manylinux_2_17_x86_64 \
  --platform manylinux_2_28_x86_64 --platform manylinux_2_34_x86_64 \
  "${DEPS[@]}"

echo "[3/4] install offline inside the root"
rm -rf "$ROOT/tmp/wheelhouse" && cp -r "$WORK/wheelhouse" "$ROOT/tmp/wheelhouse"
chroot "$ROOT" python3 -m venv /opt/certd
chroot "$ROOT" /opt/certd/bin/pip install --quiet --no-index --find-links /tmp/wheelhouse \
  'forkgate[server]'
chroot "$ROOT" /opt/certd/bin/certd --help >/dev/null
rm -rf "$ROOT/tmp/wheelhouse" "$ROOT/var/cache/apt/archives"/*.deb "$ROOT/var/lib/apt/lists"/*
chroot "$ROOT" id -u certd >/dev/null 2>&1 ||
  chroot "$ROOT" useradd --system --uid 10001 --home-dir /var/lib/certd --create-home certd
mkdir -p "$ROOT/data" && chown 10001:10001 "$ROOT/data"

echo "[4/4] docker import -> $TAG"
tar -C "$ROOT" -c . | docker import \
  --change 'ENV PATH=/opt/certd/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
  --change 'USER 10001' \
  --change 'WORKDIR /data' \
  --change 'ENTRYPOINT ["certd"]' \
  --change "LABEL forkgate.src=${SRC_KEY:-unknown}" \
  - "$TAG"
rm -rf "$WORK"
docker run --rm --network none "$TAG" --help >/dev/null
echo "built $TAG"
docker image prune -f --filter label=forkgate.src >/dev/null  # the images this one replaced
