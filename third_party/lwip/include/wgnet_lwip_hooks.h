/* lwIP hook functions (named by LWIP_HOOK_FILENAME in lwipopts.h, included by lwIP's
 * core after its own headers) and implemented in glue.c. */
#ifndef WGNET_LWIP_HOOKS_H
#define WGNET_LWIP_HOOKS_H

#include "lwip/arch.h"
#include "lwip/ip_addr.h"

#ifdef __cplusplus
extern "C" {
#endif

/* RFC 6528 initial sequence number: a 4-microsecond clock plus SipHash-2-4 of the
 * 4-tuple under a per-process random key. Ports are in host byte order, as lwIP keeps
 * them. Thread-safe; the key is drawn once, on first use. */
u32_t wgnet_lwip_tcp_isn(const ip_addr_t *local_ip, u16_t local_port,
                         const ip_addr_t *remote_ip, u16_t remote_port);

/* LWIP_HOOK_TCP_PCB_HASH (patch 0013): SipHash-2-4 of the 4-tuple under another
 * per-process key, for the active pcbs' hash table; a remote cannot aim its tuples at
 * one bucket. */
u32_t wgnet_lwip_tcp_pcb_hash(const ip_addr_t *local_ip, u16_t local_port,
                              const ip_addr_t *remote_ip, u16_t remote_port);

/* TCP_CLOCK_US(): CLOCK_MONOTONIC in microseconds, wrapping at 2^32 (patch 0005: per-
 * segment transmit times for RACK). Weak: a test with a fake clock defines its own. */
u32_t wgnet_lwip_now_us(void);

/* TCP_TICKS_NOW(): CLOCK_MONOTONIC in TCP slow ticks (patch 0012). Weak, as above. */
u32_t wgnet_lwip_slow_ticks(void);

/* LWIP_HOOK_TIMEOUT_FIRST(): a timeout now comes first; whoever runs lwIP's timers
 * re-arms its wait. Weak no-op in glue.c for programs that poll. */
void wgnet_lwip_timeout_first(void);

#ifdef __cplusplus
}
#endif

#endif /* WGNET_LWIP_HOOKS_H */
