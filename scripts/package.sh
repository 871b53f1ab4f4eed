#!/usr/bin/env bash
# Builds the Debian packages from a Release build in build-pkg/ (CPack, cmake/package.cmake):
#   build-pkg/wgnet_VERSION_ARCH.deb, build-pkg/libwgnet-dev_VERSION_ARCH.deb
# Usage: scripts/package.sh [BUILD_DIR]
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$top/build-pkg}
"$top/scripts/setup.sh"
# Debian's build flags with every hardening feature (fortify, stack protector, relro
# and bind-now, PIE), as a package built by debhelper gets them; read by the first
# configure of the build directory.
export DEB_BUILD_MAINT_OPTIONS=hardening=+all
# -Werror: a warning of g++ at these flags fails the package build.
CFLAGS="$(dpkg-buildflags --get CPPFLAGS) $(dpkg-buildflags --get CFLAGS) -Werror"
CXXFLAGS="$(dpkg-buildflags --get CPPFLAGS) $(dpkg-buildflags --get CXXFLAGS) -Werror"
LDFLAGS=$(dpkg-buildflags --get LDFLAGS)
export CFLAGS CXXFLAGS LDFLAGS
# Debian 12 paths: units in /lib/systemd/system (bookworm's systemd and lintian look
# there), sysusers.d in /usr/lib.
rm -f "$build/CMakeCache.txt"  # the flags above are read by a first configure only
cmake -S "$top" -B "$build" -DCMAKE_BUILD_TYPE=Release -DCMAKE_INSTALL_PREFIX=/usr \
  -DBUILD_TESTING=OFF -DWGNET_BENCH=OFF \
  -DWGNET_SYSTEMD_UNIT_DIR=/lib/systemd/system -DWGNET_SYSUSERS_DIR=/usr/lib/sysusers.d >/dev/null
cmake --build "$build" -j"$(nproc)"
rm -f "$build"/*.deb
(cd "$build" && cpack -G DEB >/dev/null)
ls "$build"/*.deb
