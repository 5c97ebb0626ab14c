#!/usr/bin/env bash
# Build the raygitops container image from the repository's Dockerfile without a registry:
# a Debian bookworm base bootstrapped locally (mmdebstrap, from the machine's Debian mirror),
# imported into podman and passed as the Dockerfile's PYTHON_IMAGE build arg; helm and
# kustomize given as the build context `tools`, in place of the Dockerfile's stage of that
# name (no golang image can be pulled here): the binaries tests/e2e/build.sh built from the Go
# module proxy with the versions of versions.env, which the Dockerfile checks against its own
# pins (module and go.sum hash) as it checks the binaries its own stage builds.
#   bash tests/image/build.sh            -> prints the image reference (localhost/raygitops:test)
# Cached under ${RAYGITOPS_IMAGE_CACHE:-~/.cache/raygitops-image}: the base tarball (keyed by
# its package list) and podman's own layer cache. Installs podman, mmdebstrap and runc from
# Debian when missing (as root). Facts: /work/shared/reference/real-tools.md (the image).
set -euo pipefail
cd "$(dirname "$0")/../.."

cache=${RAYGITOPS_IMAGE_CACHE:-$HOME/.cache/raygitops-image}
image=${RAYGITOPS_IMAGE:-localhost/raygitops:test}
suite=bookworm
mirror=${RAYGITOPS_DEBIAN_MIRROR:-$(sed -n 's/^URIs: *//p' /etc/apt/sources.list.d/debian.sources 2>/dev/null | head -1)}
mirror=${mirror:-http://deb.debian.org/debian}
packages=python3,python3-venv,python-is-python3,ca-certificates
mkdir -p "$cache"
log() { echo "tests/image/build.sh: $*" >&2; }

if ! command -v podman >/dev/null || ! command -v mmdebstrap >/dev/null || ! command -v runc >/dev/null; then
  if [ "$(id -u)" != 0 ]; then log "podman, mmdebstrap and runc are needed (apt-get install podman mmdebstrap runc uidmap)"; exit 1; fi
  log "installing podman, mmdebstrap, runc from Debian"
  apt-get update -qq >/dev/null
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq podman mmdebstrap runc uidmap >/dev/null
fi

# podman as root on a machine without systemd: runc, cgroupfs, file event log, ulimits.
export CONTAINERS_CONF=$cache/containers.conf
cat >"$CONTAINERS_CONF" <<'EOF'
[containers]
default_ulimits = ["nofile=16384:16384", "nproc=16384:16384"]
[engine]
runtime = "runc"
cgroup_manager = "cgroupfs"
events_logger = "file"
EOF

key=$(printf '%s %s %s r1' "$suite" "$packages" "$mirror" | sha256sum | cut -c1-12)
base=localhost/raygitops-base:$suite-$key
if ! podman image exists "$base"; then
  tar=$cache/base-$suite-$key.tar
  if [ ! -s "$tar" ]; then
    log "bootstrapping the $suite base ($packages) from $mirror"
    start=$SECONDS
    mmdebstrap --quiet --format=tar --variant=minbase --include="$packages" \
      --dpkgopt='path-exclude=/usr/share/doc/*' --dpkgopt='path-exclude=/usr/share/man/*' \
      --dpkgopt='path-exclude=/usr/share/locale/*' --dpkgopt='path-exclude=/usr/share/info/*' \
      "$suite" "$tar.tmp" "$mirror" >&2
    mv "$tar.tmp" "$tar"
    log "base bootstrapped in $((SECONDS - start))s"
  fi
  podman import --quiet "$tar" "$base" >/dev/null
fi

# helm and kustomize of the e2e build (tests/e2e/build.sh; CI builds them before the image)
# shellcheck source=../e2e/versions.env
source tests/e2e/versions.env
e2e_bin=${RAYGITOPS_E2E_CACHE:-$HOME/.cache/raygitops-e2e}/$E2E_VERSIONS_KEY/bin
tools=$cache/prebuilt-tools  # laid out as the stage's file system: tools/helm, tools/kustomize
mkdir -p "$tools/tools"
for t in helm kustomize; do
  [[ -x $e2e_bin/$t ]] || { log "$e2e_bin/$t missing: run bash tests/e2e/build.sh first"; exit 1; }
  cmp -s "$e2e_bin/$t" "$tools/tools/$t" || cp "$e2e_bin/$t" "$tools/tools/$t"
done

# The build reaches PyPI through the host network and trusts the host's CA bundle (mounted
# read-only for the RUN steps only: nothing of it stays in the image).
start=$SECONDS
# A build killed mid-way leaves buildah's working containers behind (podman lists them with
# --external); they hold their images, so the prune below would fail. No other build runs
# beside this one (the suite builds once), so every such container is a leftover.
podman ps --all --external --format '{{.ID}} {{.Names}}' |
  awk '$2 ~ /-working-container$/ {print $1}' | xargs -r podman rm --force >/dev/null
podman build --quiet --pull=never --network=host \
  --volume /etc/ssl/certs/ca-certificates.crt:/etc/ssl/certs/ca-certificates.crt:ro \
  --build-arg "PYTHON_IMAGE=$base" --build-context "tools=$tools" \
  --tag "$image" . >/dev/null
podman image prune --force >/dev/null
size=$(podman image inspect --format '{{.Size}}' "$image")
log "built $image in $((SECONDS - start))s: $((size / 1000000)) MB (base $(( $(podman image inspect --format '{{.Size}}' "$base") / 1000000 )) MB)"
echo "$image"
