#!/usr/bin/env bash
# Cross-builds etna for linux-arm64 (aarch64) on an x86-64 Debian machine,
# against the arm64 builds of that release's packages, in build-arm64/:
#   build-arm64/Release/etna.node       the addon
#   build-arm64/native/etna_*_tests     the GoogleTest programs (npm run test:arm64 runs them under QEMU)
# One build tree compiles the libraries once for both (ETNA_NODE_INCLUDE_DIR in CMakeLists.txt).
#
#   bash scripts/build-arm64.sh       (npm run build:arm64)
#
# Installs what is missing, as root (or with sudo): the arm64 architecture in
# dpkg (so apt has arm64 package lists), the cross compiler, and QEMU's
# user-mode emulator, registered with binfmt_misc. The arm64 libraries are
# unpacked into build-arm64/sysroot, not installed: Debian's XNNPACK and
# pthreadpool packages are not multi-arch, and installing their arm64 builds
# would remove this machine's own.
set -euo pipefail
cd "$(dirname "$0")/.."

out=$PWD/build-arm64
sysroot=$out/sysroot
HOST_PACKAGES=(g++-aarch64-linux-gnu qemu-user-static)
# What the build links and includes (libcpuinfo0: what libXNNPACK.so.0 needs).
SYSROOT_PACKAGES=(libxnnpack0 libxnnpack-dev libpthreadpool0 libpthreadpool-dev libcpuinfo0 libflatbuffers-dev libgtest-dev)

say() { echo "build-arm64: $*" >&2; }
. scripts/apt-packages.sh

if ! dpkg --print-foreign-architectures | grep -qx arm64; then
  say "adding the arm64 architecture to dpkg"
  $SUDO dpkg --add-architecture arm64
  $SUDO apt-get update -q >&2
fi
install_missing_packages build-arm64 "${HOST_PACKAGES[@]}" >&2

# An arm64 program that starts an arm64 program (a death test runs its own
# program again) needs the kernel to hand the new one to QEMU: binfmt_misc.
# The qemu-user-static package registers QEMU there where systemd has mounted
# binfmt_misc; elsewhere (a container, a machine without systemd) this does.
binfmt=/proc/sys/fs/binfmt_misc
if [ ! -e "$binfmt/qemu-aarch64" ]; then
  say "registering qemu-aarch64 with binfmt_misc"
  [ -e "$binfmt/register" ] || $SUDO mount -t binfmt_misc binfmt_misc "$binfmt"
  $SUDO sh -c "cat /usr/lib/binfmt.d/qemu-aarch64.conf > $binfmt/register"
fi

# The sysroot is made again whenever the wanted package versions change (a
# new list, or an apt upgrade of this machine's lists).
candidates() { apt-cache policy "${SYSROOT_PACKAGES[@]/%/:arm64}" | awk '/^[^ ]/ { name = $1 } /Candidate:/ { print name, $2 }'; }
wanted=$(candidates)
if grep -q '(none)' <<< "$wanted"; then
  $SUDO apt-get update -q >&2
  wanted=$(candidates)
fi
if [ "$(cat "$sysroot/packages.txt" 2>/dev/null)" != "$wanted" ]; then
  say "unpacking the arm64 libraries into $sysroot"
  rm -rf "$out/debs" "$sysroot.partial"
  mkdir -p "$out/debs" "$sysroot.partial"
  # APT::Sandbox::User: apt's download user may not write into this checkout.
  (cd "$out/debs" && apt-get download -q -o APT::Sandbox::User=root "${SYSROOT_PACKAGES[@]/%/:arm64}" >&2)
  for deb in "$out"/debs/*.deb; do dpkg-deb -x "$deb" "$sysroot.partial"; done
  echo "$wanted" > "$sysroot.partial/packages.txt"
  rm -rf "$sysroot" "$out/debs"
  mv "$sysroot.partial" "$sysroot"
fi

# Node's headers, where cmake-js finds them (npm's nodedir, or its own
# download for this Node version): an N-API addon includes only the
# architecture-independent C API and links no Node library.
node_include=$(npx --no-install cmake-js print-cmakejs-include 2> /dev/null | tail -n 1 | tr ';' '\n' | grep -m 1 .)
[ -f "$node_include/node_api.h" ] || { say "no node_api.h in '$node_include' (cmake-js print-cmakejs-include)"; exit 1; }

# Release, as cmake-js builds the addon.
cmake -S . -B "$out/native" -G Ninja -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_TOOLCHAIN_FILE="$PWD/cmake/toolchain-aarch64.cmake" \
  -DETNA_NODE_INCLUDE_DIR="$node_include" -DCMAKE_LIBRARY_OUTPUT_DIRECTORY="$out/Release" > /dev/null
nice cmake --build "$out/native" --parallel 2
say "built $out/Release/etna.node and the tests in $out/native"
