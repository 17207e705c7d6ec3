#!/usr/bin/env bash
# Builds poslab's Docker image without any image registry: the debian:12 base image is made from
# Debian's archive (debootstrap, then `docker import`), then the Dockerfile's cpu stage builds poslab and
# runs its tests, then the image runs `poslab --help` and the main job. Run as root on Debian with
# docker.io (or podman: POSLAB_DOCKER=podman) and debootstrap installed.
#   bash scripts/docker/build.sh            # the CPU image, tagged poslab
#   bash scripts/docker/build.sh --cuda     # also the cuda stage, on POSLAB_CUDA_BASE or this machine's toolkit
#   bash scripts/docker/build.sh --cuda-only  # the cuda stage alone
set -euo pipefail
cd "$(dirname "$0")/../.."
mode=${1:-cpu}
case "$mode" in cpu | --cuda | --cuda-only) ;; *) echo "docker/build.sh: ERROR: unknown argument '$mode' (allowed: --cuda, --cuda-only)" >&2; exit 2 ;; esac
engine=${POSLAB_DOCKER:-docker}
# The Debian archive this machine's apt already uses (its first "debian" URI), unless POSLAB_DEBIAN_MIRROR
# says otherwise; POSLAB_DEBIAN_ROOTFS imports an existing bookworm root directory instead of debootstrapping.
host_mirror() {
  { grep -h '^URIs:' /etc/apt/sources.list.d/*.sources 2>/dev/null | awk '{print $2}'
    grep -h '^deb ' /etc/apt/sources.list 2>/dev/null | awk '{print $2}'; } | grep -m1 '/debian/\?$' || true
}
mirror=${POSLAB_DEBIAN_MIRROR:-$(host_mirror)}
die() { echo "docker/build.sh: ERROR: $*" >&2; exit 1; }
log() { echo "== docker/build.sh: $*"; }

command -v "$engine" >/dev/null || die "no $engine (apt install docker.io, or podman with POSLAB_DOCKER=podman)"
"$engine" info >/dev/null 2>&1 || die "$engine cannot reach its daemon ($engine info fails)"

if ! "$engine" image inspect debian:12 >/dev/null 2>&1 && [ -n "${POSLAB_DEBIAN_ROOTFS:-}" ]; then
  [ -x "$POSLAB_DEBIAN_ROOTFS/usr/bin/apt-get" ] || die "POSLAB_DEBIAN_ROOTFS=$POSLAB_DEBIAN_ROOTFS is not a Debian root (no usr/bin/apt-get)"
  log "debian:12 from the root directory $POSLAB_DEBIAN_ROOTFS"
  tar -C "$POSLAB_DEBIAN_ROOTFS" -c . | "$engine" import - debian:12
fi
if ! "$engine" image inspect debian:12 >/dev/null 2>&1; then
  command -v debootstrap >/dev/null || die "no debootstrap (apt install debootstrap)"
  [ -n "$mirror" ] || die "no Debian archive found in /etc/apt: set POSLAB_DEBIAN_MIRROR to one"
  root=$(mktemp -d)
  trap 'rm -rf "$root"' EXIT
  log "debian:12 from $mirror (debootstrap bookworm)"
  debootstrap --variant=minbase bookworm "$root" "$mirror"
  rm -rf "$root"/var/cache/apt/archives/*.deb "$root"/var/lib/apt/lists/*
  tar -C "$root" -c . | "$engine" import - debian:12
  rm -rf "$root"
fi

# pip in the cuda stage downloads the torch wheel over HTTPS. Behind a TLS-intercepting proxy it needs the
# proxy's CA: the bundle this machine's pip trusts (POSLAB_DOCKER_CA, else PIP_CERT, else pip's global.cert)
# is put in the context as .docker-ca/ca.crt for every build (so that the cpu stage, which the classic
# builder builds again on the way to the cuda stage, keeps its cache), and the cuda stage points pip at it.
ca=${POSLAB_DOCKER_CA:-${PIP_CERT:-$(pip config get global.cert 2>/dev/null || true)}}
ca_args=()
rm -rf .docker-ca && mkdir -p .docker-ca
trap 'rm -rf .docker-ca' EXIT
if [ -n "$ca" ]; then
  [ -f "$ca" ] || die "the CA bundle $ca (POSLAB_DOCKER_CA, PIP_CERT or pip's global.cert) is not a file"
  cp "$ca" .docker-ca/ca.crt
  ca_args=(--build-arg PIP_CERT=/poslab/.docker-ca/ca.crt)
fi

if [ "$mode" != --cuda-only ]; then
  log "building the cpu stage (builds poslab and runs CTest)"
  "$engine" build --target cpu -t poslab .
  log "poslab --help in the image"
  "$engine" run --rm poslab --help
  log "the main job in the image"
  "$engine" run --rm poslab compare --config configs/experiments/quick.json --out runs/quick
fi

if [ "$mode" != cpu ]; then
  # The cuda stage needs a Debian-family base with the CUDA toolkit in /usr/local/cuda. Without a registry
  # (no NVIDIA image to pull), POSLAB_CUDA_BASE names one, or the toolkit installed on this machine is
  # copied into debian:12 as poslab-cuda-base:local.
  cuda_base=${POSLAB_CUDA_BASE:-}
  if [ -z "$cuda_base" ]; then
    toolkit=$(readlink -f /usr/local/cuda 2>/dev/null || true)
    [ -x "$toolkit/bin/nvcc" ] || die "no CUDA toolkit in /usr/local/cuda here: set POSLAB_CUDA_BASE to an image that has one"
    cuda_base=poslab-cuda-base:local
    if ! "$engine" image inspect "$cuda_base" >/dev/null 2>&1; then
      log "$cuda_base: debian:12 with this machine's toolkit ($("$toolkit/bin/nvcc" --version | tail -1))"
      "$engine" rm -f poslab-cuda-base-tmp >/dev/null 2>&1 || true
      "$engine" run --name poslab-cuda-base-tmp -v "$toolkit":/mnt/cuda:ro debian:12 cp -a /mnt/cuda /usr/local/cuda
      "$engine" commit poslab-cuda-base-tmp "$cuda_base" >/dev/null
      "$engine" rm poslab-cuda-base-tmp >/dev/null
    fi
  fi
  log "building the cuda stage on $cuda_base (builds against the torch wheel's LibTorch, runs CTest on the CPU)"
  "$engine" build --build-arg CUDA_BASE="$cuda_base" "${ca_args[@]}" --target cuda -t poslab:cuda .
  "$engine" run --rm poslab:cuda --help
fi
log "done"
