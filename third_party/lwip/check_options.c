/* Compile-time guard: the build fails if lwipopts.h loses an option wgnet relies on
 * (see lwipopts.h and /work/shared/PITFALLS.md for why each one matters). */
#include "lwip/opt.h"

#if !NO_SYS
#error "wgnet drives lwIP from one loop: NO_SYS must be 1"
#endif
#if !LWIP_TCP_SACK_OUT
#error "wgnet needs LWIP_TCP_SACK_OUT=1 (selective acknowledgements)"
#endif
#if !LWIP_WND_SCALE
#error "wgnet needs LWIP_WND_SCALE=1 (multi-megabyte TCP windows)"
#endif
#if TCP_WND <= 0xffff
#error "wgnet expects a TCP_WND above 64 KiB (window scaling in use)"
#endif
#if !LWIP_TCP_RTO_FINE || TCP_RTO_MIN_MS > 250 || TCP_TMR_INTERVAL > 25
#error "wgnet needs patch 0001's RFC 6298 timer (LWIP_TCP_RTO_FINE=1) on short ticks"
#endif
#if !LWIP_TCP_SACK_IN
#error "wgnet needs patch 0002's sender-side SACK and loss recovery (LWIP_TCP_SACK_IN=1)"
#endif
#if !LWIP_TCP_TLP
#error "wgnet needs patch 0003's tail loss probe (LWIP_TCP_TLP=1)"
#endif
#if !LWIP_TCP_CUBIC || !LWIP_TCP_PRR
#error "wgnet needs patch 0004's CUBIC and proportional rate reduction (LWIP_TCP_CUBIC=1, LWIP_TCP_PRR=1)"
#endif
#ifndef TCP_RACK_MIN_REO_US
#error "wgnet needs patch 0005's microsecond clock for RACK (TCP_CLOCK_US)"
#endif
#if !LWIP_TCP_SACK_OUT_DATA
#error "wgnet needs patch 0006's SACK blocks on data segments (LWIP_TCP_SACK_OUT_DATA=1)"
#endif
#if !LWIP_TCP_OOSEQ_LINEAR
#error "wgnet needs patch 0008's linear out-of-order queue (LWIP_TCP_OOSEQ_LINEAR=1)"
#endif
#if !LWIP_TCP_INPUT_BATCH
#error "wgnet needs patch 0009's batched ACKs (LWIP_TCP_INPUT_BATCH=1)"
#endif
#if !LWIP_TCP_BBR
#error "wgnet needs patch 0010's BBR congestion control (LWIP_TCP_BBR=1)"
#endif
#if !LWIP_TCP_ARMED_TIMERS || !defined TCP_TICKS_NOW || !defined LWIP_HOOK_TIMEOUT_FIRST
#error "wgnet needs patch 0012's timers that visit only connections with work (LWIP_TCP_ARMED_TIMERS=1, TCP_TICKS_NOW, LWIP_HOOK_TIMEOUT_FIRST)"
#endif
#if !LWIP_IDLE_CYCLIC_TIMERS
#error "wgnet needs patch 0014's cyclic timers that stop while idle (LWIP_IDLE_CYCLIC_TIMERS=1)"
#endif
#if !LWIP_TCP_PCB_HASH || !defined LWIP_HOOK_TCP_PCB_HASH
#error "wgnet needs patch 0013's hashed demultiplexing (LWIP_TCP_PCB_HASH=1, LWIP_HOOK_TCP_PCB_HASH)"
#endif
#ifndef LWIP_HOOK_TCP_ISN
#error "wgnet needs LWIP_HOOK_TCP_ISN (RFC 6528 initial sequence numbers)"
#endif
#if !TCP_QUEUE_OOSEQ || !TCP_OOSEQ_MAX_BYTES || !TCP_OOSEQ_MAX_PBUFS
#error "wgnet needs a bounded out-of-order queue (TCP_QUEUE_OOSEQ, TCP_OOSEQ_MAX_*)"
#endif
#ifdef LWIP_NOASSERT
#error "keep lwIP's asserts on: some size checks (IPv6 reassembly) exist only as asserts"
#endif
#if LWIP_IPV6 && LWIP_IPV6_REASS && !IPV6_FRAG_COPYHEADER && UINTPTR_MAX > 0xffffffffu
#error "64-bit IPv6 reassembly needs IPV6_FRAG_COPYHEADER=1"
#endif
#if PBUF_LINK_HLEN != 0 || (PBUF_LINK_ENCAPSULATION_HLEN % 4) != 0
#error "no link header on the tunnel: PBUF_LINK_HLEN 0, encapsulation headroom a multiple of 4"
#endif

#if !MEM_LIBC_MALLOC || !MEMP_MEM_MALLOC || LWIP_STATS || MEM_USE_POOLS
#error "netstack/stack.cpp allocates inbound pbufs on WireGuard's thread: that needs malloc-backed memory (MEM_LIBC_MALLOC=1, MEMP_MEM_MALLOC=1, MEM_USE_POOLS=0) and LWIP_STATS=0"
#endif

/* ISO C wants at least one declaration per translation unit. */
typedef int wgnet_lwip_options_checked;
