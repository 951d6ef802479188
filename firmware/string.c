/* memcpy / memmove / memset for the firmware, a word at a time when the
 * pointers allow it.
 *
 * They replace picolibc's size-optimised byte loops (the linker takes the
 * firmware's definitions before the library's): on the VexRiscv every store
 * goes through the write-through data cache to the bus, so a byte loop costs
 * ~10 cycles per byte, and the firmware copies descriptors, completions, OOB
 * records and recovery's page entries all the time (LiteX builds with
 * -fno-builtin, so even a 4-byte memcpy is a call).  Measured: 28-byte
 * memcpy 305 -> see docs/firmware.md. */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

/* gcc must not turn these loops back into calls to themselves */
#define NO_LIBCALL __attribute__((optimize("no-tree-loop-distribute-patterns")))

NO_LIBCALL void *memcpy(void *restrict dst, const void *restrict src, size_t n)
{
	uint8_t *d = dst;
	const uint8_t *s = src;
	if ((((uintptr_t)d | (uintptr_t)s) & 3) == 0) {
		for (; n >= 16; n -= 16, d += 16, s += 16) {
			uint32_t a = ((const uint32_t *)s)[0], b = ((const uint32_t *)s)[1];
			uint32_t c = ((const uint32_t *)s)[2], e = ((const uint32_t *)s)[3];
			((uint32_t *)d)[0] = a;
			((uint32_t *)d)[1] = b;
			((uint32_t *)d)[2] = c;
			((uint32_t *)d)[3] = e;
		}
		for (; n >= 4; n -= 4, d += 4, s += 4)
			*(uint32_t *)d = *(const uint32_t *)s;
	}
	while (n--)
		*d++ = *s++;
	return dst;
}

NO_LIBCALL void *memmove(void *dst, const void *src, size_t n)
{
	uint8_t *d = dst;
	const uint8_t *s = src;
	if (d <= s || d >= s + n)
		return memcpy(dst, src, n); /* forward copy is safe */
	d += n;
	s += n;
	if ((((uintptr_t)d | (uintptr_t)s) & 3) == 0) {
		for (; n >= 4; n -= 4) {
			d -= 4;
			s -= 4;
			*(uint32_t *)d = *(const uint32_t *)s;
		}
	}
	while (n--)
		*--d = *--s;
	return dst;
}

NO_LIBCALL void *memset(void *dst, int c, size_t n)
{
	uint8_t *d = dst;
	while (n && ((uintptr_t)d & 3)) {
		*d++ = (uint8_t)c;
		n--;
	}
	uint32_t w = (uint8_t)c * 0x01010101u;
	for (; n >= 4; n -= 4, d += 4)
		*(uint32_t *)d = w;
	while (n--)
		*d++ = (uint8_t)c;
	return dst;
}
