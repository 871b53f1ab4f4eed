/* lwIP platform port for Linux (glibc, 64-bit): byte order, diagnostics, asserts that
 * abort, and randomness from getrandom(). The functions live in glue.c. */
#ifndef WGNET_LWIP_ARCH_CC_H
#define WGNET_LWIP_ARCH_CC_H

#include <endian.h> /* BYTE_ORDER, LITTLE_ENDIAN, BIG_ENDIAN */
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* printf-style diagnostics to stderr (only LWIP_DEBUG and stats displays use it). */
void wgnet_lwip_diag(const char *format, ...) __attribute__((format(printf, 1, 2)));
/* Prints "lwIP assertion failed" with the message and location, then aborts. */
void wgnet_lwip_assert(const char *message, const char *file, int line) __attribute__((noreturn));
/* 32 random bits from getrandom(); aborts if the kernel cannot provide them. */
uint32_t wgnet_lwip_rand(void);

#ifdef __cplusplus
}
#endif

#define LWIP_PLATFORM_DIAG(x)   do { wgnet_lwip_diag x; } while (0)
#define LWIP_PLATFORM_ASSERT(x) wgnet_lwip_assert((x), __FILE__, __LINE__)
#define LWIP_RAND()             wgnet_lwip_rand()

/* Byte swaps as compiler builtins instead of def.c's portable functions. */
#if BYTE_ORDER == LITTLE_ENDIAN
#define lwip_htons(x) ((u16_t)__builtin_bswap16((u16_t)(x)))
#define lwip_htonl(x) ((u32_t)__builtin_bswap32((u32_t)(x)))
#endif

#endif /* WGNET_LWIP_ARCH_CC_H */
