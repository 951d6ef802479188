/* atomflash firmware entry: bring-up report, then the console.
 *
 * Boot order:
 *   UART, IRQs, timer (a board's SDRAM initialised and tested); find the
 *   controller block, read IDENTIFY
 *   -> NAND reset, READ ID, parameter page, timing mode -> bad blocks -> the
 *      newest checkpoint and recovery over the pages written since
 *      -> boot report (mount.c)
 *   -> erased blocks to the FTL core, its tables and IDENTIFY record,
 *      host interface enabled (ftl.c)
 *   -> the console; its idle loop (idle(), below) runs the FTL core's upkeep,
 *      checkpoints and GC.
 */
#include <stdio.h>
#include <string.h>

#include <irq.h>
#include <libbase/uart.h>

#ifdef CSR_SDRAM_BASE
#include <liblitedram/sdram.h>
#endif

#include "anchor.h"
#include "ckpt.h"
#include "ckpt_take.h"
#include "console.h"
#include "flash.h"
#include "ftl.h"
#include "nand.h"
#include "gc.h"
#include "fw.h"
#include "mount.h"
#include "nvme.h"
#include "wear.h"

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
	printf("controller: FTL core (spec %lu) at 0x%08lx: %lu channels x %lu ways, %lu host queue pairs "
	       "(+ the firmware's)\n",
	       (unsigned long)afctrl_read(AFCTRL_FTL_OFFSET + AF_FTL_VERSION), (unsigned long)AFCTRL_BASE,
	       (unsigned long)af_ftl.channels, (unsigned long)af_ftl.ways, (unsigned long)(af_ftl.queue_pairs - 1));
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

#ifdef AFCTRL_FTL
/* The GET_LOG page (spec.LOG_PAGE): the counters a host reads with GET_LOG,
 * refreshed at most every LOG_REFRESH_CYCLES while idle (the core copies it
 * from main RAM; VexRiscv's data cache writes through).  uptime_cycles goes
 * last, behind a fence: the core may copy the page mid-refresh, and a host
 * waiting for uptime to move (Device.stats(fresh=True)) must then see every
 * other field of that refresh, not the one before. */
#define LOG_REFRESH_CYCLES 20000u
static void refresh_log(void)
{
	static uint64_t last;
	uint64_t now = af_uptime_cycles();
	if (!af_ftl.running || !af_ftl.log || now - last < LOG_REFRESH_CYCLES)
		return;
	last = now;
	af_log_page_t *l = af_ftl.log;
	l->boot_cycles = af_boot_cycles;
	l->log_pages = af_ftl_seq_next() - af_ftl.start_seq;
	l->boot_scan_cycles = af_flash.t_scan + af_flash.t_finish;
	l->ckpt_seq = af_ckpt.valid ? af_ckpt.seq : 0;
	l->clk_hz = CONFIG_CLOCK_FREQUENCY;
	l->ckpt_pages = af_ckpt.pages_written;
	l->checkpoints = af_ckpt.taken;
	l->erases = af_flash.erased_since_boot;
	l->gc_victims = af_gc.victims;
	l->gc_copies = af_gc.copies;
	l->wear_copies = af_wear.copies;
	l->bad_blocks = af_flash.bad_blocks;
	l->free_blocks = af_ftl.free_blocks;
	l->map_hits = ftl_rd(AF_FTL_MAP_HITS);
	l->map_misses = ftl_rd(AF_FTL_MAP_MISSES);
	l->boot_pages_scanned = af_flash.report.pages_scanned;
	l->boot_groups_discarded = af_flash.report.groups_discarded;
	l->boot_tx_discarded = af_flash.report.tx_discarded;
	l->boot_remaps_discarded = af_flash.report.remaps_discarded;
	l->boot_lost = af_flash.lost;
	l->host_read_pages = ftl_rd(AF_FTL_HOST_READ_PAGES);
	l->host_write_pages = ftl_rd(AF_FTL_HOST_WRITE_PAGES) - ftl_rd(AF_FTL_CACHE_DESTAGED) + ftl_rd(AF_FTL_CACHE_IN);
	l->record_pages = ftl_rd(AF_FTL_RECORD_PAGES);
	l->nand_reads = ftl_rd(AF_FTL_NAND_READS);
	l->nand_programs = ftl_rd(AF_FTL_NAND_PROGRAMS);
	l->nand_erases = ftl_rd(AF_FTL_NAND_ERASES);
	l->pad_pages = ftl_rd(AF_FTL_PAD_PAGES);
	l->bits_per_cell = af_nand.bits_per_cell;
	l->no_space = af_ftl.no_space;
	l->spare_blocks = af_ftl.spare_blocks;
	__sync_synchronize();
	l->uptime_cycles = now;
}
#else
static void refresh_log(void) {}
#endif

#ifdef AFCTRL_NVME
/* The NVMe controller's admin path (nvme.c) and what the FTL does for it: a flush (and a checkpoint
 * at a shutdown) through the firmware's queue pair, atomflash's log pages through the core's GET_LOG.
 * Its staging areas and its scratch page come out of main RAM once the core runs. */
static int shutdown_clean; /* af_anchor_shutdown wrote the newest record since the host's last CC.SHN */

static void nvme_flush(int checkpoint)
{
	af_cmd_t cmd;
	memset(&cmd, 0, sizeof(cmd));
	cmd.opcode = AF_OPCODE_FLUSH;
	if (af_ftl_io(&cmd, NULL) != AF_STATUS_SUCCESS)
		printf("nvme: FLUSH through the firmware's queue failed\n");
	if (!checkpoint)
		return;
	if (af_ckpt_take() < 0)
		printf("nvme: the shutdown's checkpoint failed\n");
	else if (af_anchor_shutdown() == 0) /* the next boot counts no unsafe shutdown (SMART) */
		shutdown_clean = 1;
}

/* A shutdown's record stays the newest only while the drive stays shut down: once the host enables the
 * controller without CC.SHN again (after its reset), a record without ANCHOR.FLAG_SHUTDOWN_CLEAN makes
 * the next power loss an unsafe shutdown again. */
static void nvme_shutdown_watch(void)
{
	uint32_t cc = af_nvme.cc;
	if (!shutdown_clean || !(cc & AF_NVME_CC_EN) ||
	    (cc & AF_NVME_CC_SHN) >> AF_NVME_CC_SHN_SHIFT != AF_NVME_FIELD_SHN_NONE)
		return;
	shutdown_clean = 0;
	if (af_anchor.flags & AF_ANCHOR_FLAG_SHUTDOWN_CLEAN)
		af_anchor_write(af_anchor.mode == AF_PLAN_NONE ? AF_ANCHOR_FLAG_NO_PLAN : 0);
}

/* Identify Namespace's NUSE: the pages the core's block table counts valid (every bound LBA's
 * version, and appended pages not remapped yet), at most the capacity. */
static uint64_t nvme_blocks_in_use(void)
{
	uint64_t n = 0;
	af_dcache_invalidate(); /* the block table is written by the core */
	for (uint32_t i = 0; i < af_ftl.dies << af_ftl.block_shift; i++)
		n += af_ftl.bt[i];
	return n < af_ftl.capacity ? n : af_ftl.capacity;
}

static int32_t nvme_vendor_log(uint32_t lid, void *page, uint32_t bytes)
{
	const af_identify_t *id = af_ftl.identify;
	uint32_t len = lid == AF_NVMELOGPAGE_ATOMFLASH_OPEN
		? id->max_open_tx * (uint32_t)sizeof(af_open_tx_t) + id->max_appends * (uint32_t)sizeof(af_open_append_t)
		: (uint32_t)sizeof(af_log_page_t);
	if (len > bytes)
		return -1;
	af_cmd_t cmd;
	memset(&cmd, 0, sizeof(cmd));
	cmd.opcode = AF_OPCODE_GET_LOG;
	cmd.log_page = lid == AF_NVMELOGPAGE_ATOMFLASH_OPEN ? AF_LOGPAGE_OPEN : AF_LOGPAGE_STATS;
	cmd.buf = (uintptr_t)page;
	if (af_ftl_io(&cmd, NULL) != AF_STATUS_SUCCESS)
		return -1;
	af_dcache_invalidate(); /* the core wrote the page */
	return (int32_t)len;
}

static void nvme_start(void)
{
	static af_nvme_config_t cfg;
	void *staging = af_ram_alloc(AFCTRL_NVME_STAGING_BYTES, 4096);
	void *scratch = af_ram_alloc(AF_NVME_SCRATCH_BYTES, 4096);
	if (!staging || !scratch) {
		printf("nvme: main RAM too small for the staging areas (%lu bytes)\n",
		       (unsigned long)AFCTRL_NVME_STAGING_BYTES);
		return;
	}
	cfg.identify = af_ftl.identify;
	cfg.scratch = scratch;
	cfg.scratch_addr = (uint32_t)(uintptr_t)scratch;
	cfg.staging_base = (uint32_t)(uintptr_t)staging;
	cfg.io_queues = AFCTRL_NVME_QUEUES;
	cfg.mqes = AF_NVME_MQES;
	cfg.volatile_cache = af_ftl.cache_pages != 0;
	cfg.serial = "AF0001";
	cfg.power_cycles = af_anchor.power_cycles; /* this boot's, counted from the anchor's newest record */
	cfg.unsafe_shutdowns = af_anchor.unsafe_shutdowns;
	cfg.hooks.flush = nvme_flush;
	cfg.hooks.vendor_log = nvme_vendor_log;
	cfg.hooks.percentage_used = af_wear_percentage_used;
	cfg.hooks.blocks_in_use = nvme_blocks_in_use;
	if (af_nvme_start(&cfg) == 0)
		printf("nvme: controller ready for a host (%lu I/O queues)\n", (unsigned long)AFCTRL_NVME_QUEUES);
}
#endif

/* The console's idle hook: what runs while nobody types. */
static void idle(void)
{
	af_ftl_poll();
	af_ckpt_poll();
	af_gc_poll();
	refresh_log();
#ifdef AFCTRL_NVME
	af_nvme_poll();
	nvme_shutdown_watch();
#endif
}

int main(void)
{
	irq_setmask(0);
	irq_setie(1);
	uart_init();

	int main_ram_ok = 1;
#ifdef CSR_SDRAM_BASE
	/* A board's SDRAM (LiteX's BIOS would do this; the firmware is the
	 * ROM): initialise and test it before the tables move in. */
	main_ram_ok = sdram_init();
#endif
	boot_report();
	if (!main_ram_ok)
		printf("main RAM (SDRAM) failed its test: the flash stays down (its tables live there)\n");
	else if (af_mount() == 0 && af_ftl.present && af_ftl_start() == 0) {
		af_gc_boot();
#ifdef AFCTRL_NVME
		nvme_start();
#endif
	}
	af_boot_cycles = af_uptime_cycles();
	uint64_t us = af_cycles_to_us(af_boot_cycles);
	printf("boot: ");
	af_print_u64(af_boot_cycles);
	printf(" cycles (");
	af_print_u64(us / 1000);
	printf(".%03lu ms simulated). Type 'help'.\n", (unsigned long)(us % 1000));

	af_console_run(idle);
	return 0;
}
