#!/usr/bin/env bash
# No key reaches any output. Keys are planted where a user's mistake puts them, each
# program is run on them, and everything it prints is searched for any 16-character run
# of the key (base64, and hex for the UAPI):
#   - configs: a bare key line, a key file given as the config, `PrivateKey:` (a typo),
#     a PresharedKey outside [Peer], a key before the first section, a key as a value
#     (Endpoint, AllowedIPs, DNS, ListenPort): wg-netstack -n, wg-netstack, wg-run;
#   - wg-netstack's SIGHUP reload of each of those;
#   - UAPI set requests with a key where it does not belong (private_key with a stray
#     digit, a key as the name, as an endpoint, as an allowed_ip), to wg-netstack's
#     UAPI and to wg-tun's.
# Each run must also fail and say which line: a check that cannot fail proves nothing.
#
#   namespace $NS_A: wg-tun $WG_A (UAPI /var/run/wireguard/$WG_A.sock); wg-netstack with
#   --uapi $TMP/n.sock. Nothing is sent anywhere: the ports are never reached.
#
# Usage: secrets_output_test.sh BIN_DIR (exit 77 = skipped: not root)
WGNET_BIN=$(cd "${1:?usage: $0 BIN_DIR}" && pwd)
. "$(dirname "$0")/lib.sh"
require_root
trap cleanup EXIT
for b in wg-netstack wg-run wg-tun; do
  [ -x "$WGNET_BIN/$b" ] || { echo "$WGNET_BIN/$b missing: build it first"; exit 1; }
done
make_namespaces

KEY=$(wg genkey)
HEX=$(printf '%s' "$KEY" | base64 -d | od -An -tx1 -v | tr -d ' \n')
GOOD=$(wg genkey)
PUB=$(printf '%s' "$(wg genkey)" | wg pubkey)

# leaks FILE: prints every 16-character run of KEY or HEX found in FILE.
leaks() {
  local s i
  for s in "$KEY" "$HEX"; do
    for ((i = 0; i + 16 <= ${#s}; i++)); do
      grep -qF -- "${s:i:16}" "$1" && echo "${s:i:16}"
    done
  done
  return 0
}
# clean WHAT FILE: no run of the key in FILE.
clean() {
  local found
  found=$(leaks "$2")
  [ -z "$found" ] && return 0
  log "$1: key material in the output: $(head -c 200 "$2" | tr '\n' ' ')"
  return 1
}

mkdir -p "$TMP/conf"
# The bad configs: NAME and text. Each names line 2 as the line at fault, or line 1.
declare -A BAD
BAD[bare]=$(printf '[Interface]\n%s\n' "$KEY")
BAD[keyfile]=$KEY
BAD[colon]=$(printf '[Interface]\nPrivateKey: %s\n' "$KEY")
BAD[psk_in_interface]=$(printf '[Interface]\nPrivateKey = %s\nPresharedKey = %s\n' "$GOOD" "$KEY")
BAD[endpoint]=$(printf '[Interface]\nPrivateKey = %s\n[Peer]\nPublicKey = %s\nEndpoint = %s\n' "$GOOD" "$PUB" "$KEY")
BAD[allowed_ips]=$(printf '[Interface]\nPrivateKey = %s\n[Peer]\nPublicKey = %s\nAllowedIPs = %s\n' "$GOOD" "$PUB" "$KEY")
BAD[dns]=$(printf '[Interface]\nPrivateKey = %s\nDNS = %s\n' "$GOOD" "$KEY")
BAD[listen_port]=$(printf '[Interface]\nPrivateKey = %s\nListenPort = %s\n' "$GOOD" "$KEY")
BAD[section]=$(printf '[%s]\n' "$KEY")
BAD[wireproxy_top]=$(printf '%s\n[Socks5]\nBindAddress = 127.0.0.1:1080\n' "$KEY")

for name in "${!BAD[@]}"; do
  printf '%s\n' "${BAD[$name]}" >"$TMP/conf/$name.conf"
  chmod 600 "$TMP/conf/$name.conf"
  out="$TMP/$name.out"
  # wg-netstack -n (the unit's ExecStartPre), then as a daemon would start.
  for mode in check start; do
    flags=()
    [ $mode = check ] && flags=(-n)
    rc=0
    na timeout 20 "$WGNET_BIN/wg-netstack" "${flags[@]}" -c "$TMP/conf/$name.conf" >"$out" 2>&1 || rc=$?
    check "wg-netstack $mode $name: refused ($rc), naming the line" \
      test "$rc" -eq 1 -a -n "$(grep -E 'line [0-9]' "$out")"
    check "wg-netstack $mode $name: no key in its output" clean "wg-netstack $name" "$out"
  done
  # wireproxy's top-level lines are not wg-quick's: wg-run reads wg-quick files only.
  [ "$name" = wireproxy_top ] && continue
  rc=0
  timeout 20 "$WGNET_BIN/wg-run" -c "$TMP/conf/$name.conf" -- true >"$out" 2>&1 || rc=$?
  check "wg-run $name: refused ($rc), naming the line" test "$rc" -ne 0 -a -n "$(grep -E 'line [0-9]' "$out")"
  check "wg-run $name: no key in its output" clean "wg-run $name" "$out"
done

# --- the reload path: a running wg-netstack given each bad file on SIGHUP ---
printf '[Interface]\nPrivateKey = %s\nListenPort = 51820\nAddress = 198.19.0.1/24\n' "$GOOD" >"$TMP/conf/live.conf"
chmod 600 "$TMP/conf/live.conf"
ip netns exec "$NS_A" "$WGNET_BIN/wg-netstack" -c "$TMP/conf/live.conf" --uapi "$TMP/n.sock" --log-level verbose \
  >"$TMP/netstack.log" 2>&1 &
NPID=$!
PIDS+=("$NPID")
check "wg-netstack up with its UAPI" eventually 100 test -S "$TMP/n.sock"
reloads=0
for name in bare keyfile colon psk_in_interface endpoint allowed_ips dns listen_port section; do
  cp "$TMP/conf/$name.conf" "$TMP/conf/live.conf"
  reloads=$((reloads + 1))
  kill -HUP "$NPID"
  check "reload of $name refused" eventually 100 \
    test "$(grep -c 'reload: .*nothing changed' "$TMP/netstack.log")" -ge "$reloads"
done
check "reloads: no key in the log" clean "wg-netstack reload" "$TMP/netstack.log"

# --- UAPI: requests with a key where it does not belong ---
# uapi SOCKET REQUEST: sends REQUEST (with its blank line), prints the reply.
uapi() {
  python3 - "$1" "$2" <<'PY'
import socket, sys
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
s.settimeout(5)
s.connect(sys.argv[1])
s.sendall(sys.argv[2].encode() + b"\n\n")
reply = b""
while not reply.endswith(b"\n\n"):
    chunk = s.recv(4096)
    if not chunk:
        break
    reply += chunk
sys.stdout.write(reply.decode(errors="replace"))
PY
}
ip netns exec "$NS_A" "$WGNET_BIN/wg-tun" -f "$WG_A" >"$TMP/wgtun.log" 2>&1 &
PIDS+=("$!")
check "wg-tun up" eventually 100 test -S "/var/run/wireguard/$WG_A.sock"
PUBHEX=$(printf '%s' "$PUB" | base64 -d | od -An -tx1 -v | tr -d ' \n')
requests=(
  "set=1
private_key=${HEX}0"
  "set=1
${HEX}=1"
  "set=1
public_key=$PUBHEX
endpoint=$HEX"
  "set=1
public_key=$PUBHEX
allowed_ip=$HEX"
  "set=1
public_key=$PUBHEX
${HEX}=true"
)
for sock in "$TMP/n.sock" "/var/run/wireguard/$WG_A.sock"; do
  for r in "${requests[@]}"; do
    reply=$(uapi "$sock" "$r" 2>&1)
    check "UAPI $sock: refused (${reply%%$'\n'*})" test "${reply%%$'\n'*}" != "errno=0"
    printf '%s\n' "$reply" >>"$TMP/uapi-replies.out"
  done
done
# (Each refusal is logged before its reply is written.)
check "UAPI: no key in the replies" clean "UAPI replies" "$TMP/uapi-replies.out"
check "UAPI: wg-netstack's log names the refusals" grep -q 'UAPI set: invalid' "$TMP/netstack.log"
check "UAPI: no key in wg-netstack's log" clean "wg-netstack UAPI" "$TMP/netstack.log"
check "UAPI: wg-tun's log names the refusals" grep -q 'UAPI set: invalid' "$TMP/wgtun.log"
check "UAPI: no key in wg-tun's log" clean "wg-tun UAPI" "$TMP/wgtun.log"
finish "secrets-in-output"
