#!/bin/sh
# deb.sh: builds target/debian/kernstat_VERSION_ARCH.deb with dpkg-deb from a staged
# `make install PREFIX=/usr` (so the package holds exactly what `make install` does).
#   KERNSTAT_BIN=path   package that binary instead of the release build
#   OUT=dir             where to put the .deb (default target/debian)
set -eu
cd "$(dirname "$0")/.."
bin=${KERNSTAT_BIN:-target/release/kernstat}
out=${OUT:-target/debian}
[ "$bin" = target/release/kernstat ] && make -s target/release/kernstat
version=$(sed -n 's/^version = "\(.*\)"/\1/p' Cargo.toml | head -1)
arch=$(dpkg --print-architecture)
stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
make -s install KERNSTAT_BIN="$bin" PREFIX=/usr DESTDIR="$stage" GEN="$stage/.generated"
rm -rf "$stage/.generated"
mkdir -p "$stage/DEBIAN" "$stage/usr/share/doc/kernstat"
cp README.md "$stage/usr/share/doc/kernstat/"
cp -r docs "$stage/usr/share/doc/kernstat/"
# The libraries the binary links (libbpf is built in; libelf and zlib are not).
depends="libc6, libelf1, zlib1g"
size=$(du -sk "$stage" | cut -f1)
cat > "$stage/DEBIAN/control" <<CONTROL
Package: kernstat
Version: $version
Architecture: $arch
Maintainer: kernstat developers <kernstat@example.invalid>
Installed-Size: $size
Depends: $depends
Section: admin
Priority: optional
Homepage: https://example.invalid/kernstat
Description: Linux observer that costs almost nothing
 eBPF collectors for status bars (Waybar, i3bar), shell prompts and tmux (through a
 caching daemon), a process table, run-queue latency and write-size histograms, and a
 Prometheus endpoint. Run "kernstat doctor" to see what this kernel allows.
CONTROL
cat > "$stage/DEBIAN/postinst" <<'SCRIPT'
#!/bin/sh
set -e
if [ "$1" = configure ]; then
  systemd-sysusers kernstat.conf 2>/dev/null || \
    adduser --system --no-create-home --group --quiet kernstat 2>/dev/null || true
  if [ -d /run/systemd/system ]; then systemctl daemon-reload || true; fi
fi
SCRIPT
cat > "$stage/DEBIAN/prerm" <<'SCRIPT'
#!/bin/sh
set -e
if [ -d /run/systemd/system ] && [ "$1" = remove ]; then
  systemctl stop kernstat.service 2>/dev/null || true
fi
SCRIPT
cat > "$stage/DEBIAN/postrm" <<'SCRIPT'
#!/bin/sh
set -e
if [ -d /run/systemd/system ]; then systemctl daemon-reload || true; fi
SCRIPT
chmod 755 "$stage/DEBIAN/postinst" "$stage/DEBIAN/prerm" "$stage/DEBIAN/postrm"
mkdir -p "$out"
deb="$out/kernstat_${version}_${arch}.deb"
dpkg-deb --root-owner-group --build "$stage" "$deb" >/dev/null
echo "$deb"
