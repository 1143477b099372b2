#!/usr/bin/env bash
# A clean room for installing the packed etna tarball as a user would: a
# minimal Debian 12 root (debootstrap, variant minbase) with Node.js and npm
# copied in, and no compiler, no libxnnpack, no libpthreadpool, no libcpuinfo.
#
#   cleanroom.sh tools                install debootstrap and patchelf with apt-get if missing
#   cleanroom.sh base                 print the cached base root, making it first if needed
#   cleanroom.sh create ROOM          a fresh room: ROOM/upper holds its changes over the base
#   cleanroom.sh exec ROOM CMD...     run CMD as root inside the room
#
# The base root is made once and kept in $ETNA_CLEANROOM_CACHE (default
# /var/tmp/etna-cleanroom); every room is an overlay over it, mounted only in
# a private mount namespace for as long as one `exec` runs, so nothing stays
# mounted on the host and a room is removed with `rm -rf ROOM`.
# Needs root, debootstrap (installed with apt-get when missing) and overlayfs.
set -euo pipefail

CACHE_DIR=${ETNA_CLEANROOM_CACHE:-/var/tmp/etna-cleanroom}
SUITE=bookworm
BASE="$CACHE_DIR/$SUITE-minbase"

. "$(dirname "$0")/debian-root.sh"
die() { debian_root_die "$@"; }

create_room() {
  local room=$1
  rm -rf "$room"
  mkdir -p "$room/upper" "$room/work" "$room/merged"
}

exec_in_room() {
  local room=$1
  shift
  [ -d "$room/upper" ] || die "$room is not a room (run: cleanroom.sh create $room)"
  run_in_root --overlay "$BASE" "$room/upper" "$room/work" "$room/merged" "$@"
}

command=${1:-}
case "$command" in
  tools)
    ensure_commands debootstrap patchelf
    ;;
  base)
    make_debian_root "$SUITE" "$BASE"
    echo "$BASE"
    ;;
  create)
    [ $# -eq 2 ] || die "usage: cleanroom.sh create ROOM"
    make_debian_root "$SUITE" "$BASE"
    create_room "$2"
    ;;
  exec)
    [ $# -ge 3 ] || die "usage: cleanroom.sh exec ROOM CMD..."
    room=$2
    shift 2
    exec_in_room "$room" "$@"
    ;;
  *)
    die "usage: cleanroom.sh tools | base | create ROOM | exec ROOM CMD..."
    ;;
esac
