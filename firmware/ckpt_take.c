/* atomflash firmware: taking a checkpoint while the host writes (see ckpt_take.h). */
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include <system.h>

#include "anchor.h"
#include "ckpt.h"
#include "ckpt_take.h"
#include "console.h"
#include "flash.h"
#include "ftl.h"
#include "mapload.h"
#include "nand.h"
#include "pending.h"
#include "wear.h"

#ifdef AFCTRL_FTL

#define ENTRIES_PER_PAGE AF_MAP_ENTRIES_PER_PAGE
#define COUNTS_PER_PAGE (af_nand.page_data / 4)

/* Valid-count page `p` (format 3) of `counts` (one u32 per global block) into `page`. */
static void count_page(uint32_t p, const uint32_t *counts, uint8_t *page)
{
	uint32_t *w = (uint32_t *)page;
	memset(page, 0, af_nand.page_data);
	for (uint32_t i = 0; i < COUNTS_PER_PAGE; i++) {
		uint32_t g = p * COUNTS_PER_PAGE + i;
		if (g < af_flash.nblocks)
			w[i] = counts[g];
	}
}

/* Map-CRC page `p` (format 3) of `crc` (one u32 per map page) into `page`. */
static void crc_page(uint32_t p, const uint32_t *crc, uint32_t map_pages, uint8_t *page)
{
	uint32_t *w = (uint32_t *)page;
	memset(page, 0, af_nand.page_data);
	for (uint32_t i = 0; i < COUNTS_PER_PAGE; i++) {
		uint32_t q = p * COUNTS_PER_PAGE + i;
		if (q < map_pages)
			w[i] = crc[q];
	}
}

/* Wear page `p` of the erase counts into `page`. */
static void wear_page(uint32_t p, uint8_t *page)
{
	uint32_t *w = (uint32_t *)page;
	memset(page, 0, af_nand.page_data);
	for (uint32_t i = 0; i < COUNTS_PER_PAGE; i++) {
		uint32_t g = p * COUNTS_PER_PAGE + i;
		if (g < af_flash.nblocks)
			w[i] = (af_flash.blocks[g].erases & AF_CKPT_WEAR_COUNT_MASK) |
			       (af_flash.blocks[g].flags & (AF_BLOCK_BAD | AF_BLOCK_UNREADABLE) ? AF_CKPT_WEAR_FACTORY_BAD
				: af_flash.blocks[g].state == AF_BSTATE_RETIRED                ? AF_CKPT_WEAR_RETIRED
				: af_flash.blocks[g].retire                                    ? AF_CKPT_WEAR_RETIRING
				: af_flash.blocks[g].state == AF_BSTATE_FREE                   ? AF_CKPT_WEAR_FREE
												 : 0);
	}
}

/* The vseq of the version page `ppa` holds for `lba` (its OOB); 0 when unreadable.  An append
 * page (or its GC copy: flags kept) carries lba 0: a REMAP bound it to `lba`. */
static uint64_t vseq_of(uint32_t ppa, uint32_t lba)
{
	uint8_t buf[AF_NAND_BBM_BYTES + AF_OOB_SIZE] __attribute__((aligned(4)));
	af_oob_t oob;
	af_ckpt.oob_reads++;
	int r = af_nand_read(ppa, af_nand.oob_col, af_nand.oob_bytes, buf, 0, NULL);
	memcpy(&oob, buf + AF_NAND_BBM_BYTES, sizeof(oob));
	if (r != AF_NANDRESULT_OK || af_crc32(&oob, AF_OOB_CRC_SPAN) != oob.crc ||
	    (oob.lba != lba && !(oob.flags & AF_OOB_FLAGS_APPEND_MASK))) {
		af_ckpt.bad_entries++;
		printf("warning: ckpt: lba %lu -> page 0x%08lx: OOB unreadable or not this LBA's\n", (unsigned long)lba,
		       (unsigned long)ppa);
		return 0;
	}
	return oob.vseq;
}

/* Entry `lba` as the checkpoint stores it (shadow arrays, brought up to date by pass 1). */
static void entry(uint32_t lba, af_ckpt_entry_t *e)
{
	uint32_t ppa = af_ckpt.shadow_ppa[lba];
	e->ppa = ppa;
	e->vseq = ppa == AF_PPA_UNMAPPED ? AF_REC_VSEQ_NONE : af_flash.map.vseq[lba];
	e->rsvd = 0;
}

static int fail(const char *why)
{
	af_ckpt.failed++;
	/* `ckpt now` reports an error; automatic checkpoints (GC, the interval) warn, once per reason until
	 * one is taken: GC asks again after every write, and a worn-out device would print nothing else */
	if (af_ckpt.from_console)
		printf("error: ckpt: %s\n", why);
	else if (why != af_ckpt.last_failure)
		printf("warning: ckpt: %s (warned once; `ckpt` counts the failures)\n", why);
	if (!af_ckpt.from_console)
		af_ckpt.last_failure = why;
	return -1;
}

static const char NO_AREA_BLOCK[] = "no erased block left for a checkpoint area";

/* Blocks the next area lacks (lost to failed erases or programs) beyond what the pool holds: the take
 * would fail at step 5, so it fails before the flush and the pass over the whole table. */
static int area_blocks_short(void)
{
	uint32_t area = af_ckpt.valid ? 1 - af_ckpt.area : 0, missing = 0, pooled = 0;
	for (uint32_t i = 0; i < af_ckpt.narea; i++)
		missing += af_ckpt.area_block[area][i] == AF_CKPT_NO_BLOCK;
	for (uint32_t d = 0; d < af_ftl.dies; d++)
		pooled += af_ftl.pool_n[d];
	return missing > pooled;
}

/* A program in the area failed: its block is grown bad (retired: the next record and checkpoint name it);
 * the next checkpoint takes an erased block in its place.  The newest checkpoint, in the other area, stands. */
static int program_failed(uint32_t area, uint32_t index, const char *why)
{
	uint32_t *g = &af_ckpt.area_block[area][index / af_nand.pages_per_block];
	af_ftl_retire(*g, "a program failed (checkpoint area)", 0);
	*g = AF_CKPT_NO_BLOCK;
	return fail(why);
}

static int setup_areas(uint32_t pages)
{
	uint32_t narea = (pages + af_nand.pages_per_block - 1) / af_nand.pages_per_block;
	if (narea > AF_CKPT_MAX_AREA_BLOCKS)
		return -1;
	if (af_ckpt.narea >= narea)
		return 0;
	/* first checkpoint (or a larger map): fresh areas from the free pool */
	for (uint32_t a = 0; a < AF_CKPT_AREAS; a++)
		for (uint32_t i = 0; i < narea; i++)
			if (af_ftl_pool_take(&af_ckpt.area_block[a][i]) < 0)
				return -1;
	af_ckpt.narea = narea;
	af_ckpt.valid = 0; /* the new areas hold nothing yet */
	return 0;
}

/* pages one checkpoint of this device takes */
static uint32_t checkpoint_pages(void)
{
	return af_ckpt_pages_for(af_ftl.capacity, af_flash.nblocks);
}

uint64_t af_ckpt_next_floor(void)
{
	return af_ftl_seq_next(); /* open transactions and live appends go into the checkpoint (pending.h) */
}

int af_ckpt_take(void)
{
	if (!af_ftl.running)
		return fail("the FTL core is not running");
	uint64_t t0 = af_uptime_cycles();
	uint64_t nlba = af_ftl.capacity;
	uint32_t map_pages = af_ckpt_map_pages(nlba), wear_pages = af_ckpt_wear_pages(af_flash.nblocks);
	uint32_t total = checkpoint_pages();
	uint32_t nopen = 0;
	if (setup_areas(total) < 0)
		return fail("no room for the checkpoint areas");
	if (area_blocks_short())
		return fail(NO_AREA_BLOCK);

	/* the whole table is read below: what the boot left to load lazily comes in first */
	af_map_load_all();
	if (!af_ckpt.map_crc)
		af_ckpt.map_crc = af_ram_alloc(4 * af_ckpt_map_pages(af_flash.nlba), 4);
	if (!af_ckpt.map_crc)
		return fail("main RAM too small for the map pages' CRCs");
	uint32_t *map_crc = af_ckpt.map_crc, crc_pages = af_ckpt_crc_pages(map_pages);
	if (af_ftl.trace)
		printf("ckpt: taking one, %lu free blocks\n", (unsigned long)af_ftl.free_blocks);
	/* 1-3: the floor with the pending bindings at it (everything older published), the table in memory */
	uint64_t floor;
	const char *why;
	if (af_pend_snapshot(&floor, &why) < 0)
		return fail(why);
	uint64_t at = floor;
	uint32_t pend_pages = af_pend_pages();
	total = total - af_pend_max_pages() + pend_pages; /* the areas have room for the most */
	af_cmd_t cmd;
	memset(&cmd, 0, sizeof(cmd));
	cmd.opcode = AF_OPCODE_FLUSH;
	int st = af_ftl_io(&cmd, NULL);
	/* With a write cache a FLUSH fails when a destage found no page or hit a failed program: those pages
	 * stay buffered, bound to nothing, and the FLUSH was still published after every binding before it,
	 * which is all the checkpoint needs (a drive out of blocks must still checkpoint for GC to free one). */
	if (st != AF_STATUS_SUCCESS &&
	    !(af_ftl.cache_pages && (st == AF_STATUS_NO_SPACE || st == AF_STATUS_MEDIA_ERROR)))
		return fail("FLUSH through the firmware's queue failed");
	int r = af_ftl_map(AF_MAPFWOP_FLUSH, 0, 0, 0, NULL);
	if (r < 0 || (r & AF_FTL_MAP_RESULT_ERROR))
		return fail("map-cache flush failed");
	af_dcache_invalidate();

	/* 4, pass 1: bring the shadow up to date, each map page's CRC, the valid counts of these entries */
	uint32_t pcrc = AF_CRC32_INIT, bound = 0, *counts = af_flash.counts;
	for (uint32_t g = 0; g < af_flash.nblocks; g++)
		counts[g] = 0;
	const volatile uint32_t *table = af_flash.map.ppa;
	af_ckpt_entry_t *e = (af_ckpt_entry_t *)af_ckpt.page;
	for (uint32_t p = 0; p < map_pages; p++) {
		memset(af_ckpt.page, 0, af_nand.page_data);
		for (uint32_t i = 0; i < ENTRIES_PER_PAGE; i++) {
			uint64_t lba = (uint64_t)p * ENTRIES_PER_PAGE + i;
			if (lba >= nlba) {
				memset(&e[i], 0xff, sizeof(e[i]));
				continue;
			}
			uint32_t ppa = table[lba];
			uint32_t g = ppa == AF_PPA_UNMAPPED ? af_flash.nblocks : af_nand_block_of(ppa);
			/* a page of a block erased since the shadow was taken may be a newer version at the same PPA */
			if (ppa != af_ckpt.shadow_ppa[lba] ||
			    (g < af_flash.nblocks && af_flash.blocks[g].erases != af_ckpt.shadow_erases[g])) {
				af_flash.map.vseq[lba] = ppa == AF_PPA_UNMAPPED ? AF_REC_VSEQ_NONE : vseq_of(ppa, (uint32_t)lba);
				af_ckpt.shadow_ppa[lba] = ppa;
			}
			entry((uint32_t)lba, &e[i]);
			if (e[i].ppa != AF_PPA_UNMAPPED) {
				uint32_t g = af_nand_block_of(e[i].ppa);
				bound++;
				if (g < af_flash.nblocks)
					counts[g]++;
			}
		}
		map_crc[p] = af_crc32(af_ckpt.page, af_nand.page_data);
	}
	af_ckpt_shadow_erases();

	/* 5: the other area, erased, header first */
	uint32_t area = af_ckpt.valid ? 1 - af_ckpt.area : 0;
	for (uint32_t i = 0; i < af_ckpt.narea; i++) {
		/* a block the boot found reused (af_ckpt_load) is replaced; a worn one is swapped for the
		 * least-worn erased block (the newest checkpoint, in the other area, stays where it is) */
		if (af_ckpt.area_block[area][i] == AF_CKPT_NO_BLOCK) {
			if (af_ftl_pool_take(&af_ckpt.area_block[area][i]) < 0)
				return fail(NO_AREA_BLOCK);
			continue; /* erased already */
		}
		if (!af_wear.static_off && af_anchor.mode != AF_PLAN_DEAD &&
		    af_ftl_pool_rotate(&af_ckpt.area_block[area][i], af_wear.spread)) {
			af_ckpt.rotated++;
			continue;
		}
		af_flash.blocks[af_ckpt.area_block[area][i]].erases++;
		af_flash.erased_since_boot++;
		if (af_nand_erase(af_nand_block_ppa(af_ckpt.area_block[area][i]), NULL) != AF_NANDRESULT_OK) {
			/* a grown bad area block: retire it, an erased one from the pool takes its place */
			af_ftl_retire(af_ckpt.area_block[area][i], "its erase failed (checkpoint area)", 0);
			if (af_ftl_pool_take(&af_ckpt.area_block[area][i]) < 0) {
				af_ckpt.area_block[area][i] = AF_CKPT_NO_BLOCK; /* the next take looks again, never at it */
				return fail("erase of a checkpoint block failed and no erased block is left to replace it");
			}
		}
	}
	/* areas that moved: the anchor's record first, so a boot never takes the old ones for them */
	if (af_anchor.mode != AF_PLAN_OFF && af_anchor_areas_changed() &&
	    af_anchor_write(af_anchor.mode == AF_PLAN_NONE ? AF_ANCHOR_FLAG_NO_PLAN : 0) < 0)
		return fail("the anchor's record of the new checkpoint areas could not be written");
	/* the erase counts as they are now, this area's erases included */
	for (uint32_t p = 0; p < wear_pages; p++) {
		wear_page(p, af_ckpt.page);
		pcrc = af_crc32_update(pcrc, af_ckpt.page, af_nand.page_data);
	}
	for (uint32_t p = 0; p < wear_pages; p++) {
		count_page(p, counts, af_ckpt.page);
		pcrc = af_crc32_update(pcrc, af_ckpt.page, af_nand.page_data);
	}
	for (uint32_t p = 0; p < crc_pages; p++) {
		crc_page(p, map_crc, map_pages, af_ckpt.page);
		pcrc = af_crc32_update(pcrc, af_ckpt.page, af_nand.page_data);
	}
	for (uint32_t p = 0; p < pend_pages; p++) {
		af_pend_page(p, af_ckpt.page);
		pcrc = af_crc32_update(pcrc, af_ckpt.page, af_nand.page_data);
	}
	af_ckpt_hdr_t h;
	memset(&h, 0, sizeof(h));
	h.magic = AF_CKPT_MAGIC;
	h.format = AF_CKPT_FORMAT;
	h.area = (uint8_t)area;
	h.pend_pages = (uint16_t)pend_pages;
	h.seq = floor;
	h.number = (af_ckpt.seen_number > af_ckpt.number ? af_ckpt.seen_number : af_ckpt.number) + 1;
	h.nlba = nlba;
	h.map_pages = map_pages;
	h.wear_pages = wear_pages;
	h.nblocks = af_flash.nblocks;
	h.bound = bound;
	h.narea = af_ckpt.narea;
	h.payload_crc = pcrc ^ AF_CRC32_XOROUT;
	memset(af_ckpt.page, 0, af_nand.page_data);
	uint32_t *list = (uint32_t *)(af_ckpt.page + sizeof(h));
	for (uint32_t g = 0; g < af_flash.nblocks; g++) {
		const af_block_t *b = &af_flash.blocks[g];
		/* open, or closed after the floor: pages from it on may be in it.  Not only when an open
		 * transaction/append lowered the floor below `at`: a block the core closed during the FLUSH
		 * above holds pages written after `at` (a transaction begun since, a write the map cache had
		 * not written back), and neither this list nor the anchor's next plan (af_plan_checkpointed
		 * drops handed-out blocks) would name it (campaign trial 2745) */
		if (b->state == AF_BSTATE_CORE || (b->state == AF_BSTATE_DATA && b->close_seq > floor)) {
			if (nopen == AF_CKPT_MAX_OPEN ||
			    sizeof(h) + 4 * (nopen + 2 + AF_CKPT_AREAS * af_ckpt.narea) > af_nand.page_data)
				return fail("the header's block lists do not fit a page (a transaction open for too long?)");
			list[nopen++] = af_nand_block_ppa(g);
		}
	}
	h.nopen = nopen;
	for (uint32_t a = 0; a < AF_CKPT_AREAS; a++)
		for (uint32_t i = 0; i < af_ckpt.narea; i++)
			list[nopen + a * af_ckpt.narea + i] = af_nand_block_ppa(af_ckpt.area_block[a][i]);
	uint32_t nlist = nopen + AF_CKPT_AREAS * af_ckpt.narea;
	list[nlist++] = af_anchor_header_word(); /* format 5 */
	if (sizeof(h) + 4 * nlist > af_nand.page_data)
		return fail("the header's block lists do not fit a page");
	uint32_t crc = af_crc32_update(AF_CRC32_INIT, &h, offsetof(af_ckpt_hdr_t, crc));
	h.crc = af_crc32_update(crc, list, 4 * nlist) ^ AF_CRC32_XOROUT;
	memcpy(af_ckpt.page, &h, sizeof(h));
	af_oob_t oob;
	af_ckpt_oob(&oob, 0, total, floor, h.number);
	if (af_ckpt_program_page(af_ckpt_page_ppa(area, 0), af_ckpt.page, &oob) < 0)
		return program_failed(area, 0, "program of the header page failed");

	/* pass 2: the same entries from the shadow (the live table may have moved on) */
	for (uint32_t p = 0; p < map_pages; p++) {
		for (uint32_t i = 0; i < ENTRIES_PER_PAGE; i++) {
			uint64_t lba = (uint64_t)p * ENTRIES_PER_PAGE + i;
			if (lba < nlba)
				entry((uint32_t)lba, &e[i]);
			else
				memset(&e[i], 0xff, sizeof(e[i]));
		}
		af_ckpt_oob(&oob, 1 + p, total, floor, h.number);
		if (af_ckpt_program_page(af_ckpt_page_ppa(area, 1 + p), af_ckpt.page, &oob) < 0)
			return program_failed(area, 1 + p, "program of a map page failed");
	}
	for (uint32_t p = 0; p < wear_pages; p++) {
		wear_page(p, af_ckpt.page);
		af_ckpt_oob(&oob, 1 + map_pages + p, total, floor, h.number);
		if (af_ckpt_program_page(af_ckpt_page_ppa(area, 1 + map_pages + p), af_ckpt.page, &oob) < 0)
			return program_failed(area, 1 + map_pages + p, "program of a wear page failed");
	}
	for (uint32_t p = 0; p < wear_pages; p++) {
		count_page(p, counts, af_ckpt.page);
		af_ckpt_oob(&oob, 1 + map_pages + wear_pages + p, total, floor, h.number);
		if (af_ckpt_program_page(af_ckpt_page_ppa(area, 1 + map_pages + wear_pages + p), af_ckpt.page, &oob) < 0)
			return program_failed(area, 1 + map_pages + wear_pages + p, "program of a valid-count page failed");
	}
	for (uint32_t p = 0; p < crc_pages; p++) {
		crc_page(p, map_crc, map_pages, af_ckpt.page);
		af_ckpt_oob(&oob, 1 + map_pages + 2 * wear_pages + p, total, floor, h.number);
		if (af_ckpt_program_page(af_ckpt_page_ppa(area, 1 + map_pages + 2 * wear_pages + p), af_ckpt.page, &oob) < 0)
			return program_failed(area, 1 + map_pages + 2 * wear_pages + p, "program of a map-CRC page failed");
	}
	for (uint32_t p = 0, at_page = 1 + map_pages + 2 * wear_pages + crc_pages; p < pend_pages; p++) {
		af_pend_page(p, af_ckpt.page);
		af_ckpt_oob(&oob, at_page + p, total, floor, h.number);
		if (af_ckpt_program_page(af_ckpt_page_ppa(area, at_page + p), af_ckpt.page, &oob) < 0)
			return program_failed(area, at_page + p, "program of a pending-bindings page failed");
	}
	af_ckpt.valid = 1;
	af_ckpt.seq = floor;
	af_ckpt.at = at;
	af_ckpt.number = h.number;
	af_ckpt.area = area;
	af_ckpt.pages = total;
	af_ckpt.nopen = nopen;
	af_ckpt.taken++;
	af_ckpt.last_failure = NULL; /* a new failure warns again */
	af_ckpt.pages_written += total;
	af_ckpt.t_last = af_uptime_cycles() - t0;
	af_plan_checkpointed(); /* a fresh plan counted from this checkpoint */
	return 0;
}

void af_ckpt_poll(void)
{
	if (!af_ftl.running || !af_ckpt.interval)
		return;
	if (af_ftl_seq_next() - (af_ckpt.valid ? af_ckpt.at : af_ftl.start_seq) >= af_ckpt.interval)
		af_ckpt_take();
}

/* --- console ---------------------------------------------------------------------------- */

static int cmd_ckpt(int argc, char **argv)
{
	if (argc == 2 && !strcmp(argv[1], "now")) {
		af_ckpt.from_console = 1;
		int r = af_ckpt_take();
		af_ckpt.from_console = 0;
		if (r < 0)
			return AF_EFAIL;
		printf("checkpoint %lu taken: floor seq ", (unsigned long)af_ckpt.number);
		af_print_u64(af_ckpt.seq);
		printf(", area %lu, %lu pages, ", (unsigned long)af_ckpt.area, (unsigned long)af_ckpt.pages);
		af_print_u64(af_ckpt.t_last);
		printf(" cycles\n");
		return AF_OK;
	}
	if (argc == 3 && !strcmp(argv[1], "every")) {
		uint32_t n;
		if (af_parse_u32(argv[2], &n))
			return AF_EUSAGE;
		af_ckpt.interval = n;
		printf("automatic checkpoints %s", n ? "every " : "off\n");
		if (n)
			printf("%lu pages written\n", (unsigned long)n);
		return AF_OK;
	}
	if (argc != 1)
		return AF_EUSAGE;
	if (!af_ckpt.valid) {
		printf("no checkpoint on flash yet (%s)\n", af_ckpt.narea ? "areas reserved" : "no areas yet");
	} else {
		printf("newest checkpoint %lu: floor seq ", (unsigned long)af_ckpt.number);
		af_print_u64(af_ckpt.seq);
		printf(", area %lu, %lu pages, %lu open blocks listed%s\n", (unsigned long)af_ckpt.area,
		       (unsigned long)af_ckpt.pages, (unsigned long)af_ckpt.nopen, af_ckpt.loaded ? ", loaded at boot" : "");
	}
	for (uint32_t a = 0; a < AF_CKPT_AREAS && af_ckpt.narea; a++) {
		printf("area %lu: blocks", (unsigned long)a);
		for (uint32_t i = 0; i < af_ckpt.narea; i++)
			if (af_ckpt.area_block[a][i] == AF_CKPT_NO_BLOCK)
				printf(" (none yet)");
			else
				printf(" %lu", (unsigned long)af_ckpt.area_block[a][i]);
		printf("\n");
	}
	af_anchor_print("anchor: ");
	printf("taken %lu, failed %lu since boot; OOB reads for changed entries %lu; every %lu pages\n",
	       (unsigned long)af_ckpt.taken, (unsigned long)af_ckpt.failed, (unsigned long)af_ckpt.oob_reads,
	       (unsigned long)af_ckpt.interval);
	return AF_OK;
}
AF_COMMAND(ckpt, "ckpt [now | every <pages>]",
	   "map checkpoints: the newest, take one now, or set the automatic interval (0: off)", cmd_ckpt);

#endif /* AFCTRL_FTL */
