# Sourced by the scripts that install Debian packages (setup.sh,
# build-arm64.sh): apt-get and dpkg run as root, or with sudo when not root.
SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo"

# install_missing_packages WHO PACKAGE...: those of the PACKAGEs dpkg has not
# installed, with apt-get, after updating its package lists; WHO names the
# caller in the line that says which.
install_missing_packages() {
  local who=$1 missing=() pkg
  shift
  for pkg in "$@"; do
    dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" || missing+=("$pkg")
  done
  [ "${#missing[@]}" -eq 0 ] && return 0
  echo "$who: installing ${missing[*]}"
  $SUDO apt-get update -q
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -q --no-install-recommends "${missing[@]}"
}
