/* lwIP 2.2.1 configuration for wgnet's netstack: NO_SYS, raw API only, one thread,
 * IPv4 + IPv6 on a point-to-point WireGuard netif, large windows with SACK, RFC 6528
 * initial sequence numbers. check_options.c refuses to build without the essentials. */
#ifndef WGNET_LWIPOPTS_H
#define WGNET_LWIPOPTS_H

/* ---- System: no OS, no threads inside lwIP; one loop drives everything. ---- */
#define NO_SYS                          1
#define SYS_LIGHTWEIGHT_PROT            0
#define LWIP_TIMERS                     1 /* sys_check_timeouts(); sys_now() comes from netstack/ */
#define LWIP_SOCKET                     0
#define LWIP_NETCONN                    0
#define LWIP_NETIF_API                  0

/* ---- Memory: everything from malloc. ----
 * With MEMP_MEM_MALLOC no pool is reserved statically, so room for 10,000+
 * connections costs nothing until used. The flip side: the MEMP_NUM_* and
 * PBUF_POOL_SIZE limits below are NOT enforced by lwIP any more. The netstack caps
 * connections (and listeners, UDP pcbs) in its own code. The numbers stay meaningful
 * (and satisfy init.c's sanity checks) if MEMP_MEM_MALLOC is ever turned off. */
#define MEM_LIBC_MALLOC                 1
#define MEMP_MEM_MALLOC                 1
#define MEM_ALIGNMENT                   8 /* 64-bit: pbuf payloads and structs stay aligned */
#define MEMP_NUM_TCP_PCB                16384
#define MEMP_NUM_TCP_PCB_LISTEN         1024
#define MEMP_NUM_UDP_PCB                4096
#define MEMP_NUM_RAW_PCB                64
#define MEMP_NUM_TCP_SEG                65535 /* u16_t max; >= TCP_SND_QUEUELEN */
#define MEMP_NUM_PBUF                   65535 /* PBUF_REF/ROM: tcp_write without copy */
#define MEMP_NUM_REASSDATA              16
#define PBUF_POOL_SIZE                  8192  /* > TCP_WND / TCP_MSS */

/* ---- Link layer: none. Packets are bare IP in and out of the tunnel. ----
 * PBUF_LINK_HLEN defaults to 14 even without Ethernet and misaligns TCP headers;
 * any encapsulation headroom must stay a multiple of 4. */
#define LWIP_ARP                        0
#define LWIP_ETHERNET                   0
#define PBUF_LINK_HLEN                  0
#define PBUF_LINK_ENCAPSULATION_HLEN    0

/* ---- Netif ----
 * One netif per netstack::Stack, several Stacks in a process (lwIP's state is global and
 * shared by all; patch 0011 binds their pcbs apart); tests and benchmarks also join two
 * netifs in one process. */
#define LWIP_SINGLE_NETIF               0
#define LWIP_NETIF_STATUS_CALLBACK      0
#define LWIP_NETIF_LINK_CALLBACK        0
#define LWIP_NETIF_LOOPBACK             0
/* Inbound checksum checks can be switched off on the tunnel netif (WireGuard's AEAD
 * already authenticates every packet); generation stays on. */
#define LWIP_CHECKSUM_CTRL_PER_NETIF    1
#define CHECKSUM_GEN_IP                 1
#define CHECKSUM_GEN_UDP                1
#define CHECKSUM_GEN_TCP                1
#define CHECKSUM_GEN_ICMP               1
#define CHECKSUM_GEN_ICMP6              1

/* ---- IPv4 ---- */
#define LWIP_IPV4                       1
#define IP_DEFAULT_TTL                  64
#define IP_FORWARD                      0
#define IP_REASSEMBLY                   1
#define IP_FRAG                         1
#define IP_REASS_MAX_PBUFS              128 /* a 64 KiB UDP datagram at MTU 1420 is ~47 */
#define LWIP_ICMP                       1
#define LWIP_RAW                        1 /* raw ICMP/ICMPv6 pcbs receive ping replies */
#define LWIP_DHCP                       0
#define LWIP_AUTOIP                     0
#define LWIP_ACD                        0
#define LWIP_IGMP                       0
#define LWIP_DNS                        0 /* netstack/ has its own DNS client */

/* ---- IPv6 on a point-to-point tunnel: no neighbours, no routers, no multicast. ----
 * LWIP_IPV6 still compiles in nd6.c (ip6_route and icmp6 call it) but nothing here
 * makes it send anything: no DAD, no router solicitation, no MLD reports. Addresses
 * are added by the netstack and set to IP6_ADDR_PREFERRED at once. */
#define LWIP_IPV6                       1
#define LWIP_IPV6_SCOPES                0 /* no link-local addressing on the tunnel */
#define LWIP_IPV6_NUM_ADDRESSES         3
#define LWIP_IPV6_FORWARD               0
#define LWIP_IPV6_FRAG                  1
#define LWIP_IPV6_REASS                 1
/* 64-bit: struct ip6_reass_helper does not fit in the IPv6 header; without this the
 * reassembly code asserts (or, with LWIP_NOASSERT, corrupts memory). */
#define IPV6_FRAG_COPYHEADER            1
#define LWIP_ICMP6                      1
#define LWIP_IPV6_MLD                   0
#define LWIP_IPV6_AUTOCONFIG            0
#define LWIP_IPV6_ADDRESS_LIFETIMES     0
#define LWIP_IPV6_DUP_DETECT_ATTEMPTS   0
#define LWIP_IPV6_SEND_ROUTER_SOLICIT   0
#define LWIP_IPV6_DHCP6                 0
#define LWIP_ND6_QUEUEING               0
#define LWIP_ND6_ALLOW_RA_UPDATES       0 /* a peer must not change our MTU or timers */
#define LWIP_ND6_TCP_REACHABILITY_HINTS 0
#define LWIP_ND6_RDNSS_MAX_DNS_SERVERS  0

/* ---- UDP ---- */
#define LWIP_UDP                        1
#define LWIP_UDPLITE                    0

/* ---- TCP ---- */
#define LWIP_TCP                        1
#define LWIP_RANDOMIZE_INITIAL_LOCAL_PORTS 1
/* Tunnel MTU 1420 - 20 (IPv4) - 20 (TCP). lwIP's MSS logic (TCP_CALCULATE_EFF_SEND_MSS)
 * takes the netif MTU into account and announces 1420 - 40 - 20 = 1360 over IPv6. */
#define TCP_MSS                         1380
#define TCP_CALCULATE_EFF_SEND_MSS      1
/* Receive window of 4 MiB needs window scaling: 4 MiB >> 7 fits the 16-bit field
 * (scale 7 allows up to 8 MiB). The SYN carries MSS, window scale and SACK_PERM. */
#define LWIP_WND_SCALE                  1
#define TCP_RCV_SCALE                   7
#define TCP_WND                         (4 * 1024 * 1024)
#define TCP_SND_BUF                     (4 * 1024 * 1024)
/* Only the socket APIs read it, but init.c insists it sit 4*MSS below u16_t overflow. */
#define TCP_SNDLOWAT                    (0xffff - (4 * TCP_MSS) - 1)
#define TCP_SND_QUEUELEN                LWIP_MIN(0xffff, ((4 * (TCP_SND_BUF) + (TCP_MSS - 1)) / (TCP_MSS)))
/* Selective acknowledgements out, with a bounded out-of-order queue per connection. */
#define TCP_QUEUE_OOSEQ                 1
#define LWIP_TCP_SACK_OUT               1
#define LWIP_TCP_SACK_OUT_DATA          1
#define LWIP_TCP_MAX_SACK_NUM           4
/* The out-of-order queue may hold a whole window (a sender that keeps a window in
 * flight over a lossy path, BBR's habit, otherwise sees its SACKed data dropped and
 * resent); the pbuf bound keeps tiny segments from costing more than full ones. */
#define TCP_OOSEQ_MAX_BYTES             TCP_WND
#define TCP_OOSEQ_MAX_PBUFS             4096
#define TCP_LISTEN_BACKLOG              1
/* Per-connection keepalive interval and probe count (StackOptions::tcp_keepalive); off
 * unless the Stack's options ask for it. */
#define LWIP_TCP_KEEPALIVE              1
#define LWIP_CALLBACK_API               1

/* ---- A modern sender: our patch series (patches/, see the README). ----
 * 0001 RFC 6298 retransmission timer in ms (200 ms minimum, 1 s initial, Karn). Its
 *      timer fires on slow ticks (2 x TCP_TMR_INTERVAL), so the ticks are short:
 *      20 ms slow, 10 ms fast (delayed ACKs leave within 10 ms). lwIP's other
 *      timeouts are written in ms and keep their meaning.
 * 0002 sender-side SACK: scoreboard, RFC 6675 recovery, RACK loss marking, NewReno
 *      partial ACKs, duplicate ACKs that work against Linux, limited transmit.
 * 0003 tail loss probe: a lost last segment is found in 2 SRTT, not an RTO.
 * 0004 CUBIC with HyStart++'s slow-start exit, and PRR during recovery.
 * 0005 RACK's transmit times and RTT samples in microseconds (TCP_CLOCK_US below):
 *      the tunnel's RTT is often below a millisecond.
 * 0006 SACK blocks on data segments too, so a bidirectional flow needs no extra
 *      empty ACKs to report its losses.
 * 0007 hostile-input fixes (MSS only in SYN, truncated options, persist split).
 * 0008 an out-of-order queue that costs O(1) per segment, not a walk of the whole
 *      queue (appends at a remembered tail, limits against running bounds, in-order
 *      data chained in one pass): a receiver behind a lossy path keeps up.
 * 0009 one ACK per connection per batch of received packets (the netstack feeds lwIP
 *      in batches), as a receiver behind GRO sends, instead of one per out-of-order
 *      segment (a SACK peer's fast retransmit does not count duplicate ACKs).
 * 0010 BBR besides CUBIC, per connection (tcp_cc_default; the netstack's
 *      StackOptions::tcp_congestion, BBR unless told otherwise): a window from the
 *      measured bottleneck rate and minimum RTT, which random loss does not shrink.
 * 0012 timers that visit only connections with work pending; an idle connection waits
 *      for its keepalive in a heap, and the TCP timer stops when none has work.
 * 0013 tcp_input finds a segment's connection in a keyed hash table, not by walking
 *      every active connection. */
#define TCP_TMR_INTERVAL                10
#define LWIP_TCP_RTO_TIME               1000
#define LWIP_TCP_RTO_FINE               1
#define TCP_RTO_MIN_MS                  200
#define TCP_RTO_MAX_MS                  60000
#define LWIP_TCP_SACK_IN                1
#define LWIP_TCP_TLP                    1
#define LWIP_TCP_CUBIC                  1
#define LWIP_TCP_PRR                    1
#define LWIP_TCP_OOSEQ_LINEAR           1
#define LWIP_TCP_INPUT_BATCH            1
#define LWIP_TCP_BBR                    1
#define TCP_CLOCK_US()                  wgnet_lwip_now_us()
#define LWIP_TCP_ARMED_TIMERS           1
#define LWIP_TCP_PCB_HASH               1
#define LWIP_IDLE_CYCLIC_TIMERS         1
#define TCP_TICKS_NOW()                 wgnet_lwip_slow_ticks()
#define LWIP_HOOK_TIMEOUT_FIRST()       wgnet_lwip_timeout_first()
#define TCP_RACK_MIN_REO_US             100

/* ---- Hooks: RFC 6528 initial sequence numbers (glue.c). ----
 * The function is declared in the hook header: ip_addr_t does not exist yet here. */
#define LWIP_HOOK_FILENAME              "wgnet_lwip_hooks.h"
#define LWIP_HOOK_TCP_ISN(local_ip, local_port, remote_ip, remote_port) \
  wgnet_lwip_tcp_isn((local_ip), (local_port), (remote_ip), (remote_port))
#define LWIP_HOOK_TCP_PCB_HASH(local_ip, local_port, remote_ip, remote_port) \
  wgnet_lwip_tcp_pcb_hash((local_ip), (local_port), (remote_ip), (remote_port))
/* What lwIP sends without a pcb bound to a netif while it handles an input packet (ICMP
 * errors such as port unreachable, ICMPv6 errors) leaves through the netif the packet came
 * in on: with several Stacks of the same addresses, the subnet match would pick the first
 * netif, another Stack's tunnel. Outside input the usual route (every pcb of ours is bound
 * to its Stack's netif, so that is only a fallback). */
#define LWIP_HOOK_IP4_ROUTE_SRC(src, dest) ip_current_input_netif()
#define LWIP_HOOK_IP6_ROUTE(src, dest)     ip_current_input_netif()

/* ---- Diagnostics: no statistics, no debug output; asserts stay ON. ----
 * Never define LWIP_NOASSERT: several of lwIP's size checks exist only as asserts. */
#define LWIP_STATS                      0
#define LWIP_STATS_DISPLAY              0
/* LWIP_DEBUG is deliberately not defined. */

/* <arpa/inet.h> owns htons() & co.; lwIP keeps to its lwip_ names. */
#define LWIP_DONT_PROVIDE_BYTEORDER_FUNCTIONS 1

#endif /* WGNET_LWIPOPTS_H */
