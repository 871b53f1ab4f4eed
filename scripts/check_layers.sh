#!/usr/bin/env bash
# The include rules of DESIGN's folder table, checked on the sources: each folder may
# include only the project headers listed for it here. Prints every forbidden include
# (file:line: the include, and what the folder may use) and fails when there is one.
# Usage: check_layers.sh [SOURCE_DIR]
set -uo pipefail
root=${1:-$(dirname "$0")/..}

# folder -> the include prefixes it may use besides its own folder ("lwip/" is lwIP).
declare -A allowed=(
  [wg/base]=""
  [tun]=""
  [bind]="wg/base/"
  [tunlinux]="tun/device.hpp wg/base/"
  [wg]="bind/bind.hpp tun/device.hpp wg/base/"
  [netstack]="tun/device.hpp wg/base/ lwip/ arch/"
)
# Project folders whose headers are checked; an include of anything else is a system or
# third-party header and not ours to rule on.
project="wg/ bind/ tun/ tunlinux/ netstack/ wgnet/ examples/ tests/"

violations=0
for folder in "${!allowed[@]}"; do
  [ -d "$root/$folder" ] || { echo "check_layers: no folder $root/$folder" >&2; exit 2; }
  while IFS= read -r -d '' file; do
    rel=${file#"$root/"}
    # wg/base has its own entry: files under it are not judged as wg/'s.
    [ "$folder" = wg ] && [[ $rel == wg/base/* ]] && continue
    while IFS=: read -r line inc; do
      ok=0
      case "$inc" in "$folder"/*) ok=1 ;; esac
      [ "$folder" = wg ] && [[ $inc == wg/base/* ]] && ok=1
      if [ $ok = 0 ]; then
        ours=0
        for p in $project; do [[ $inc == "$p"* ]] && ours=1; done
        for a in ${allowed[$folder]}; do [[ $inc == "$a"* ]] && ok=1; done
        # lwIP's headers are only the netstack's; anything else unknown is a system header.
        [ $ours = 0 ] && [[ $inc != lwip/* && $inc != arch/* ]] && ok=1
      fi
      if [ $ok = 0 ]; then
        echo "$rel:$line: includes \"$inc\"; $folder/ may include only its own headers${allowed[$folder]:+ and ${allowed[$folder]}}"
        violations=$((violations + 1))
      fi
    done < <(grep -nE '^[[:space:]]*#[[:space:]]*include[[:space:]]*"' "$file" |
             sed -E 's/^([0-9]+):[^"]*"([^"]*)".*/\1:\2/')
  done < <(find "$root/$folder" \( -name '*.cpp' -o -name '*.hpp' -o -name '*.h' -o -name '*.c' \) -print0)
done
if [ $violations -gt 0 ]; then
  echo "check_layers: $violations forbidden include(s)"
  exit 1
fi
echo "check_layers: every include follows the folder table"
