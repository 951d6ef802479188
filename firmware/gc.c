/* atomflash firmware: garbage collection.
 *
 * A victim is a full block the core handed back (or one from before boot),
 * not a checkpoint area's.  Its live pages move through the core's relocation
 * hook (rtl/ftl/relocate.py: read, GC_COPY keeping vseq, CAS rebind, so a
 * racing host write wins); when the core's block table says no LBA is bound
 * in it any more, it is erased and returns to the free pool.
 *
 * Three rules keep recovery sound and the device live:
 *  - transactions and appends: a staged page is live (the core counts it) though
 *    the map does not name it; such pages (OOB flags.tx / append) are offered to the relocator,
 *    which moves the pending binding with the page, or copies nothing when no binding names it
 *    (rtl/ftl/relocate.py).
 *  - remapped appends: a page a REMAP bound keeps its APPEND's OOB, which names no LBA.  When
 *    the block table still counts pages after the OOB pass, one pass over the L2P table finds
 *    them and the relocator rebinds the LBA given; the copy's OOB names it.  Without this such a
 *    page could never move, its block never be erased, and GC chose it again and again.
 *  - trap 2: a block is erased only when a durable checkpoint's floor is above
 *    every page in it (close_seq <= af_ckpt.seq); if none is, GC takes a
 *    checkpoint first.  Proofs that recovery could still need are then all in
 *    blocks newer than the floor, which GC leaves alone, or in the checkpoint:
 *    it records the transactions open and the appends live at its floor
 *    (pending.h), so however long one stays open the floor is the log's next
 *    seq and every closed block can be collected.
 *  - reads: the core's read path looks a page up and reads it later; before
 *    an erase GC sends a READ through its own queue pair, which completes only
 *    after every read fetched before it, so none still targets the victim.
 *  - liveness: the free pool keeps a reserve the host's writes never get
 *    (ftl.c refill); below `low` free blocks GC relocates with the host held
 *    (ftl.host_enable.hold) and may use the reserve, so relocation always
 *    finds pages (thresholds count erased blocks: the pool's and those queued
 *    in the core behind each die's open one); the spec's over-provisioning guarantees a victim that frees
 *    more than it copies.  The host stays held until the erasures are done: from the
 *    first victim of a foreground episode to the last one's erase (the hold leaves the
 *    firmware's own queue pair served, for the read fence, the erase and checkpoints), and at
 *    boot until GC is back at `low` (af_gc_boot; nothing of the host's in the core, so GC
 *    may spend the block otherwise kept for it).  A background step whose victim is still
 *    moving when the host's writes take the drive below `low` goes on holding the host
 *    (room_for_copies).
 *  - the last block is not GC's: a copy is made only while the log writer keeps
 *    one block of pages (keep_pages()) beyond it for the commands already in the
 *    core, and a victim is picked only if its pages fit the rest.  Erase
 *    failures can eat the reserve (a checkpoint area's replacement, a victim
 *    whose erase fails after its copies); spending the last pages on copies
 *    then left a write in the core waiting for a page no erase would bring
 *    (campaign trial 6441).  GC stops instead, the device goes GC_STUCK and
 *    what the core holds finishes on the block kept.
 *
 * Victims: greedy (fewest valid pages) or cost-benefit ((1 - u) / 2u x age, or LFS's (1 - u) / (1 + u)
 * x age), `gc policy`: policy.c scores them (the same code measures them at scale on the host, sim/gcsim).  Background GC runs from the idle loop
 * below `high` free blocks when the host has been quiet. */
#include <stdio.h>
#include <string.h>

#include <system.h>

#include "anchor.h"
#include "ckpt.h"
#include "ckpt_take.h"
#include "console.h"
#include "flash.h"
#include "mapload.h"
#include "ftl.h"
#include "gc.h"
#include "nand.h"
#include "policy.h"
#include "wear.h"

af_gc_t af_gc = { .policy = AF_GCPOLICY_GREEDY };

#ifdef AFCTRL_FTL

#define RELOC_SPIN 4000000u
#define DRAIN_QUIET_CYCLES 2000u  /* far longer than a command fetch (16 bus words) */
#define DRAIN_WAIT_CYCLES 20000000u /* commands in the core finish in far less (a few ms of NAND time each) */


/* Pages GC leaves to the commands in the core: one block (see the header); none while the core holds no
 * host command to need one: the host held since boot (af_gc_boot), or held and drained (drain_host). */
static uint64_t keep_pages(void)
{
	return af_ftl.host_admitted && !af_ftl.host_drained ? af_nand.pages_per_block : 0;
}

/* Pages the next victim may need copied: what the log writer can take beyond keep_pages(). */
static uint32_t copy_budget(void)
{
	uint64_t room = af_ftl_room_pages(), keep = keep_pages();
	return room > keep ? (uint32_t)(room - keep < UINT32_MAX ? room - keep : UINT32_MAX) : 0;
}

static int candidate(uint32_t g)
{
	const af_block_t *b = &af_flash.blocks[g];
	uint32_t ppa = af_nand_block_ppa(g);
	return !b->flags && b->state == AF_BSTATE_DATA && b->written > 0 && AF_PPA_PPA_LUN_GET(ppa) == 0;
}

/* The best victim under the policy, among blocks a checkpoint with this floor covers (every page in
 * them older than it: close_seq <= floor) whose valid pages fit budget (copy_budget()). */
static int pick_within(uint64_t floor, uint32_t budget, uint32_t *victim)
{
	af_policy_victim_t v;
	af_policy_victim_begin(&v, af_gc.policy, af_nand.pages_per_block, af_ftl_seq_next());
	af_dcache_invalidate(); /* the block table is written by the core */
	for (uint32_t g = 0; g < af_flash.nblocks; g++) {
		if (!candidate(g))
			continue;
		const af_block_t *b = &af_flash.blocks[g];
		if (b->close_seq > floor)
			continue;
		uint32_t valid = af_ftl_valid_of(g);
		if (valid > budget)
			continue; /* no room for its copies */
		af_policy_victim_consider(&v, g, valid, b->close_seq);
	}
	if (v.found)
		*victim = v.victim;
	return v.found;
}

static int pick(uint64_t floor, uint32_t *victim)
{
	return pick_within(floor, copy_budget(), victim);
}

/* lba_word: 0 (the OOB names the LBA) or lba | AF_FTL_RELOC_LBA_GIVEN (a remapped append page) */
static int relocate(uint32_t ppa, uint16_t tag, uint32_t lba_word)
{
	for (unsigned spin = 0; ftl_rd(AF_FTL_STATUS) & AF_FTL_STATUS_RELOC_PENDING; spin++)
		if (spin > RELOC_SPIN)
			return -1;
	ftl_wr(AF_FTL_RELOC_PPA, ppa);
	ftl_wr(AF_FTL_RELOC_TAG, tag);
	ftl_wr(AF_FTL_RELOC_LBA, lba_word);
	ftl_wr(AF_FTL_CTRL, AF_FTL_CTRL_RELOCATE);
	for (unsigned spin = 0; spin < RELOC_SPIN; spin++) {
		if (!(ftl_rd(AF_FTL_STATUS) & AF_FTL_STATUS_RELOC_DONE_VALID)) {
			/* the copy may need a fresh block, and a core starved meanwhile GC's reserve: the upkeep the
			 * firmware's own commands get (a background step holds nothing; without it a copy waited for
			 * a page no one would hand over, and the console went silent) */
			if ((spin & 255) == 255)
				af_ftl_hooks.upkeep ? af_ftl_hooks.upkeep() : af_ftl_poll();
			continue;
		}
		uint32_t d = ftl_rd(AF_FTL_RELOC_DONE);
		ftl_wr(AF_FTL_CTRL, AF_FTL_CTRL_POP_RELOC_DONE);
		if (((d & AF_FTL_RELOC_DONE_TAG) >> AF_FTL_RELOC_DONE_TAG_SHIFT) != tag) {
			af_gc.late++; /* an earlier relocation we stopped waiting for: ours comes after it */
			continue;
		}
		af_ftl.fw_waiting = 0;
		return (int)((d & AF_FTL_RELOC_DONE_RESULT) >> AF_FTL_RELOC_DONE_RESULT_SHIFT);
	}
	af_ftl.fw_waiting = 0;
	return -1; /* still in the core: its answer, when it comes, is discarded by the next wait (tags differ) */
}

/* Every read fetched so far has finished (see the header).  Its page lands in gc_buf, the relocator's,
 * idle once the last copy is done: not in io_buf, where `io random` has the next write's data waiting
 * (the fence must not overwrite it with LBA 0's, or such a write would store LBA 0's data). */
static int read_fence(void)
{
	af_cmd_t cmd;
	memset(&cmd, 0, sizeof(cmd));
	cmd.opcode = AF_OPCODE_READ;
	cmd.lba = 0;
	cmd.nlb = 1;
	cmd.buf = (uint32_t)(uintptr_t)af_ftl.gc_buf;
	return af_ftl_io(&cmd, NULL) == AF_STATUS_SUCCESS ? 0 : -1;
}

static uint32_t low_threshold(void)
{
	return af_gc.low ? af_gc.low : af_ftl.dies;
}

static void hold(int on)
{
	/* the host waits; GC may use the reserve (ftl.c refill) */
	af_ftl.gc_active = on;
	af_ftl_host_ctrl();
	if (on) {
		af_gc.holds++;
		af_ftl_refill_all();
	}
}

/* One relocation and its counters; 0 when it moved or raced, -1 (said on the console) otherwise. */
static int move_page(uint32_t g, uint32_t ppa, uint32_t lba_word)
{
	int res = relocate(ppa, (uint16_t)(af_gc.requests++ & 0x7fff), lba_word);
	if (res == AF_RELOCRESULT_MOVED) {
		af_gc.copies++;
		if (lba_word)
			af_gc.by_map++;
		return 0;
	}
	if (res == AF_RELOCRESULT_RACED) {
		af_gc.raced++;
		return 0;
	}
	af_gc.failed++;
	printf("warning: gc: relocating page 0x%08lx of block %lu: %s\n", (unsigned long)ppa, (unsigned long)g,
	       res < 0 ? "no answer" : af_relocresult_name((unsigned)res));
	return -1;
}

/* With the host held, wait until the core has finished every command that may take pages (they may take
 * the reserve meanwhile: gc_active), so GC may spend the block keep_pages() leaves them.  A command caught
 * mid-fetch when the hold was written shows up within a few bus cycles: the count must stay 0 a while.
 * Not drained: a command of the firmware's own in the core (GC runs inside its wait, which would never
 * end), a write cache destaging (it takes pages with no command in the core), or commands still there
 * after the wait.  Dirty pages at rest are no obstacle: with the host held no write comes to make them
 * due, and waiting for them could be for ever (a device out of blocks has nowhere to destage them).
 * 1 when drained. */
static int drain_host(void)
{
	if (af_ftl.host_drained)
		return 1;
	if (!af_ftl.gc_active || !af_ftl.host_admitted || af_ftl_fw_in_core())
		return 0; /* gc_active is set by hold(), which writes the hold to the core */
	uint64_t start = af_uptime_cycles(), quiet_since = 0;
	for (unsigned spin = 0;; spin++) {
		uint64_t now = af_uptime_cycles();
		if (af_ftl_in_core() || (ftl_rd(AF_FTL_STATUS) & AF_FTL_STATUS_CACHE_BUSY)) {
			if (now - start > DRAIN_WAIT_CYCLES)
				return 0;
			quiet_since = 0;
			if ((spin & 63) == 63)
				af_ftl_hooks.upkeep ? af_ftl_hooks.upkeep() : af_ftl_poll();
			continue;
		}
		if (!quiet_since) {
			quiet_since = now;
		} else if (now - quiet_since > DRAIN_QUIET_CYCLES) {
			af_ftl.host_drained = 1;
			af_gc.drained++;
			return 1;
		}
	}
}

/* This victim's copies run with the host held (collect: foreground, or a background step escalated). */
static int holding;

static void hold_host(void)
{
	if (holding)
		return;
	holding = 1;
	af_ftl.host_held = 1;
	hold(1);
}

static int room_for_copies(uint32_t g)
{
	/* a background step lets the host write beside its copies; once the host's writes bring the drive
	 * below `low` the rest of the victim goes on as foreground, or they would take the pages its copies
	 * need and leave a half-moved victim with no room for any other (GC_STUCK far below the capacity) */
	if (!holding && af_ftl_erased_blocks() < low_threshold()) {
		af_gc.escalated++;
		hold_host();
	}
	if (af_ftl_room_pages() > keep_pages() || (holding && drain_host() && af_ftl_room_pages() > 0))
		return 1;
	/* records or erase failures took the room while we copied: stop here */
	af_gc.no_room++;
	printf("warning: gc: block %lu: no erased page left for its copies beyond the block kept for "
	       "the core's commands: kept\n", (unsigned long)g);
	return 0;
}

/* Pages of g bound under an LBA their OOB does not name: an APPEND's pages keep no LBA when a REMAP binds
 * them, so only the map knows it.  One pass over the L2P table (after the map cache wrote it back) finds
 * them; the relocator rebinds that LBA and stamps it in the copy, so the copy is found by its OOB. */
static int move_remapped(uint32_t g)
{
	af_map_load_all();
	int r = af_ftl_map(AF_MAPFWOP_FLUSH, 0, 0, 0, NULL);
	if (r < 0 || (r & AF_FTL_MAP_RESULT_ERROR))
		return -1;
	af_dcache_invalidate();
	af_gc.map_passes++;
	const volatile uint32_t *table = af_flash.map.ppa;
	for (uint32_t lba = 0; lba < af_flash.nlba && af_ftl_valid_of(g); lba++) {
		uint32_t ppa = table[lba];
		if (ppa == AF_PPA_UNMAPPED || af_nand_block_of(ppa) != g)
			continue;
		if (!room_for_copies(g) || move_page(g, ppa, lba | AF_FTL_RELOC_LBA_GIVEN) < 0)
			return -1;
		af_dcache_invalidate(); /* the core's count of g, for the loop's test */
	}
	return 0;
}

/* Move every bound page out of global block g: 0, or -1 (some are still there). */
static int move_all(uint32_t g)
{
	uint32_t ppa0 = af_nand_block_ppa(g);
	/* the block table counts every page bound or staged in g: once it reads 0 (at the start, after a
	 * copy) the pages left are garbage, and their OOB reads (~3 k cycles each) are skipped */
	af_dcache_invalidate();
	for (uint32_t pg = 0; pg < af_nand.pages_per_block && af_ftl_valid_of(g); pg++) {
		uint32_t ppa = AF_PPA_PPA_PAGE_SET(ppa0, pg);
		uint8_t buf[AF_NAND_BBM_BYTES + AF_OOB_SIZE] __attribute__((aligned(4)));
		af_oob_t oob;
		int r = af_nand_read(ppa, af_nand.oob_col, af_nand.oob_bytes, buf, 0, NULL);
		af_gc.oob_reads++;
		if (r == AF_NANDRESULT_ERASED)
			break; /* pages are programmed in order: the rest are erased too */
		if (r != AF_NANDRESULT_OK)
			continue; /* unreadable: if it were bound, the count check below catches it */
		memcpy(&oob, buf + AF_NAND_BBM_BYTES, sizeof(oob));
		if (af_crc32(&oob, AF_OOB_CRC_SPAN) != oob.crc ||
		    (oob.kind != AF_KIND_DATA && oob.kind != AF_KIND_GC_COPY && oob.kind != AF_KIND_APPEND) ||
		    oob.lba >= af_ftl.capacity)
			continue;
		uint32_t bound;
		int m = af_ftl_map(AF_MAPFWOP_READ, (uint32_t)oob.lba, 0, 0, &bound);
		if (m < 0 || (m & AF_FTL_MAP_RESULT_ERROR))
			continue;
		/* a transaction's page the map does not name may be staged (a pending binding): the core
		 * moves the binding if one names it, else answers RACED (the copy is garbage) */
		if (bound != ppa && (!(oob.flags & (AF_OOB_FLAGS_TX_MASK | AF_OOB_FLAGS_APPEND_MASK)) || af_ftl_valid_of(g) == 0))
			continue; /* superseded */
		if (!room_for_copies(g) || move_page(g, ppa, 0) < 0)
			return -1;
		af_dcache_invalidate(); /* the core's count of g, for the loop's test */
	}
	/* what is still bound was named by no OOB: remapped append pages */
	af_dcache_invalidate();
	if (af_ftl_valid_of(g) != 0 && move_remapped(g) < 0)
		return -1;
	af_dcache_invalidate();
	if (af_ftl_valid_of(g) != 0) {
		af_gc.failed++;
		printf("warning: gc: block %lu still holds %lu bound pages after relocation: kept\n", (unsigned long)g,
		       (unsigned long)af_ftl_valid_of(g));
		return -1;
	}
	return 0;
}

/* Move every bound page out of global block g, then erase it (`erase`) or retire it.  Foreground: the host
 * is held from the first copy to the erase, so its commands cannot take the pages just copied into before
 * the victim's come back (step after step, until no victim's copies fit); the fence and the erase go
 * through the firmware's own queue pair, which the hold leaves served.  GC's reserve goes to the core for
 * the copies only: back in the pool, a checkpoint can replace an area with it. */
static int collect(uint32_t g, int foreground, int erase)
{
	if (af_ftl.trace)
		printf("gc: victim %lu (%lu valid), %lu free blocks\n", (unsigned long)g, (unsigned long)af_ftl_valid_of(g),
		       (unsigned long)af_ftl.free_blocks);
	uint32_t ppa0 = af_nand_block_ppa(g);
	af_flash.blocks[g].state = AF_BSTATE_GC;
	int outer = af_ftl.host_held; /* a foreground episode's or the boot's hold goes on after us */
	holding = 0;
	if (foreground)
		hold_host();
	int r = move_all(g);
	if (holding)
		hold(0);
	if (r == 0 && !erase) {
		/* a grown bad block: nothing bound in it any more; never erased or used again */
		af_flash.blocks[g].state = AF_BSTATE_RETIRED;
		af_flash.blocks[g].retire = 0;
		af_ftl.retiring--;
		af_anchor_retired();
		af_anchor_poll(); /* durable before anyone is shown it retired: a power cut may follow at once */
		af_gc.retired++;
	} else if (r == 0) {
		r = read_fence() < 0 ? -1
			: af_ftl_block_erased(g, af_nand_erase(ppa0, NULL) == AF_NANDRESULT_OK) < 0 ? AF_GC_RETIRED : 0;
	}
	if (r < 0)
		af_flash.blocks[g].state = AF_BSTATE_DATA;
	if (holding) {
		holding = 0;
		af_ftl.host_held = outer;
		af_ftl_host_ctrl();
	}
	return r;
}

/* the floor of the durable checkpoint: blocks closed at or below it may be erased */
static uint64_t covered_floor(void)
{
	return af_ckpt.valid ? af_ckpt.seq : 0;
}

/* A checkpoint whose floor covers close_seq, taken now if none is yet; 1 if one is there.  A checkpoint's
 * floor is the log's next seq (open transactions and live appends go into it: pending.h), so one taken
 * now covers every closed block. */
static int checkpoint_covering(uint64_t close_seq)
{
	if (close_seq <= covered_floor())
		return 1;
	return af_ckpt_take() == 0 && close_seq <= covered_floor();
}

int af_gc_collect_block(uint32_t g)
{
	if (!af_ftl.running || !candidate(g) || af_ftl_valid_of(g) > copy_budget())
		return -1;
	if (!checkpoint_covering(af_flash.blocks[g].close_seq))
		return -1;
	uint64_t t0 = af_uptime_cycles();
	int r = collect(g, 0, 1);
	af_gc.cycles += af_uptime_cycles() - t0;
	return r;
}

/* The best victim a durable checkpoint covers, taking a checkpoint if its floor would cover one: 1, or 0. */
static int pick_covered(uint32_t *g)
{
	if (pick(covered_floor(), g))
		return 1;
	if (!pick(af_ckpt_next_floor(), g) && !pick(UINT64_MAX, g))
		return 0; /* nothing to collect at all */
	return checkpoint_covering(af_flash.blocks[*g].close_seq) && pick(covered_floor(), g);
}

/* No victim fits copy_budget(), but one would fit every page left, the block kept for the host's
 * commands included (not a checkpoint that could not be taken, not nothing to collect). */
static int only_the_kept_block_is_missing(void)
{
	uint32_t g;
	uint64_t room = af_ftl_room_pages();
	return keep_pages() && !pick(UINT64_MAX, &g) &&
	       pick_within(UINT64_MAX, room < UINT32_MAX ? (uint32_t)room : UINT32_MAX, &g);
}

int af_gc_step(int foreground)
{
	uint32_t g;
	if (!af_ftl.running)
		return -1;
	int found = pick_covered(&g);
	if (!found && foreground && only_the_kept_block_is_missing()) {
		/* no victim's copies fit beside the block kept for the host's commands: hold the host until the
		 * core has finished them, then the kept block is GC's too (otherwise GC_STUCK at any fill, once
		 * the host's writes and GC's copies had brought the erased blocks down to GC's reserve) */
		hold(1);
		if (drain_host())
			found = pick_covered(&g);
		hold(0);
	}
	if (!found)
		return -1;
	uint64_t t0 = af_uptime_cycles();
	int r = collect(g, foreground, 1);
	af_gc.cycles += af_uptime_cycles() - t0;
	if (r == 0) {
		af_gc.victims++;
		if (foreground)
			af_gc.foreground++;
	}
	return r;
}

/* Foreground steps until `low` erased blocks (or nothing to collect): the last step's result. */
static int collect_until(uint32_t low)
{
	int r = 0;
	while (af_ftl_erased_blocks() < low && (r = af_gc_step(1)) >= 0)
		af_ftl_poll(); /* a victim retired for a failed erase: the next one (each step retires or frees one) */
	return r;
}

void af_gc_boot(void)
{
	if (!af_ftl.running || !af_ftl.host_held)
		return;
	uint32_t low = low_threshold();
	uint32_t victims = af_gc.victims, copies = af_gc.copies;
	if (!af_gc.off)
		collect_until(low);
	if (af_gc.victims != victims)
		printf("gc: boot: %lu blocks collected (%lu copies) before the host came in: %lu erased\n",
		       (unsigned long)(af_gc.victims - victims), (unsigned long)(af_gc.copies - copies),
		       (unsigned long)af_ftl_erased_blocks());
	af_ftl.host_held = 0;
	af_ftl_host_ctrl();
}

/* Static wear levelling: the block wear.c picks, moved through GC's path.  1 when it moved one, 0 when
 * there is nothing to do, -1 on failure. */
static int wear_move(void)
{
	uint32_t g = af_wear_cold_block();
	if (g == AF_WEAR_NONE)
		return 0;
	uint32_t before = af_gc.copies;
	if (af_gc_collect_block(g) < 0) {
		af_wear.failed++;
		return -1;
	}
	af_wear.moves++;
	af_wear.copies += af_gc.copies - before;
	return 1;
}

/* Why GC found no victim: the room for copies against the fewest valid pages of any candidate. */
static void print_stuck(void)
{
	uint32_t fewest = UINT32_MAX;
	af_dcache_invalidate();
	for (uint32_t g = 0; g < af_flash.nblocks; g++)
		if (candidate(g) && af_ftl_valid_of(g) < fewest)
			fewest = af_ftl_valid_of(g);
	printf("gc: stuck: %lu pages for copies (%lu erased pages, %lu kept for the host's %lu commands in the "
	       "core), the fewest valid pages in a victim %lu\n",
	       (unsigned long)copy_budget(), (unsigned long)af_ftl_room_pages(), (unsigned long)keep_pages(),
	       (unsigned long)af_ftl_in_core(), (unsigned long)(fewest == UINT32_MAX ? 0 : fewest));
}

void af_gc_poll(void)
{
	if (!af_ftl.running || af_gc.off)
		return;
	uint32_t low = low_threshold(), high = af_gc.high ? af_gc.high : 2 * af_ftl.dies;
	uint64_t now = af_ftl_seq_next();
	int quiet = now == af_gc.last_seq;
	af_gc.last_seq = now;
	/* try again only when something changed since a step found nothing to do: the log moved on, a block
	 * was erased, or a transaction or append that held the checkpoint floor ended (an abort writes nothing) */
	uint32_t floor_lo = ftl_rd(AF_FTL_TX_FLOOR_LO);
	if (af_gc.idle_seq == now + 1 && af_gc.idle_free == af_ftl_erased_blocks() && af_gc.idle_floor == floor_lo)
		return;
	af_gc.idle_seq = 0;
	/* blocks a program failed in: once the core has filled them, move their data and retire them.  A
	 * retired block is out of every later boot's scan, like an erased one, so its pages must be decided
	 * by a checkpoint first: GC moves bound data pages only, not the commit, trim and remap records
	 * or the superseded group members recovery's proofs still need (campaign trial 4432 lost an
	 * acknowledged transaction that way). */
	for (uint32_t g = 0; af_ftl.retiring && g < af_flash.nblocks; g++)
		if (af_flash.blocks[g].retire && af_flash.blocks[g].state == AF_BSTATE_DATA &&
		    af_ftl_valid_of(g) <= copy_budget() && checkpoint_covering(af_flash.blocks[g].close_seq)) {
			uint64_t t0 = af_uptime_cycles();
			if (collect(g, 0, 0) < 0)
				printf("warning: gc: block %lu: its data could not all move yet: retried later\n", (unsigned long)g);
			af_gc.cycles += af_uptime_cycles() - t0;
		}
	int r = 0;
	if (af_ftl_erased_blocks() < low) {
		/* foreground: the host held for the whole episode, until back above the threshold */
		af_ftl.host_held = 1;
		r = collect_until(low);
		af_ftl.host_held = 0;
		af_ftl_host_ctrl();
	} else if (af_ftl_erased_blocks() < high && quiet) {
		r = af_gc_step(0);
	}
	/* down to the reserve with nothing to collect: refuse new data rather than let writes wait forever,
	 * and let what is already in the core finish on the reserve (ftl.c refill_wanted).  Stuck is its own
	 * flag: a device already FULL needs the reserve just as much for the write starved in the core
	 * (its transaction's commit or abort may wait behind it), and FULL stays the reason shown. */
	if (r < 0 && af_ftl_erased_blocks() <= AF_FTL_GC_RESERVE) {
		int was_stuck = af_ftl.gc_stuck;
		af_ftl.gc_stuck = 1;
		if (!was_stuck)
			print_stuck();
		if (af_ftl.no_space == AF_NOSPACE_NONE)
			af_ftl_set_no_space(AF_NOSPACE_GC_STUCK);
		if (!was_stuck)
			af_ftl_refill_all();
	} else if (af_ftl.gc_stuck && af_ftl_erased_blocks() > AF_FTL_GC_RESERVE) {
		af_ftl.gc_stuck = 0;
		if (af_ftl.no_space == AF_NOSPACE_GC_STUCK) {
			af_ftl_set_no_space(AF_NOSPACE_NONE);
			af_ftl_space_check();
		}
	}
	/* static wear levelling once GC has done its part (it looks again only after an erase) */
	if (r < 0 || wear_move() < 0)
		goto nothing;
	return;
nothing:
	af_gc.idle_seq = now + 1;
	af_gc.idle_free = af_ftl_erased_blocks();
	af_gc.idle_floor = floor_lo;
}

/* --- console ------------------------------------------------------------------------ */

static int cmd_gc(int argc, char **argv)
{
	if (argc == 2 && !strcmp(argv[1], "now")) {
		uint32_t before = af_ftl.free_blocks;
		int r = af_gc_step(1);
		if (r < 0) {
			printf("error: gc: no victim collected (see warnings; a block must hold fewer valid pages than it has, "
			       "and no more than the %lu erased pages beyond one block kept for the core's commands)\n",
			       (unsigned long)copy_budget());
			return AF_EFAIL;
		}
		if (r == AF_GC_RETIRED) {
			printf("error: gc: the victim's erase failed: its data moved, the block is retired\n");
			return AF_EFAIL;
		}
		printf("gc: one block collected: %lu -> %lu free blocks, %lu copies so far\n", (unsigned long)before,
		       (unsigned long)af_ftl.free_blocks, (unsigned long)af_gc.copies);
		return AF_OK;
	}
	if (argc == 3 && !strcmp(argv[1], "block")) {
		uint32_t g;
		if (af_parse_u32(argv[2], &g) || g >= af_flash.nblocks) {
			printf("error: gc block: 0..%lu\n", (unsigned long)af_flash.nblocks - 1);
			return AF_EFAIL;
		}
		uint32_t copies = af_gc.copies;
		int r = af_gc_collect_block(g);
		if (r < 0) {
			printf("error: gc: block %lu not collected (a full data block of LUN 0 whose valid pages fit the %lu "
			       "pages for copies; see warnings)\n", (unsigned long)g, (unsigned long)copy_budget());
			return AF_EFAIL;
		}
		printf("gc: block %lu collected%s: %lu copies\n", (unsigned long)g,
		       r == AF_GC_RETIRED ? " (its erase failed: retired)" : "", (unsigned long)(af_gc.copies - copies));
		return AF_OK;
	}
	if (argc == 3 && !strcmp(argv[1], "policy")) {
		int p = af_policy_named(argv[2]);
		if (p < 0) {
			printf("error: unknown policy '%s' (greedy, cost-benefit, cost-benefit-lfs)\n", argv[2]);
			return AF_EFAIL;
		}
		af_gc.policy = (unsigned)p;
		printf("gc policy %s\n", argv[2]);
		return AF_OK;
	}
	if (argc == 4 && !strcmp(argv[1], "thresholds")) {
		uint32_t low, high;
		if (af_parse_u32(argv[2], &low) || af_parse_u32(argv[3], &high) || low == 0 || high < low ||
		    high > af_flash.nblocks) {
			printf("error: thresholds: 1 <= low <= high <= %lu erased blocks\n", (unsigned long)af_flash.nblocks);
			return AF_EFAIL;
		}
		af_gc.low = low;
		af_gc.high = high;
		af_gc.idle_seq = 0;
		printf("gc: foreground below %lu, background below %lu erased blocks\n", (unsigned long)low,
		       (unsigned long)high);
		return AF_OK;
	}
	if (argc == 2 && !strcmp(argv[1], "trace")) {
		af_ftl.trace = !af_ftl.trace;
		printf("gc trace %s\n", af_ftl.trace ? "on" : "off");
		return AF_OK;
	}
	if (argc == 2 && (!strcmp(argv[1], "off") || !strcmp(argv[1], "on"))) {
		af_gc.off = argv[1][1] == 'f';
		printf("automatic gc %s\n", argv[1]);
		return AF_OK;
	}
	if (argc != 1)
		return AF_EUSAGE;
	char name[24];
	af_policy_name(af_gc.policy, name, sizeof(name));
	printf("gc policy %s, automatic %s; thresholds: foreground below %lu, background below %lu erased blocks "
	       "(the pool and those queued in the core: %lu; pages for copies: %lu)\n",
	       name, af_gc.off ? "off" : "on",
	       (unsigned long)low_threshold(), (unsigned long)(af_gc.high ? af_gc.high : 2 * af_ftl.dies),
	       (unsigned long)af_ftl_erased_blocks(), (unsigned long)copy_budget());
	printf("victims %lu (%lu foreground), copies %lu (%lu found through the map), raced %lu, failed %lu, "
	       "host holds %lu, retired %lu, ",
	       (unsigned long)af_gc.victims, (unsigned long)af_gc.foreground, (unsigned long)af_gc.copies,
	       (unsigned long)af_gc.by_map, (unsigned long)af_gc.raced, (unsigned long)af_gc.failed,
	       (unsigned long)af_gc.holds, (unsigned long)af_gc.retired);
	af_print_u64(af_gc.cycles);
	printf(" cycles\n");
	if (af_gc.escalated)
		printf("background steps gone foreground %lu times: the host's writes brought the drive below the "
		       "foreground threshold\n", (unsigned long)af_gc.escalated);
	if (af_gc.drained)
		printf("waited %lu times for the host's commands to leave the core, to copy into the block kept for them\n",
		       (unsigned long)af_gc.drained);
	if (af_gc.no_room)
		printf("stopped %lu times for room: copies would have taken the block kept for the core's commands\n",
		       (unsigned long)af_gc.no_room);
	if (af_gc.late || af_ftl.late_completions)
		printf("late answers discarded: %lu to relocations, %lu to firmware commands (their waits had given up)\n",
		       (unsigned long)af_gc.late, (unsigned long)af_ftl.late_completions);
	return AF_OK;
}
AF_COMMAND(gc, "gc [now | block <n> | policy greedy|cost-benefit|cost-benefit-lfs | thresholds <low> <high> | on | off | trace]",
	   "garbage collection: counters, collect one block now (the policy's victim, or block n), victim policy, "
	   "free-block thresholds, automatic on/off",
	   cmd_gc);

#endif /* AFCTRL_FTL */
