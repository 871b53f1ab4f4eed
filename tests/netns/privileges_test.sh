#!/usr/bin/env bash
# What a compromised daemon would hold, read from the running processes:
#   - wg-netstack started as root (its UAPI socket under /var/run/wireguard) keeps no
#     capability once up, in every thread: CapEff, CapPrm, CapInh, CapAmb and CapBnd 0;
#     with a listener below 1024 it keeps CAP_NET_BIND_SERVICE alone, and that listener
#     answers; with --user nobody it runs as nobody with none.
#   - wg-tun as root keeps CAP_NET_ADMIN, CAP_NET_BIND_SERVICE and CAP_SYS_ADMIN alone,
#     its files confined, and still removes its UAPI socket at exit;
#   - wg-netstack's private key, rotated with wg set, leaves no copy in its memory (read
#     by root through /proc/PID/mem), nor does wg-run's in its namespace's init (a copy
#     of wg-run made before the keys were applied);
#   - every program is non-dumpable: as nobody, wg-netstack --user nobody's
#     /proc/PID/environ and /proc/PID/mem cannot be read by another nobody process
#     (they belong to root), nor wg-tun --user nobody's, nor those of wg-run run by
#     nobody (its outer process, once the TUN is handed over, and its namespace's init);
#   - wg-run as root keeps no capability in its own process.
#
#   namespace $NS_A: wg-netstack --interface $WG_N (UDP 51820, SOCKS5 127.0.0.1:1080),
#   wg-tun $WG_A. Nothing is sent anywhere.
#
# Usage: privileges_test.sh BIN_DIR (exit 77 = skipped: not root)
WGNET_BIN=$(cd "${1:?usage: $0 BIN_DIR}" && pwd)
. "$(dirname "$0")/lib.sh"
require_root
WG_N="wn${RUN_ID}"
trap 'cleanup; rm -f "/var/run/wireguard/$WG_N.sock"' EXIT
for b in wg-netstack wg-tun; do
  [ -x "$WGNET_BIN/$b" ] || { echo "$WGNET_BIN/$b missing: build it first"; exit 1; }
done
id nobody >/dev/null || { echo "no user nobody"; exit 1; }
make_namespaces
mkdir -p "$TMP/conf"
chmod 755 "$TMP" "$TMP/conf"
KEY=$(wg genkey)
printf '[Interface]\nPrivateKey = %s\nListenPort = 51820\nAddress = 198.19.0.1/24\n' "$KEY" >"$TMP/conf/n.conf"
chmod 644 "$TMP/conf/n.conf"  # readable by nobody, for the --user run

# caps_of PID: "CapInh CapPrm CapEff CapBnd CapAmb" of every thread, one line each.
caps_of() {
  local t
  for t in /proc/"$1"/task/*; do
    awk '/^Cap(Inh|Prm|Eff|Bnd|Amb):/ {sub(":", "", $1); printf "%s=%s ", $1, $2} END {print ""}' "$t/status"
  done
}
# caps_are PID HEX: every capability set of every thread is HEX (CapBnd too).
caps_are() {
  local want=$1$'\n' lines
  lines=$(caps_of "$2")
  log "  $(echo "$lines" | sort -u | head -3)"
  [ -n "$lines" ] && ! echo "$lines" | grep -E -o 'Cap(Prm|Eff|Bnd)=[0-9a-f]+' | grep -v "=$1\$" | grep -q . &&
    ! echo "$lines" | grep -E -o 'Cap(Inh|Amb)=[0-9a-f]+' | grep -v '=0000000000000000$' | grep -q .
}
# start_n NAME FLAGS...: wg-netstack on n.conf as interface $WG_N; NPID is its PID.
start_n() {
  local name=$1
  shift
  ip netns exec "$NS_A" "$WGNET_BIN/wg-netstack" -c "$TMP/conf/n.conf" --interface "$WG_N" "$@" \
    >"$TMP/$name.log" 2>&1 &
  NPID=$!
  PIDS+=("$NPID")
  eventually 100 test -S "/var/run/wireguard/$WG_N.sock" && wait_listen "$NS_A" 127.0.0.1:1080 &&
    eventually 50 grep -q 'wg-netstack: up' "$TMP/$name.log"
}
stop_n() {
  kill -TERM "$NPID"
  wait "$NPID"
  forget_pid "$NPID"
}
# uid_is PID UID: the process runs as UID (read at each call, for `eventually`).
uid_is() { test "$(awk '/^Uid:/ {print $2}' /proc/"$1"/status 2>/dev/null)" = "$2"; }
# threaded PID: the process has started a second thread.
threaded() { test "$(ls /proc/"$1"/task 2>/dev/null | wc -l)" -gt 1; }
# as_nobody CMD...: CMD as nobody, with no supplementary groups.
as_nobody() { setpriv --reuid=nobody --regid="$(id -g nobody)" --clear-groups "$@"; }
# as_nobody_reads FILE: a process of nobody's can read FILE.
as_nobody_reads() { as_nobody head -c 1 "$1" >/dev/null 2>&1; }
PROC_MEM="$(cd "$(dirname "$0")/.." && pwd)/support/proc_mem.py"
# as_nobody_reads_memory PID: a process of nobody's can read PID's memory (the system
# Python: root's PATH may name one nobody cannot run).
as_nobody_reads_memory() { as_nobody /usr/bin/python3 "$PROC_MEM" reads "$1" 2>/dev/null; }
# key_copies PID KEY: how often KEY (base64) is in PID's memory, as bytes or text.
key_copies() { python3 "$PROC_MEM" count "$1" "$2"; }

log "=== the memory check itself ==="
# (spelled out: a function run in the background is a subshell, and $! would be it)
setpriv --reuid=nobody --regid="$(id -g nobody)" --clear-groups sleep 30 &
SPID=$!
PIDS+=("$SPID")
check "sanity: a nobody process reads another's memory (a dumpable sleep)" eventually 50 as_nobody_reads_memory "$SPID"
kill "$SPID"
wait "$SPID" 2>/dev/null
forget_pid "$SPID"

log "=== wg-netstack as root ==="
check "wg-netstack up as root" start_n root
check "no capability in any thread" caps_are 0000000000000000 "$NPID"
check "wg show still drives it" ip netns exec "$NS_A" wg show "$WG_N" listen-port
check "sanity: the scan finds its private key ($(key_copies "$NPID" "$KEY") copies)" \
  test "$(key_copies "$NPID" "$KEY")" -gt 0
ip netns exec "$NS_A" wg set "$WG_N" private-key <(wg genkey)
check "the key rotated with wg set: no copy of the old one left in its memory ($(key_copies "$NPID" "$KEY"))" \
  test "$(key_copies "$NPID" "$KEY")" = 0
check "stops cleanly" stop_n

log "=== wg-netstack as root, a listener below 1024 ==="
check "wg-netstack up with --health 127.0.0.1:99" start_n low --health 127.0.0.1:99
check "CAP_NET_BIND_SERVICE alone" caps_are 0000000000000400 "$NPID"
check "the health listener below 1024 answers" \
  ip netns exec "$NS_A" curl -sS --max-time 5 -o /dev/null http://127.0.0.1:99/metrics
check "stops cleanly" stop_n

log "=== wg-netstack --user nobody ==="
check "wg-netstack up as nobody" start_n nobody --user nobody
check "runs as nobody" uid_is "$NPID" "$(id -u nobody)"
check "no capability in any thread" caps_are 0000000000000000 "$NPID"
check "non-dumpable: its environ is root's, not nobody's" test "$(stat -c %U /proc/"$NPID"/environ)" = root
check "another nobody process cannot read its environ" eval '! as_nobody_reads /proc/$NPID/environ'
check "nor its memory" eval '! as_nobody_reads_memory $NPID'
check "stops cleanly" stop_n

log "=== wg-tun as root ==="
ip netns exec "$NS_A" env LOG_LEVEL=verbose "$WGNET_BIN/wg-tun" -f "$WG_A" >"$TMP/wgtun-root.log" 2>&1 &
TPID=$!
PIDS+=("$TPID")
check "wg-tun up" eventually 100 grep -q "started on $WG_A" "$TMP/wgtun-root.log"
# CAP_NET_ADMIN (12), CAP_NET_BIND_SERVICE (10), CAP_SYS_ADMIN (21, setns): 0x201400.
check "CAP_NET_ADMIN, CAP_NET_BIND_SERVICE and CAP_SYS_ADMIN alone" caps_are 0000000000201400 "$TPID"
check "its files confined by Landlock" grep -q "sandbox: files confined (Landlock ABI" "$TMP/wgtun-root.log"
check "wg show drives it" ip netns exec "$NS_A" wg show "$WG_A" listen-port
check "ip link del: it exits" eval 'ip netns exec "$NS_A" ip link del "$WG_A" && wait "$TPID"'
forget_pid "$TPID"
check "... and removes its UAPI socket" test ! -e "/var/run/wireguard/$WG_A.sock"

log "=== wg-tun --user nobody ==="
ip netns exec "$NS_A" "$WGNET_BIN/wg-tun" -f --user nobody "$WG_A" >"$TMP/wgtun.log" 2>&1 &
TPID=$!
PIDS+=("$TPID")
check "wg-tun up" eventually 100 test -S "/var/run/wireguard/$WG_A.sock"
# -f --user re-executes in place: the PID stays, the user changes once up.
check "wg-tun runs as nobody" eventually 100 uid_is "$TPID" "$(id -u nobody)"
check "non-dumpable: its environ is root's" test "$(stat -c %U /proc/"$TPID"/environ)" = root
check "another nobody process cannot read its environ" eval '! as_nobody_reads /proc/$TPID/environ'
log "=== wg-run as nobody ==="
# (From /: a working directory under /tmp is private to COMMAND, and refused.)
(cd / && exec ip netns exec "$NS_A" setpriv --reuid=nobody --regid="$(id -g nobody)" --clear-groups \
  "$WGNET_BIN/wg-run" -c "$TMP/conf/n.conf" -- sleep 60) >"$TMP/wgrun.log" 2>&1 &
RPID=$!
PIDS+=("$RPID")
# The outer process once the TUN is handed over: its Tun's event thread runs.
check "wg-run up" eventually 100 threaded "$RPID"
check "wg-run runs as nobody" uid_is "$RPID" "$(id -u nobody)"
check "non-dumpable: its environ is root's" test "$(stat -c %U /proc/"$RPID"/environ)" = root
check "another nobody process cannot read its memory" eval '! as_nobody_reads_memory $RPID'
# The namespace's init: a copy of wg-run made before the keys were applied.
IPID=$(cat /proc/"$RPID"/task/*/children | awk '{print $1}')
check "its namespace's init ($IPID) runs as nobody" uid_is "$IPID" "$(id -u nobody)"
check "... is non-dumpable: a nobody process (as COMMAND is) cannot read its memory" \
  eval '! as_nobody_reads_memory $IPID'
check "sanity: the scan finds the private key in wg-run itself ($(key_copies "$RPID" "$KEY") copies)" \
  test "$(key_copies "$RPID" "$KEY")" -gt 0
check "no copy of the private key in the init's memory (scanned as root: $(key_copies "$IPID" "$KEY"))" \
  test "$(key_copies "$IPID" "$KEY")" = 0
check "... and in wg-run's own only its device's (the config's copy wiped): 1" \
  test "$(key_copies "$RPID" "$KEY")" = 1
kill -TERM "$RPID"
wait "$RPID"
forget_pid "$RPID"

log "=== wg-run as root ==="
(cd / && exec ip netns exec "$NS_A" "$WGNET_BIN/wg-run" -c "$TMP/conf/n.conf" -- sleep 60) >"$TMP/wgrun-root.log" 2>&1 &
RPID=$!
PIDS+=("$RPID")
check "wg-run up" eventually 100 threaded "$RPID"
check "no capability in any thread of its own process" caps_are 0000000000000000 "$RPID"
IPID=$(cat /proc/"$RPID"/task/*/children | awk '{print $1}')
check "no copy of the private key in its namespace's init ($IPID)" test "$(key_copies "$IPID" "$KEY")" = 0
finish "privileges"
