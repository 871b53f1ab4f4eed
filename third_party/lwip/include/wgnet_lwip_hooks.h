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

/* TCP_CLOCK_US(): CLOCK_MONOTONIC in microseconds, wrapping at 2^32 (patch 0005: per-
 * segment transmit times for RACK). Weak: a test with a fake clock defines its own. */
u32_t wgnet_lwip_now_us(void);

#ifdef __cplusplus
}
#endif

#endif /* WGNET_LWIP_HOOKS_H */
