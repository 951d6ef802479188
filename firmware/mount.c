/* atomflash firmware: mounting the flash at boot, from NAND bring-up to the recovered map (see mount.h). */
#include <stdio.h>
#include <string.h>

#include "anchor.h"
#include "ckpt.h"
#include "console.h"
#include "flash.h"
#include "mapload.h"
#include "mount.h"
#include "nand.h"
#include "pending.h"

#ifndef AFNAND_BASE

int af_mount(void)
{
	memset(&af_flash, 0, sizeof(af_flash));
	printf("nand: no NAND controller in this build\n");
	return AF_NAND_ENODEV;
}

#else

/* Load the newest intact checkpoint (headers found in the page-0 pass); 0 if none. */
static int find_checkpoint(void)
{
	uint64_t below = UINT64_MAX; /* try numbers below this */
	for (;;) {
		uint32_t best = UINT32_MAX;
		for (uint32_t g = 0; g < af_flash.nblocks; g++) {
			const af_block_t *b = &af_flash.blocks[g];
			if (!b->flags && b->p0 == AF_P0_CKPT && af_flash.p0[g].num < below &&
			    (best == UINT32_MAX || af_flash.p0[g].num > af_flash.p0[best].num))
				best = g;
		}
		if (best == UINT32_MAX)
			return 0;
		if (af_ckpt_load(best, NULL) == 0)
			return 1;
		af_ckpt.tried++;
		below = af_flash.p0[best].num;
	}
}

/* --- the fast path (anchor.h): page 0 of the anchor's blocks only ------------------------ */

static int fast_fail(const char *why)
{
	af_flash.full_why = why;
	af_flash.fast = 0;
	return 0;
}

/* Load the newest checkpoint in the anchor's areas and read page 0 of the blocks written since its floor
 * (open in it, or planned).  1 when it did; 0 when the boot must read page 0 of every block
 * (af_flash.full_why says why), with nothing changed that the full path does not set again. */
static int fast_boot(void)
{
	if (!AF_ANCHOR_ENABLED)
		return fast_fail("anchor.h: AF_ANCHOR_ENABLED is 0");
	if (!af_anchor.found)
		return fast_fail("no anchor blocks (fewer than two good ones at the start of target 0)");
	if (!af_anchor.have)
		return fast_fail("no anchor record");
	if (af_anchor.flags & AF_ANCHOR_FLAG_NO_PLAN)
		return fast_fail("the anchor's record keeps no plan");
	/* page 0 of both areas' first blocks: the headers */
	uint32_t g[AF_CKPT_AREAS];
	uint64_t num[AF_CKPT_AREAS];
	for (uint32_t a = 0; a < AF_CKPT_AREAS; a++) {
		g[a] = af_anchor.narea ? af_anchor.area[a][0] : AF_CKPT_NO_BLOCK;
		num[a] = 0;
		if (g[a] >= af_flash.nblocks)
			continue;
		uint8_t buf[AF_NAND_BBM_BYTES + AF_OOB_SIZE] __attribute__((aligned(4)));
		af_oob_t oob;
		af_flash.p0_reads++;
		int r = af_nand_read(af_nand_block_ppa(g[a]), af_nand.oob_col, af_nand.oob_bytes, buf, 0, NULL);
		memcpy(&oob, buf + AF_NAND_BBM_BYTES, sizeof(oob));
		if (r == AF_NANDRESULT_OK && af_crc32(&oob, AF_OOB_CRC_SPAN) == oob.crc && oob.format == AF_OOB_FORMAT &&
		    oob.kind == AF_KIND_CHECKPOINT && oob.lba == 0) {
			num[a] = oob.vseq;
			if (oob.vseq > af_ckpt.seen_number) /* intact or not, the next checkpoint goes above it */
				af_ckpt.seen_number = oob.vseq;
		}
	}
	af_flash.fast = 1;
	af_ckpt_where_t where;
	af_anchor_where(&where);
	for (;;) {
		uint32_t a = num[0] >= num[1] ? 0 : 1;
		if (num[a] == 0)
			break;
		int r = af_ckpt_load(g[a], &where);
		if (r == 0)
			break;
		if (r == -2) {
			af_ckpt.tried = 0;
			return fast_fail("the newest checkpoint is not the one the anchor's record belongs to");
		}
		af_ckpt.tried++;
		num[a] = 0;
	}
	if (!af_ckpt.loaded) {
		af_ckpt.tried = 0;
		return fast_fail("no checkpoint in the anchor's areas loads");
	}
	if (af_ckpt.number > af_ckpt.seen_number)
		af_ckpt.seen_number = af_ckpt.number;
	/* Page 0 is read only of the blocks open when the checkpoint was taken (af_ckpt_load marked them
	 * cand) or planned since; every other good block is as the checkpoint knew it, free or written below
	 * its floor (af_flash_select says which). */
	af_flash_cand_clear();
	for (uint32_t i = 0; i < af_ckpt.nopen; i++)
		af_flash_cand(af_nand_block_of(af_ckpt.open_ppa[i]));
	for (uint32_t i = 0; i < af_anchor.nplan; i++)
		if (af_anchor.plan[i] < af_flash.nblocks)
			af_flash_cand(af_anchor.plan[i]);
	return af_flash_p0_pass(1) < 0 ? -1 : 1;
}

/* Recovery is about to use entry lba: its segment of a lazily loaded checkpoint map in memory.  1 when one
 * may have been loaded (through the sync slot). */
static int need_segment(uint32_t lba)
{
	if (!af_mapload.active)
		return 0;
	af_map_need(lba);
	return 1;
}

int af_mount(void)
{
	int r = af_flash_bringup();
	if (r < 0)
		return r;
	/* Page 0 of every block: checkpoint headers, and each block's first seq.  The bad-block table
	 * comes after it: from the newest checkpoint (format 4), or else from the factory markers. */
	af_ckpt.page = af_ram_alloc(af_nand.page_data, 64);
	if (!af_ckpt.page) {
		printf("error: boot: main RAM too small\n");
		return -1;
	}
	af_flash.ram_used = af_ram_used();
	/* The anchor, then the checkpoint its record names and page 0 of the blocks written since; or page 0
	 * of every block: checkpoint headers, and each block's first seq.  The bad-block table comes after
	 * it: from the newest checkpoint (format 4), or else from the factory markers. */
	uint64_t t0 = af_uptime_cycles();
	af_anchor_boot();
	int have_ckpt = fast_boot();
	if (have_ckpt < 0)
		return have_ckpt;
	af_flash.t_ckpt = af_uptime_cycles() - t0 - af_flash.t_p0;
	if (!have_ckpt) {
		r = af_flash_p0_pass(0);
		if (r < 0)
			return r;
		t0 = af_uptime_cycles();
		have_ckpt = find_checkpoint();
		/* the next checkpoint's number above every header on flash, intact or not: a torn or stale header
		 * that stays in a block no area names (rotation) must never tie with a new one (find_checkpoint
		 * tries each number once) */
		for (uint32_t g = 0; g < af_flash.nblocks; g++)
			if (!af_flash.blocks[g].flags && af_flash.blocks[g].p0 == AF_P0_CKPT &&
			    af_flash.p0[g].num > af_ckpt.seen_number)
				af_ckpt.seen_number = af_flash.p0[g].num;
		af_flash.t_ckpt += af_uptime_cycles() - t0;
		/* The anchor blocks are this firmware's when they hold its records or nothing; on a device an
		 * older firmware wrote (a checkpoint before format 5) only when they are erased. */
		for (uint32_t i = 0; af_anchor.found && i < AF_ANCHOR_BLOCKS; i++) {
			uint8_t p0 = af_flash.blocks[af_anchor.block[i]].p0;
			int older = have_ckpt && af_ckpt.format < 5;
			if (!(p0 == AF_P0_ERASED || p0 == AF_P0_ANCHOR || (p0 == AF_P0_TORN && !older))) {
				printf("anchor: block %lu holds an older firmware's data: no anchor on this device (every boot "
				       "reads page 0 of every block)\n", (unsigned long)af_anchor.block[i]);
				for (uint32_t j = 0; j < AF_ANCHOR_BLOCKS; j++)
					af_flash.blocks[af_anchor.block[j]].anchor = 0;
				af_anchor.found = 0;
				af_anchor.mode = AF_PLAN_OFF;
				break;
			}
		}
	}
	if (!af_ckpt.bbt) {
		/* Factory bad blocks: raw read of page 0's marker bytes (the first boot, or an older
		 * checkpoint format).  What the page-0 pass read of a bad block is ignored from here on. */
		r = af_flash_bbt_pass();
		if (r < 0)
			return r;
	}
	uint32_t anchor_bad = af_anchor_apply_bad(); /* before the selection: those are not scanned */
	uint32_t factory = 0, shown = 0, first_bad[16];
	for (uint32_t a = 0; have_ckpt && a < AF_CKPT_AREAS; a++) /* the areas: never scanned */
		for (uint32_t i = 0; i < af_ckpt.narea; i++) {
			uint32_t g = af_ckpt.area_block[a][i];
			if (g < af_flash.nblocks && !af_flash.blocks[g].flags)
				af_flash.blocks[g].state = AF_BSTATE_CKPT;
		}
	af_flash_select(have_ckpt, af_ckpt.seq, &factory, first_bad);
	printf("bbt: %lu bad blocks of %lu", (unsigned long)factory, (unsigned long)af_flash.nblocks);
	for (; shown < factory && shown < 16; shown++)
		printf("%s%lu", shown ? " " : ": ", (unsigned long)first_bad[shown]);
	printf("%s", factory > shown ? " ..." : "");
	if (af_ckpt.bbt)
		printf(" (the table of checkpoint %lu; no markers read)", (unsigned long)af_ckpt.number);
	else
		printf(" (factory markers read%s)", have_ckpt ? ": the checkpoint's format carries no table" : "");
	printf("\n");
	if (have_ckpt) {
		printf("checkpoint: %lu (floor seq ", (unsigned long)af_ckpt.number);
		af_print_u64(af_ckpt.seq);
		printf(", area %lu, %lu pages, %lu open blocks)", (unsigned long)af_ckpt.area, (unsigned long)af_ckpt.pages,
		       (unsigned long)af_ckpt.nopen);
		if (af_ckpt.tried)
			printf("; %lu newer ones not intact", (unsigned long)af_ckpt.tried);
		printf("\n");
		if (af_ckpt.retired)
			printf("bbt: %lu grown bad blocks (retired, named by the checkpoint)\n", (unsigned long)af_ckpt.retired);
		if (af_ckpt.areas_dropped)
			printf("checkpoint: %lu blocks its header names for the other area hold no checkpoint now (reused "
			       "or torn): the next checkpoint takes fresh ones\n", (unsigned long)af_ckpt.areas_dropped);
		if (af_ckpt.retiring)
			printf("bbt: %lu blocks retiring (named by the checkpoint: a program failed; GC moves their data, "
			       "then retires them)\n", (unsigned long)af_ckpt.retiring);
	} else {
		printf("checkpoint: none%s: scanning every block\n", af_ckpt.tried ? " intact" : "");
	}
	if (anchor_bad)
		printf("bbt: %lu grown bad blocks named by the anchor's record (retired since the checkpoint)\n",
		       (unsigned long)anchor_bad);
	if (af_anchor.found && !af_anchor.have) {
		printf("anchor: blocks %lu %lu, no record yet", (unsigned long)af_anchor.block[0],
		       (unsigned long)af_anchor.block[1]);
	} else if (af_anchor.found) {
		printf("anchor: blocks %lu %lu, record ", (unsigned long)af_anchor.block[0], (unsigned long)af_anchor.block[1]);
		af_print_u64(af_anchor.seq);
		printf(" (base checkpoint ");
		af_print_u64(af_anchor.base);
		printf(", plan %lu blocks)", (unsigned long)af_anchor.nplan);
	} else {
		printf("anchor: %s", AF_ANCHOR_ENABLED ? "none" : "off in this build");
	}
	if (af_flash.fast)
		printf(": page 0 of %lu blocks read\n", (unsigned long)af_flash.p0_reads);
	else
		printf(": page 0 of every block read (%s)\n", af_flash.full_why ? af_flash.full_why : "?");
	/* Recovery: the written prefix of every selected block, up to its first erased page, then
	 * af_rec_finish over the checkpoint's map */
	af_rec_checkpoint_t ck;
	memset(&ck, 0, sizeof(ck));
	ck.seq = af_ckpt.seq;
	if (af_ckpt.format >= AF_CKPT_FORMAT_PENDING)
		af_pend_fill(&ck); /* transactions open and appends live at its floor */
	else
		ck.published_below = 1; /* older firmware's floor rule: held below every open one */
	r = af_flash_recover(have_ckpt ? &ck : NULL, need_segment);
	if (r < 0)
		return r;
	if (af_mapload.active)
		printf("map: loaded lazily: %lu of %lu segments (%lu LBAs each) read for recovery; the rest as the "
		       "host needs them, and in the background\n", (unsigned long)af_mapload.at_boot,
		       (unsigned long)af_mapload.nseg, (unsigned long)(1u << af_mapload.seg_shift));
	printf("time: bring-up ");
	af_print_ms(af_flash.t_bringup);
	printf(", bbt ");
	af_print_ms(af_flash.t_bbt);
	printf(", page 0 ");
	af_print_ms(af_flash.t_p0);
	printf(", checkpoint ");
	af_print_ms(af_flash.t_ckpt);
	printf(", scan ");
	af_print_ms(af_flash.t_scan);
	printf(", finish ");
	af_print_ms(af_flash.t_finish);
	printf(" (simulated at %lu Hz)\n", (unsigned long)CONFIG_CLOCK_FREQUENCY);
	return 0;
}

#endif /* AFNAND_BASE */
