#!/bin/sh
# deps.sh build|test: installs (with apt-get) the Debian packages kernstat needs.
#   build: clang (compiles bpf/*.bpf.c), libelf and zlib headers and pkg-config (libbpf-sys
#          builds libbpf from source), gcc and make.
#   test:  build + the workloads and peers the tests compare against (stress-ng, taskset,
#          setpriv), and the real Waybar under headless sway for the end-to-end test
#          (sway, waybar, grim, tesseract, a font), and qemu with busybox for booting
#          Linux 6.1 (the CO-RE fallback test).
# Only missing packages are installed; nothing happens when all are present.
set -eu
build="clang libelf-dev zlib1g-dev pkg-config gcc make"
test="$build stress-ng util-linux sway waybar grim tesseract-ocr fonts-dejavu-core qemu-system-x86 busybox-static cpio"
case "${1:-build}" in
  build) want=$build ;;
  test) want=$test ;;
  *) echo "usage: $0 build|test" >&2; exit 2 ;;
esac
missing=""
for p in $want; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing="$missing $p"
done
if ! command -v cargo >/dev/null 2>&1; then
  echo "kernstat: cargo is missing; install Rust (https://rustup.rs) first" >&2
  exit 1
fi
[ -z "$missing" ] && exit 0
if [ "$(id -u)" != 0 ]; then
  echo "kernstat: missing packages:$missing" >&2
  echo "run as root, or: sudo apt-get install$missing" >&2
  exit 1
fi
echo "kernstat: installing$missing" >&2
apt-get update -qq
DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $missing >/dev/null
