/* atomflash firmware: shared declarations. */
#ifndef AF_FW_H
#define AF_FW_H

#include <stdint.h>

#include <generated/csr.h>
#include <generated/mem.h>
#include <generated/soc.h>

#include "atomflash_spec.h"

#include <system.h>

/* Before reading what another bus master (the FTL core, a NAND DMA) wrote to main RAM: the data cache
 * is invalidated, and the compiler keeps loads and stores on their side of it (LiteX's
 * flush_cpu_dcache() has no memory clobber). */
static inline void af_dcache_invalidate(void)
{
	__asm__ volatile("" ::: "memory");
	flush_cpu_dcache();
	__asm__ volatile("" ::: "memory");
}

/* The FTL core's window holds the NAND window too (soc/ftl_bridge.py). */
#if defined(AFCTRL_FTL) && !defined(AFNAND_BASE)
#define AFNAND_BASE (AFCTRL_BASE + AFCTRL_NAND_OFFSET)
#endif

/* The firmware's own version (reported in IDENTIFY.fw_version by the real
 * controller path): major << 16 | minor. */
#define AF_FW_VERSION_MAJOR 0
#define AF_FW_VERSION_MINOR 1
#define AF_FW_VERSION ((AF_FW_VERSION_MAJOR << 16) | AF_FW_VERSION_MINOR)

/* --- time (timer0 uptime counter, sys clock cycles) ------------------------ */
uint64_t af_uptime_cycles(void);
/* cycles -> microseconds at CONFIG_CLOCK_FREQUENCY */
uint64_t af_cycles_to_us(uint64_t cycles);

/* --- controller core (AFCTRL_BASE window; offsets AFCTRL_REG_* from soc.h) - */
static inline uint32_t afctrl_read(uint32_t off)
{
	return *(volatile uint32_t *)(AFCTRL_BASE + off);
}
static inline void afctrl_write(uint32_t off, uint32_t v)
{
	*(volatile uint32_t *)(AFCTRL_BASE + off) = v;
}
/* Is the controller block there and the one we expect (the FTL core, or in
 * builds without NAND the identify placeholder)? */
int afctrl_present(void);
#ifndef AFCTRL_FTL
/* --- the identify placeholder (soc/placeholder.py; AFCTRL_REG_* in soc.h) --- */
static inline int afctrl_has(unsigned cap_bit)
{
	return (afctrl_read(AFCTRL_REG_CAPS) >> cap_bit) & 1;
}
/* Copy the IDENTIFY record out of the block's register window. */
void afctrl_identify_mmio(af_identify_t *out);
/* Have the block DMA the IDENTIFY record to `dst` (in main RAM, 4-byte
 * aligned); polls for completion.  0 on success, -1 on error/timeout. */
int afctrl_identify_dma(void *dst);
#endif

/* --- main RAM: a bump allocator for the firmware's tables (hw.c) ------------
 * From MAIN_RAM_BASE up to the scratch window `selftest` uses at the top. */
void af_ram_reset(void);
void *af_ram_alloc(uint32_t bytes, uint32_t align); /* NULL when it does not fit */
void af_ram_release(void *p);  /* free p and everything allocated after it */
uint32_t af_ram_used(void);
uint32_t af_ram_free(void);
#define AF_RAM_SCRATCH_BYTES 8192u /* top of main RAM: selftest's pattern and DMA target */

/* boot time in cycles: the uptime when the console started (main.c sets it) */
extern uint64_t af_boot_cycles;

#endif
