#!/usr/bin/env bash
# The Debian packages as an administrator meets them: built (scripts/package.sh), checked
# by lintian (no error), installed with apt-get on this machine, used (programs, manuals,
# service units, the README's embedding example built against libwgnet-dev), and removed
# without leaving a file behind.
# Usage: tests/package_test.sh SOURCE_DIR [BUILD_DIR]   (root; exit 77 = skipped)
set -euo pipefail
src=$(cd "$1" && pwd)
build=${2:-$src/build-pkg}
if [ "$(id -u)" -ne 0 ]; then
  echo "SKIPPED: package_test needs root (apt-get install)"
  exit 77
fi
for p in wgnet libwgnet-dev; do
  if dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed'; then
    echo "package_test: $p is installed already; remove it first (apt-get purge $p)" >&2
    exit 1
  fi
done

fail=0
check() { # DESCRIPTION CMD...
  local what=$1; shift
  if "$@"; then echo "ok: $what"; else echo "FAIL: $what"; fail=1; fi
}

bash "$src/scripts/package.sh" "$build"
version=$(sed -n 's/^project(wgnet VERSION \([0-9.]*\) .*/\1/p' "$src/CMakeLists.txt")
arch=$(dpkg --print-architecture)
deb=$build/wgnet_${version}_${arch}.deb
devdeb=$build/libwgnet-dev_${version}_${arch}.deb
check "packages built: $(basename "$deb"), $(basename "$devdeb")" test -f "$deb" -a -f "$devdeb"

echo "--- lintian"
lintian --fail-on error --display-info "$deb" "$devdeb" || { echo "FAIL: lintian reports an error"; fail=1; }

tmp=$(mktemp -d /tmp/wgnet-package.XXXXXX)
cleanup() {
  rm -rf "$tmp" /etc/systemd/system/wg-quick@wgpkgtest.service.d
  DEBIAN_FRONTEND=noninteractive apt-get purge -y -qq wgnet libwgnet-dev >/dev/null 2>&1 || true
}
trap cleanup EXIT

echo "--- install"
DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "$deb" "$devdeb" >"$tmp/apt.log" 2>&1 ||
  { cat "$tmp/apt.log"; echo "FAIL: apt-get install"; exit 1; }
# Every program the package installs is in the documentation's lists: the package
# table, README's manuals, the build's program list, and the CHANGELOG.
programs=$(dpkg -L wgnet | sed -n 's|^/usr/bin/||p' | sort)
check "the package installs programs ($(echo $programs))" test -n "$programs"
for p in $programs; do
  check "$p is in docs/packaging.md's table" grep -qE "^\| .*\`$p\`.* in \`/usr/bin\`" "$src/docs/packaging.md"
  check "man 8 $p is in README's manuals" grep -qF "\`man 8 $p\`" "$src/README.md"
  check "$p is in docs/building.md" grep -qF "$p" "$src/docs/building.md"
  check "$p is in CHANGELOG.md" grep -qF "$p" "$src/CHANGELOG.md"
done
for p in wg-netstack wg-tun wg-run; do
  check "$p is /usr/bin/$p" test "$(command -v $p)" = "/usr/bin/$p"
  out=$($p -v)
  check "$p -v prints $version ($out)" grep -q "$version" <<<"$out"
  check "man -w $p: $(man -w $p 2>&1)" test "$(man -w $p 2>/dev/null)" = "/usr/share/man/man8/$p.8.gz"
  check "man $p renders without a warning" bash -c "test -z \"\$(MANWIDTH=80 man --warnings -P cat $p 2>&1 >/dev/null)\""
done
check "the system user _wgnet exists (postinst, sysusers.d)" bash -c "getent passwd _wgnet >/dev/null"
unit=/lib/systemd/system/wg-netstack@.service
check "the unit is $unit" test -f "$unit"
out=$(systemd-analyze verify wg-netstack@pkgtest.service 2>&1) && rc=0 || rc=$?
check "systemd-analyze verify wg-netstack@pkgtest.service: rc $rc, '$out'" test "$rc" -eq 0 -a -z "$out"
exposure=$(cd /lib/systemd/system && systemd-analyze security --offline=yes wg-netstack@.service 2>&1 |
  sed -n 's/.*Overall exposure level for [^:]*: \([0-9.]*\).*/\1/p')
check "systemd-analyze security: exposure $exposure <= 2.0" awk -v e="$exposure" 'BEGIN { exit !(e != "" && e <= 2.0) }'
dropin=/usr/share/doc/wgnet/examples/wg-quick-wg-tun.conf
check "the wg-quick drop-in is $dropin" test -f "$dropin"
install -D -m 0644 "$dropin" /etc/systemd/system/wg-quick@wgpkgtest.service.d/wg-tun.conf
out=$(systemd-analyze verify wg-quick@wgpkgtest.service 2>&1) && rc=0 || rc=$?
check "systemd-analyze verify wg-quick@ with the drop-in: rc $rc, '$out'" test "$rc" -eq 0 -a -z "$out"
# The sample configs, their placeholders replaced by keys, pass wg-netstack's check.
for sample in wg0.conf wg-netstack.conf; do
  f=/usr/share/doc/wgnet/examples/$sample
  check "the sample config $f is there" test -f "$f"
  (umask 077; sed -e "s|<output of wg genkey>|$(wg genkey)|" -e "s|<the peer's public key>|$(wg genkey | wg pubkey)|" \
    "$f" >"$tmp/$sample")
  out=$(wg-netstack -n -c "$tmp/$sample" 2>&1) && rc=0 || rc=$?
  check "wg-netstack -n accepts $sample with keys filled in: rc $rc, '$out'" test "$rc" -eq 0 -a "$out" = "Config OK"
done
check "copyright and changelog in /usr/share/doc" \
  test -f /usr/share/doc/wgnet/copyright -a -f /usr/share/doc/wgnet/changelog.gz -a -f /usr/share/doc/libwgnet-dev/copyright

echo "--- the README's embedding example against libwgnet-dev"
mkdir -p "$tmp/app"
awk '/^## Embedding/ { sec = 1 } sec && /^```cpp/ { inside = 1; next } inside && /^```/ { exit } inside { print }' \
  "$src/README.md" >"$tmp/app/main.cpp"
check "README has a C++ example under '## Embedding' ($(wc -l <"$tmp/app/main.cpp") lines)" test -s "$tmp/app/main.cpp"
# The whole CMakeLists.txt docs/embedding.md prints.
awk '/^## Building against wgnet/ { sec = 1 } sec && /^```cmake/ { inside = 1; next } inside && /^```/ { exit } inside { print }' \
  "$src/docs/embedding.md" >"$tmp/app/CMakeLists.txt"
check "docs/embedding.md has a whole CMakeLists.txt" grep -q "^add_executable(app main.cpp)" "$tmp/app/CMakeLists.txt"
if cmake -S "$tmp/app" -B "$tmp/app/build" >"$tmp/app.log" 2>&1 && cmake --build "$tmp/app/build" -j"$(nproc)" >>"$tmp/app.log" 2>&1; then
  echo "ok: the README example builds with docs/embedding.md's CMakeLists.txt against the installed package"
else
  tail -30 "$tmp/app.log"; echo "FAIL: the README example does not build with docs/embedding.md's CMakeLists.txt"; fail=1
fi

echo "--- remove"
DEBIAN_FRONTEND=noninteractive apt-get purge -y -qq wgnet libwgnet-dev >"$tmp/apt.log" 2>&1 ||
  { cat "$tmp/apt.log"; echo "FAIL: apt-get purge"; fail=1; }
left=$(ls -d /usr/bin/wg-netstack /usr/bin/wg-tun /usr/bin/wg-run /usr/share/man/man8/wg-netstack.8.gz \
  /usr/share/man/man8/wg-run.8.gz "$unit" /usr/share/doc/wgnet \
  /usr/include/wgnet /usr/lib/*/cmake/wgnet 2>/dev/null || true)
check "removed without a trace: '${left}'" test -z "$left"

if [ "$fail" -ne 0 ]; then echo "package_test: FAILED"; exit 1; fi
echo "package_test: all passed"
