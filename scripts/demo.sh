#!/usr/bin/env bash
# The Quick start demo. Needs no root-only feature and no outside network.
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
cd "$top"
"$top/scripts/setup.sh"
cmake --preset default >/dev/null
cmake --build build -j"$(nproc)" --target wg-demo >/dev/null
exec ./build/bin/wg-demo 200000
