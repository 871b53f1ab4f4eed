/* The platform functions lwIP calls back into (arch/cc.h, wgnet_lwip_hooks.h):
 * diagnostics, asserts, randomness and RFC 6528 initial sequence numbers. */
#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>

#include <sodium.h>

#include "lwip/arch.h"
#include "lwip/opt.h"
#include "lwip/ip_addr.h"
#include "wgnet_lwip_hooks.h"

void wgnet_lwip_diag(const char *format, ...) {
  va_list args;
  va_start(args, format);
  vfprintf(stderr, format, args);
  va_end(args);
}

void wgnet_lwip_assert(const char *message, const char *file, int line) {
  fprintf(stderr, "lwIP assertion failed: \"%s\" at %s:%d\n", message, file, line);
  fflush(stderr);
  abort();
}

/* Fills buf from the kernel's CSPRNG. Randomness that silently degrades is worse than
 * none: abort if getrandom() is unavailable. */
static void random_bytes(void *buf, size_t len) {
  unsigned char *p = buf;
  while (len > 0) {
    ssize_t n = getrandom(p, len, 0);
    if (n < 0) {
      if (errno == EINTR) {
        continue;
      }
      fprintf(stderr, "lwIP: getrandom failed: %s\n", strerror(errno));
      abort();
    }
    p += n;
    len -= (size_t)n;
  }
}

__attribute__((weak)) u32_t wgnet_lwip_now_us(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (u32_t)((uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u);
}

__attribute__((weak)) u32_t wgnet_lwip_slow_ticks(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (u32_t)(((uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u) / (2u * TCP_TMR_INTERVAL)); /* TCP_SLOW_INTERVAL */
}

__attribute__((weak)) void wgnet_lwip_timeout_first(void) {}

uint32_t wgnet_lwip_rand(void) {
  uint32_t r;
  random_bytes(&r, sizeof r);
  return r;
}

/* ---- RFC 6528: ISN = M + F(localip, localport, remoteip, remoteport, secretkey) ----
 * M is a 4 us clock (it wraps every ~4.8 hours, as the RFC allows); F is SipHash-2-4
 * (libsodium's crypto_shorthash), keyed once per process. A given 4-tuple thus sees
 * ISNs that keep growing with time (old duplicates stay out of the new window), while
 * another tuple's ISN says nothing about it. */

static unsigned char isn_key[crypto_shorthash_KEYBYTES];
/* The key of the active pcbs' hash table (patch 0013): another, so that a bucket says
   nothing about an ISN. */
static unsigned char pcb_hash_key[crypto_shorthash_KEYBYTES];
static pthread_once_t isn_key_once = PTHREAD_ONCE_INIT;

static void isn_key_init(void) {
  if (sodium_init() < 0) {
    fprintf(stderr, "lwIP: sodium_init failed\n");
    abort();
  }
  random_bytes(isn_key, sizeof isn_key);
  random_bytes(pcb_hash_key, sizeof pcb_hash_key);
}

/* Appends an address as a family byte and its 4 or 16 bytes in network order. */
static size_t put_addr(unsigned char *out, const ip_addr_t *addr) {
  if (IP_IS_V6(addr)) {
    out[0] = 6;
    memcpy(out + 1, ip_2_ip6(addr)->addr, 16);
    return 17;
  }
  out[0] = 4;
  memcpy(out + 1, &ip_2_ip4(addr)->addr, 4);
  return 5;
}

static size_t put_port(unsigned char *out, u16_t port) {
  out[0] = (unsigned char)(port >> 8);
  out[1] = (unsigned char)port;
  return 2;
}

/* SipHash-2-4 of the 4-tuple under key, its first 4 bytes. */
static u32_t tuple_hash(const ip_addr_t *local_ip, u16_t local_port, const ip_addr_t *remote_ip,
                        u16_t remote_port, const unsigned char *key) {
  unsigned char tuple[2 * 17 + 2 * 2];
  size_t len = 0;
  len += put_addr(tuple + len, local_ip);
  len += put_port(tuple + len, local_port);
  len += put_addr(tuple + len, remote_ip);
  len += put_port(tuple + len, remote_port);

  unsigned char hash[crypto_shorthash_BYTES];
  crypto_shorthash(hash, tuple, len, key);
  u32_t f;
  memcpy(&f, hash, sizeof f);
  return f;
}

u32_t wgnet_lwip_tcp_pcb_hash(const ip_addr_t *local_ip, u16_t local_port,
                              const ip_addr_t *remote_ip, u16_t remote_port) {
  pthread_once(&isn_key_once, isn_key_init);
  return tuple_hash(local_ip, local_port, remote_ip, remote_port, pcb_hash_key);
}

u32_t wgnet_lwip_tcp_isn(const ip_addr_t *local_ip, u16_t local_port,
                         const ip_addr_t *remote_ip, u16_t remote_port) {
  pthread_once(&isn_key_once, isn_key_init);
  const u32_t f = tuple_hash(local_ip, local_port, remote_ip, remote_port, isn_key);

  struct timespec now;
  clock_gettime(CLOCK_MONOTONIC, &now);
  u32_t m = (u32_t)(((uint64_t)now.tv_sec * 1000000000u + (uint64_t)now.tv_nsec) / 4000u);
  return m + f;
}
