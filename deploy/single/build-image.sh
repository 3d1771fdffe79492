#!/usr/bin/env bash
# Build the single-node certd image (forkgate/certd-single:dev): one `certd serve` with the
# embedded SQLite ledger in /data, on the host's loopback. Nothing is pulled: the base is the
# cluster image (deploy/cluster/build-image.sh: debootstrap root + wheelhouse + docker import),
# built by that script when missing; this layer only reinstalls the forkgate wheel of this tree
# offline (--no-deps; `pip check` fails the build when the base's dependencies no longer fit,
# then `docker rmi` the base to rebuild it), adds deploy/single/certd.json as /etc/certd/certd.json
# (the base has no math extra: math off) and sets the command.
#
#   deploy/single/build-image.sh                       # -> forkgate/certd-single:dev
#   TAG=forkgate/certd-single:0.1.0 BASE=forkgate/certd:0.1.0 deploy/single/build-image.sh
#   docker run --rm --network host -v certd-data:/data forkgate/certd-single:dev
#
# Needs: docker (engine running), the repo's .venv; debootstrap only when the base is missing.
set -euo pipefail

TAG=${TAG:-forkgate/certd-single:dev}
BASE=${BASE:-forkgate/certd:dev}
REPO=$(cd "$(dirname "$0")/../.." && pwd)
PIP=${PIP:-$REPO/.venv/bin/pip}

if ! docker image inspect "$BASE" >/dev/null 2>&1; then
  echo "[0/3] base image $BASE missing: building it (deploy/cluster/build-image.sh)"
  TAG="$BASE" "$REPO/deploy/cluster/build-image.sh"
fi

WORK=$(mktemp -d /tmp/forkgate-single.XXXXXX)
CID=""
cleanup() {
  [ -z "$CID" ] || docker rm -f "$CID" >/dev/null 2>&1 || true
  rm -rf "$WORK"
}
trap cleanup EXIT

echo "[1/3] forkgate wheel of $REPO"
# From a copy of the tree, so setuptools' build/ never lands in the checkout (a build/ dir
# there shadows the `build` module of `python -m build`).
mkdir "$WORK/src"
tar -C "$REPO" --exclude=./.venv --exclude=./.git --exclude=./.cache --exclude=./build \
  --exclude=./.mypy_cache --exclude=./.ruff_cache --exclude=./.pytest_cache -cf - . |
  tar -C "$WORK/src" -xf -
"$PIP" wheel --quiet --no-deps --wheel-dir "$WORK" "$WORK/src" 2>"$WORK/wheel.log" ||
  { cat "$WORK/wheel.log" >&2; exit 1; }
WHEEL=$(cd "$WORK" && ls forkgate-*.whl)

echo "[2/3] reinstall it offline in $BASE"
CID=$(docker create --network none --user 0 --entrypoint /bin/sh "$BASE" -c \
  "/opt/certd/bin/pip install --quiet --no-index --no-deps --force-reinstall /tmp/$WHEEL \
   && /opt/certd/bin/pip check && rm -f /tmp/$WHEEL && /opt/certd/bin/certd --version \
   && mkdir -p /etc/certd && mv /tmp/certd.json /etc/certd/certd.json \
   && chmod 0644 /etc/certd/certd.json")
docker cp "$WORK/$WHEEL" "$CID:/tmp/$WHEEL"
docker cp "$REPO/deploy/single/certd.json" "$CID:/tmp/certd.json"
docker start --attach "$CID"

echo "[3/3] docker commit -> $TAG"
docker commit \
  --change 'USER 10001' \
  --change 'WORKDIR /data' \
  --change 'ENTRYPOINT ["certd"]' \
  --change "LABEL forkgate.src=${SRC_KEY:-unknown}" \
  --change 'CMD ["serve", "--data-dir", "/data", "--config", "/etc/certd/certd.json", "--listen", "127.0.0.1:50051"]' \
  --message "forkgate single-node certd ($WHEEL on $BASE)" \
  "$CID" "$TAG" >/dev/null
docker run --rm --network none "$TAG" config --check /etc/certd/certd.json
echo "built $TAG"
docker image prune -f --filter label=forkgate.src >/dev/null  # the images this one replaced
