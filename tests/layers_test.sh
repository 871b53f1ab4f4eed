#!/usr/bin/env bash
# scripts/check_layers.sh on the tree (must pass) and on copies of it with one forbidden
# include planted per folder (each must fail and name the planted line).
# Usage: layers_test.sh SOURCE_DIR
set -uo pipefail
src=${1:?usage: $0 SOURCE_DIR}
check="$src/scripts/check_layers.sh"
tmp=$(mktemp -d /tmp/wgnet-layers.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
failures=0

if out=$("$check" "$src" 2>&1); then
  echo "ok: the tree passes: $out"
else
  echo "FAIL: the tree has forbidden includes:"; echo "$out" | sed 's/^/  /'
  failures=$((failures + 1))
fi

# plant FOLDER/FILE INCLUDE: a copy of the tree's layered folders with one line added.
plant() {
  local file=$1 inc=$2
  rm -rf "${tmp:?}/tree"
  mkdir -p "$tmp/tree"
  for d in wg bind tun tunlinux netstack; do cp -r "$src/$d" "$tmp/tree/"; done
  printf '#include "%s"\n' "$inc" >>"$tmp/tree/$file"
  if out=$("$check" "$tmp/tree" 2>&1); then
    echo "FAIL: $file including $inc passed"
    failures=$((failures + 1))
  elif grep -q "^$file:[0-9]*: includes \"$inc\"" <<<"$out"; then
    echo "ok: $file including $inc is refused: $(grep "^$file:" <<<"$out")"
  else
    echo "FAIL: $file including $inc failed without naming it:"; echo "$out" | sed 's/^/  /'
    failures=$((failures + 1))
  fi
}
plant netstack/udp.cpp wg/device.hpp        # the device never includes the core
plant netstack/stack.hpp wg/crypto.hpp      # only the base of wg/
plant tunlinux/tun.cpp bind/bind.hpp
plant bind/linux.cpp wg/config.hpp
plant wg/device.cpp bind/linux.hpp          # the core sees the Bind interface only
plant wg/send.cpp tunlinux/tun.hpp
plant wg/base/ip.cpp wg/device.hpp          # the base depends on nothing of ours
plant tun/memory.cpp wg/base/log.hpp
plant wg/receive.cpp lwip/tcp.h             # lwIP is the netstack's alone

[ $failures = 0 ] && echo "layers: all checks passed" || echo "layers: $failures check(s) failed"
exit $((failures > 0))
