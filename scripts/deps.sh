#!/bin/sh
# deps.sh build|test: installs (with apt-get) the Debian packages kernstat needs.
#   build: clang (compiles bpf/*.bpf.c), libelf and zlib headers and pkg-config (libbpf-sys
#          builds libbpf from source), gcc and make.
#   test:  build + the workloads and peers the tests compare against (stress-ng, taskset,
#          setpriv, Prometheus and promtool, iperf3), and the real Waybar under headless sway for the end-to-end test
#          (sway, waybar, grim, tesseract, a font), headless Chromium for `kernstat view`'s
#          page, and qemu with busybox for booting
#          Linux 6.1 (the CO-RE fallback test), and the tools whose files the context
#          providers read, to make real layouts and compare answers (kubectl from
#          kubernetes-client, direnv, python3's venv, sudo), and the shells, tmux and neovim
#          the prompt hooks and the Lua example are driven in; and pyarrow and DuckDB
#          (PyPI, in target/pyenv) that read the Parquet export; and the arm64 C cross
#          compiler and its libc headers (libc6-dev-arm64-cross: zstd-sys compiles C even
#          for cargo check; it is only a Recommends of the compiler, which --no-install-
#          recommends skips) with Rust's aarch64-unknown-linux-gnu target (rustup), with which
#          `make test` checks that the whole workspace compiles for arm64.
# Only missing packages are installed; nothing happens when all are present.
set -eu
build="clang libelf-dev zlib1g-dev pkg-config gcc make"
peers="gcc-aarch64-linux-gnu libc6-dev-arm64-cross stress-ng util-linux libcap2-bin procps libbpf-tools bpftool git qemu-system-x86 busybox-static cpio prometheus kubernetes-client direnv python3 python3-venv sudo strace tmux zsh bash fish neovim iperf3 nftables iproute2"
# The desktop pieces get their recommended packages too (icon theme, MIME data):
# GTK programs started with a bare minimum tend to draw nothing and say little.
desktop="sway waybar grim tesseract-ocr fonts-dejavu-core chromium"
case "${1:-build}" in
  build) lean=$build; full="" ;;
  test) lean="$build $peers"; full=$desktop ;;
  *) echo "usage: $0 build|test" >&2; exit 2 ;;
esac
missing() {
  for p in "$@"; do
    # Another package may already provide kubectl (Google's "kubectl" package owns
    # /usr/bin/kubectl and makes kubernetes-client fail to unpack): any kubectl will do.
    [ "$p" = kubernetes-client ] && command -v kubectl >/dev/null 2>&1 && continue
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || printf ' %s' "$p"
  done
}
if ! command -v cargo >/dev/null 2>&1; then
  echo "kernstat: cargo is missing; install Rust (https://rustup.rs) first" >&2
  exit 1
fi
# shellcheck disable=SC2086
need_lean=$(missing $lean)
# shellcheck disable=SC2086
need_full=$(missing $full)
# The Parquet export is checked with pyarrow and DuckDB (from PyPI, in a venv under
# target/, made once; `test` only).
pyenv="$(cd "$(dirname "$0")/.." && pwd)/target/pyenv"
python_deps() {
  [ "${1:-build}" = test ] || return 0
  "$pyenv/bin/python" -c 'import pyarrow, duckdb' 2>/dev/null && return 0
  echo "kernstat: installing pyarrow and duckdb into $pyenv" >&2
  python3 -m venv "$pyenv"
  "$pyenv/bin/pip" install -q --disable-pip-version-check pyarrow duckdb
}
# Rust's arm64 standard library, for `cargo check --target aarch64-unknown-linux-gnu`.
rust_arm64() {
  [ "${1:-build}" = test ] || return 0
  command -v rustup >/dev/null 2>&1 || return 0
  rustup target list --installed 2>/dev/null | grep -q '^aarch64-unknown-linux-gnu$' && return 0
  echo "kernstat: adding Rust's aarch64-unknown-linux-gnu target (rustup)" >&2
  rustup target add aarch64-unknown-linux-gnu >&2
}
if [ -z "$need_lean$need_full" ]; then
  python_deps "${1:-build}"
  rust_arm64 "${1:-build}"
  exit 0
fi
if [ "$(id -u)" != 0 ]; then
  echo "kernstat: missing packages:$need_lean$need_full" >&2
  echo "run as root, or: sudo apt-get install$need_lean$need_full" >&2
  exit 1
fi
echo "kernstat: installing$need_lean$need_full" >&2
apt-get update -qq
export DEBIAN_FRONTEND=noninteractive
# shellcheck disable=SC2086
[ -z "$need_lean" ] || apt-get install -y -qq --no-install-recommends $need_lean >/dev/null
# shellcheck disable=SC2086
[ -z "$need_full" ] || apt-get install -y -qq $need_full >/dev/null
python_deps "${1:-build}"
rust_arm64 "${1:-build}"
