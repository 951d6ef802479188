/* System commands: info, stats, selftest, reboot, exit. */
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include <system.h>

#include "anchor.h"
#include "console.h"
#include "flash.h"
#include "ftl.h"
#include "fw.h"
#include "gc.h"
#include "wear.h"
#include "nand.h"

/* IDENTIFY fields printed by `info`: names are the generated struct's member
 * names (stringified), offsets and sizes come from the struct itself. */
#define IDF(f) { #f, offsetof(af_identify_t, f), sizeof(((af_identify_t *)0)->f) }
static const struct { const char *name; unsigned off, size; } identify_fields[] = {
	IDF(magic), IDF(spec_version), IDF(fw_version), IDF(capacity), IDF(lba_size),
	IDF(max_transfer), IDF(max_atomic_pages), IDF(max_open_tx), IDF(max_pending),
	IDF(max_remap_triples), IDF(max_appends), IDF(awupf), IDF(volatile_cache), IDF(channels), IDF(ways),
	IDF(luns), IDF(page_data), IDF(page_spare), IDF(pages_per_block), IDF(blocks_per_lun),
	IDF(queue_depth), IDF(ecc_t), IDF(ecc_codeword),
};

static uint64_t field_value(const af_identify_t *idf, unsigned off, unsigned size)
{
	uint64_t v = 0;
	memcpy(&v, (const uint8_t *)idf + off, size); /* little-endian */
	return v;
}

static void print_identify(const af_identify_t *idf)
{
	for (unsigned i = 0; i < sizeof(identify_fields) / sizeof(identify_fields[0]); i++) {
		uint64_t v = field_value(idf, identify_fields[i].off, identify_fields[i].size);
		printf("  %-18s ", identify_fields[i].name);
		if (identify_fields[i].size == 8 && v > 0xffffffffu)
			af_print_hex64(v);
		else
			af_print_u64(v);
		if (identify_fields[i].off == offsetof(af_identify_t, magic))
			printf(v == AF_IDENTIFY_MAGIC ? " (ok)" : " (BAD: expected IDENTIFY_MAGIC)");
		if (identify_fields[i].off == offsetof(af_identify_t, spec_version) && v != AF_SPEC_VERSION)
			printf(" (firmware speaks spec %u)", (unsigned)AF_SPEC_VERSION);
		printf("\n");
	}
}

static int cmd_info(int argc, char **argv)
{
	if (argc != 1)
		return AF_EUSAGE;
	printf("firmware     %d.%d (fw_version 0x%08lx), spec %u\n", AF_FW_VERSION_MAJOR,
	       AF_FW_VERSION_MINOR, (unsigned long)AF_FW_VERSION, (unsigned)AF_SPEC_VERSION);
	printf("soc          %s\n", CONFIG_IDENTIFIER);
	printf("sys clock    %lu Hz\n", (unsigned long)CONFIG_CLOCK_FREQUENCY);
	printf("memory       rom 0x%08lx %lu KiB, sram 0x%08lx %lu KiB, main_ram 0x%08lx %lu KiB\n",
	       (unsigned long)ROM_BASE, (unsigned long)(ROM_SIZE / 1024), (unsigned long)SRAM_BASE,
	       (unsigned long)(SRAM_SIZE / 1024), (unsigned long)MAIN_RAM_BASE,
	       (unsigned long)(MAIN_RAM_SIZE / 1024));
	if (!afctrl_present()) {
		printf("error: no controller block at 0x%08lx\n", (unsigned long)AFCTRL_BASE);
		return AF_EFAIL;
	}
#ifdef AFCTRL_FTL
	af_ftl_print("controller   ");
	af_flash_print_geometry("nand         ");
	if (af_flash.scanned)
		printf("nand         %lu bad blocks, %lu of %lu LBAs bound at boot, main RAM tables %lu KiB (%lu KiB during recovery)\n",
		       (unsigned long)af_flash.bad_blocks, (unsigned long)af_flash.bound, (unsigned long)af_flash.nlba,
		       (unsigned long)(af_flash.ram_used / 1024), (unsigned long)(af_flash.ram_peak / 1024));
	printf("power        ");
	af_print_u64(af_anchor.power_cycles);
	printf(" power cycles, ");
	af_print_u64(af_anchor.unsafe_shutdowns);
	printf(" unsafe shutdowns%s\n", af_anchor.found ? "" : " (no anchor: not kept across power cycles)");
	if (!af_ftl.running) {
		printf("error: the FTL core is not running: no IDENTIFY record\n");
		return AF_EFAIL;
	}
	printf("identify (the record IDENTIFY returns, at 0x%08lx):\n", (unsigned long)(uintptr_t)af_ftl.identify);
	print_identify(af_ftl.identify);
#else
	uint32_t v = afctrl_read(AFCTRL_REG_VERSION), caps = afctrl_read(AFCTRL_REG_CAPS);
	printf("controller   block v%lu.%lu at 0x%08lx, caps 0x%lx:%s%s%s\n", (unsigned long)(v >> 16),
	       (unsigned long)(v & 0xffff), (unsigned long)AFCTRL_BASE, (unsigned long)caps,
	       (caps >> AFCTRL_CAP_IDENTIFY) & 1 ? " identify" : "", (caps >> AFCTRL_CAP_DMA) & 1 ? " dma" : "",
	       (caps >> AFCTRL_CAP_NAND) & 1 ? " nand" : "");
#ifdef AFCTRL_INTERRUPT
	printf("ctrl irq     %d (masked: the firmware polls)\n", AFCTRL_INTERRUPT);
#endif
	if (!((caps >> AFCTRL_CAP_NAND) & 1))
		printf("host i/f     none yet (identify placeholder: no queues, IDENTIFY reports no flash)\n");
	af_flash_print_geometry("nand         ");
	if (!((caps >> AFCTRL_CAP_IDENTIFY) & 1)) {
		printf("error: controller serves no IDENTIFY record\n");
		return AF_EFAIL;
	}
	af_identify_t idf;
	afctrl_identify_mmio(&idf);
	printf("identify (read from the controller at 0x%08lx):\n",
	       (unsigned long)(AFCTRL_BASE + AFCTRL_REG_IDENTIFY));
	print_identify(&idf);
#endif
	printf("spec limits (defaults the controller is elaborated with):\n");
	printf("  max_transfer %u, max_atomic_pages %u, max_open_tx %u, max_pending %u,\n"
	       "  max_remap_triples %u, max_appends %u, queue_depth %u, token_bytes %u, lba_size %u\n",
	       AF_LIMITS_MAX_TRANSFER, AF_LIMITS_MAX_ATOMIC_PAGES, AF_LIMITS_MAX_OPEN_TX,
	       AF_LIMITS_MAX_PENDING, AF_LIMITS_MAX_REMAP_TRIPLES, AF_LIMITS_MAX_APPENDS, AF_LIMITS_QUEUE_DEPTH,
	       AF_LIMITS_TOKEN_BYTES, AF_LIMITS_LBA_SIZE);
	return AF_OK;
}
AF_COMMAND(info, "info", "firmware version, SoC, controller, IDENTIFY record and limits", cmd_info);

static int cmd_stats(int argc, char **argv)
{
	if (argc != 1)
		return AF_EUSAGE;
	uint64_t now = af_uptime_cycles();
	printf("uptime_cycles      ");
	af_print_u64(now);
	printf("\nuptime_us          ");
	af_print_u64(af_cycles_to_us(now));
	printf("\nboot_cycles        ");
	af_print_u64(af_boot_cycles);
	printf("\nconsole_commands   %lu\nconsole_errors     %lu\n", af_console_commands_run(),
	       af_console_commands_failed());
#ifdef AFCTRL_FTL
	if (af_ftl.present) {
		uint32_t hits = ftl_rd(AF_FTL_MAP_HITS), misses = ftl_rd(AF_FTL_MAP_MISSES);
		printf("map_cache_hits     %lu\nmap_cache_misses   %lu\n", (unsigned long)hits, (unsigned long)misses);
		printf("map_cache_hit_pct  %lu\n", (unsigned long)(hits + misses ? (uint64_t)hits * 100 / (hits + misses) : 0));
		printf("blocks_free        %lu\nblocks_to_core     %lu\nblocks_closed      %lu\n",
		       (unsigned long)af_ftl.free_blocks, (unsigned long)af_ftl.pushed, (unsigned long)af_ftl.closed);
		printf("core_starved       %lu\n", (unsigned long)!!(ftl_rd(AF_FTL_STATUS) & AF_FTL_STATUS_STARVED));
		printf("good_blocks        %lu\nspare_blocks       %lu\nlive_pages         %lu\nno_space           %s\n",
		       (unsigned long)af_ftl.good_blocks, (unsigned long)af_ftl.spare_blocks,
		       (unsigned long)af_ftl.live_pages, af_nospace_name(af_ftl.no_space));
		printf("no_blocks          %lu\ngc_stuck           %lu\n", (unsigned long)af_ftl.no_blocks,
		       (unsigned long)af_ftl.gc_stuck);
		/* activity since boot: what the host asked for and what the flash did for it */
		uint32_t hw = ftl_rd(AF_FTL_HOST_WRITE_PAGES), progs = ftl_rd(AF_FTL_NAND_PROGRAMS);
		uint32_t host_in = hw - ftl_rd(AF_FTL_CACHE_DESTAGED) + ftl_rd(AF_FTL_CACHE_IN); /* pages the host wrote */
		printf("host_read_pages    %lu\nhost_write_pages   %lu\nrecord_pages       %lu\n",
		       (unsigned long)ftl_rd(AF_FTL_HOST_READ_PAGES), (unsigned long)host_in,
		       (unsigned long)ftl_rd(AF_FTL_RECORD_PAGES));
		printf("nand_reads         %lu\nnand_programs      %lu\nnand_erases        %lu\n",
		       (unsigned long)ftl_rd(AF_FTL_NAND_READS), (unsigned long)progs,
		       (unsigned long)ftl_rd(AF_FTL_NAND_ERASES));
		printf("pad_pages          %lu\n", (unsigned long)ftl_rd(AF_FTL_PAD_PAGES));
		/* the append tokens' key: whether it was drawn, never the key */
		uint32_t key = ftl_rd(AF_FTL_TOKEN_KEY);
		printf("token_key          %s, %s\n",
		       key & AF_FTL_TOKEN_KEY_READY ? "drawn" : key & AF_FTL_TOKEN_KEY_ALARM ?
		       (key & AF_FTL_TOKEN_KEY_ALARM_RCT ? "health test failed (repetition count): appends refused" :
			"health test failed (adaptive proportion): appends refused") : "drawing",
		       key & AF_FTL_TOKEN_KEY_HARDWARE ? "ring oscillators" : "simulation stand-in (no entropy)");
		printf("gc_copies          %lu\nwear_copies        %lu\n", (unsigned long)af_gc.copies,
		       (unsigned long)af_wear.copies);
		/* flash programs (data, records, GC and wear copies, checkpoints) per page the host wrote */
		if (host_in)
			printf("write_amp          %lu.%02lu\n", (unsigned long)(progs / host_in),
			       (unsigned long)((uint64_t)(progs % host_in) * 100 / host_in));
		else
			printf("write_amp          -\n");
		printf("cache_pages        %lu\ncache_in           %lu\ncache_coalesced    %lu\n"
		       "cache_destaged     %lu\ncache_dirty        %lu\n", (unsigned long)af_ftl.cache_pages,
		       (unsigned long)ftl_rd(AF_FTL_CACHE_IN), (unsigned long)ftl_rd(AF_FTL_CACHE_COALESCED),
		       (unsigned long)ftl_rd(AF_FTL_CACHE_DESTAGED), (unsigned long)ftl_rd(AF_FTL_CACHE_DIRTY));
	}
#else
	if (afctrl_present() && afctrl_has(AFCTRL_CAP_DMA))
		printf("ctrl_dma_copies    %lu\n", (unsigned long)afctrl_read(AFCTRL_REG_DMA_COUNT));
#endif
#ifdef CSR_CTRL_BUS_ERRORS_ADDR
	printf("bus_errors         %lu\n", (unsigned long)ctrl_bus_errors_read()); /* accesses the bus timeout ended */
#endif
	if (af_flash.scanned) {
		printf("boot_pages_scanned %lu\nboot_scan_cycles   ", (unsigned long)af_flash.report.pages_scanned);
		af_print_u64(af_flash.t_scan);
		printf("\nnand_inflight      %lu\nnand_read_errors   %lu\n", (unsigned long)af_nand_inflight(),
		       (unsigned long)af_flash.read_errors);
	} else {
		printf("flash              no NAND scan at boot\n");
	}
	return AF_OK;
}
AF_COMMAND(stats, "stats", "counters: uptime, console, map cache, blocks, host and flash activity, write amplification, boot scan", cmd_stats);

/* Main RAM check on a small window at the top of main RAM (left unused by
 * the firmware so far). */
static int ram_test(uint32_t *base, unsigned words)
{
	for (unsigned i = 0; i < words; i++)
		base[i] = 0x9e3779b9u * (i + 1) ^ (uint32_t)(uintptr_t)&base[i];
	af_dcache_invalidate();
	for (unsigned i = 0; i < words; i++)
		if (base[i] != (0x9e3779b9u * (i + 1) ^ (uint32_t)(uintptr_t)&base[i]))
			return -1;
	return 0;
}

static int cmd_selftest(int argc, char **argv)
{
	if (argc != 1)
		return AF_EUSAGE;
	int fails = 0;

	/* 1. controller identity and a read/write register (slave path). */
	int present = afctrl_present();
	printf("ctrl id        %s\n", present ? "pass" : "FAIL");
	fails += !present;
#ifdef AFCTRL_FTL
	if (present) {
		uint32_t keep = ftl_rd(AF_FTL_MAP_EXPECTED), pat[] = {0x00000000u, 0xffffffffu, 0xa5a55a5au, 0x12345678u};
		int ok = 1;
		for (unsigned i = 0; i < 4; i++) {
			ftl_wr(AF_FTL_MAP_EXPECTED, pat[i]);
			ok &= ftl_rd(AF_FTL_MAP_EXPECTED) == pat[i];
		}
		ftl_wr(AF_FTL_MAP_EXPECTED, keep);
		printf("ctrl register  %s\n", ok ? "pass" : "FAIL");
		fails += !ok;
	}
#else
	if (present) {
		uint32_t pat[] = {0x00000000u, 0xffffffffu, 0xa5a55a5au, 0x12345678u};
		int ok = 1;
		for (unsigned i = 0; i < 4; i++) {
			afctrl_write(AFCTRL_REG_SCRATCH, pat[i]);
			ok &= afctrl_read(AFCTRL_REG_SCRATCH) == pat[i];
		}
		printf("ctrl scratch   %s\n", ok ? "pass" : "FAIL");
		fails += !ok;
	}
#endif

	/* 2. main RAM (a 4 KiB window at its top). */
	uint32_t *win = (uint32_t *)(MAIN_RAM_BASE + MAIN_RAM_SIZE - 4096);
	int ram = ram_test(win, 1024);
	printf("main ram       %s\n", ram == 0 ? "pass" : "FAIL");
	fails += ram != 0;

#ifdef AFCTRL_FTL
	/* 3. the core's data path: IDENTIFY through the firmware's own queue pair
	 *    (command fetch, DMA copy, completion) must return the record. */
	if (af_ftl.running) {
		af_identify_t *dst = (af_identify_t *)(MAIN_RAM_BASE + MAIN_RAM_SIZE - 8192);
		memset(dst, 0, sizeof(*dst));
		af_dcache_invalidate();
		af_cmd_t cmd;
		memset(&cmd, 0, sizeof(cmd));
		cmd.opcode = AF_OPCODE_IDENTIFY;
		cmd.buf = (uint32_t)(uintptr_t)dst;
		int st = af_ftl_io(&cmd, NULL);
		af_dcache_invalidate();
		int ok = st == AF_STATUS_SUCCESS && memcmp(dst, af_ftl.identify, sizeof(*dst)) == 0;
		printf("ctrl identify  %s (IDENTIFY command: status %d, %u bytes to 0x%08lx)\n", ok ? "pass" : "FAIL", st,
		       (unsigned)sizeof(*dst), (unsigned long)(uintptr_t)dst);
		fails += !ok;
		/* the map port: read LBA 0's entry; it must equal the table in memory after a flush */
		uint32_t old = 0;
		int r = af_ftl_map(AF_MAPFWOP_READ, 0, 0, 0, &old);
		int f = af_ftl_map(AF_MAPFWOP_FLUSH, 0, 0, 0, NULL);
		af_dcache_invalidate();
		ok = r >= 0 && f >= 0 && !(r & AF_FTL_MAP_RESULT_ERROR) && old == af_flash.map.ppa[0];
		printf("ctrl map port  %s (lba 0 -> 0x%08lx)\n", ok ? "pass" : "FAIL", (unsigned long)old);
		fails += !ok;
	} else {
		printf("ctrl           FAIL: the FTL core is not running\n");
		fails++;
	}
#else
	/* 3. DMA (master path): the block copies IDENTIFY into main RAM; it must
	 *    equal what the slave window serves. */
	if (present && afctrl_has(AFCTRL_CAP_DMA)) {
		af_identify_t mmio;
		af_identify_t *dst = (af_identify_t *)(MAIN_RAM_BASE + MAIN_RAM_SIZE - 8192);
		memset(dst, 0, sizeof(*dst));
		af_dcache_invalidate();
		afctrl_identify_mmio(&mmio);
		int r = afctrl_identify_dma(dst);
		int ok = r == 0 && memcmp(&mmio, dst, sizeof(mmio)) == 0 && dst->magic == AF_IDENTIFY_MAGIC;
		printf("ctrl dma       %s (IDENTIFY, %u bytes to 0x%08lx)\n", ok ? "pass" : "FAIL",
		       (unsigned)sizeof(mmio), (unsigned long)(uintptr_t)dst);
		fails += !ok;
	}
#endif
	/* 4. NAND: READ STATUS of every target through the controller. */
	if (af_nand.up) {
		int ok = 1;
		for (unsigned t = 0; t < af_nand.targets; t++) {
			af_nand_cpl_t c AF_NAND_ALIGNED;
			ok &= af_nand_read_status(t / af_nand.ways, t % af_nand.ways, &c) == AF_NANDRESULT_OK &&
			      ((c.nand_status >> AF_ONFISTATUS_RDY) & 1);
		}
		printf("nand status    %s (%lu targets ready)\n", ok ? "pass" : "FAIL", (unsigned long)af_nand.targets);
		fails += !ok;
	} else {
		printf("nand           skipped: no NAND controller brought up\n");
	}
#if defined(BUS_TIMEOUT_CYCLES) && defined(BUS_UNMAPPED_PROBE) && defined(CSR_CTRL_BUS_ERRORS_ADDR)
	/* 5. the bus timeout (soc/bus_timeout.py): a read no slave answers ends with all-ones after
	 *    BUS_TIMEOUT_CYCLES and counts one bus error, instead of hanging the CPU. */
	{
		uint32_t errors = ctrl_bus_errors_read();
		uint64_t t0 = af_uptime_cycles();
		uint32_t v = *(volatile uint32_t *)(uintptr_t)BUS_UNMAPPED_PROBE;
		uint64_t waited = af_uptime_cycles() - t0;
		uint32_t after = ctrl_bus_errors_read();
		int ok = v == 0xffffffffu && after == errors + 1 && waited >= BUS_TIMEOUT_CYCLES;
		printf("bus timeout    %s (0x%08lx, no slave: 0x%08lx after %lu cycles; bus_errors %lu -> %lu)\n",
		       ok ? "pass" : "FAIL", (unsigned long)BUS_UNMAPPED_PROBE, (unsigned long)v, (unsigned long)waited,
		       (unsigned long)errors, (unsigned long)after);
		fails += !ok;
	}
#endif
	printf("selftest: %s\n", fails ? "FAIL" : "pass");
	return fails ? AF_EFAIL : AF_OK;
}
AF_COMMAND(selftest, "selftest", "check controller registers, main RAM, the controller's DMA (FTL: IDENTIFY through the queues, the map port), NAND status and the bus timeout", cmd_selftest);

static int cmd_reboot(int argc, char **argv)
{
	if (argc != 1)
		return AF_EUSAGE;
	printf("rebooting\n");
	ctrl_reset_write(1);
	return AF_OK;
}
AF_COMMAND(reboot, "reboot", "reset the SoC (CPU and peripherals)", cmd_reboot);

#ifdef CSR_SIM_FINISH_BASE
static int cmd_exit(int argc, char **argv)
{
	if (argc != 1)
		return AF_EUSAGE;
#ifdef AFCTRL_FTL
	/* a clean shutdown: the write cache's pages go to flash first (a power cut is the other way out) */
	if (af_ftl.running && af_ftl.cache_pages) {
		af_cmd_t cmd;
		memset(&cmd, 0, sizeof(cmd));
		cmd.opcode = AF_OPCODE_FLUSH;
		if (af_ftl_io(&cmd, NULL) != AF_STATUS_SUCCESS)
			printf("error: the write cache's FLUSH failed\n");
	}
#endif
	printf("simulation finished\n");
	sim_finish_finish_write(1);
	return AF_OK;
}
AF_COMMAND(exit, "exit", "end the simulation (simulation builds only)", cmd_exit);
#endif
