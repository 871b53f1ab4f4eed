#!/usr/bin/env bash
# wg-tun in network namespaces against Debian's wireguard-go and against itself,
# configured with the real `wg` and `wg-quick`. Topology: see lib.sh.
# Usage: wg_tun_test.sh BIN_DIR   (exit 77 = skipped: not root)
# WGNET_NETNS_ONLY=GROUP[,GROUP...] runs some groups (names at the end of this file).
# The offload switches in the environment (WG_TUN_DISABLE_TSO, ...) reach every wg-tun
# the suite starts; the groups but "flags" check that the daemons honour them.
WGNET_BIN=$(cd "${1:?usage: $0 BIN_DIR}" && pwd)
. "$(dirname "$0")/lib.sh"
require_root
trap cleanup EXIT
command -v wireguard-go >/dev/null || { echo "wireguard-go missing (scripts/setup.sh installs it)"; exit 1; }

pair_checks() { # IMPL_A IMPL_B
  local a=$1 b=$2
  log "=== $a <-> $b: A initiates ==="
  setup_pair "$a" "$b" || { fail "$a/$b setup"; teardown_pair; return; }
  check "$a→$b first ping (handshake from A)" ping_eventually "$NS_A" 198.19.0.2
  # The offloads in use are the ones this run's environment leaves on (ctest runs the
  # suite once per offload switched off).
  local off
  off=$(offloads_off_by_env | xargs)
  check "A's offloads as the environment says (off: ${off:-none})" offloads_logged "$WG_A" $off
  [ "$b" = wg-tun ] && check "B's offloads as the environment says" offloads_logged "$WG_B" $off
  check "$a→$b ping IPv4 in tunnel, IPv4 outside" ping_ok "$NS_A" 198.19.0.2
  check "$a→$b ping IPv6 in tunnel, IPv4 outside" ping_ok "$NS_A" fd00:19::2
  check "$b→$a ping IPv4" ping_ok "$NS_B" 198.19.0.1
  check "$b→$a ping IPv6" ping_ok "$NS_B" fd00:19::1
  local bps
  bps=$(iperf_tcp "$NS_A" "$NS_B" 198.19.0.2 3) && [ "${bps:-0}" -gt 0 ] \
    && pass "$a→$b iperf3 TCP 3 s: $((bps / 1000000)) Mbit/s" || fail "$a→$b iperf3 TCP"
  bps=$(iperf_tcp "$NS_A" "$NS_B" 198.19.0.2 3 -R) && [ "${bps:-0}" -gt 0 ] \
    && pass "$b→$a iperf3 TCP 3 s: $((bps / 1000000)) Mbit/s" || fail "$b→$a iperf3 TCP"
  local hs_a hs_b
  hs_a=$(na wg show "$WG_A" latest-handshakes | awk '{print $2}')
  hs_b=$(nb wg show "$WG_B" latest-handshakes | awk '{print $2}')
  check "wg show: latest handshake on both sides ($hs_a, $hs_b)" test "${hs_a:-0}" -gt 0 -a "${hs_b:-0}" -gt 0
  # Counters: once quiet (both sides' counters still for 0.3 s), a fixed exchange must
  # move both sides' counters by the same amounts (under iperf load the receiver's socket
  # may drop datagrams, which the sender counted: only a loss-free exchange can be
  # compared exactly). A counter moves when its packet is handled, so they are compared
  # again for up to 5 s until they agree.
  local before_a before_b
  eventually 50 counters_still
  before_a=$(na wg show "$WG_A" transfer | awk '{print $2, $3}')   # rx tx
  before_b=$(nb wg show "$WG_B" transfer | awk '{print $2, $3}')
  na ping -c 10 -i 0.05 -s 1000 198.19.0.2 >/dev/null 2>&1
  eventually 50 counters_agree "$before_a" "$before_b" >/dev/null
  check "wg show: A's tx matches B's rx and the reverse ($(counters_agree "$before_a" "$before_b"))" \
    counters_agree "$before_a" "$before_b"
  # IPv6 outside.
  na wg set "$WG_A" peer "$(cat "$TMP/b.pub")" endpoint "[fd00:18::2]:51821"
  nb wg set "$WG_B" peer "$(cat "$TMP/a.pub")" endpoint "[fd00:18::1]:51820"
  check "$a→$b ping IPv4 in tunnel, IPv6 outside" ping_eventually "$NS_A" 198.19.0.2
  check "$a→$b ping IPv6 in tunnel, IPv6 outside" ping_ok "$NS_A" fd00:19::2
  check "$b→$a ping over IPv6 outside" ping_ok "$NS_B" fd00:19::1
  local ep
  ep=$(na wg show "$WG_A" endpoints | awk '{print $2}')
  check "endpoint over IPv6 shown ($ep)" test "$ep" = "[fd00:18::2]:51821"
  teardown_pair

  log "=== $a <-> $b: B initiates ==="
  setup_pair "$a" "$b" || { fail "$a/$b setup"; teardown_pair; return; }
  check "$b→$a first ping (handshake from B)" ping_eventually "$NS_B" 198.19.0.1
  check "$a→$b ping back" ping_ok "$NS_A" fd00:19::2
  hs_a=$(na wg show "$WG_A" latest-handshakes | awk '{print $2}')
  check "A records the handshake B started" test "${hs_a:-0}" -gt 0
  teardown_pair
}

# counters_still: neither side's transfer counters move for 0.3 s.
counters_still() {
  local a b
  a=$(na wg show "$WG_A" transfer; nb wg show "$WG_B" transfer)
  sleep 0.3
  b=$(na wg show "$WG_A" transfer; nb wg show "$WG_B" transfer)
  [ "$a" = "$b" ]
}

# counters_agree BEFORE_A BEFORE_B ("rx tx" each): since then, A's tx equals B's rx and
# B's tx A's rx, over 10 KB; prints what it compared.
counters_agree() {
  local after_a after_b
  after_a=$(na wg show "$WG_A" transfer | awk '{print $2, $3}')
  after_b=$(nb wg show "$WG_B" transfer | awk '{print $2, $3}')
  echo "A: $1 → $after_a, B: $2 → $after_b"
  python3 - "$1" "$after_a" "$2" "$after_b" <<'PY'
import sys
ba, aa, bb, ab = (list(map(int, a.split())) for a in sys.argv[1:5])
a_rx, a_tx = aa[0] - ba[0], aa[1] - ba[1]
b_rx, b_tx = ab[0] - bb[0], ab[1] - bb[1]
sys.exit(0 if a_tx > 10000 and a_tx == b_rx and b_tx == a_rx else 1)
PY
}

# endpoint_is NS IFACE ADDR: the first peer's endpoint address (port cut) is ADDR.
endpoint_is() {
  local ep
  ep=$(ip netns exec "$1" wg show "$2" endpoints | awk '{print $2}')
  [ "${ep%:*}" = "$3" ]
}

roaming() { # IMPL_A IMPL_B: B roams. (Debian's 2022 wireguard-go cannot be the roaming
  # side here: its sticky source is not dropped on ENETUNREACH, which this kernel returns.)
  log "=== roaming: $2's underlay address changes mid-flow, $1 follows ==="
  setup_pair "$1" "$2" || { fail "roaming setup"; teardown_pair; return; }
  check "roaming: tunnel up" ping_eventually "$NS_B" 198.19.0.1
  # Keep the rest of the subnet's addresses when the primary one goes.
  nb sysctl -qw "net.ipv4.conf.${PREFIX}vb.promote_secondaries=1"
  nb ping -i 0.1 -c 60 198.19.0.1 >"$TMP/roam.ping" 2>&1 &
  local pinger=$!
  sleep 1
  nb ip addr add 198.18.0.3/24 dev "${PREFIX}vb"
  nb ip addr del 198.18.0.2/24 dev "${PREFIX}vb"
  eventually 50 endpoint_is "$NS_A" "$WG_A" 198.18.0.3
  local ep
  ep=$(na wg show "$WG_A" endpoints | awk '{print $2}')
  check "roaming: A now shows B at 198.18.0.3 ($ep)" test "${ep%:*}" = "198.18.0.3"
  wait $pinger
  local received
  received=$(awk '/packets transmitted/ {print $4}' "$TMP/roam.ping")
  check "roaming: traffic continued (${received:-0}/60 replies)" test "${received:-0}" -ge 50
  teardown_pair
}

reconfiguration() {
  log "=== reconfiguration while traffic flows ==="
  setup_pair wg-tun wireguard-go || { fail "reconfig setup"; teardown_pair; return; }
  check "reconfig: tunnel up" ping_eventually "$NS_A" 198.19.0.2
  na ping -i 0.05 -c 200 -W 1 198.19.0.2 >/dev/null 2>&1 &
  local pinger=$!
  # New private key on A: B learns the new public key; a new handshake follows at once.
  (umask 077; wg genkey >"$TMP/a2.key"); wg pubkey <"$TMP/a2.key" >"$TMP/a2.pub"
  na wg set "$WG_A" private-key "$TMP/a2.key"
  nb wg set "$WG_B" peer "$(cat "$TMP/a.pub")" remove
  nb wg set "$WG_B" peer "$(cat "$TMP/a2.pub")" allowed-ips 198.19.0.1/32,fd00:19::1/128 endpoint 198.18.0.1:51820
  check "reconfig: works after private key change" ping_eventually "$NS_A" 198.19.0.2
  # Peer removed and re-added on A.
  na wg set "$WG_A" peer "$(cat "$TMP/b.pub")" remove
  check "reconfig: no route after peer removal" bash -c "! ip netns exec $NS_A ping -c 1 -W 1 198.19.0.2 >/dev/null 2>&1"
  na wg set "$WG_A" peer "$(cat "$TMP/b.pub")" allowed-ips 198.19.0.2/32,fd00:19::2/128 endpoint 198.18.0.2:51821
  check "reconfig: works after peer re-added" ping_eventually "$NS_A" 198.19.0.2
  # Allowed IPs replaced: IPv6 only, so IPv4 must stop (no stale routing).
  na wg set "$WG_A" peer "$(cat "$TMP/b.pub")" allowed-ips fd00:19::2/128
  check "reconfig: IPv4 dropped after allowed IPs replaced" bash -c "! ip netns exec $NS_A ping -c 1 -W 1 198.19.0.2 >/dev/null 2>&1"
  check "reconfig: IPv6 still flows" ping_ok "$NS_A" fd00:19::2
  wait $pinger
  check "reconfig: daemon still alive" kill -0 "${PIDS[0]}"
  teardown_pair
}

bad_input() {
  log "=== bad input: datagram spray and malformed UAPI ==="
  setup_pair wg-tun wireguard-go || { fail "bad input setup"; teardown_pair; return; }
  check "bad input: tunnel up" ping_eventually "$NS_A" 198.19.0.2
  nb timeout 10 python3 - <<'PY'
import os, random, socket, struct, time
rnd = random.Random(1234)
s4 = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s6 = socket.socket(socket.AF_INET6, socket.SOCK_DGRAM)
targets = [(s4, ("198.18.0.1", 51820)), (s6, ("fd00:18::1", 51820))]
end = time.time() + 3
sizes = [0, 1, 3, 4, 31, 32, 33, 63, 64, 65, 91, 92, 93, 147, 148, 149, 1500, 65000]
n = 0
while time.time() < end and n < 200000:
    size = rnd.choice(sizes + [rnd.randrange(0, 2000)])
    body = bytearray(os.urandom(size))
    if size >= 4 and rnd.random() < 0.7:
        body[0] = rnd.choice([1, 2, 3, 4]); body[1:4] = b"\0\0\0"
    s, addr = rnd.choice(targets)
    try:
        s.sendto(bytes(body), addr); n += 1
    except OSError:
        pass
print(f"sprayed {n} datagrams")
PY
  check "bad input: tunnel still works after the spray" ping_eventually "$NS_A" 198.19.0.2
  check "bad input: daemon alive" kill -0 "${PIDS[0]}"
  local sock="/var/run/wireguard/$WG_A.sock"
  check "bad input: malformed UAPI requests get errno replies" python3 - "$sock" <<'PY'
import socket, sys
path = sys.argv[1]
def ask(req):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM); s.settimeout(5); s.connect(path)
    s.sendall(req); data = b""
    while not data.endswith(b"\n\n"):
        chunk = s.recv(4096)
        if not chunk: break
        data += chunk
    s.close(); return data.decode()
cases = [b"set=1\ngarbage\n\n", b"set=1\nlisten_port=99999\n\n", b"set=1\nprivate_key=zz\n\n",
         b"set=1\npublic_key=00\n\n", b"set=1\nbogus=1\n\n", b"nonsense=1\n\n"]
for c in cases:
    r = ask(c)
    if "errno=" not in r or "errno=0" in r:
        print("bad reply", c, r); sys.exit(1)
r = ask(b"get=1\n\n")
sys.exit(0 if "errno=0" in r and "public_key=" in r else 1)
PY
  check "bad input: wg show still works" bash -c "ip netns exec $NS_A wg show $WG_A >/dev/null"
  teardown_pair
}

shutdown_checks() {
  log "=== clean shutdown ==="
  make_namespaces
  start_impl "$NS_A" "$WG_A" wg-tun || { fail "shutdown start"; teardown_pair; return; }
  local pid=${PIDS[0]}
  kill -TERM "$pid"
  timeout 5 tail --pid="$pid" -f /dev/null
  wait "$pid"; local rc=$?
  check "SIGTERM: exit status 0 (got $rc)" test $rc -eq 0
  check "SIGTERM: socket file removed" test ! -e "/var/run/wireguard/$WG_A.sock"
  check "SIGTERM: interface gone" bash -c "! ip netns exec $NS_A ip link show $WG_A >/dev/null 2>&1"
  PIDS=()
  start_impl "$NS_A" "$WG_A" wg-tun || { fail "shutdown restart"; teardown_pair; return; }
  pid=${PIDS[0]}
  na ip link del "$WG_A"
  timeout 5 tail --pid="$pid" -f /dev/null
  check "ip link del: daemon exited" bash -c "! kill -0 $pid 2>/dev/null"
  check "ip link del: socket file removed" test ! -e "/var/run/wireguard/$WG_A.sock"
  PIDS=()
  # A live socket of another daemon is never taken over.
  start_impl "$NS_A" "$WG_A" wg-tun || { fail "shutdown restart 2"; teardown_pair; return; }
  local out
  out=$(na "$WGNET_BIN/wg-tun" -f "$WG_A" 2>&1); rc=$?
  check "second daemon on the same name fails with one line (rc=$rc: $out)" test $rc -ne 0 -a "$(echo "$out" | wc -l)" -eq 1
  check "first daemon's socket survives" test -S "/var/run/wireguard/$WG_A.sock"
  teardown_pair
}

daemonize_checks() {
  log "=== background mode (no -f) ==="
  make_namespaces
  na "$WGNET_BIN/wg-tun" "$WG_A"; local rc=$?
  check "background start returns 0" test $rc -eq 0
  # It returns once the background process is up (WG_READY_FD): the UAPI answers at once.
  check "the UAPI answers as soon as the start returned" bash -c "ip netns exec $NS_A wg show $WG_A >/dev/null"
  eventually 50 pgrep -f "[w]g-tun -f $WG_A" >/dev/null
  local pid
  pid=$(pgrep -f "[w]g-tun -f $WG_A" | head -1)
  check "daemon runs in the background" test -n "$pid"
  local comm
  comm=$(cat "/proc/$pid/comm" 2>/dev/null)
  check "the daemon is named wg-tun (comm '$comm'), so pgrep -x and ps -C find it" \
    bash -c "test '$comm' = wg-tun && pgrep -x wg-tun | grep -qx '$pid' && ps -C wg-tun -o pid= | grep -qw '$pid'"
  check "wg show talks to it" bash -c "ip netns exec $NS_A wg show $WG_A >/dev/null"
  [ -n "$pid" ] && PIDS+=("$pid")
  teardown_pair

  # An unknown --user is refused before anything is made, with the reason (the readiness
  # pipe's "exited before it was up" has its own case in process_test).
  make_namespaces
  local err
  err=$(na "$WGNET_BIN/wg-tun" --user no-such-user-wgtun "$WG_A" 2>&1); rc=$?
  check "unknown --user: exit 1 (got $rc)" test $rc -eq 1
  check "... with a line saying why ($err)" grep -qx "wg-tun: --user no-such-user-wgtun: no such user" <<<"$err"
  check "... leaving no interface behind" bash -c "! ip netns exec $NS_A ip link show $WG_A >/dev/null 2>&1"
  check "... and no UAPI socket" test ! -e "/var/run/wireguard/$WG_A.sock"
  teardown_pair

  # A background process that fails once it runs as the user: with at most one process
  # for nobody (RLIMIT_NPROC, which root's start ignores) it cannot make its threads.
  # Its reason, written to its stderr (the readiness pipe), is what the start prints.
  make_namespaces
  err=$(na prlimit --nproc=1 -- "$WGNET_BIN/wg-tun" --user nobody "$WG_A" 2>&1); rc=$?
  check "background failure: exit 1 (got $rc)" test $rc -eq 1
  check "... with the background process's own reason ($err)" \
    grep -qx "wg-tun: Resource temporarily unavailable" <<<"$err"
  check "... leaving no interface behind" bash -c "! ip netns exec $NS_A ip link show $WG_A >/dev/null 2>&1"
  # (root's directory: the waiting parent removes it, not the process become nobody)
  check "... and no UAPI socket" test ! -e "/var/run/wireguard/$WG_A.sock"
  teardown_pair

  # A start that fails before its fork (the readiness pipe cannot be made: no descriptor
  # left) removes the UAPI socket it made.
  make_namespaces
  local n
  for n in $(seq 8 20); do
    err=$(na prlimit --nofile="$n" -- "$WGNET_BIN/wg-tun" "$WG_A" 2>&1) && break
    case $err in *"pipe: Too many open files"*) break ;; esac
  done
  check "out of descriptors at the pipe (limit $n): said so ($err)" grep -q "pipe: Too many open files" <<<"$err"
  check "... and no UAPI socket left" test ! -e "/var/run/wireguard/$WG_A.sock"
  teardown_pair
}

wg_quick() {
  log "=== wg-quick up/down drives wg-tun ==="
  make_namespaces
  (umask 077; wg genkey >"$TMP/q.key"; wg genkey >"$TMP/qb.key")
  local conf="$TMP/$WG_A.conf"
  cat >"$conf" <<CONF
[Interface]
PrivateKey = $(cat "$TMP/q.key")
ListenPort = 51820
Address = 198.19.0.1/24, fd00:19::1/64
MTU = 1380

[Peer]
PublicKey = $(wg pubkey <"$TMP/qb.key")
AllowedIPs = 198.19.5.0/24, fd00:19:5::/64
Endpoint = 198.18.0.2:51821
CONF
  chmod 600 "$conf"
  # A ListenPort another socket holds: `wg setconf` (the interface still down) is refused
  # with EADDRINUSE, so wg-quick up fails and removes the interface, as with wireguard-go.
  ip netns exec "$NS_A" python3 -c 'import socket, time
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.bind(("0.0.0.0", 51820)); time.sleep(60)' &
  local holder=$!
  eventually 50 bash -c "ip netns exec $NS_A ss -Hlun 'sport = :51820' | grep -q ."
  na env WG_QUICK_USERSPACE_IMPLEMENTATION="$WGNET_BIN/wg-tun" WG_SUDO=1 wg-quick up "$conf" >"$TMP/wgq-busy.log" 2>&1
  local rc=$? i
  kill "$holder" 2>/dev/null; wait "$holder" 2>/dev/null
  check "wg-quick up with ListenPort in use fails (rc $rc): $(grep -m1 -i 'in use' "$TMP/wgq-busy.log")" \
    bash -c "test $rc -ne 0 && grep -q 'Address already in use' '$TMP/wgq-busy.log'"
  for i in $(seq 50); do pgrep -f "[w]g-tun -f $WG_A" >/dev/null || break; sleep 0.1; done
  check "wg-quick up with ListenPort in use: interface and daemon gone" \
    bash -c "! ip netns exec $NS_A ip link show $WG_A >/dev/null 2>&1 && ! pgrep -f '[w]g-tun -f $WG_A' >/dev/null"
  na env WG_QUICK_USERSPACE_IMPLEMENTATION="$WGNET_BIN/wg-tun" WG_SUDO=1 wg-quick up "$conf" >"$TMP/wgq.log" 2>&1
  check "wg-quick up succeeds" test $? -eq 0 || cat "$TMP/wgq.log"
  check "wg-quick: address set" bash -c "ip netns exec $NS_A ip addr show $WG_A | grep -q 198.19.0.1/24"
  check "wg-quick: MTU set" bash -c "ip netns exec $NS_A ip link show $WG_A | grep -q 'mtu 1380'"
  check "wg-quick: route set" bash -c "ip netns exec $NS_A ip route show dev $WG_A | grep -q 198.19.5.0/24"
  check "wg-quick: wg show lists the peer" bash -c "ip netns exec $NS_A wg show $WG_A peers | grep -q ."
  # The daemon wg-quick starts inherits the environment's offload switches.
  local want_tso=on want_uso=on
  offloads_off_by_env | grep -qx tso && want_tso=off
  offloads_off_by_env | grep -qx uso && want_uso=off
  local got_tso got_uso
  got_tso=$(ethtool_feature "$NS_A" "$WG_A" tcp-segmentation-offload)
  got_uso=$(ethtool_feature "$NS_A" "$WG_A" tx-udp-segmentation)
  check "wg-quick: ethtool TSO $got_tso, USO $got_uso (environment: $want_tso, $want_uso)" \
    test "$got_tso $got_uso" = "$want_tso $want_uso"
  na wg-quick down "$conf" >>"$TMP/wgq.log" 2>&1
  check "wg-quick down succeeds" test $? -eq 0
  local i
  for i in $(seq 50); do pgrep -f "[w]g-tun -f $WG_A" >/dev/null || break; sleep 0.1; done
  check "wg-quick down: interface removed" bash -c "! ip netns exec $NS_A ip link show $WG_A >/dev/null 2>&1"
  check "wg-quick down: socket removed" test ! -e "/var/run/wireguard/$WG_A.sock"
  check "wg-quick down: no daemon left" bash -c "! pgrep -f '[w]g-tun -f $WG_A' >/dev/null"
  teardown_pair
}

# by_hand_block FILE: the fenced block in FILE that starts with "wg-tun wg0" (the
# documented by-hand start).
by_hand_block() {
  awk '/^```/ { if (inb && found) exit; inb = !inb; first = 1; next }
       inb && first { first = 0; if ($0 == "wg-tun wg0") found = 1 }
       inb && found { print }' "$1"
}

# The by-hand start as README, docs/wg-tun.md and wg-tun(8) print it, run as printed
# (wg0 renamed to this run's interface) with README's config against wireguard-go.
documented() {
  log "=== the documented by-hand start ==="
  local top readme f
  top=$(cd "$(dirname "$0")/../.." && pwd)
  readme=$(by_hand_block "$top/README.md")
  check "README has the by-hand commands" test -n "$readme"
  for f in docs/wg-tun.md docs/man/wg-tun.8.scd; do
    check "$f prints README's by-hand commands" test "$(by_hand_block "$top/$f")" = "$readme"
  done
  make_namespaces
  (umask 077; wg genkey >"$TMP/a.key"; wg genkey >"$TMP/b.key")
  start_impl "$NS_B" "$WG_B" wireguard-go || { fail "wireguard-go for B"; teardown_pair; return; }
  configure "$NS_B" "$WG_B" "$TMP/b.key" 51820 "$(wg pubkey <"$TMP/a.key")" "" \
    198.19.0.2 fd00:19::2 198.19.0.1 fd00:19::1
  local dir="$TMP/by-hand"
  mkdir -p "$dir/bin"
  ln -s "$WGNET_BIN/wg-tun" "$dir/bin/wg-tun"
  (umask 077; cat >"$dir/$WG_A.conf" <<CONF
[Interface]
PrivateKey = $(cat "$TMP/a.key")
Address = 198.19.0.1/24
ListenPort = 51820

[Peer]
PublicKey = $(wg pubkey <"$TMP/b.key")
Endpoint = 198.18.0.2:51820
AllowedIPs = 198.19.0.0/24
CONF
  )
  printf 'set -e\n%s\n' "${readme//wg0/$WG_A}" >"$dir/by-hand.sh"
  (cd "$dir" && ip netns exec "$NS_A" env PATH="$dir/bin:$PATH" bash by-hand.sh) >"$TMP/by-hand.log" 2>&1
  local rc=$?
  check "the by-hand commands run as printed (status $rc)" test "$rc" = 0
  check "... and the tunnel carries a ping" ping_eventually "$NS_A" 198.19.0.2
  ip netns exec "$NS_A" ip link del "$WG_A" 2>/dev/null
  check "... and wg-tun exits with its interface, its socket removed" \
    eventually 50 test ! -e "/var/run/wireguard/$WG_A.sock"
  teardown_pair
}

# wg-tun's usage: wireguard-go's command line, plus one flag per offload.
usage_checks() {
  local out rc
  out=$("$WGNET_BIN/wg-tun" --disable-everything wgx 2>"$TMP/usage.err"); rc=$?
  # A usage error: one line on stderr naming the problem and the usage, exit status 1
  # (wireguard-go's; wg-netstack's too).
  check "unknown flag: exit 1 (got $rc), nothing on stdout" test $rc -eq 1 -a -z "$out"
  check "unknown flag: one line on stderr naming it, with the usage" \
    test "$(wc -l <"$TMP/usage.err")" -eq 1 -a -n "$(grep "unknown option '--disable-everything'.*usage: .*\[-f/--foreground\]" "$TMP/usage.err")"
  out=$("$WGNET_BIN/wg-tun" 2>"$TMP/usage.err"); rc=$?
  check "no interface: exit 1 (got $rc), one line" test $rc -eq 1 -a -z "$out" -a "$(wc -l <"$TMP/usage.err")" -eq 1
  out=$("$WGNET_BIN/wg-tun" wga wgb 2>"$TMP/usage.err"); rc=$?
  check "two interface names: exit 1 (got $rc), one line" test $rc -eq 1 -a -z "$out" -a "$(wc -l <"$TMP/usage.err")" -eq 1
  out=$("$WGNET_BIN/wg-tun" bad/name 2>"$TMP/usage.err"); rc=$?
  check "a name with '/': exit 1 (got $rc), the rule before the kernel is asked ($(cat "$TMP/usage.err"))" \
    grep -q "^wg-tun: 'bad/name': an interface name is 1-15 characters without '/', ':' or spaces; usage: " "$TMP/usage.err"
  make_namespaces
  na ip link add "$WG_A" type veth peer name "${WG_A}p"
  out=$(na "$WGNET_BIN/wg-tun" "$WG_A" 2>"$TMP/usage.err"); rc=$?
  check "a name another interface has: exit 1 (got $rc), said so ($(cat "$TMP/usage.err"))" \
    grep -qx "wg-tun: cannot create interface $WG_A: an interface of that name exists already" "$TMP/usage.err"
  check "... and no UAPI socket left" test ! -e "/var/run/wireguard/$WG_A.sock"
  teardown_pair
  "$WGNET_BIN/wg-tun" --help >"$TMP/usage.out" 2>&1; rc=$?
  check "--help: exit 0 (got $rc)" test $rc -eq 0
  local o
  for o in "${OFFLOADS[@]}"; do
    check "--help names --disable-$o and pairs $(offload_env "$o") with it" \
      bash -c "grep -q -- '^  --disable-$o ' '$TMP/usage.out' && grep -q -- '^  $(offload_env "$o") .*the same as --disable-$o ' '$TMP/usage.out'"
  done
}

# ethtool_case WHAT TSO USO OFF... -- ARG...: wg-tun started with ARGs (flags; IMPL_ENV
# may add environment switches) shows TSO and USO in `ethtool -k` and logs OFF... as off.
ethtool_case() {
  local what=$1 tso=$2 uso=$3; shift 3
  local off=()
  while [ "$1" != -- ]; do off+=("$1"); shift; done
  shift
  make_namespaces
  start_impl "$NS_A" "$WG_A" wg-tun "$@" || { fail "$what: start"; teardown_pair; return; }
  na ip link set "$WG_A" up
  local got_tso got_uso
  got_tso=$(ethtool_feature "$NS_A" "$WG_A" tcp-segmentation-offload)
  got_uso=$(ethtool_feature "$NS_A" "$WG_A" tx-udp-segmentation)
  check "$what: ethtool tcp-segmentation-offload $got_tso, tx-udp-segmentation $got_uso" \
    test "$got_tso $got_uso" = "$tso $uso"
  check "$what: logged offloads (off: ${off[*]:-none})" offloads_logged "$WG_A" "${off[@]}"
  teardown_pair
}

# Link counters for the traffic checks.
link_stat() { ip netns exec "$1" cat "/sys/class/net/$2/statistics/$3"; }
udp_in_datagrams() { ip netns exec "$1" awk '/^Udp:/ {n++; if (n == 2) print $2}' /proc/net/snmp; }
wg_rx_bytes() { ip netns exec "$1" wg show "$2" transfer | awk '{print $2}'; }

# traffic_case WHAT SENDER RECEIVER TUN_GRO UDP_GSO UDP_GRO: a 2 s TCP flow from SENDER
# (A or B) to RECEIVER through a wg-tun pair, then what the kernel's counters show about
# three offloads (each expected on or off; UDP_GRO may be "-": not observable):
#   TUN GRO  the receiver's wg interface took packets longer than its MTU (1420): its
#            mean rx packet (bytes/packets) is larger only if some were coalesced
#   UDP GSO  the sender's veth carried UDP frames longer than 1514 bytes: its mean tx
#            frame is larger only if some were GSO super-datagrams
#   UDP GRO  the receiver's UDP sockets took fewer datagrams (Udp InDatagrams counts one
#            per coalesced datagram handed over) than half the WireGuard messages that
#            arrived (at least rx bytes / 1452); without GRO they take every one
# The UDP GRO check needs the sender's UDP GSO on: only GSO datagrams arrive coalesced
# over a veth (it has no GRO of its own).
traffic_case() {
  local what=$1 snd=$2 rcv=$3 want_gro=$4 want_gso=$5 want_ugro=$6
  local sns rns rwg sveth
  if [ "$snd" = A ]; then
    sns=$NS_A rns=$NS_B rwg=$WG_B sveth=${PREFIX}va
  else
    sns=$NS_B rns=$NS_A rwg=$WG_A sveth=${PREFIX}vb
  fi
  local rb0 rp0 tb0 tp0 ud0 wr0 rb1 rp1 tb1 tp1 ud1 wr1
  rb0=$(link_stat "$rns" "$rwg" rx_bytes); rp0=$(link_stat "$rns" "$rwg" rx_packets)
  tb0=$(link_stat "$sns" "$sveth" tx_bytes); tp0=$(link_stat "$sns" "$sveth" tx_packets)
  ud0=$(udp_in_datagrams "$rns"); wr0=$(wg_rx_bytes "$rns" "$rwg")
  local addr=198.19.0.2
  [ "$rcv" = A ] && addr=198.19.0.1
  local bps
  bps=$(iperf_tcp "$sns" "$rns" "$addr" 2)
  check "$what: TCP $snd→$rcv flows (${bps:-0} bit/s)" test "${bps:-0}" -gt 0
  rb1=$(link_stat "$rns" "$rwg" rx_bytes); rp1=$(link_stat "$rns" "$rwg" rx_packets)
  tb1=$(link_stat "$sns" "$sveth" tx_bytes); tp1=$(link_stat "$sns" "$sveth" tx_packets)
  ud1=$(udp_in_datagrams "$rns"); wr1=$(wg_rx_bytes "$rns" "$rwg")
  local tun_mean=$(((rb1 - rb0) / (rp1 - rp0 + 1))) veth_mean=$(((tb1 - tb0) / (tp1 - tp0 + 1)))
  local msgs=$(((wr1 - wr0) / 1452)) dgrams=$((ud1 - ud0))
  local got_gro=off got_gso=off got_ugro=off
  [ "$tun_mean" -gt 1420 ] && got_gro=on
  [ "$veth_mean" -gt 1514 ] && got_gso=on
  [ $((dgrams * 2)) -lt "$msgs" ] && got_ugro=on
  check "$what: $rcv's TUN GRO $got_gro (mean packet written $tun_mean B)" test "$got_gro" = "$want_gro"
  check "$what: $snd's UDP GSO $got_gso (mean veth frame $veth_mean B)" test "$got_gso" = "$want_gso"
  case $want_ugro in
    off) check "$what: $rcv's UDP GRO off ($dgrams datagrams for >= $msgs messages)" \
           test "$dgrams" -ge "$msgs" -a "$msgs" -gt 1000 ;;
    on) check "$what: $rcv's UDP GRO on ($dgrams datagrams for >= $msgs messages)" test "$got_ugro" = on ;;
  esac
}

# The offload flags: each turns its offload off as its environment switch does (either
# is enough), in the foreground and across background mode's re-exec. TSO and USO show
# in `ethtool -k`; TUN GRO, UDP GSO and UDP GRO in the kernel's counters (traffic_case).
flag_checks() {
  log "=== offload flags ==="
  # The defaults are checked too: whatever this run's environment says is cleared
  # (start_impl reads IMPL_ENV).
  # shellcheck disable=SC2034
  local IMPL_ENV=$OFFLOAD_ENV_CLEAR
  usage_checks
  ethtool_case "default" on on -- 
  ethtool_case "--disable-tso" off on tso -- --disable-tso
  ethtool_case "--disable-uso" on off uso -- --disable-uso
  ethtool_case "every flag" off off "${OFFLOADS[@]}" -- \
    --disable-tso --disable-uso --disable-tun-gro --disable-tun-csum --disable-udp-gso --disable-udp-gro
  IMPL_ENV="$OFFLOAD_ENV_CLEAR WG_TUN_DISABLE_TSO=1 WG_DISABLE_UDP_GRO=1" \
    ethtool_case "WG_TUN_DISABLE_TSO=1 WG_DISABLE_UDP_GRO=1" off on tso udp-gro --
  IMPL_ENV="$OFFLOAD_ENV_CLEAR WG_TUN_DISABLE_TSO=1" ethtool_case "env and flag" off off tso uso -- --disable-uso
  IMPL_ENV="$OFFLOAD_ENV_CLEAR WG_TUN_DISABLE_TSO=0" ethtool_case "WG_TUN_DISABLE_TSO=0" on on --

  # Background mode: the child re-negotiates the offloads on the inherited descriptor,
  # so it must get the flags too.
  make_namespaces
  # shellcheck disable=SC2086
  na env $OFFLOAD_ENV_CLEAR LOG_LEVEL=verbose "$WGNET_BIN/wg-tun" --disable-tso --disable-udp-gso "$WG_A" \
    >"$TMP/$WG_A.log" 2>&1
  local rc=$? pid
  pid=$(pgrep -f "[w]g-tun -f $WG_A" | head -1)
  [ -n "$pid" ] && PIDS+=("$pid")
  check "background with flags: starts (rc=$rc), child runs" test $rc -eq 0 -a -n "$pid"
  check "background with flags: the child has them ($(tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null))" \
    bash -c "tr '\0' ' ' </proc/$pid/cmdline | grep -q -- '-f $WG_A --disable-tso --disable-udp-gso'"
  na ip link set "$WG_A" up
  local got_tso got_uso
  got_tso=$(ethtool_feature "$NS_A" "$WG_A" tcp-segmentation-offload)
  got_uso=$(ethtool_feature "$NS_A" "$WG_A" tx-udp-segmentation)
  check "background with flags: ethtool TSO $got_tso, USO $got_uso" test "$got_tso $got_uso" = "off on"
  check "background with flags: logged offloads" offloads_logged "$WG_A" tso udp-gso
  teardown_pair

  # Background mode with --queues 2: the child gets the flag and attaches the second queue
  # to the descriptor it inherits (the parent's second queue closes with the parent).
  make_namespaces
  # shellcheck disable=SC2086
  na env $OFFLOAD_ENV_CLEAR LOG_LEVEL=verbose "$WGNET_BIN/wg-tun" --queues 2 "$WG_A" >"$TMP/$WG_A.log" 2>&1
  rc=$?
  pid=$(pgrep -f "[w]g-tun -f $WG_A" | head -1)
  [ -n "$pid" ] && PIDS+=("$pid")
  check "background with --queues 2: starts (rc=$rc), child runs with it ($(tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null))" \
    bash -c "[ $rc -eq 0 ] && tr '\0' ' ' </proc/$pid/cmdline | grep -q -- '-f $WG_A --queues 2'"
  check "background with --queues 2: the interface has 2 queues ($(na ip -d link show "$WG_A" | grep -o 'multi_queue numqueues [0-9]*'))" \
    bash -c "ip netns exec $NS_A ip -d link show $WG_A | grep -q 'multi_queue numqueues 2 '"
  na ip link set "$WG_A" up
  check "background with --queues 2: logged when up" \
    eventually 30 grep -q "2 TUN queues and 4 UDP sockets" "$TMP/$WG_A.log"
  teardown_pair

  # TUN GRO, UDP GSO and UDP GRO under traffic: on by default ...
  setup_pair wg-tun wg-tun || { fail "flags: pair setup"; teardown_pair; return; }
  check "flags: tunnel up (defaults)" ping_eventually "$NS_A" 198.19.0.2
  traffic_case "defaults" A B on on on
  teardown_pair
  # ... and off where B's flags say so (A keeps UDP GSO, so B is sent coalesced datagrams).
  ARGS_B="--disable-tun-gro --disable-udp-gso --disable-udp-gro" setup_pair wg-tun wg-tun \
    || { fail "flags: pair setup"; teardown_pair; return; }
  check "flags: tunnel up (B without GRO and GSO)" ping_eventually "$NS_A" 198.19.0.2
  check "flags: B logged offloads" offloads_logged "$WG_B" tun-gro udp-gso udp-gro
  traffic_case "B without GRO/GSO" A B off on off
  traffic_case "B without GRO/GSO" B A on off -
  teardown_pair
}

# WGNET_EXPECT_OFF (set by the per-offload ctest entries): the offloads this run's
# environment must switch off, so that a misspelt variable cannot pass as a default run.
if [ -n "${WGNET_EXPECT_OFF+x}" ]; then
  env_off=$(offloads_off_by_env | xargs)
  [ "$env_off" = "$WGNET_EXPECT_OFF" ] || { echo "environment switches off '$env_off', expected '$WGNET_EXPECT_OFF'"; exit 1; }
  log "offloads switched off by the environment: $env_off"
fi

# WGNET_NETNS_ONLY: one group or a comma-separated list (default: all).
GROUPS_KNOWN=(flags interop self wg-quick documented roaming reconfig bad-input shutdown daemon)
only=${WGNET_NETNS_ONLY:-all}
if [ "$only" != all ]; then
  for g in ${only//,/ }; do
    [[ " ${GROUPS_KNOWN[*]} " == *" $g "* ]] || { echo "unknown group '$g' (known: ${GROUPS_KNOWN[*]})"; exit 1; }
  done
fi
run() { [ "$only" = all ] || [[ ",$only," == *",$1,"* ]]; }
run flags && flag_checks
run interop && pair_checks wg-tun wireguard-go
run self && pair_checks wg-tun wg-tun
run wg-quick && wg_quick
run documented && documented
run roaming && roaming wireguard-go wg-tun && roaming wg-tun wg-tun
run reconfig && reconfiguration
run bad-input && bad_input
run shutdown && shutdown_checks
run daemon && daemonize_checks

finish "netns"
