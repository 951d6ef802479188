/* Hardware access: timer uptime and the controller core's window. */
#include <string.h>

#include <system.h>

#include <generated/csr.h>

#include "conout.h"
#include "fw.h"

uint64_t af_boot_cycles;

uint64_t af_uptime_cycles(void)
{
	timer0_uptime_latch_write(1);
	return timer0_uptime_cycles_read();
}

/* Every uart_write() of libbase (printf, putchar) comes here (the Makefile
 * links with --wrap=uart_write).  With a crossover console (a board whose
 * UART carries the host port) a character waits at most
 * AF_CONSOLE_STALL_CYCLES for room, then output is dropped until a reader
 * drains the FIFO (conout.h); elsewhere it is libbase's own. */
void __real_uart_write(char c);
void __wrap_uart_write(char c);
#ifdef CSR_UART_XOVER_RXTX_ADDR
#define AF_CONSOLE_STALL_CYCLES (CONFIG_CLOCK_FREQUENCY / 100u) /* 10 ms */
af_conout_t af_conout;

static int console_full(void)
{
	return uart_txfull_read();
}

void __wrap_uart_write(char c)
{
	if (af_conout_admit(&af_conout, console_full, af_uptime_cycles, AF_CONSOLE_STALL_CYCLES))
		__real_uart_write(c);
}
#else
void __wrap_uart_write(char c)
{
	__real_uart_write(c);
}
#endif

uint64_t af_cycles_to_us(uint64_t cycles)
{
	return cycles / (CONFIG_CLOCK_FREQUENCY / 1000000u);
}

#ifdef AFCTRL_FTL
int afctrl_present(void)
{
	return afctrl_read(AFCTRL_FTL_OFFSET + AF_FTL_ID) == AF_FTL_REGS_ID;
}
#else
int afctrl_present(void)
{
	return afctrl_read(AFCTRL_REG_ID) == AFCTRL_BLOCK_ID;
}

void afctrl_identify_mmio(af_identify_t *out)
{
	uint8_t *p = (uint8_t *)out;
	for (unsigned i = 0; i < sizeof(*out) / 4; i++) {
		uint32_t w = afctrl_read(AFCTRL_REG_IDENTIFY + 4 * i);
		memcpy(p + 4 * i, &w, 4);
	}
}

int afctrl_identify_dma(void *dst)
{
	if (!afctrl_has(AFCTRL_CAP_DMA) || ((uintptr_t)dst & 3))
		return -1;
	afctrl_write(AFCTRL_REG_DMA_ADDR, (uint32_t)(uintptr_t)dst);
	afctrl_write(AFCTRL_REG_DMA_CTRL, 1u << AFCTRL_DMA_START);
	for (unsigned spin = 0; spin < 100000; spin++) {
		uint32_t s = afctrl_read(AFCTRL_REG_DMA_CTRL);
		if (s & (1u << AFCTRL_DMA_BUSY))
			continue;
		if (s & (1u << AFCTRL_DMA_ERROR))
			return -1;
		if (s & (1u << AFCTRL_DMA_DONE)) {
			/* The DMA wrote main RAM behind the data cache. */
			af_dcache_invalidate();
			flush_l2_cache();
			return 0;
		}
	}
	return -1;
}

#endif /* AFCTRL_FTL */

/* --- main RAM allocator ------------------------------------------------------ */

static uintptr_t ram_next = MAIN_RAM_BASE;
#define RAM_END ((uintptr_t)MAIN_RAM_BASE + MAIN_RAM_SIZE - AF_RAM_SCRATCH_BYTES)

void af_ram_reset(void)
{
	ram_next = MAIN_RAM_BASE;
}

void *af_ram_alloc(uint32_t bytes, uint32_t align)
{
	uintptr_t p = (ram_next + align - 1) & ~(uintptr_t)(align - 1);
	if (p > RAM_END || bytes > RAM_END - p)
		return NULL;
	ram_next = p + bytes;
	return (void *)p;
}

void af_ram_release(void *p)
{
	if ((uintptr_t)p >= MAIN_RAM_BASE && (uintptr_t)p <= ram_next)
		ram_next = (uintptr_t)p;
}

uint32_t af_ram_used(void)
{
	return (uint32_t)(ram_next - MAIN_RAM_BASE);
}

uint32_t af_ram_free(void)
{
	return ram_next < RAM_END ? (uint32_t)(RAM_END - ram_next) : 0;
}
