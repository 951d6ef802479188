/* atomflash firmware: owning the FTL core (see ftl.h). */
#include <stdio.h>
#include <string.h>

#include <system.h>

#include "anchor.h"
#include "ckpt.h"
#include "console.h"
#include "flash.h"
#include "ftl.h"
#include "mapload.h"
#include "nand.h"
#include "policy.h"
#include "wear.h"

#ifdef AFCTRL_FTL

/* --- free blocks -------------------------------------------------------------------- */

static unsigned die_target(void)
{
	/* the open block plus up to two queued behind it (the core's FIFO holds free_depth) */
	return 1 + (af_ftl.free_depth < 2 ? af_ftl.free_depth : 2);
}

/* Count the erase a popped block needed before use (result: its AF_NANDRESULT_*); retired when it failed.
 * 0, or -1 when retired. */
static int erased_before_use(uint32_t g, int result)
{
	af_block_t *b = &af_flash.blocks[g];
	b->erases++;
	af_flash.erased_since_boot++;
	if (result != AF_NANDRESULT_OK) {
		af_ftl_retire(g, "its erase failed", 0);
		return -1;
	}
	b->needs_erase = 0;
	return 0;
}

/* Pop die's next erased block, erasing it first when only its page 0 is known erased (unless !erase: then
 * the caller does, b->needs_erase still set); for the core (for_core) only a block the anchor's plan
 * allows.  0; -1 when the pool is empty, -2 when no block in it is planned. */
static int pool_pop(uint32_t die, uint16_t *block, int for_core, int erase)
{
	while (af_ftl.pool_n[die] > 0) {
		/* least worn first (dynamic wear levelling): swap it to the top, pop */
		uint16_t *pool = &af_ftl.pool[die * af_nand.blocks_per_lun];
		uint32_t *wear = &af_ftl.pool_wear[die * af_nand.blocks_per_lun];
		uint32_t top = af_ftl.pool_n[die] - 1, pick = af_policy_least_worn(wear, top + 1);
		if (for_core && !af_plan_allows(af_ftl_gblock(die, pool[pick]))) {
			pick = UINT32_MAX; /* the least worn of the planned ones (ties: the stack's top) */
			uint32_t g0 = af_ftl_gblock(die, 0); /* a die's blocks are consecutive global blocks */
			for (uint32_t i = top + 1; i-- > 0;) /* the plan only of those less worn */
				if ((pick == UINT32_MAX || wear[i] < wear[pick]) && af_plan_allows(g0 + pool[i]))
					pick = i;
			if (pick == UINT32_MAX)
				return -2;
		}
		af_ftl.pool_n[die] = top;
		*block = pool[pick];
		pool[pick] = pool[top];
		wear[pick] = wear[top];
		af_ftl.free_blocks--;
		uint32_t g = af_ftl_gblock(die, *block);
		if (erase && af_flash.blocks[g].needs_erase &&
		    erased_before_use(g, af_nand_erase(af_nand_block_ppa(g), NULL)) < 0)
			continue;
		return 0;
	}
	return -1;
}

int af_ftl_pool_take(uint32_t *g)
{
	/* the die with the most free blocks */
	uint32_t best = 0;
	for (uint32_t d = 1; d < af_ftl.dies; d++)
		if (af_ftl.pool_n[d] > af_ftl.pool_n[best])
			best = d;
	uint16_t block;
	if (pool_pop(best, &block, 0, 1) < 0)
		return -1;
	*g = af_ftl_gblock(best, block);
	af_flash.blocks[*g].state = AF_BSTATE_CKPT;
	return 0;
}

int af_ftl_pool_rotate(uint32_t *g, uint32_t spread)
{
	uint32_t bpl = af_nand.blocks_per_lun, best_die = 0, best = UINT32_MAX;
	for (uint32_t d = 0; d < af_ftl.dies; d++)
		for (uint32_t i = 0; i < af_ftl.pool_n[d]; i++) {
			uint32_t e = af_ftl.pool_wear[d * bpl + i];
			if (e < best) {
				best = e;
				best_die = d;
			}
		}
	af_block_t *old = &af_flash.blocks[*g];
	uint32_t old_ppa = af_nand_block_ppa(*g), old_die = af_ftl_die_of(old_ppa);
	if (best == UINT32_MAX || old->erases < best + spread || AF_PPA_PPA_LUN_GET(old_ppa) != 0)
		return 0;
	uint16_t block;
	if (pool_pop(best_die, &block, 0, 1) < 0) /* the least worn of that die: the one found (or as worn) */
		return 0;
	uint32_t fresh = af_ftl_gblock(best_die, block);
	af_flash.blocks[fresh].state = AF_BSTATE_CKPT;
	/* the old block holds only a stale checkpoint: erased when it is next handed out */
	old->state = AF_BSTATE_FREE;
	old->needs_erase = 1;
	old->written = 0;
	old->valid = 0;
	af_ftl.pool_wear[old_die * bpl + af_ftl.pool_n[old_die]] = old->erases;
	af_ftl.pool[old_die * bpl + af_ftl.pool_n[old_die]++] = (uint16_t)AF_PPA_PPA_BLOCK_GET(old_ppa);
	af_ftl.free_blocks++;
	*g = fresh;
	return 1;
}

/* Does die take another block now?  The reserve goes to the core while GC relocates, and once GC is
 * stuck (nothing to collect: af_ftl.gc_stuck, whether the writes are refused as GC_STUCK or as FULL) or
 * the core had no block at all: then only commands already in the core and the records that finish or
 * free something take pages, and an abort or commit queued behind a starved write can run (an open
 * transaction pinning the floor).  Also while the firmware waits for its own command behind a starved
 * core (af_ftl_reap). */
static int refill_wanted(uint32_t die)
{
	return af_ftl.handed[die] < die_target() && af_ftl.pool_n[die] > 0 &&
	       (af_ftl.gc_active || af_ftl.free_blocks > AF_FTL_GC_RESERVE || af_ftl.gc_stuck ||
		af_ftl.no_space == AF_NOSPACE_NO_BLOCKS || af_ftl.fw_waiting);
}

static void no_blocks_check(void);

/* Die's next block for the core (planned; the plan topped up when it ran dry on this die): 0, or -1. */
static int pop_for_core(uint32_t die, uint16_t *block, int erase)
{
	int r = pool_pop(die, block, 1, erase);
	if (r == -2 && af_plan_extend() == 0) /* topped up, recorded */
		r = pool_pop(die, block, 1, erase);
	return r < 0 ? -1 : 0;
}

/* The core took the last block pushed (before a block leaves the pool for it): 0, or -1. */
static int wait_free_taken(uint32_t die)
{
	if (af_ftl_wait_clear(AF_FTL_STATUS_FREE_PENDING) == 0)
		return 0;
	printf("error: ftl: free-block push not taken (die %lu)\n", (unsigned long)die);
	return -1;
}

static int push_to_core(uint32_t die, uint16_t block)
{
	if (wait_free_taken(die) < 0)
		return -1;
	ftl_wr(AF_FTL_FREE, (die << AF_FTL_FREE_DIE_SHIFT) | ((uint32_t)block << AF_FTL_FREE_BLOCK_SHIFT));
	af_flash.blocks[af_ftl_gblock(die, block)].state = AF_BSTATE_CORE;
	af_ftl.handed[die]++;
	af_ftl.pushed++;
	if (af_ftl.no_blocks) { /* pages again (the core stopped giving up as the block was offered) */
		af_ftl.no_blocks = 0;
		if (af_ftl.no_space == AF_NOSPACE_NO_BLOCKS) {
			af_ftl_set_no_space(AF_NOSPACE_NONE);
			af_ftl.space_dirty = 1; /* FULL, perhaps: the next poll decides */
		} else {
			af_ftl_host_ctrl();
		}
	}
	return 0;
}

void af_ftl_refill(uint32_t die)
{
	uint16_t block;
	while (refill_wanted(die) && wait_free_taken(die) == 0 && pop_for_core(die, &block, 1) == 0)
		push_to_core(die, block);
	no_blocks_check(); /* the pool may have run dry on failed erases */
}

void af_ftl_refill_all(void)
{
	static uint32_t ppa[AF_FTL_MAX_DIES];
	static uint16_t block[AF_FTL_MAX_DIES];
	static uint8_t die_of[AF_FTL_MAX_DIES];
	static int result[AF_FTL_MAX_DIES];
	for (;;) {
		/* a round: one block for every die that takes one, their erases (if any) side by side */
		uint32_t n = 0, m = 0;
		for (uint32_t d = 0; d < af_ftl.dies; d++)
			if (refill_wanted(d) && pop_for_core(d, &block[n], 0) == 0)
				die_of[n++] = (uint8_t)d;
		if (!n) {
			no_blocks_check(); /* the pool may have run dry on failed erases */
			return;
		}
		for (uint32_t i = 0; i < n; i++)
			if (af_flash.blocks[af_ftl_gblock(die_of[i], block[i])].needs_erase)
				ppa[m++] = af_nand_block_ppa(af_ftl_gblock(die_of[i], block[i]));
		af_nand_erase_many(ppa, result, m);
		for (uint32_t i = 0, k = 0; i < n; i++) {
			uint32_t g = af_ftl_gblock(die_of[i], block[i]);
			if (af_flash.blocks[g].needs_erase && erased_before_use(g, result[k++]) < 0)
				continue; /* the die tries its next block in the next round */
			if (push_to_core(die_of[i], block[i]) < 0)
				return;
		}
	}
}

uint64_t af_ftl_room_pages(void)
{
	uint64_t ppb = af_nand.pages_per_block, pushed = (uint64_t)af_ftl.pushed * ppb;
	uint64_t used = af_ftl_seq_next() - af_ftl.start_seq;
	return (pushed > used ? pushed - used : 0) + (uint64_t)af_ftl.free_blocks * ppb;
}

uint32_t af_ftl_erased_blocks(void)
{
	uint32_t n = af_ftl.free_blocks;
	for (uint32_t d = 0; d < af_ftl.dies; d++)
		n += af_ftl.handed[d] > 1 ? af_ftl.handed[d] - 1 : 0; /* queued behind the open one */
	return n;
}

void af_ftl_retire(uint32_t g, const char *why, int holds_data)
{
	af_block_t *b = &af_flash.blocks[g];
	if (!b->flags)
		af_flash.bad_blocks++;
	if (!(b->flags & AF_BLOCK_RETIRED))
		af_flash.retired_marks++;
	b->flags |= AF_BLOCK_RETIRED;
	/* a block the core writes or that holds bound pages retires once GC moved them (gc.c) */
	b->retire = (uint8_t)holds_data;
	af_ftl.space_dirty = 1;
	if (b->retire)
		af_ftl.retiring++;
	else {
		b->state = AF_BSTATE_RETIRED;
		af_anchor_retired();
	}
	printf("warning: ftl: block %lu: %s: retired%s\n", (unsigned long)g, why,
	       b->retire ? " once its data moved" : "");
}

int af_ftl_block_erased(uint32_t g, int ok)
{
	af_block_t *b = &af_flash.blocks[g];
	uint32_t ppa = af_nand_block_ppa(g);
	uint32_t die = af_ftl_die_of(ppa);
	b->erases++;
	af_flash.erased_since_boot++;
	if (!ok) {
		af_ftl_retire(g, "its erase failed", 0);
		return -1;
	}
	b->state = AF_BSTATE_FREE;
	b->written = b->torn = 0;
	b->valid = 0;
	b->needs_erase = 0;
	b->close_seq = 0;
	af_ftl.pool_wear[die * af_nand.blocks_per_lun + af_ftl.pool_n[die]] = b->erases;
	af_ftl.pool[die * af_nand.blocks_per_lun + af_ftl.pool_n[die]++] = (uint16_t)AF_PPA_PPA_BLOCK_GET(ppa);
	af_ftl.free_blocks++;
	af_ftl.erased++;
	af_ftl.space_dirty = 1;
	af_ftl_refill(die);
	return 0;
}

void af_ftl_count_erase(uint32_t g)
{
	af_block_t *b = &af_flash.blocks[g];
	b->erases++;
	af_flash.erased_since_boot++;
	uint32_t ppa = af_nand_block_ppa(g), die = af_ftl_die_of(ppa), bpl = af_nand.blocks_per_lun;
	if (!af_ftl.pool || !af_ftl.pool_wear || AF_PPA_PPA_LUN_GET(ppa) != 0)
		return;
	for (uint32_t i = 0; i < af_ftl.pool_n[die]; i++)
		if (af_ftl.pool[die * bpl + i] == AF_PPA_PPA_BLOCK_GET(ppa))
			af_ftl.pool_wear[die * bpl + i] = b->erases;
}

/* --- out of space (ftl.h) ---------------------------------------------------------------- */

/* No page will come: the core starved and not one block in the pool (the erases failed).  A command
 * already in the core would wait for a page for ever, and every command behind it -- the firmware's own
 * FLUSH before a checkpoint too, which GC may need before it can free a block (campaign trial 6952);
 * ftl.host_enable.no_blocks has the core complete it NO_SPACE instead (its group dropped, nothing
 * bound), and new writes get NO_SPACE (NoSpace.NO_BLOCKS) unless already refused for another reason.
 * Lifted when a block reaches the core again (push_to_core). */
static void no_blocks_check(void)
{
	if (!af_ftl.running || af_ftl.no_blocks || af_ftl.free_blocks != 0 || !(ftl_rd(AF_FTL_STATUS) & AF_FTL_STATUS_STARVED))
		return;
	af_ftl.no_blocks = 1;
	printf("warning: ftl: no erased block for the core and none in the pool: commands waiting for a page "
	       "complete NO_SPACE\n");
	af_ftl_space_check(); /* the counts the warning below shows (at boot none has been taken yet) */
	if (af_ftl.no_space == AF_NOSPACE_NONE)
		af_ftl_set_no_space(AF_NOSPACE_NO_BLOCKS);
	else
		af_ftl_host_ctrl();
}

void af_ftl_set_no_space(uint32_t why)
{
	if (why == af_ftl.no_space)
		return;
	if (why == AF_NOSPACE_NONE)
		printf("ftl: writes accepted again (%lu good blocks, %lu pages stored)\n", (unsigned long)af_ftl.good_blocks,
		       (unsigned long)af_ftl.live_pages);
	else
		printf("warning: ftl: out of space: %s: writes complete with NO_SPACE; reads go on "
		       "(%lu good blocks, %lu pages stored, %lu erased blocks)\n",
		       why == AF_NOSPACE_FULL	    ? "the good blocks left cannot hold the data stored"
		       : why == AF_NOSPACE_GC_STUCK ? "GC found nothing to collect with only its reserve left"
						    : "no erased block for the core, none in the pool",
		       (unsigned long)af_ftl.good_blocks, (unsigned long)af_ftl.live_pages,
		       (unsigned long)af_ftl_erased_blocks());
	af_ftl.no_space = why;
	if (af_ftl.log) {
		/* GET_LOG says why before the first refusal (the idle refresh may come later) */
		af_ftl.log->no_space = why;
		af_ftl.log->spare_blocks = af_ftl.spare_blocks;
		af_dcache_invalidate();
	}
	if (af_ftl.running)
		af_ftl_host_ctrl();
}

/* good: LUN 0's good blocks; live: the pages the core's block table counts */
static void space_apply(uint32_t good, uint64_t live)
{
	uint32_t ppb = af_nand.pages_per_block;
	af_ftl.space_dirty = 0;
	/* less what the capacity leaves out (the checkpoint areas counted whether taken yet or not) */
	uint32_t held = af_ftl.held_blocks;
	uint64_t usable = good > held ? (uint64_t)(good - held) * ppb : 0;
	uint32_t spare = usable > af_ftl.capacity ? (uint32_t)((usable - af_ftl.capacity) / ppb) : 0;
	if (spare < af_ftl.spare_blocks && spare == 0)
		printf("warning: ftl: grown bad blocks used up the over-provisioning: writes get NO_SPACE once the "
		       "data stored no longer fits\n");
	af_ftl.good_blocks = good;
	af_ftl.spare_blocks = spare;
	af_ftl.live_pages = live;
	/* the data stored, in blocks, plus one block of garbage for GC to make progress with.  While the
	 * good blocks hold the whole capacity that way, never FULL: live is the block table's count, which
	 * counts a write's new page before the map drops its old one (every command in flight, up to a
	 * whole transfer each), and a device that can hold every LBA it advertises is not full. */
	uint64_t need = ((live + ppb - 1) / ppb + 1) * ppb;
	uint64_t need_capacity = ((af_ftl.capacity + ppb - 1) / ppb + 1) * ppb;
	int full = usable < need && usable < need_capacity;
	if (af_ftl.no_space == AF_NOSPACE_FULL ? usable >= need + ppb : af_ftl.no_space == AF_NOSPACE_NONE && full)
		af_ftl_set_no_space(full ? AF_NOSPACE_FULL : AF_NOSPACE_NONE);
}

void af_ftl_space_check(void)
{
	uint32_t good = 0;
	uint64_t live = 0;
	for (uint32_t t = 0; t < af_nand.targets; t++) { /* LUN 0 of each target: the FTL's blocks */
		const af_block_t *b = &af_flash.blocks[t * af_nand.luns * af_nand.blocks_per_lun];
		for (uint32_t k = 0; k < af_nand.blocks_per_lun; k++)
			good += !b[k].flags;
	}
	af_dcache_invalidate(); /* the block table is written by the core */
	for (uint32_t i = 0; i < (af_ftl.dies << af_ftl.block_shift); i++)
		live += af_ftl.bt[i];
	space_apply(good, live);
}

void af_ftl_poll(void)
{
	if (!af_ftl.running)
		return;
	af_map_poll(); /* a host request waiting for its map segment first */
	while (ftl_rd(AF_FTL_STATUS) & AF_FTL_STATUS_CLOSED_VALID) {
		uint32_t c = ftl_rd(AF_FTL_CLOSED);
		ftl_wr(AF_FTL_CTRL, AF_FTL_CTRL_POP_CLOSED);
		uint32_t die = ftl_field(c, AF_FTL_CLOSED_DIE, AF_FTL_CLOSED_DIE_SHIFT);
		uint32_t block = ftl_field(c, AF_FTL_CLOSED_BLOCK, AF_FTL_CLOSED_BLOCK_SHIFT);
		af_ftl.closed++;
		if (die >= af_ftl.dies || block >= af_nand.blocks_per_lun) {
			printf("error: ftl: closed block die %lu block %lu does not exist\n", (unsigned long)die,
			       (unsigned long)block);
			continue;
		}
		af_block_t *b = &af_flash.blocks[af_ftl_gblock(die, block)];
		b->state = AF_BSTATE_DATA;
		b->written = (uint16_t)af_nand.pages_per_block;
		b->close_seq = af_ftl_seq_next();
		if (af_ftl.handed[die])
			af_ftl.handed[die]--;
		af_ftl.space_dirty = 1;
		af_ftl_refill(die);
	}
	uint32_t st;
	while ((st = ftl_rd(AF_FTL_STATUS)) & AF_FTL_STATUS_FAILED_VALID) {
		uint32_t ppa = ftl_rd(AF_FTL_FAILED);
		ftl_wr(AF_FTL_CTRL, AF_FTL_CTRL_POP_FAILED);
		af_ftl.program_failures++;
		uint32_t g = af_nand_block_of(ppa);
		if (g >= af_flash.nblocks) {
			printf("error: ftl: program failure reported on page 0x%08lx, outside the device\n", (unsigned long)ppa);
			continue;
		}
		printf("warning: ftl: program of page 0x%08lx failed (the core wrote its data again elsewhere)\n",
		       (unsigned long)ppa);
		if (!(af_flash.blocks[g].flags & AF_BLOCK_RETIRED))
			af_ftl_retire(g, "a program failed", 1);
	}
	if ((st & AF_FTL_STATUS_FAILED_LOST) && !af_ftl.failed_lost_seen) {
		af_ftl.failed_lost_seen = 1;
		printf("warning: ftl: program failures came faster than the firmware took them: some block with one "
		       "was not retired (it will fail again)\n");
	}
	if (af_ftl.space_dirty)
		af_ftl_space_check();
	no_blocks_check();
	af_anchor_poll(); /* a block retired: the next boot learns it from the anchor, before any checkpoint */
}

/* While the firmware waits for its own command (af_ftl_reap): the core's streams (a long write may need fresh
 * blocks).  Our command may wait behind the core's, and those for a page (a checkpoint's FLUSH behind a host
 * write, with only GC's reserve left: campaign trial 6952): the reserve goes to the core. */
static void reap_upkeep(void)
{
	af_ftl_poll();
	if (!af_ftl.fw_waiting && (ftl_rd(AF_FTL_STATUS) & AF_FTL_STATUS_STARVED) && af_ftl.free_blocks) {
		af_ftl.fw_waiting = 1;
		af_ftl_refill_all();
	}
}

/* --- start ---------------------------------------------------------------------------- */

static void fill_identify(af_identify_t *idf)
{
	memset(idf, 0, sizeof(*idf));
	idf->magic = AF_IDENTIFY_MAGIC;
	idf->spec_version = AF_SPEC_VERSION;
	idf->fw_version = AF_FW_VERSION;
	idf->capacity = af_ftl.capacity;
	idf->lba_size = af_nand.page_data;
	idf->max_transfer = AF_LIMITS_MAX_TRANSFER;      /* the core is elaborated with the spec's limits */
	idf->max_atomic_pages = AF_LIMITS_MAX_ATOMIC_PAGES;
	uint32_t lim = ftl_rd(AF_FTL_TX_LIMITS);        /* the core's build */
	idf->max_open_tx = (lim & AF_FTL_TX_LIMITS_MAX_OPEN_TX) >> AF_FTL_TX_LIMITS_MAX_OPEN_TX_SHIFT;
	/* Staged pages (open transactions, live appends) are live beside the host's data, so they must fit
	 * the over-provisioning with room left for GC: half of it at most (the core's table may be larger).
	 * Beyond it TX_WRITE and APPEND complete PENDING_FULL; plain writes are never refused for it. */
	uint32_t table = (lim & AF_FTL_TX_LIMITS_MAX_PENDING) >> AF_FTL_TX_LIMITS_MAX_PENDING_SHIFT;
	uint64_t usable = (uint64_t)(af_ftl.dies * af_nand.blocks_per_lun - af_ftl.held_blocks) * af_nand.pages_per_block;
	uint64_t budget = usable > af_ftl.capacity ? (usable - af_ftl.capacity) / 2 : 0;
	idf->max_pending = budget < table ? (uint32_t)budget : table;
	ftl_wr(AF_FTL_PENDING_BUDGET, idf->max_pending ? idf->max_pending : 1);
	uint32_t app = ftl_rd(AF_FTL_APPEND_LIMITS);
	idf->max_remap_triples = (app & AF_FTL_APPEND_LIMITS_MAX_REMAP_TRIPLES) >> AF_FTL_APPEND_LIMITS_MAX_REMAP_TRIPLES_SHIFT;
	idf->max_appends = (app & AF_FTL_APPEND_LIMITS_MAX_APPENDS) >> AF_FTL_APPEND_LIMITS_MAX_APPENDS_SHIFT;
	idf->awupf = AF_LIMITS_MAX_ATOMIC_PAGES;
	idf->volatile_cache = af_ftl.cache_pages * af_nand.page_data; /* FLUSH makes it durable */
	idf->channels = (uint16_t)af_ftl.channels;
	idf->ways = (uint16_t)af_ftl.ways;
	idf->luns = 1;
	idf->page_data = af_nand.page_data;
	idf->page_spare = af_nand.page_spare;
	idf->pages_per_block = af_nand.pages_per_block;
	idf->blocks_per_lun = af_nand.blocks_per_lun;
	idf->queue_depth = AF_LIMITS_QUEUE_DEPTH;        /* checked against hostq.max_entries once enabled */
	idf->ecc_t = AF_ECC_T;
	idf->ecc_codeword = AF_ECC_CODEWORD;
}

int af_ftl_start(void)
{
	if (!af_ftl.present || !af_flash.scanned)
		return -1;
	uint32_t bpl = af_nand.blocks_per_lun;
	uint64_t t0 = af_uptime_cycles();
	if (af_ftl.channels != af_nand.channels || af_ftl.ways != af_nand.ways) {
		printf("error: ftl: core built for %lu x %lu, NAND window reports %lu x %lu\n",
		       (unsigned long)af_ftl.channels, (unsigned long)af_ftl.ways, (unsigned long)af_nand.channels,
		       (unsigned long)af_nand.ways);
		return -1;
	}
	af_ftl.block_shift = 0;
	while ((1u << af_ftl.block_shift) < bpl)
		af_ftl.block_shift++;
	uint32_t bt_words = af_ftl.dies << af_ftl.block_shift;
	/* capacity: the dies' blocks less the checkpoint areas, GC's reserve and one open
	 * block per die, less the over-provisioning -- at least one block of it, the headroom
	 * space_apply wants for GC, so a device without grown bad blocks is never FULL; from the
	 * geometry alone, so it is the same on every boot (grown bad blocks eat into the
	 * over-provisioning) */
	uint32_t ppb = af_nand.pages_per_block, held = AF_FTL_GC_RESERVE + af_ftl.dies + (AF_ANCHOR_ENABLED ? AF_ANCHOR_BLOCKS : 0), narea = 1;
	for (int i = 0; i < 3; i++) {
		uint32_t blocks = af_ftl.dies * bpl > held + AF_CKPT_AREAS * narea ? af_ftl.dies * bpl - held - AF_CKPT_AREAS * narea : 0;
		af_ftl.capacity = (uint64_t)blocks * ppb * (100u - AF_LIMITS_OVER_PROVISION_PERCENT) / 100u;
		if (blocks && af_ftl.capacity > (uint64_t)(blocks - 1) * ppb)
			af_ftl.capacity = (uint64_t)(blocks - 1) * ppb;
		uint64_t ckpt_pages = af_ckpt_pages_for(af_ftl.capacity, af_flash.nblocks);
		narea = (uint32_t)((ckpt_pages + ppb - 1) / ppb);
	}
	af_ftl.held_blocks = held + AF_CKPT_AREAS * narea; /* what the capacity left out (af_ftl_space_check) */
	if (af_ftl.capacity > af_flash.nlba)
		af_ftl.capacity = af_flash.nlba;
	if (af_ftl.capacity == 0) {
		printf("error: ftl: %lu blocks per die leave no room for host data\n", (unsigned long)bpl);
		return -1;
	}

	af_ftl.bt = af_ram_alloc(4 * bt_words, 8);
	af_ftl.scratch = af_ram_alloc(af_ftl.scratch_pages * af_nand.page_data, 64);
	af_ftl.gc_buf = af_ram_alloc(af_nand.page_data, 64);
	af_ftl.identify = af_ram_alloc(sizeof(af_identify_t), 64);
	af_ftl.log = af_ram_alloc(sizeof(af_log_page_t), 64);
	af_ftl.pool = af_ram_alloc(2 * af_ftl.dies * bpl, 4);
	af_ftl.pool_wear = af_ram_alloc(4 * af_ftl.dies * bpl, 4);
	af_ckpt.shadow_ppa = af_ram_alloc(4 * (uint32_t)af_ftl.capacity, 8);
	af_ckpt.shadow_erases = af_ram_alloc(4 * af_flash.nblocks, 4);
	/* the write cache, when the core has one (soc/sim.py --cache-pages): main RAM the core alone uses */
	af_ftl.cache_pages = ftl_rd(AF_FTL_CACHE_PAGES);
	af_ftl.cache = af_ftl.cache_pages ? af_ram_alloc(af_ftl.cache_pages * af_nand.page_data, 64) : NULL;
	if (!af_ftl.bt || !af_ftl.scratch || !af_ftl.gc_buf || !af_ftl.identify || !af_ftl.log || !af_ftl.pool || !af_ftl.pool_wear ||
	    !af_ckpt.shadow_ppa || !af_ckpt.shadow_erases || (af_ftl.cache_pages && !af_ftl.cache)) {
		printf("error: ftl: main RAM too small for the core's tables\n");
		return -1;
	}

	/* block table (the core's order) and the free pool: erased good blocks of LUN 0 */
	memset(af_ftl.bt, 0, 4 * bt_words);
	/* one pass, ~140 cycles a block on VexRiscv (docs/firmware.md, "Boot passes"): the globals it reads
	 * in locals (a byte store may alias any of them: the compiler would load them again every block) */
	uint32_t other_lun_valid = 0, row_ppa = 0, k = bpl, free_blocks = 0, good = 0;
	uint64_t live = 0; /* af_ftl_space_check's counts, from this pass */
	const uint32_t nblocks = af_flash.nblocks, shift = af_ftl.block_shift;
	const uint64_t next_seq = af_flash.report.next_seq, ckpt_seq = af_ckpt.seq;
	uint32_t *bt = af_ftl.bt;
	uint16_t *pool = af_ftl.pool;
	uint32_t *pool_wear = af_ftl.pool_wear;
	uint8_t *planned = af_flash.planned;
	for (uint32_t g = 0; g < nblocks; g++) {
		af_block_t *b = &af_flash.blocks[g];
		if (k == bpl) { /* a new (target, LUN) row: its divisions once, not per block */
			row_ppa = af_nand_block_ppa(g);
			k = 0;
		}
		uint32_t ppa = AF_PPA_PPA_BLOCK_SET(row_ppa, k++);
		/* every page older than the next seq: GC may erase it once a checkpoint passes that */
		b->close_seq = b->scan ? next_seq : ckpt_seq;
		if (b->retire && !b->flags) {
			/* retiring when the checkpoint was taken (ckpt.c): never in the pool; GC moves its data out */
			b->flags |= AF_BLOCK_RETIRED;
			af_flash.bad_blocks++;
			af_flash.retired_marks++;
			af_ftl.retiring++;
		}
		if (af_plan_boot_mark(b)) /* the array is zero from the boot: a store only where it is set */
			planned[g] = 1;
		uint32_t lun0 = AF_PPA_PPA_LUN_GET(ppa) == 0;
		good += lun0 && !b->flags;
		if (b->state == AF_BSTATE_CKPT || b->state == AF_BSTATE_RETIRED)
			continue;
		if (!lun0) {
			b->state = AF_BSTATE_DATA;
			other_lun_valid += b->valid;
			continue;
		}
		uint32_t die = af_ftl_die_of(ppa), block = AF_PPA_PPA_BLOCK_GET(ppa);
		bt[(die << shift) | block] = b->valid;
		live += b->valid;
		if (!b->flags && b->written == 0) {
			b->state = AF_BSTATE_FREE;
			pool_wear[die * bpl + af_ftl.pool_n[die]] = b->erases;
			pool[die * bpl + af_ftl.pool_n[die]++] = (uint16_t)block;
			free_blocks++;
		} else {
			b->state = AF_BSTATE_DATA;
		}
	}
	af_ftl.free_blocks += free_blocks;
	if (other_lun_valid)
		printf("warning: ftl: %lu valid pages on LUNs the core does not write\n", (unsigned long)other_lun_valid);
	/* the checkpoint's view of the map so far: what recovery left (vseq in af_flash.map.vseq), for
	 * the segments in memory (a lazily loaded one sets its own); libc's word copy */
	af_map_copy_shadow(af_ckpt.shadow_ppa);
	af_ckpt_shadow_erases();
	/* the pool is a stack: hand out low block numbers first */
	for (uint32_t d = 0; d < af_ftl.dies; d++) {
		uint16_t *p = &af_ftl.pool[d * bpl];
		uint32_t *w = &af_ftl.pool_wear[d * bpl];
		for (uint32_t i = 0, j = af_ftl.pool_n[d]; i + 1 < j; i++, j--) {
			uint16_t t = p[i];
			p[i] = p[j - 1];
			p[j - 1] = t;
			uint32_t e = w[i];
			w[i] = w[j - 1];
			w[j - 1] = e;
		}
	}

	fill_identify(af_ftl.identify);
	memset(af_ftl.log, 0, sizeof(af_log_page_t));
	af_dcache_invalidate();

	ftl_wr(AF_FTL_PAGES_PER_BLOCK, af_nand.pages_per_block);
	/* MLC (DESIGN.md trap 4): lower-page completions wait for their word line's upper page */
	ftl_wr(AF_FTL_PAIRING, af_nand.bits_per_cell >= 2 ? AF_FTL_PAIRING_MLC : 0);
	ftl_wr(AF_FTL_BLOCK_SHIFT, af_ftl.block_shift);
	ftl_wr(AF_FTL_CAPACITY_LO, (uint32_t)af_ftl.capacity);
	ftl_wr(AF_FTL_CAPACITY_HI, (uint32_t)(af_ftl.capacity >> 32));
	ftl_wr(AF_FTL_L2P_BASE, (uint32_t)(uintptr_t)af_flash.map.ppa);
	ftl_wr(AF_FTL_BT_BASE, (uint32_t)(uintptr_t)af_ftl.bt);
	ftl_wr(AF_FTL_SCRATCH_BASE, (uint32_t)(uintptr_t)af_ftl.scratch);
	ftl_wr(AF_FTL_IDENTIFY_BASE, (uint32_t)(uintptr_t)af_ftl.identify);
	ftl_wr(AF_FTL_LOG_BASE, (uint32_t)(uintptr_t)af_ftl.log);
	ftl_wr(AF_FTL_GC_BUF, (uint32_t)(uintptr_t)af_ftl.gc_buf);
	ftl_wr(AF_FTL_CACHE_BASE, (uint32_t)(uintptr_t)af_ftl.cache);

	/* the lazy-load gate (which segments are in memory), then the map cache's block RAM, which
	 * survives a reset: drop whatever it holds */
	af_map_start_core();
	int r = af_ftl_map(AF_MAPFWOP_INVALIDATE, 0, 0, 0, NULL);
	if (r < 0 || (r & AF_FTL_MAP_RESULT_ERROR)) {
		printf("error: ftl: map-cache invalidate failed\n");
		return -1;
	}
	/* the log resumes past every seq recovery saw */
	af_ftl.start_seq = af_flash.report.next_seq;
	/* the resume gap is not pages written: automatic checkpoints count only the pages recovery saw past
	 * the checkpoint loaded (none after a clean reboot, which must not take one at once) */
	if (af_ckpt.valid) {
		uint64_t seen = af_flash.report.high_seq + 1;
		af_ckpt.at = af_ftl.start_seq - (seen > af_ckpt.at ? seen - af_ckpt.at : 0);
	}
	ftl_wr(AF_FTL_SEQ_LO, (uint32_t)af_ftl.start_seq);
	ftl_wr(AF_FTL_SEQ_HI, (uint32_t)(af_ftl.start_seq >> 32));
	ftl_wr(AF_FTL_CTRL, AF_FTL_CTRL_LOAD_SEQ);
	if (af_ftl_wait_clear(AF_FTL_STATUS_SEQ_PENDING) < 0) {
		printf("error: ftl: the log writer did not take its seq\n");
		return -1;
	}
	af_ftl_hooks.upkeep = reap_upkeep;
	/* the host held until the boot's GC is done (af_gc_boot): no command of its in the core meanwhile */
	af_ftl.host_held = 1;
	af_ftl.running = 1;
	af_plan_boot(); /* the anchor's record of what this boot may hand out, before it does */
	af_ftl_refill_all();

	af_ftl.spare_blocks = 0; /* the used-up warning is for a change while running, not every boot */
	if (af_ftl.space_dirty) /* a block retired since the pass (an erase before use failed): count again */
		af_ftl_space_check();
	else
		space_apply(good, live);
	af_ftl_host_ctrl();
	if (hostq_rd(AF_HOSTQ_ID) != AF_HOST_REGS_ID || hostq_rd(AF_HOSTQ_MAX_ENTRIES) != af_ftl.identify->queue_depth) {
		printf("error: ftl: host queue registers missing or not as the spec says (max_entries %lu)\n",
		       (unsigned long)hostq_rd(AF_HOSTQ_MAX_ENTRIES));
		ftl_wr(AF_FTL_HOST_ENABLE, 0);
		return -1;
	}
	if (af_ftl_queue_setup() < 0) {
		printf("error: ftl: the firmware's queue pair was refused\n");
		return -1;
	}
	printf("ftl: host interface on: capacity ");
	af_print_u64(af_ftl.capacity);
	printf(" LBAs of %lu B (%u%% over-provisioning), %lu free blocks, %lu handed to %lu dies, log seq ",
	       (unsigned long)af_nand.page_data, (unsigned)AF_LIMITS_OVER_PROVISION_PERCENT,
	       (unsigned long)(af_ftl.free_blocks + af_ftl.pushed), (unsigned long)af_ftl.pushed,
	       (unsigned long)af_ftl.dies);
	af_print_u64(af_ftl.start_seq);
	printf("; started in ");
	af_print_ms(af_uptime_cycles() - t0); /* tb/soc/bench.py: what grows with the device */
	printf("\n");
	return 0;
}

#endif /* AFCTRL_FTL */
