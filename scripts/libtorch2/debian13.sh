#!/usr/bin/env bash
# The LibTorch 2.x leg: builds poslab in a Debian 13 (trixie) root, whose libtorch-dev is 2.6, and runs the
# whole CTest suite there. The root is made once with debootstrap from the mirror the host's apt sources
# name and cached outside the clone (POSLAB_DEBIAN13_ROOT, default /var/cache/poslab/debian13); re-runs
# reuse it. Run as root. Extra arguments go to CTest, e.g. `bash scripts/libtorch2/debian13.sh -L unit`.
set -euo pipefail
cd "$(dirname "$0")/../.."
src=$PWD
root=${POSLAB_DEBIAN13_ROOT:-/var/cache/poslab/debian13}
build=${POSLAB_DEBIAN13_BUILD:-build-debian13}  # inside the clone, git-ignored (/build*/)
packages=(ca-certificates g++ cmake ninja-build libtorch-dev nlohmann-json3-dev libspdlog-dev libgtest-dev
          libcli11-dev libopenblas0-pthread python3-torch python3-matplotlib libgloo-dev)
need_mb=8000  # the root with LibTorch, python3-torch and matplotlib is ~5 GB

die() { echo "debian13: ERROR: $*" >&2; exit 1; }
log() { echo "== debian13: $*"; }
[ "$(id -u)" -eq 0 ] || die "run as root (debootstrap, chroot and bind mounts need it)"

# The mirror: the first Debian archive the host's apt sources name (deb822 or one-line format), not security.
mirror=${POSLAB_DEBIAN_MIRROR:-}
if [ -z "$mirror" ]; then
  mirror=$(cat /etc/apt/sources.list.d/*.sources 2>/dev/null | awk '/^URIs:/ {print $2}' | grep -v -- '-security' | head -1 || true)
fi
if [ -z "$mirror" ]; then
  mirror=$(cat /etc/apt/sources.list /etc/apt/sources.list.d/*.list 2>/dev/null | awk '$1 == "deb" && $0 !~ /security/ {for (i = 2; i <= NF; i++) if ($i ~ /^[a-z]+:\/\//) {print $i; exit}}' || true)
fi
[ -n "$mirror" ] || die "no Debian mirror found in /etc/apt/sources.list{,.d}; set POSLAB_DEBIAN_MIRROR"

mounts=()
cleanup() {
  local i
  for ((i = ${#mounts[@]} - 1; i >= 0; i--)); do umount "${mounts[i]}" 2>/dev/null || umount -l "${mounts[i]}" || true; done
}
trap cleanup EXIT
trap 'exit 130' INT TERM  # so that the EXIT trap unmounts on Ctrl-C and kill too
bind() {  # bind <host dir> <dir inside the root>
  mkdir -p "$root$2"
  mountpoint -q "$root$2" && umount -l "$root$2"  # left over from a run that was killed
  mount --bind "$1" "$root$2"
  mounts+=("$root$2")
}
in_root() { chroot "$root" /usr/bin/env -i HOME=/root LANG=C.UTF-8 PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
              DEBIAN_FRONTEND=noninteractive CI="${CI:-}" "$@"; }

stamp="$root/.poslab-packages"
t0=$(date +%s)
if [ ! -f "$stamp" ] || [ "$(cat "$stamp")" != "${packages[*]}" ]; then
  mkdir -p "$(dirname "$root")"
  free_mb=$(df -Pm "$(dirname "$root")" | awk 'NR == 2 {print $4}')
  ((free_mb >= need_mb)) || die "$(dirname "$root") has ${free_mb} MB free; the Debian 13 root needs ~${need_mb} MB"
  if [ ! -x "$root/usr/bin/apt-get" ]; then
    command -v debootstrap >/dev/null || { log "installing debootstrap"; DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends debootstrap \
      || { apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends debootstrap; }; }
    log "debootstrap trixie into $root from $mirror"
    rm -rf "$root.partial"
    debootstrap --variant=minbase trixie "$root.partial" "$mirror" > "$(dirname "$root")/debootstrap.log" 2>&1 \
      || { tail -20 "$(dirname "$root")/debootstrap.log"; die "debootstrap failed (log: $(dirname "$root")/debootstrap.log)"; }
    if grep -q " $root[/ ]" /proc/mounts; then die "something is still mounted under $root; unmount it first"; fi
    rm -rf "$root" && mv "$root.partial" "$root"
  fi
  log "installing ${packages[*]}"
  bind /proc /proc; bind /sys /sys; bind /dev /dev
  cp /etc/resolv.conf "$root/etc/resolv.conf" 2>/dev/null || true
  apt_log="$(dirname "$root")/debian13-apt.log"
  { in_root apt-get update -q && in_root apt-get install -y -q --no-install-recommends "${packages[@]}" && in_root apt-get clean; } \
    > "$apt_log" 2>&1 || { tail -30 "$apt_log"; die "installing packages in the root failed (log: $apt_log)"; }
  echo "${packages[*]}" > "$stamp"
  cleanup; mounts=()
  log "root ready in $(( $(date +%s) - t0 )) s"
fi

in_root dpkg-query -W -f='${Package} ${Version}\n' libtorch-dev python3-torch g++ cmake | sed 's/^/   /'
bind /proc /proc; bind /sys /sys; bind /dev /dev; bind "$src" /src
start=$(date +%s)
log "configure and build in $build"
in_root bash -c "cd /src && cmake -S . -B '$build' -G Ninja -DCMAKE_BUILD_TYPE=Release > /dev/null && cmake --build '$build'"
log "built in $(( $(date +%s) - start )) s; CTest"
# Debian 13's own torchrun (python3-torch 2.6) fails before starting a rank: its agent asks for the libuv
# store, which Debian's LibTorch is built without (USE_LIBUV=0 does not help). Its launch test is skipped,
# said so; poslab's ranks themselves fall back to the classic store there (src/distributed/process_group.cpp).
in_root bash -c "cd /src && POSLAB_TORCHRUN=/nonexistent/debian13-torchrun-needs-libuv ctest --test-dir '$build' --output-on-failure -j 2 $(printf '%q ' "$@")"
log "passed in $(( $(date +%s) - start )) s"
