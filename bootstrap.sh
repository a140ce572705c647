#!/bin/sh
# bootstrap.sh: install the build and test dependencies (Debian 12, as root), then configure and build.
# Extra arguments go to ./configure (e.g. --enable-asan).
set -eu
cd "$(dirname "$0")"

PACKAGES="build-essential autoconf automake pkg-config libdw-dev libelf-dev libunwind-dev libjson-c-dev libyaml-dev libzstd-dev zlib1g-dev libsystemd-dev libmicrohttpd-dev libgnutls28-dev libcurl4-openssl-dev zstd systemd
check python3-pytest util-linux binutils elfutils prometheus prometheus-alertmanager systemd-journal-remote libiberty-dev
libdebuginfod-dev debuginfod rustc clang libclang-rt-14-dev libpython3.11 golang-go
default-jdk-headless libxml2-utils chromium bpftool libbpf-dev
libuv1 libc-ares2 libicu72 libnghttp2-14 libbrotli1 ruby3.1"

# Cross build for aarch64 (--host=aarch64-linux-gnu): Debian's cross toolchain, the :arm64 libraries (multiarch) and
# qemu-user, which runs the unit tests (tests/arm64/cross-check); then the same configure and build for that host.
# --deps-only stops after the packages. Optional features without an arm64 package here are switched off.
host="" deps_only=false
for a in "$@"; do
        shift
        case $a in
        --host=*) host=${a#--host=}; continue ;;
        --deps-only) deps_only=true; continue ;;
        esac
        set -- "$@" "$a"
done
case $host in
"" | x86_64-linux-gnu) ;;
aarch64-linux-gnu)
        ARM64_LIBS="libdw-dev libelf-dev libjson-c-dev libyaml-dev libzstd-dev zlib1g-dev libsystemd-dev libmicrohttpd-dev
libgnutls28-dev libcurl4-openssl-dev libiberty-dev libdebuginfod-dev check"
        if [ "$(id -u)" -eq 0 ] && ! dpkg --print-foreign-architectures | grep -qx arm64; then
                dpkg --add-architecture arm64
                apt-get update
        fi
        optional=""
        if apt-cache show libunwind-dev:arm64 >/dev/null 2>&1; then
                ARM64_LIBS="$ARM64_LIBS libunwind-dev"
        else
                echo "bootstrap.sh: no libunwind-dev:arm64 in the archive: building without the libunwind backend" >&2
                optional="$optional --without-libunwind"
        fi
        PACKAGES="build-essential autoconf automake pkg-config crossbuild-essential-arm64 binutils"
        command -v qemu-aarch64 >/dev/null || command -v qemu-aarch64-static >/dev/null ||
                PACKAGES="$PACKAGES qemu-user"
        for p in $ARM64_LIBS; do
                PACKAGES="$PACKAGES $p:arm64"
        done
        ;;
*)
        echo "bootstrap.sh: --host=$host: stackwatch cross-builds for aarch64-linux-gnu only" >&2
        exit 1
        ;;
esac

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

$deps_only && exit 0

autoreconf -fi
if [ -n "$host" ] && [ "$host" != x86_64-linux-gnu ]; then
        # pkg-config of the host's multiarch directory, unless a $host-pkg-config wrapper exists; BPF (built by clang
        # for this machine's kernel) stays off in a cross build.
        command -v "$host-pkg-config" >/dev/null ||
                { PKG_CONFIG_LIBDIR=/usr/lib/$host/pkgconfig:/usr/share/pkgconfig; export PKG_CONFIG_LIBDIR; }
        if ./configure --help | grep -q -- --with-bpf; then
                echo "bootstrap.sh: cross build: BPF scan off (--without-bpf)" >&2
                optional="$optional --without-bpf"
        fi
        # shellcheck disable=SC2086 # optional is a list of options
        ./configure --host="$host" --enable-werror $optional "$@"
        make -j"$(nproc)"
        make -j"$(nproc)" fixtures
        echo "bootstrap.sh: built for $host; its unit tests run under qemu-user: tests/arm64/cross-check"
        exit 0
fi
./configure --enable-werror --with-libunwind "$@"
make -j"$(nproc)"
make -j"$(nproc)" fixtures
# Debian's Node 18 beside the machine's node, for the JavaScript frame tests (the libraries it needs are in PACKAGES);
# without it tests/integration/test_node.py skips Node 18 with the reason.
if [ "$(id -u)" -eq 0 ]; then
        tests/fixtures/node/fetch-node18 || echo "bootstrap.sh: no Node 18: its JavaScript frame tests will skip" >&2
fi
# The browser tests' driver (tests/browser/package-lock.json pins it; it downloads no browser: Debian's chromium).
# Without npm or the registry, tests/integration/test_web.py skips with the reason.
if command -v npm >/dev/null; then
        npm ci --prefix tests/browser --no-audit --no-fund || echo "bootstrap.sh: npm ci failed: the browser tests will skip" >&2
fi
