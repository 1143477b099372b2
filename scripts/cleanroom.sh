#!/usr/bin/env bash
# A clean room for installing the packed etna tarball as a user would, with no
# compiler, no libxnnpack, no libpthreadpool and no libcpuinfo:
#   x64    a minimal Debian 12 root (debootstrap, variant minbase), into which
#          the test copies this machine's Node.js and npm
#   arm64  a minimal Debian 13 arm64 root with Debian's Node.js (20.19), its
#          programs emulated by QEMU (scripts/build-arm64.sh registers it); the
#          test copies in npm, which is JavaScript
#
#   cleanroom.sh tools                install debootstrap and patchelf with apt-get if missing
#   cleanroom.sh base [ARCH]          print the cached base root, making it first if needed
#   cleanroom.sh create ROOM [ARCH]   a fresh room: ROOM/upper holds its changes over the base
#   cleanroom.sh exec ROOM CMD...     run CMD as root inside the room
#
# ARCH is x64 (the default) or arm64, as Node.js names them. The base roots are
# made once and kept in $ETNA_CLEANROOM_CACHE (default /var/tmp/etna-cleanroom);
# every room is an overlay over one, mounted only in a private mount namespace
# for as long as one `exec` runs, so nothing stays mounted on the host and a
# room is removed with `rm -rf ROOM`.
# Needs root, debootstrap (installed with apt-get when missing) and overlayfs.
set -euo pipefail

CACHE_DIR=${ETNA_CLEANROOM_CACHE:-/var/tmp/etna-cleanroom}

. "$(dirname "$0")/debian-root.sh"
die() { debian_root_die "$@"; }

# base_root ARCH: makes ARCH's base root if needed and prints its folder.
base_root() {
  local base
  case "${1:-x64}" in
    x64)
      base="$CACHE_DIR/bookworm-minbase"
      make_debian_root bookworm "$base"
      ;;
    arm64)
      base="$CACHE_DIR/trixie-arm64-nodejs"
      make_debian_root trixie "$base" arm64 nodejs,ca-certificates
      ;;
    *) die "unknown architecture '$1' (x64 or arm64)" ;;
  esac
  echo "$base"
}

create_room() {
  local room=$1 base
  base=$(base_root "${2:-x64}")
  rm -rf "$room"
  mkdir -p "$room/upper" "$room/work" "$room/merged"
  echo "$base" > "$room/base"
}

exec_in_room() {
  local room=$1
  shift
  [ -f "$room/base" ] || die "$room is not a room (run: cleanroom.sh create $room)"
  run_in_root --overlay "$(cat "$room/base")" "$room/upper" "$room/work" "$room/merged" "$@"
}

command=${1:-}
case "$command" in
  tools)
    ensure_commands debootstrap patchelf
    ;;
  base)
    [ $# -le 2 ] || die "usage: cleanroom.sh base [ARCH]"
    base_root "${2:-x64}"
    ;;
  create)
    [ $# -ge 2 ] && [ $# -le 3 ] || die "usage: cleanroom.sh create ROOM [ARCH]"
    create_room "$2" "${3:-x64}"
    ;;
  exec)
    [ $# -ge 3 ] || die "usage: cleanroom.sh exec ROOM CMD..."
    room=$2
    shift 2
    exec_in_room "$room" "$@"
    ;;
  *)
    die "usage: cleanroom.sh tools | base [ARCH] | create ROOM [ARCH] | exec ROOM CMD..."
    ;;
esac
