#!/usr/bin/env bash
# Idempotent set-up for a fresh Debian 12 machine: build tools, libraries, test tools,
# and lwIP's Debian source package (sha256-verified, patched by dpkg-source).
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)

packages=(
  cmake g++ make clang-14 libclang-rt-14-dev pkg-config dpkg-dev patch
  libsodium-dev libb2-dev libssl-dev libboost1.81-dev libfmt-dev catch2 libbenchmark-dev
  libcli11-dev
  wireguard-go wireguard-tools iperf3 iproute2 iputils-ping nftables curl python3 procps ethtool
  python3-cryptography openssl libseccomp-dev
  scdoc mandoc ccache
  lintian man-db systemd
)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  if [ "$(id -u)" -ne 0 ]; then
    echo "setup: missing packages (${missing[*]}); run this script as root" >&2
    exit 1
  fi
  echo "setup: installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

"$top/third_party/lwip/fetch.sh"
