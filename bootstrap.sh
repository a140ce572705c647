#!/bin/sh
# bootstrap.sh: install the build and test dependencies (Debian 12, as root), then configure and build.
# Extra arguments go to ./configure (e.g. --enable-asan).
set -eu
cd "$(dirname "$0")"

PACKAGES="build-essential autoconf automake pkg-config libdw-dev libelf-dev libunwind-dev libjson-c-dev libyaml-dev libzstd-dev zlib1g-dev libsystemd-dev libmicrohttpd-dev libgnutls28-dev libcurl4-openssl-dev zstd systemd
check python3-pytest util-linux binutils elfutils prometheus prometheus-alertmanager systemd-journal-remote libiberty-dev
libdebuginfod-dev debuginfod rustc clang libclang-rt-14-dev libpython3.11 golang-go
default-jdk-headless libxml2-utils chromium bpftool libbpf-dev"

missing=""
for p in $PACKAGES; do
        dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing="$missing $p"
done
if [ -n "$missing" ]; then
        if [ "$(id -u)" -ne 0 ]; then
                echo "bootstrap.sh: missing packages:$missing — run as root, or: apt-get install$missing" >&2
                exit 1
        fi
        apt-get update
        DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends $missing
fi

autoreconf -fi
./configure --enable-werror --with-libunwind "$@"
make -j"$(nproc)"
make -j"$(nproc)" fixtures
# The browser tests' driver (tests/browser/package-lock.json pins it; it downloads no browser: Debian's chromium).
# Without npm or the registry, tests/integration/test_web.py skips with the reason.
if command -v npm >/dev/null; then
        npm ci --prefix tests/browser --no-audit --no-fund || echo "bootstrap.sh: npm ci failed: the browser tests will skip" >&2
fi
