#!/usr/bin/env bash
# By hand (root; Debian's debootstrap and systemd-container): wg-netstack@.service as
# systemd runs it, sandbox and all. systemd is not PID 1 on the CI machines, so CI only
# verifies the unit (tests/package_test.sh); this boots a Debian 12 container with
# systemd as init, installs the wgnet package in it and uses the service:
#
#   curl ──SOCKS5──▶ wg-netstack@demo (the unit, user _wgnet) ══ WireGuard over lo ══▶
#        wg-netstack B (started by hand) ──--reverse──▶ B's own /metrics
#
# then reads /proc/PID/status of the service, reloads it, and stops it.
# Usage: tests/manual/service_nspawn.sh WGNET_DEB [ROOTFS]
#   ROOTFS: a debootstrap'd bookworm with systemd (made if missing:
#   debootstrap --variant=minbase --include=systemd,systemd-sysv,dbus,curl,wireguard-tools bookworm ROOTFS)
set -euo pipefail
deb=$(realpath "$1")
root=${2:-/var/tmp/wgnet-nspawn}
machine=wgnet-unit-$$
if [ ! -x "$root/lib/systemd/systemd" ]; then
  debootstrap --variant=minbase --include=systemd,systemd-sysv,dbus,curl,iproute2,wireguard-tools bookworm "$root" \
    http://deb.debian.org/debian
fi
cp "$deb" "$root/tmp/wgnet.deb"
cleanup() { machinectl terminate "$machine" >/dev/null 2>&1 || true; }
trap cleanup EXIT
# The package's own dependencies come from the container's apt (network: the host's).
systemd-nspawn -q -D "$root" sh -c 'apt-get install -y -qq --no-install-recommends /tmp/wgnet.deb >/dev/null'
systemd-nspawn -q -b -D "$root" -M "$machine" --private-network >/dev/null 2>&1 &
for _ in $(seq 100); do
  systemd-run -q -M "$machine" --wait /bin/true 2>/dev/null && break
  sleep 0.3
done
run() { systemd-run -q -M "$machine" --wait --pipe "$@"; }

run /bin/sh -c '
set -e
ip link set lo up
ka=$(wg genkey); kb=$(wg genkey)
install -d /etc/wgnet
cat >/etc/wgnet/demo.conf <<CONF
[Interface]
PrivateKey = $ka
ListenPort = 51820
Address = 198.19.0.1/24
[Peer]
PublicKey = $(echo "$kb" | wg pubkey)
Endpoint = 127.0.0.1:51821
AllowedIPs = 198.19.0.2/32
CONF
chown _wgnet:_wgnet /etc/wgnet/demo.conf; chmod 600 /etc/wgnet/demo.conf
cat >/root/b.conf <<CONF
[Interface]
PrivateKey = $kb
ListenPort = 51821
Address = 198.19.0.2/24
[Peer]
PublicKey = $(echo "$ka" | wg pubkey)
AllowedIPs = 198.19.0.1/32
CONF
chmod 600 /root/b.conf
'
systemd-run -q -M "$machine" --unit=peer-b /usr/bin/wg-netstack -c /root/b.conf --no-socks5 --health 127.0.0.1:9080 \
  --reverse tcp:198.19.0.2:80=127.0.0.1:9080
run systemctl start wg-netstack@demo
sleep 2
echo "--- systemctl status"
run systemctl --no-pager status wg-netstack@demo | head -12
echo "--- /proc/PID/status of the service"
run /bin/sh -c 'pid=$(systemctl show -P MainPID wg-netstack@demo); grep -E "^(Uid|Gid|CapEff|CapBnd|CapAmb|NoNewPrivs|Seccomp):" /proc/$pid/status'
echo "--- curl through the service's SOCKS5 into the tunnel"
run curl -sS -m 20 --socks5-hostname 127.0.0.1:1080 http://198.19.0.2/metrics | grep -m3 '^wgnet_'
echo "--- systemctl reload (SIGHUP), then the journal"
run systemctl reload wg-netstack@demo
sleep 1
run journalctl -q --no-pager -u wg-netstack@demo | tail -5
run curl -sS -m 20 --socks5-hostname 127.0.0.1:1080 http://198.19.0.2/metrics | grep -c '^wgnet_' |
  sed 's/^/metrics lines after the reload: /'
run systemctl stop wg-netstack@demo
echo "service_nspawn: done"
