#!/usr/bin/env bash
# Fetches lwIP 2.2.1 from Debian's source package (trixie), checks the pinned sha256 of
# the upstream tarball, unpacks it with dpkg-source so Debian's patches are applied, then
# applies our own series, patches/NNNN-topic.patch, in order. A patch that does not apply
# fails set-up. The stamp records the series' sha256: a changed series unpacks afresh.
# The machine's apt configuration is never touched: a private deb-src list and state dir.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
dest="$here/src"            # git-ignored
orig_sha256=83729c274c499d3348e9fbbe043a3113f3fa8953e7efddc7c21c7fcbb1f2b7b1
orig_name=lwip_2.2.1+dfsg1.orig.tar.xz

series=("$here"/patches/[0-9][0-9][0-9][0-9]-*.patch)
[ -e "${series[0]}" ] || series=()
series_sum=$(cat /dev/null "${series[@]}" | sha256sum | cut -c1-64)
if [ -f "$dest/.wgnet-ready" ] && [ "$(sed -n 2p "$dest/.wgnet-ready")" = "patches $series_sum" ]; then
  exit 0
fi

fail() { echo "lwip: $*" >&2; exit 1; }

# apply_series: our patches on top of Debian's, in order; stops at the first that fails.
apply_series() {
  local p
  for p in "${series[@]}"; do
    patch -d "$dest" -p1 --forward --batch --no-backup-if-mismatch -s <"$p" >"$work/patch.log" 2>&1 \
      || { cat "$work/patch.log" >&2; rm -rf "$dest"; fail "patch $(basename "$p") does not apply to lwIP 2.2.1 (see above)"; }
  done
}

work="$here/.apt"
rm -rf "$dest"
# An earlier download is reused when only our series changed.
dsc_cached=$(ls "$work"/download/lwip_2.2.1+dfsg1-*.dsc 2>/dev/null | head -1) || true
if [ -z "$dsc_cached" ]; then
rm -rf "$work"
mkdir -p "$work/lists/partial" "$work/sources.list.d" "$work/download"
cat > "$work/sources.list.d/trixie-src.sources" <<SRC
Types: deb-src
URIs: http://deb.debian.org/debian
Suites: trixie trixie-updates
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg

Types: deb-src
URIs: http://deb.debian.org/debian-security
Suites: trixie-security
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
SRC

apt_opts=(
  -o "Dir::Etc::SourceParts=$work/sources.list.d"
  -o "Dir::Etc::SourceList=/dev/null"
  -o "Dir::State::Lists=$work/lists"
  -o "Dir::Cache::pkgcache=" -o "Dir::Cache::srcpkgcache="
  -o "Debug::NoLocking=1"
)

apt-get "${apt_opts[@]}" -qq update >"$work/update.log" 2>&1 \
  || fail "could not download Debian's trixie source index (see $work/update.log); lwIP source unavailable"
# Newest revision of 2.2.1 (Debian security updates keep the same orig tarball).
(cd "$work/download" && apt-get "${apt_opts[@]}" -qq --download-only source lwip >"$work/source.log" 2>&1) \
  || fail "could not download Debian's lwip source package (see $work/source.log)"
fi

cd "$work/download"
dsc=$(ls lwip_2.2.1+dfsg1-*.dsc 2>/dev/null | head -1) || true
[ -n "$dsc" ] || fail "downloaded lwip source is not 2.2.1: $(ls)"
echo "$orig_sha256  $orig_name" | sha256sum -c --quiet - \
  || fail "sha256 of $orig_name does not match the pinned value"
# The other files are checked against the sha256 list of the .dsc (apt verified the .dsc
# against the signed index).
awk '/^Checksums-Sha256:/{f=1;next} /^[^ ]/{f=0} f && NF==3 {print $1"  "$3}' "$dsc" \
  | sha256sum -c --quiet - || fail "a file of $dsc does not match its sha256"
dpkg-source --no-check -x "$dsc" "$dest" >"$work/unpack.log" 2>&1 \
  || fail "dpkg-source could not unpack $dsc (see $work/unpack.log)"
apply_series
printf '%s\npatches %s\n' "${dsc%.dsc}" "$series_sum" > "$dest/.wgnet-ready"
echo "lwip: ${dsc%.dsc} unpacked into $dest, ${#series[@]} patches of ours applied"
