#!/usr/bin/env bash
# wg-netstack's /readyz tells the truth, and does not flap on an idle healthy tunnel:
#   - N1 (no CheckAlive): ready without any traffic (its own first handshake at start);
#     200 for 200 s of idleness, past the 180 s after which a handshake is no longer
#     fresh; once the peer stops answering (its port dropped by nftables) and a request
#     makes N1 try, 503 within REKEY_TIMEOUT + a few seconds; 200 again once it answers;
#   - N2 (--check-alive 198.19.0.2 --check-alive-interval 2, wireproxy's CheckAlive):
#     200 with wireproxy's JSON body {"198.19.0.2":UNIX_TIME} across the same 200 s; 503
#     within interval + 2 s (+ one interval of slack) once pings go unanswered; 200 again.
#
#        namespace $NS_A                                namespace $NS_B
#   wg-netstack N1 UDP :51820, 198.19.0.1           wireguard-go $WG_B :51821, 198.19.0.2
#     health 127.0.0.1:9091                            peers: N1 (198.19.0.1), N2 (198.19.0.3)
#   wg-netstack N2 UDP :51822, 198.19.0.3
#     health 127.0.0.1:9092, SOCKS5 :1082
#
# Topology: lib.sh. Usage: wg_netstack_readyz_test.sh BIN_DIR   (exit 77 = skipped)
# WGNET_READYZ_IDLE changes the idle time (default 200 s).
WGNET_BIN=$(cd "${1:?usage: $0 BIN_DIR}" && pwd)
. "$(dirname "$0")/lib.sh"
require_root
trap cleanup EXIT
command -v wireguard-go >/dev/null || { echo "wireguard-go missing (scripts/setup.sh installs it)"; exit 1; }
IDLE=${WGNET_READYZ_IDLE:-200}
H1=127.0.0.1:9091
H2=127.0.0.1:9092
TABLE=wgnet_readyz

status() { na curl -s -o /dev/null -w '%{http_code}' --max-time 5 "http://$1/readyz"; }
is_status() { [ "$(status "$1")" = "$2" ]; }
# block / unblock: B's WireGuard port drops everything (B stops answering), or not.
block() {
  nb nft -f - <<NFT
table inet $TABLE {
  chain input { type filter hook input priority 0; policy accept; udp dport 51821 drop; }
}
NFT
}
unblock() { nb nft delete table inet "$TABLE"; }
# poke SOCKS: a connection attempt through the proxy, so that it tries to handshake.
poke() { na timeout 8 curl -s -o /dev/null --max-time 6 --socks5 "$1" http://198.19.0.2:9/ ; true; }

# netstack_conf KEY ADDR PORT: a wg-netstack config against B.
netstack_conf() {
  cat <<CONF
[Interface]
PrivateKey = $(cat "$1")
Address = $2/24
ListenPort = $3

[Peer]
PublicKey = $(cat "$TMP/b.pub")
AllowedIPs = 198.19.0.2/32
Endpoint = 198.18.0.2:51821
CONF
}

log "=== /readyz of wg-netstack, with and without CheckAlive, against wireguard-go ==="
make_namespaces
(umask 077; for k in n1 n2 b; do wg genkey >"$TMP/$k.key"; done)
for k in n1 n2 b; do wg pubkey <"$TMP/$k.key" >"$TMP/$k.pub"; done
start_impl "$NS_B" "$WG_B" wireguard-go || { fail "wireguard-go did not start"; finish "readyz"; }
nb wg set "$WG_B" private-key "$TMP/b.key" listen-port 51821 \
  peer "$(cat "$TMP/n1.pub")" allowed-ips 198.19.0.1/32 endpoint 198.18.0.1:51820 \
  peer "$(cat "$TMP/n2.pub")" allowed-ips 198.19.0.3/32 endpoint 198.18.0.1:51822
nb ip addr add 198.19.0.2/24 dev "$WG_B"
nb ip link set "$WG_B" up
(umask 077; netstack_conf "$TMP/n1.key" 198.19.0.1 51820 >"$TMP/n1.conf"; netstack_conf "$TMP/n2.key" 198.19.0.3 51822 >"$TMP/n2.conf")
bg_netstack() { # NAME ARGS...
  local name=$1; shift
  ip netns exec "$NS_A" "$WGNET_BIN/wg-netstack" --log-level verbose "$@" >"$TMP/$name.log" 2>&1 &
  PIDS+=($!)
}
bg_netstack n1 -c "$TMP/n1.conf" --socks5 127.0.0.1:1081 --health "$H1"
bg_netstack n2 -c "$TMP/n2.conf" --socks5 127.0.0.1:1082 --health "$H2" --check-alive 198.19.0.2 --check-alive-interval 2
wait_listen "$NS_A" "$H1" && wait_listen "$NS_A" "$H2" || fail "health ports"

check "N1: ready without any traffic, within 5 s of the start (its own first handshake)" eventually 50 is_status "$H1" 200
check "N2: ready once its first ping is answered" eventually 80 is_status "$H2" 200
body=$(na curl -s --max-time 5 "http://$H2/readyz")
check "N2: wireproxy's body, {\"198.19.0.2\":UNIX_TIME} ($body)" \
  python3 -c 'import json, sys, time; d = json.loads(sys.argv[1]); sys.exit(not (list(d) == ["198.19.0.2"] and abs(d["198.19.0.2"] - time.time()) < 10))' "$body"

log "--- $IDLE s without traffic, /readyz asked every 5 s ---"
bad1=0 bad2=0 asked=0
end=$(($(date +%s) + IDLE))
while [ "$(date +%s)" -lt "$end" ]; do
  s1=$(status "$H1") s2=$(status "$H2")
  asked=$((asked + 1))
  [ "$s1" = 200 ] || { bad1=$((bad1 + 1)); log "  N1 answered $s1"; }
  [ "$s2" = 200 ] || { bad2=$((bad2 + 1)); log "  N2 answered $s2"; }
  sleep 5
done
handshake_age=$(( $(date +%s) - $(nb wg show "$WG_B" latest-handshakes | grep -F "$(cat "$TMP/n1.pub")" | awk '{print $2}') ))
check "N1: 200 all the time ($bad1 of $asked not; its last handshake now $handshake_age s old)" test "$bad1" -eq 0
check "N1: the idle time went past a fresh handshake's 180 s" test "$handshake_age" -ge 180
check "N2: 200 all the time ($bad2 of $asked not)" test "$bad2" -eq 0

log "--- the peer stops answering ---"
block
poke 127.0.0.1:1081
check "N1: 503 within 10 s of a request it could not handshake for" eventually 100 is_status "$H1" 503
check "N2: 503 within 8 s of unanswered pings" eventually 80 is_status "$H2" 503
unblock
poke 127.0.0.1:1081
check "N1: 200 again once the peer answers" eventually 100 is_status "$H1" 200
check "N2: 200 again once pings are answered" eventually 80 is_status "$H2" 200

finish "readyz"
