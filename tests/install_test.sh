#!/usr/bin/env bash
# Installs wgnet into a temporary prefix and builds examples/embed against it with
# find_package(wgnet): the package a library user gets must be complete.
# Usage: install_test.sh BUILD_DIR SOURCE_DIR
set -euo pipefail
build=$1 src=$2
tmp=$(mktemp -d /tmp/wgnet-install.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
cmake --install "$build" --prefix "$tmp/prefix" >/dev/null
test -f "$tmp/prefix/include/wgnet/netstack/stack.hpp"
test -f "$tmp/prefix/include/wgnet/netstack.hpp"  # <wgnet/netstack.hpp>
test ! -e "$tmp/prefix/include/wgnet/netstack/stack_impl.hpp"
cmake -S "$src/examples/embed" -B "$tmp/embed" -DCMAKE_PREFIX_PATH="$tmp/prefix" >/dev/null
cmake --build "$tmp/embed" -j"$(nproc)" >/dev/null
out=$("$tmp/embed/wgnet-embed" 2>&1 || true)
grep -q usage <<<"$out"
echo "installed package builds and links wgnet-embed"
