/* atomflash firmware entry: bring-up report, then the console.
 *
 * Boot order (issue #7; what exists today is marked):
 *   [now]   UART, IRQs, timer; find the controller block, read IDENTIFY
 *   [now]   NAND reset, READ ID, parameter page, timing mode -> factory
 *           bad-block scan -> recovery over every page's OOB (no checkpoint
 *           on flash yet) -> boot report (flash.c)
 *   [now]   erased blocks to the FTL core, its tables and IDENTIFY record,
 *           host interface enabled (ftl.c)
 *   [later] newest checkpoint instead of the full scan, GC
 */
#include <stdio.h>

#include <irq.h>
#include <libbase/uart.h>

#include "ckpt.h"
#include "console.h"
#include "flash.h"
#include "ftl.h"
#include "gc.h"
#include "fw.h"

uint64_t af_boot_cycles;

static void boot_report(void)
{
	printf("\n\e[1matomflash firmware %d.%d\e[0m (spec %u, %s)\n", AF_FW_VERSION_MAJOR,
	       AF_FW_VERSION_MINOR, (unsigned)AF_SPEC_VERSION, CONFIG_IDENTIFIER);
	printf("sys clock %lu Hz, main RAM %lu KiB at 0x%08lx\n",
	       (unsigned long)CONFIG_CLOCK_FREQUENCY, (unsigned long)(MAIN_RAM_SIZE / 1024),
	       (unsigned long)MAIN_RAM_BASE);
#ifdef AFCTRL_FTL
	if (!af_ftl_probe()) {
		printf("controller: no FTL core at 0x%08lx (id 0x%08lx)\n", (unsigned long)AFCTRL_BASE,
		       (unsigned long)afctrl_read(AFCTRL_FTL_OFFSET + AF_FTL_ID));
		return;
	}
	printf("controller: FTL core (spec %lu) at 0x%08lx: %lu channels x %lu ways, %lu host queue pairs\n",
	       (unsigned long)afctrl_read(AFCTRL_FTL_OFFSET + AF_FTL_VERSION), (unsigned long)AFCTRL_BASE,
	       (unsigned long)af_ftl.channels, (unsigned long)af_ftl.ways, (unsigned long)af_ftl.queue_pairs);
#else
	if (!afctrl_present()) {
		printf("controller: none at 0x%08lx (id 0x%08lx)\n", (unsigned long)AFCTRL_BASE,
		       (unsigned long)afctrl_read(AFCTRL_REG_ID));
		return;
	}
	uint32_t v = afctrl_read(AFCTRL_REG_VERSION);
	printf("controller: block v%lu.%lu at 0x%08lx (identify placeholder: no host interface)\n",
	       (unsigned long)(v >> 16), (unsigned long)(v & 0xffff), (unsigned long)AFCTRL_BASE);
#endif
}

void af_idle(void)
{
	af_ftl_poll();
	af_ckpt_poll();
	af_gc_poll();
}

int main(void)
{
	irq_setmask(0);
	irq_setie(1);
	uart_init();

	boot_report();
	if (af_flash_boot() == 0 && af_ftl.present)
		af_ftl_start();
	af_boot_cycles = af_uptime_cycles();
	uint64_t us = af_cycles_to_us(af_boot_cycles);
	printf("boot: ");
	af_print_u64(af_boot_cycles);
	printf(" cycles (");
	af_print_u64(us / 1000);
	printf(".%03lu ms simulated). Type 'help'.\n", (unsigned long)(us % 1000));

	af_console_run();
	return 0;
}
