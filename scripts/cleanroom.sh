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

die() { echo "cleanroom: $*" >&2; exit 1; }

[ "$(id -u)" -eq 0 ] || die "needs root (debootstrap, chroot and mount namespaces)"

debian_mirror() {
  # The mirror this machine's apt already uses, so the room comes from the same place.
  local uri=""
  if [ -f /etc/apt/sources.list.d/debian.sources ]; then
    uri=$(awk '/^URIs:/ { print $2; exit }' /etc/apt/sources.list.d/debian.sources)
  fi
  if [ -z "$uri" ] && [ -f /etc/apt/sources.list ]; then
    uri=$(awk '$1 == "deb" && $0 !~ /security/ { print $2; exit }' /etc/apt/sources.list)
  fi
  echo "${uri:-http://deb.debian.org/debian}"
}

install_tools() {
  local missing=()
  command -v debootstrap >/dev/null || missing+=(debootstrap)
  command -v patchelf >/dev/null || missing+=(patchelf)
  [ "${#missing[@]}" -eq 0 ] && return 0
  echo "cleanroom: installing ${missing[*]}" >&2
  DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "${missing[@]}" >&2 \
    || { apt-get update -q >&2 && DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "${missing[@]}" >&2; }
}

make_base() {
  [ -x "$BASE/usr/bin/env" ] && return 0
  install_tools
  mkdir -p "$CACHE_DIR"
  local partial="$BASE.partial"
  rm -rf "$partial"
  echo "cleanroom: debootstrap $SUITE (minbase) into $BASE; this takes a few minutes once" >&2
  debootstrap --variant=minbase "$SUITE" "$partial" "$(debian_mirror)" > "$CACHE_DIR/debootstrap.log" 2>&1 \
    || die "debootstrap failed; see $CACHE_DIR/debootstrap.log"
  # Only a finished root takes the final name, so an interrupted run starts over.
  mv "$partial" "$BASE"
}

create_room() {
  local room=$1
  rm -rf "$room"
  mkdir -p "$room/upper" "$room/work" "$room/merged"
}

exec_in_room() {
  local room=$1
  shift
  [ -d "$room/upper" ] || die "$room is not a room (run: cleanroom.sh create $room)"
  # unshare gives a private mount namespace: the overlay and the /proc, /sys and
  # /dev mounts vanish with the process. XNNPACK's cpuinfo reads /proc and /sys.
  unshare --mount --propagation private -- /bin/bash -euo pipefail -c '
    base=$1 room=$2
    shift 2
    mount -t overlay overlay -o "lowerdir=$base,upperdir=$room/upper,workdir=$room/work" "$room/merged"
    mount -t proc proc "$room/merged/proc"
    mount --rbind /sys "$room/merged/sys"
    mount --rbind /dev "$room/merged/dev"
    exec chroot "$room/merged" /usr/bin/env -i HOME=/root LANG=C.UTF-8 \
      PATH=/usr/local/bin:/usr/local/sbin:/usr/bin:/usr/sbin:/bin:/sbin "$@"
  ' cleanroom-exec "$BASE" "$room" "$@"
}

command=${1:-}
case "$command" in
  tools)
    install_tools
    ;;
  base)
    make_base
    echo "$BASE"
    ;;
  create)
    [ $# -eq 2 ] || die "usage: cleanroom.sh create ROOM"
    make_base
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
