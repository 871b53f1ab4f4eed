#!/usr/bin/env bash
# Key changes start a new session at once, as in the kernel and wireguard-go: after `wg set
# private-key` on one side (the other given the new public key) or a new preshared key on
# both, a single `ping -W 1 -c 1` must get through, and a new handshake must be recorded.
# Each change follows a handshake that A itself started less than REKEY_TIMEOUT (5 s) before,
# which is when a stale "handshake just sent" guard held the next one back for 5 s.
# Topology: see lib.sh. Usage: wg_tun_rekey_test.sh BIN_DIR   (exit 77 = skipped: not root)
WGNET_BIN=$(cd "${1:?usage: $0 BIN_DIR}" && pwd)
. "$(dirname "$0")/lib.sh"
require_root
trap cleanup EXIT
command -v wireguard-go >/dev/null || { echo "wireguard-go missing (scripts/setup.sh installs it)"; exit 1; }

# latest_handshake NS IFACE PUBKEY: seconds since the epoch of the peer's last handshake.
latest_handshake() {
  ip netns exec "$1" wg show "$2" latest-handshakes | awk -v k="$3" '$1 == k {print $2}'
}

# ping_once NS ADDR: exactly one echo request, one second to answer.
ping_once() { ip netns exec "$1" ping -c 1 -W 1 "$2" >/dev/null 2>&1; }

private_key_change() { # IMPL_B
  log "=== private key change on A (wg-tun), B ($1) given the new public key ==="
  setup_pair wg-tun "$1" || { fail "private key: setup"; teardown_pair; return; }
  check "private key: first ping (A initiates)" ping_eventually "$NS_A" 198.19.0.2
  local before
  before=$(latest_handshake "$NS_A" "$WG_A" "$(cat "$TMP/b.pub")")
  sleep 1.1  # so that a new handshake shows as a later second
  (umask 077; wg genkey >"$TMP/a2.key"); wg pubkey <"$TMP/a2.key" >"$TMP/a2.pub"
  nb wg set "$WG_B" peer "$(cat "$TMP/a.pub")" remove \
    peer "$(cat "$TMP/a2.pub")" allowed-ips 198.19.0.1/32,fd00:19::1/128 endpoint 198.18.0.1:51820
  na wg set "$WG_A" private-key "$TMP/a2.key"
  check "private key: one ping right after the change gets through" ping_once "$NS_A" 198.19.0.2
  local after
  after=$(latest_handshake "$NS_A" "$WG_A" "$(cat "$TMP/b.pub")")
  check "private key: a new handshake ($before -> $after)" test "${after:-0}" -gt "${before:-0}"
  check "private key: B sees A under its new key" \
    test "$(latest_handshake "$NS_B" "$WG_B" "$(cat "$TMP/a2.pub")")" -gt 0
  check "private key: the other way too" ping_once "$NS_B" 198.19.0.1

  # A peer whose public key is our new one is removed (as the kernel does).
  na wg set "$WG_A" peer "$(cat "$TMP/a.pub")" allowed-ips 198.19.0.99/32
  na wg set "$WG_A" private-key "$TMP/a.key"
  check "private key: a peer with our own new public key is removed" \
    bash -c "! ip netns exec $NS_A wg show $WG_A peers | grep -qxF '$(cat "$TMP/a.pub")'"
  teardown_pair
}

preshared_key_change() { # IMPL_B
  log "=== preshared key change on both sides: wg-tun <-> $1 ==="
  setup_pair wg-tun "$1" || { fail "psk: setup"; teardown_pair; return; }
  check "psk: first ping (A initiates)" ping_eventually "$NS_A" 198.19.0.2
  local before
  before=$(latest_handshake "$NS_A" "$WG_A" "$(cat "$TMP/b.pub")")
  sleep 1.1
  (umask 077; wg genpsk >"$TMP/psk")
  nb wg set "$WG_B" peer "$(cat "$TMP/a.pub")" preshared-key "$TMP/psk"
  na wg set "$WG_A" peer "$(cat "$TMP/b.pub")" preshared-key "$TMP/psk"
  check "psk: one ping right after the change gets through" ping_once "$NS_A" 198.19.0.2
  local after
  after=$(latest_handshake "$NS_A" "$WG_A" "$(cat "$TMP/b.pub")")
  check "psk: a new handshake, with the new key ($before -> $after)" test "${after:-0}" -gt "${before:-0}"
  check "psk: the other way too" ping_once "$NS_B" 198.19.0.1
  # Setting the same key again (wg setconf repeats it) keeps the session.
  sleep 1.1
  before=$after
  na wg set "$WG_A" peer "$(cat "$TMP/b.pub")" preshared-key "$TMP/psk"
  check "psk: the same key again: traffic flows" ping_once "$NS_A" 198.19.0.2
  after=$(latest_handshake "$NS_A" "$WG_A" "$(cat "$TMP/b.pub")")
  check "psk: the same key again: no new handshake ($before -> $after)" test "${after:-0}" -eq "${before:-0}"
  teardown_pair
}

private_key_change wireguard-go
private_key_change wg-tun
preshared_key_change wg-tun
preshared_key_change wireguard-go

finish
