# Shared by the scripts that make Debian roots with debootstrap and run
# commands inside them (cleanroom.sh, debian13.sh, test-arm64-node.sh). Source
# it; needs root.

debian_root_die() { echo "$(basename "$0"): $*" >&2; exit 1; }

[ "$(id -u)" -eq 0 ] || debian_root_die "needs root (debootstrap, chroot and mount namespaces)"

debian_mirror() {
  # The mirror this machine's apt already uses, so every root comes from the same place.
  local uri=""
  if [ -f /etc/apt/sources.list.d/debian.sources ]; then
    uri=$(awk '/^URIs:/ { print $2; exit }' /etc/apt/sources.list.d/debian.sources)
  fi
  if [ -z "$uri" ] && [ -f /etc/apt/sources.list ]; then
    uri=$(awk '$1 == "deb" && $0 !~ /security/ { print $2; exit }' /etc/apt/sources.list)
  fi
  echo "${uri:-http://deb.debian.org/debian}"
}

# ensure_commands COMMAND...: installs each missing command's package (named
# like the command) with apt-get.
ensure_commands() {
  local missing=() command
  for command in "$@"; do
    command -v "$command" >/dev/null || missing+=("$command")
  done
  [ "${#missing[@]}" -eq 0 ] && return 0
  echo "$(basename "$0"): installing ${missing[*]}" >&2
  DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "${missing[@]}" >&2 \
    || { apt-get update -q >&2 && DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "${missing[@]}" >&2; }
}

# unpack_foreign_root ROOT: finishes a root that `debootstrap --foreign` left
# with its packages downloaded, without running them: every package is
# unpacked here, by this machine's dpkg-deb, and recorded as installed. What
# the maintainer scripts would have made and the tests' programs read is made
# here too: users and groups, the CA bundle, the dynamic loader's cache.
# debootstrap's own second stage runs every maintainer script under QEMU
# instead, which took about 20 minutes for an arm64 root with Node.js; this
# takes under a minute. Such a root runs programs; it is not for apt or dpkg
# to install into.
unpack_foreign_root() {
  local root=$1 deb status
  status=$root/var/lib/dpkg/status
  mkdir -p "$(dirname "$status")"
  : > "$status"
  for deb in "$root"/var/cache/apt/archives/*.deb; do
    dpkg-deb -x "$deb" "$root"
    dpkg-deb -f "$deb" | sed '/^Package:/a Status: install ok installed' >> "$status"
    echo >> "$status"
  done
  [ -e "$root/etc/passwd" ] || cp "$root/usr/share/base-passwd/passwd.master" "$root/etc/passwd"
  [ -e "$root/etc/group" ] || cp "$root/usr/share/base-passwd/group.master" "$root/etc/group"
  [ -e "$root/usr/bin/awk" ] || [ ! -e "$root/usr/bin/mawk" ] || ln -s mawk "$root/usr/bin/awk"
  if [ -d "$root/usr/share/ca-certificates" ]; then
    mkdir -p "$root/etc/ssl/certs"
    find "$root/usr/share/ca-certificates" -name '*.crt' -print0 | sort -z | xargs -0 cat > "$root/etc/ssl/certs/ca-certificates.crt"
  fi
  chroot "$root" /sbin/ldconfig
  rm -rf "$root/debootstrap" "$root"/var/cache/apt/archives/*.deb
}

# make_debian_root SUITE DIR [ARCH [PACKAGE,...]]: a minimal root
# (debootstrap, variant minbase) in DIR, unless a finished one is already
# there; for ARCH (this machine's by default), with the PACKAGEs and what they
# depend on. A root of another architecture is downloaded by debootstrap
# --foreign and unpacked here (unpack_foreign_root); its programs run through
# QEMU (binfmt_misc, see scripts/build-arm64.sh). The log goes to DIR.log.
make_debian_root() {
  local suite=$1 dir=$2 arch=${3:-$(dpkg --print-architecture)} packages=${4:-}
  [ -x "$dir/usr/bin/env" ] && return 0
  ensure_commands debootstrap
  mkdir -p "$(dirname "$dir")"
  local partial="$dir.partial" options=(--variant=minbase --arch="$arch")
  [ -z "$packages" ] || options+=(--include="$packages")
  local foreign=false
  [ "$arch" = "$(dpkg --print-architecture)" ] || { foreign=true; options+=(--foreign); }
  rm -rf "$partial"
  echo "$(basename "$0"): debootstrap $suite ($arch, minbase) into $dir; this takes a few minutes once" >&2
  debootstrap "${options[@]}" "$suite" "$partial" "$(debian_mirror)" > "$dir.log" 2>&1 \
    || debian_root_die "debootstrap failed; see $dir.log"
  if $foreign; then
    unpack_foreign_root "$partial" >> "$dir.log" 2>&1 || debian_root_die "unpacking the $arch root failed; see $dir.log"
  fi
  # Only a finished root takes the final name, so an interrupted run starts over.
  mv "$partial" "$dir"
}

# run_in_root [--overlay LOWER UPPER WORK] [--bind|--bind-writable SOURCE TARGET]... ROOT CMD...
# Runs CMD as root chrooted in ROOT, with /proc, /sys and /dev (XNNPACK's
# cpuinfo reads /proc and /sys). --overlay first mounts UPPER over LOWER at
# ROOT; --bind shows the host's SOURCE read-only at TARGET, a path inside
# ROOT, and --bind-writable writable; binds are mounted in the order given.
# Every mount is made in a private mount namespace (unshare), so all of them
# vanish with the process, however it ends, and none is ever seen on the host.
run_in_root() {
  unshare --mount --propagation private -- /bin/bash -euo pipefail -c '
    overlay=() binds=()
    while [ $# -gt 0 ]; do
      case "$1" in
        --overlay) overlay=("$2" "$3" "$4"); shift 4 ;;
        --bind) binds+=("$2" "$3" ro); shift 3 ;;
        --bind-writable) binds+=("$2" "$3" rw); shift 3 ;;
        *) break ;;
      esac
    done
    root=$1
    shift
    if [ "${#overlay[@]}" -gt 0 ]; then
      mount -t overlay overlay -o "lowerdir=${overlay[0]},upperdir=${overlay[1]},workdir=${overlay[2]}" "$root"
    fi
    mount -t proc proc "$root/proc"
    mount --rbind /sys "$root/sys"
    mount --rbind /dev "$root/dev"
    for ((i = 0; i < ${#binds[@]}; i += 3)); do
      target=$root${binds[i + 1]}
      [ -d "$target" ] || mkdir -p "$target"
      mount --bind "${binds[i]}" "$target"
      [ "${binds[i + 2]}" = rw ] || mount -o remount,bind,ro "$target"
    done
    exec chroot "$root" /usr/bin/env -i HOME=/root LANG=C.UTF-8 \
      PATH=/usr/local/bin:/usr/local/sbin:/usr/bin:/usr/sbin:/bin:/sbin "$@"
  ' run-in-root "$@"
}
