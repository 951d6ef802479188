/* atomflash firmware: the flash at boot: bring-up, the tables, the page-0, marker and recovery passes
 * (see flash.h; mount.c runs them). */
#include <stdio.h>
#include <string.h>

#include "console.h"
#include "flash.h"
#include "fw.h"
#include "nand.h"

af_flash_t af_flash;

#ifndef AFNAND_BASE

void af_flash_print_geometry(const char *prefix)
{
	printf("%sno NAND controller in this build\n", prefix);
}

#else

/* --- pipelined page reads over every target ---------------------------------------
 *
 * Reads of one column range (the bad-block marker, or the OOB codeword) of
 * many pages, issued in a fixed order and handed to the consumer in that same
 * order, while up to AFNAND_QUEUE + 1 reads per target and slots - 1 per
 * channel are in flight (the last slot of each channel is for synchronous
 * operations, which the consumer may issue).  The order is what makes the
 * scan deterministic: recovery's "first copy in scan order" picks the same
 * page on every boot. */

#define PIPE_RING 32 /* power of two; ring index = descriptor tag (< AF_NAND_TAG_SYNC) */
#define PIPE_BYTES (AF_NAND_BBM_BYTES + AF_OOB_SIZE)
#define PIPE_MAX_TARGETS 16

typedef struct {
	uint32_t ppa;
	uint32_t gblock; /* global block number (nand.h) */
	uint8_t ch, slot, done, result;
	uint8_t data[PIPE_BYTES];
} pipe_ent_t;

typedef struct walk walk_t;

typedef struct {
	unsigned col, len, flags;
	walk_t *walk;                              /* which pages, in which order */
	void (*consume)(void *ctx, pipe_ent_t *e); /* each page read, in that order */
	void *ctx;
} pipe_t;

static int walk_next(walk_t *w, uint32_t *ppa, uint32_t *gblock);

static int pipe_run(const pipe_t *p)
{
	static pipe_ent_t ring[PIPE_RING];
	uint8_t tgt_busy[PIPE_MAX_TARGETS] = { 0 };
	uint32_t free_slots[PIPE_MAX_TARGETS]; /* per channel: bit s = slot s free */
	unsigned head = 0, tail = 0;
	unsigned per_target = AFNAND_QUEUE + 1;
	uint32_t ppa = 0, gblock = 0;
	int have = walk_next(p->walk, &ppa, &gblock);
	af_nand_desc_t d AF_NAND_ALIGNED; /* the fields every read shares; per page only the address, slot and tag change */
	af_nand_desc_init(&d, AF_NANDOP_READ, 0);
	d.flags = (uint8_t)p->flags;
	d.column = (uint16_t)p->col;
	d.length = (uint16_t)p->len;
	/* every slot but the sync slot (the pipe runs at boot, before the FTL core uses the others) */
	uint32_t pipe_mask = af_nand.slots >= 32 ? 0xffffffffu : (1u << af_nand.slots) - 1;
	pipe_mask &= ~(1u << af_nand_sync_slot());
	for (unsigned c = 0; c < af_nand.channels && c < PIPE_MAX_TARGETS; c++)
		free_slots[c] = pipe_mask;

	while (have || head != tail) {
		/* issue in order while the next page's target and channel have room */
		while (have && tail - head < PIPE_RING) {
			unsigned ch = AF_PPA_PPA_CHANNEL_GET(ppa), way = AF_PPA_PPA_WAY_GET(ppa);
			unsigned t = ch * af_nand.ways + way;
			if (tgt_busy[t] >= per_target || !free_slots[ch])
				break;
			unsigned slot = 0;
			while (!((free_slots[ch] >> slot) & 1))
				slot++;
			pipe_ent_t *e = &ring[tail % PIPE_RING];
			d.channel = (uint8_t)ch;
			d.target = (uint8_t)way;
			d.lun = (uint8_t)AF_PPA_PPA_LUN_GET(ppa);
			d.block = AF_PPA_PPA_BLOCK_GET(ppa);
			d.page = (uint16_t)AF_PPA_PPA_PAGE_GET(ppa);
			d.slot = (uint16_t)slot;
			d.tag = (uint16_t)(tail % PIPE_RING);
			if (af_nand_submit(&d) < 0)
				return AF_NAND_ETIMEOUT;
			e->ppa = ppa;
			e->gblock = gblock;
			e->ch = (uint8_t)ch;
			e->slot = (uint8_t)slot;
			e->done = 0;
			free_slots[ch] &= ~(1u << slot);
			tgt_busy[t]++;
			tail++;
			have = walk_next(p->walk, &ppa, &gblock);
		}
		/* collect completions: wait for one unless the oldest page is done already */
		if (head != tail && !ring[head % PIPE_RING].done) {
			af_nand_cpl_t c AF_NAND_ALIGNED;
			unsigned spin = 0;
			while (!af_nand_poll(&c))
				if (++spin > 4000000u)
					return AF_NAND_ETIMEOUT;
			do {
				if (c.tag >= PIPE_RING) {
					af_flash.read_errors++; /* not ours: a stray completion */
					continue;
				}
				pipe_ent_t *e = &ring[c.tag];
				e->result = c.result;
				e->done = 1;
				if (c.result == AF_NANDRESULT_OK)
					af_nand_buf_read(e->ch, e->slot, p->col, e->data, p->len);
				free_slots[e->ch] |= 1u << e->slot;
				tgt_busy[e->ch * af_nand.ways + AF_PPA_PPA_WAY_GET(e->ppa)]--;
			} while (af_nand_poll(&c));
		}
		/* hand finished pages to the consumer in issue order */
		while (head != tail && ring[head % PIPE_RING].done) {
			p->consume(p->ctx, &ring[head % PIPE_RING]);
			head++;
		}
	}
	return 0;
}

/* --- factory bad blocks -------------------------------------------------------- */

/* Walks every (lun, block[, page]) of every target in the scan order: lun,
 * block, page, then target (channel-major), so consecutive reads go to
 * different targets and overlap. */
struct walk {
	uint32_t lun, block, page, ch, way;
	uint32_t pages;  /* pages per block to visit (1: page 0 only) */
	int skip_bad;    /* skip blocks the bad-block table marks */
	int selected;    /* visit only blocks marked for the recovery scan (af_block_t.scan) */
	int cand;        /* visit only the fast path's candidates (af_block_t.cand) */
	const uint8_t *rows; /* with selected or cand: nonzero per (lun, block) row some target may visit */
};

/* Rows (lun, block) the walk may visit: one byte each, so a walk over a large device steps over the rows
 * it skips without a line fill per block (docs/firmware.md, "Boot passes"). */
static uint8_t *walk_rows;

static void rows_clear(void)
{
	memset(walk_rows, 0, af_nand.luns * af_nand.blocks_per_lun);
}

static void rows_mark(uint32_t g)
{
	walk_rows[g % (af_nand.luns * af_nand.blocks_per_lun)] = 1;
}

/* Whether the walk visits block (lun, block) on target t. */
static int walk_visits(const walk_t *w, uint32_t t, uint32_t lun, uint32_t block)
{
	const af_block_t *b = &af_flash.blocks[(t * af_nand.luns + lun) * af_nand.blocks_per_lun + block];
	return (!w->skip_bad || !b->flags) && (!w->selected || (b->scan && !b->scan_end)) && (!w->cand || b->cand);
}

static int walk_next(walk_t *w, uint32_t *ppa, uint32_t *gblock)
{
	for (;;) {
		if (w->lun >= af_nand.luns)
			return 0;
		if (w->ch == 0 && w->way == 0) { /* a new page row: skip the rest of a block no target still needs */
			uint32_t t = 0;
			if (w->rows && !w->rows[w->lun * af_nand.blocks_per_lun + w->block])
				t = af_nand.targets;
			while (t < af_nand.targets && !walk_visits(w, t, w->lun, w->block))
				t++;
			if (t == af_nand.targets) {
				w->page = 0;
				if (++w->block == af_nand.blocks_per_lun) {
					w->block = 0;
					w->lun++;
				}
				continue;
			}
		}
		uint32_t t = w->ch * af_nand.ways + w->way, lun = w->lun, block = w->block;
		uint32_t gb = (t * af_nand.luns + lun) * af_nand.blocks_per_lun + block;
		uint32_t p = af_nand_ppa(w->ch, w->way, lun, block, w->page);
		if (++w->way == af_nand.ways) {
			w->way = 0;
			if (++w->ch == af_nand.channels) {
				w->ch = 0;
				if (++w->page == w->pages) {
					w->page = 0;
					if (++w->block == af_nand.blocks_per_lun) {
						w->block = 0;
						w->lun++;
					}
				}
			}
		}
		if (walk_visits(w, t, lun, block)) {
			*ppa = p;
			*gblock = gb;
			return 1;
		}
	}
}

static void bbt_consume(void *ctx, pipe_ent_t *e)
{
	af_block_t *b = &af_flash.blocks[e->gblock];
	uint8_t before = b->flags; /* a grown bad block the checkpoint named is counted already */
	if (e->result == AF_NANDRESULT_ERASED) {
		/* all FFh: a good block */
	} else if (e->result != AF_NANDRESULT_OK) {
		b->flags |= AF_BLOCK_UNREADABLE;
		af_flash.read_errors++;
	} else {
		for (unsigned i = 0; i < AF_NAND_BBM_BYTES; i++)
			if (e->data[i] != 0xff)
				b->flags |= AF_BLOCK_BAD;
	}
	if (b->flags && !before)
		af_flash.bad_blocks++;
}

/* --- page 0 of every good block: checkpoints, and what was written when ----------- */

static void p0_consume(void *ctx, pipe_ent_t *e)
{
	af_block_t *b = &af_flash.blocks[e->gblock];
	af_oob_t oob;
	af_flash.p0_reads++;
	if (e->result == AF_NANDRESULT_ERASED) {
		b->p0 = AF_P0_ERASED;
		return;
	}
	memcpy(&oob, e->data + AF_NAND_BBM_BYTES, sizeof(oob));
	if (e->result != AF_NANDRESULT_OK || af_crc32(&oob, AF_OOB_CRC_SPAN) != oob.crc || oob.format != AF_OOB_FORMAT) {
		b->p0 = AF_P0_TORN;
		return;
	}
	b->p0 = oob.kind == AF_KIND_CHECKPOINT && oob.lba == 0		    ? AF_P0_CKPT
		: oob.kind == AF_KIND_CHECKPOINT && oob.lba == AF_ANCHOR_OOB_LBA ? AF_P0_ANCHOR
										  : AF_P0_INTACT;
	af_flash.p0[e->gblock] = (af_p0_t){ .seq = oob.seq, .num = oob.vseq, .kind = oob.kind };
}

/* --- recovery scan ----------------------------------------------------------------- */

typedef struct {
	af_rec_t *r;
	pipe_ent_t *cur;      /* the page being scanned (its OOB is already read) */
	uint32_t data_ppa;    /* whose data area the sync slot holds (AF_PPA_UNMAPPED: none) */
	int data_ok;
} scan_t;

static int io_read_oob(void *ctx, uint32_t ppa, void *oob)
{
	scan_t *s = ctx;
	int result;
	const uint8_t *rec;
	uint8_t buf[PIPE_BYTES] __attribute__((aligned(4)));
	if (s->cur && s->cur->ppa == ppa) { /* the pipeline has read it */
		result = s->cur->result;
		rec = s->cur->data + AF_NAND_BBM_BYTES;
	} else {
		result = af_nand_read(ppa, af_nand.oob_col, af_nand.oob_bytes, buf, 0, NULL);
		rec = buf + AF_NAND_BBM_BYTES;
	}
	if (result == AF_NANDRESULT_ERASED) {
		memset(oob, 0xff, AF_OOB_SIZE);
		return 0;
	}
	if (result != AF_NANDRESULT_OK) {
		if (result != AF_NANDRESULT_UNCORRECTABLE)
			af_flash.read_errors++;
		return 1; /* unreadable: absent, never data (trap 3) */
	}
	memcpy(oob, rec, AF_OOB_SIZE);
	return 0;
}

static int io_read_data(void *ctx, uint32_t ppa, uint32_t offset, void *buf, uint32_t len)
{
	scan_t *s = ctx;
	if (offset + len > af_nand.page_data || offset + len < offset)
		return 1;
	if (s->data_ppa != ppa) {
		/* the whole data area (ECC reads whole codewords) into the sync slot, once per record page */
		int r = af_nand_read(ppa, 0, af_nand.page_data, NULL, 0, NULL);
		af_flash.record_reads++;
		s->data_ppa = ppa;
		s->data_ok = r == AF_NANDRESULT_OK;
		if (r != AF_NANDRESULT_OK && r != AF_NANDRESULT_UNCORRECTABLE && r != AF_NANDRESULT_ERASED)
			af_flash.read_errors++;
	}
	if (!s->data_ok)
		return 1;
	af_nand_buf_read(AF_PPA_PPA_CHANNEL_GET(ppa), af_nand_sync_slot(), offset, buf, len);
	return 0;
}

static void scan_consume(void *ctx, pipe_ent_t *e)
{
	scan_t *s = ctx;
	af_block_t *b = &af_flash.blocks[e->gblock];
	if (b->scan_end) { /* read ahead past the block's first erased page: not part of its written prefix */
		af_flash.scan_skipped++;
		return;
	}
	s->cur = e;
	int r = af_rec_scan(s->r, e->ppa);
	s->cur = NULL;
	if (r == AF_REC_EFULL) {
		af_flash.scan_full++;
		return;
	}
	if (r == AF_REC_PAGE_ERASED) {
		b->scan_end = 1; /* the walk skips the rest of the block */
		return;
	}
	b->written++;
	if (r == AF_REC_PAGE_TORN)
		b->torn++;
}

/* af_rec_block_end_filter: the last page of a scanned block's written prefix (pages are consumed in
 * order within a block, so `written` is the prefix) -- where a cut tears. */
static int is_block_end_cb(void *ctx, uint32_t ppa)
{
	(void)ctx;
	const af_block_t *b = &af_flash.blocks[af_nand_block_of(ppa)];
	return b->scan && b->written && AF_PPA_PPA_PAGE_GET(ppa) == b->written - 1u;
}

static void torn_end_cb(void *ctx, uint32_t ppa)
{
	(void)ctx;
	af_flash.blocks[af_nand_block_of(ppa)].torn_end = 1;
}

/* af_rec_mlc_filter: the upper page past the block's written prefix, or the torn page ending it
 * (absent), intact (a prefix without torn pages), or to be read. */
static int upper_state_cb(void *ctx, uint32_t ppa)
{
	(void)ctx;
	const af_block_t *b = &af_flash.blocks[af_nand_block_of(ppa)];
	uint32_t page = AF_PPA_PPA_PAGE_GET(ppa);
	if (page >= b->written || (b->torn_end && page == b->written - 1u))
		return AF_REC_UPPER_ABSENT;
	return b->torn ? AF_REC_UPPER_UNKNOWN : AF_REC_UPPER_INTACT;
}

static uint32_t block_of_cb(void *ctx, uint32_t ppa)
{
	return af_nand_block_of(ppa);
}

/* Recovery is about to use entry lba: the caller's hook (a lazily loaded checkpoint map's segment in memory).
 * A load reads through the sync slot, which io_read_data may think holds a record page. */
static int (*need_hook)(uint32_t lba);

static void need_cb(void *ctx, uint32_t lba)
{
	scan_t *scan = ctx;
	if (need_hook(lba))
		scan->data_ppa = AF_PPA_UNMAPPED;
}

/* --- boot ---------------------------------------------------------------------------- */

void af_print_ms(uint64_t cycles)
{
	uint64_t us = af_cycles_to_us(cycles);
	af_print_u64(us / 1000);
	printf(".%03lu ms", (unsigned long)(us % 1000));
}

void af_flash_print_geometry(const char *prefix)
{
	printf("%scontroller v%lu.%lu at 0x%08lx: %lu channels x %lu ways, %lu slots of %lu B, ECC %s\n", prefix,
	       (unsigned long)(af_nand.block_version >> 16), (unsigned long)(af_nand.block_version & 0xffff),
	       (unsigned long)AFNAND_BASE, (unsigned long)af_nand.channels, (unsigned long)af_nand.ways,
	       (unsigned long)af_nand.slots, (unsigned long)af_nand.slot_bytes, af_nand.ecc ? "on" : "off");
	if (!af_nand.up) {
		printf("%sdevice not brought up\n", prefix);
		return;
	}
	printf("%sdevice %s %s (ONFI parameter page, copy %u)\n", prefix, af_nand.manufacturer, af_nand.model,
	       (unsigned)af_nand.param_copy);
	printf("%sgeometry %lu+%lu B pages, %lu pages/block, %lu blocks/LUN, %lu LUN/target, %lu targets: "
	       "%lu blocks, %lu pages\n", prefix,
	       (unsigned long)af_nand.page_data, (unsigned long)af_nand.page_spare,
	       (unsigned long)af_nand.pages_per_block, (unsigned long)af_nand.blocks_per_lun,
	       (unsigned long)af_nand.luns, (unsigned long)af_nand.targets, (unsigned long)af_nand.blocks,
	       (unsigned long)af_nand.pages);
	printf("%stiming mode %d (device modes 0x%02lx, build 0x%02lx); tR %lu us, tPROG %lu us, tBERS %lu us, "
	       "%lu bit/cell\n", prefix, af_nand.mode, (unsigned long)af_nand.timing_modes,
	       (unsigned long)AFNAND_TIMING_MODES, (unsigned long)af_nand.t_r_us, (unsigned long)af_nand.t_prog_us,
	       (unsigned long)af_nand.t_bers_us, (unsigned long)af_nand.bits_per_cell);
}

/* walk_rows for the scan's walk; one pass over the block table, which also counts the bad blocks for the
 * report: every pass costs a line fill per block (docs/firmware.md, "Boot passes"). */
void af_flash_select(int have_ckpt, uint64_t floor, uint32_t *factory, uint32_t *first_bad)
{
	const uint32_t nblocks = af_flash.nblocks, rows = af_nand.luns * af_nand.blocks_per_lun;
	const uint16_t ppb = (uint16_t)af_nand.pages_per_block;
	const int fast = af_flash.fast;
	uint32_t nbad = 0, scanned = 0;
	rows_clear();
	for (uint32_t g = 0, row = 0; g < nblocks; g++, row = row + 1 == rows ? 0 : row + 1) {
		af_block_t *b = &af_flash.blocks[g];
		if (b->flags) {
			if (b->flags & (AF_BLOCK_BAD | AF_BLOCK_UNREADABLE)) {
				if (nbad < 16)
					first_bad[nbad] = g;
				nbad++;
			}
			continue;
		}
		if (b->anchor || b->state == AF_BSTATE_CKPT) {
			b->scan = 0;
			b->state = AF_BSTATE_CKPT;
			b->written = ppb;
			continue;
		}
		uint8_t p0 = b->p0;
		if (fast && !b->cand) /* page 0 not read: as the checkpoint knew it, free or below its floor */
			b->p0 = p0 = b->ckpt_free ? AF_P0_ERASED : AF_P0_INTACT;
		if (p0 == AF_P0_ERASED) {
			b->scan = 0; /* its written prefix is empty */
			/* Only page 0 was read, and an interrupted erase can leave pages after an
			 * erased one programmed: erase it before use (docs/recovery.md). */
			b->needs_erase = 1;
			continue;
		}
		if (!have_ckpt || p0 == AF_P0_TORN)
			b->scan = 1;
		else if ((p0 == AF_P0_INTACT || p0 == AF_P0_CKPT) && (!fast || b->cand) && af_flash.p0[g].seq >= floor)
			b->scan = 1;
		if (b->scan) {
			walk_rows[row] = 1;
			scanned++;
		} else {
			b->written = ppb; /* not read: older than the floor, full or not */
		}
	}
	*factory = nbad;
	af_flash.blocks_scanned += scanned;
}

int af_flash_bringup(void)
{
	memset(&af_flash, 0, sizeof(af_flash));
	uint64_t t0 = af_uptime_cycles();
	int r = af_nand_bringup(5);
	af_flash.t_bringup = af_uptime_cycles() - t0;
	if (r < 0)
		return r;
	af_flash.nand_ok = 1;
	af_flash_print_geometry("nand: ");
	for (unsigned t = 0; t < af_nand.targets; t++) {
		const af_nand_target_t *x = af_nand_target(t);
		printf("nand: ch %lu way %lu: id", (unsigned long)(t / af_nand.ways), (unsigned long)(t % af_nand.ways));
		for (unsigned i = 0; i < AF_NAND_ID_LEN; i++)
			printf(" %02x", x->id[i]);
		printf("%s\n", x->onfi ? ", ONFI" : "");
	}

	/* Tables: the map and the block table stay; the scan table goes after boot. */
	af_ram_reset();
	af_flash.nlba = af_nand.pages; /* one LBA per flash page at most */
	af_flash.nblocks = af_nand.blocks;
	af_flash.map.nlba = af_flash.nlba;
	af_flash.map.ppa = af_ram_alloc(4 * af_flash.nlba, 8);
	af_flash.map.vseq = af_ram_alloc(8 * af_flash.nlba, 8);
	af_flash.map.cseq = af_ram_alloc(8 * af_flash.nlba, 8);
	af_flash.blocks = af_ram_alloc(sizeof(af_block_t) * af_flash.nblocks, 32); /* one line each */
	af_flash.planned = af_ram_alloc(af_flash.nblocks, 4);
	af_flash.p0 = af_ram_alloc(sizeof(af_p0_t) * af_flash.nblocks, 8);
	af_flash.counts = af_ram_alloc(4 * af_flash.nblocks, 8);
	walk_rows = af_ram_alloc(af_nand.luns * af_nand.blocks_per_lun, 4);
	if (!af_flash.map.ppa || !af_flash.map.vseq || !af_flash.map.cseq || !af_flash.blocks || !af_flash.planned || !af_flash.p0 ||
	    !af_flash.counts || !walk_rows) {
		printf("error: boot: main RAM (%lu KiB) too small for the map of %lu LBAs\n",
		       (unsigned long)(MAIN_RAM_SIZE / 1024), (unsigned long)af_flash.nlba);
		af_flash.nand_ok = 0;
		return -1;
	}
	af_flash.ram_used = af_ram_used();
	/* af_flash.p0 needs no clearing: an entry is read only where page 0 was read and found intact */
	memset(af_flash.blocks, 0, sizeof(af_block_t) * af_flash.nblocks);
	memset(af_flash.planned, 0, af_flash.nblocks);
	af_flash.retired_marks = 0;
	/* valid counts kept entry by entry from the checkpoint's (no pass over the map) */
	af_flash.tally = (af_rec_tally_t){ af_flash.counts, af_flash.nblocks, block_of_cb, NULL, 0, 0 };
	af_flash.map.tally = &af_flash.tally;
	af_flash.map.cseq_zeroed = 1; /* the checkpoint's load, or af_rec_map_clear, zeroes cseq */
	return 0;
}

void af_flash_cand_clear(void)
{
	rows_clear();
}

void af_flash_cand(uint32_t g)
{
	af_flash.blocks[g].cand = 1;
	rows_mark(g);
}

int af_flash_p0_pass(int cand_only)
{
	walk_t w = { .pages = 1, .skip_bad = cand_only, .cand = cand_only, .rows = cand_only ? walk_rows : NULL };
	pipe_t p = { af_nand.oob_col, af_nand.oob_bytes, 0, &w, p0_consume, NULL };
	uint64_t t0 = af_uptime_cycles();
	int r = pipe_run(&p);
	af_flash.t_p0 = af_uptime_cycles() - t0;
	if (r < 0)
		printf("error: boot: page-0 reads timed out\n");
	return r;
}

int af_flash_bbt_pass(void)
{
	uint64_t t0 = af_uptime_cycles();
	walk_t w = { .pages = 1, .skip_bad = 0 };
	pipe_t bbt = { af_nand.page_data, AF_NAND_BBM_BYTES, AF_NAND_DESC_FLAGS_RAW_MASK, &w, bbt_consume, NULL };
	int r = pipe_run(&bbt);
	af_flash.t_bbt = af_uptime_cycles() - t0;
	if (r < 0)
		printf("error: bbt: page reads timed out\n");
	return r;
}

int af_flash_recover(const af_rec_checkpoint_t *ck, int (*need)(uint32_t lba))
{
	/* Recovery: the written prefix of every selected block, up to its first erased page. */
	uint32_t avail = af_ram_free();
	uint32_t cap = avail / (sizeof(af_rec_page_t) + 2 * sizeof(uint32_t));
	uint32_t good_pages = af_flash.blocks_scanned * af_nand.pages_per_block;
	if (cap > good_pages)
		cap = good_pages;
	af_rec_page_t *pages = af_ram_alloc(sizeof(af_rec_page_t) * cap, 8);
	uint32_t *index = af_ram_alloc(2 * sizeof(uint32_t) * cap, 4);
	af_flash.scan_cap = cap;
	af_flash.ram_peak = af_ram_used();
	static af_rec_t rec;
	static scan_t scan;
	memset(&scan, 0, sizeof(scan));
	scan.r = &rec;
	scan.data_ppa = AF_PPA_UNMAPPED;
	af_rec_io_t io = { io_read_oob, io_read_data, &scan };
	need_hook = need;
	af_flash.map.need = need_cb;
	af_flash.map.need_ctx = &scan;
	af_rec_init(&rec, &io, af_nand.page_data, pages, index, cap);
	uint64_t t0 = af_uptime_cycles();
	walk_t sw = { .pages = af_nand.pages_per_block, .skip_bad = 1, .selected = 1, .rows = walk_rows };
	pipe_t sp = { af_nand.oob_col, af_nand.oob_bytes, 0, &sw, scan_consume, &scan };
	int r = pipe_run(&sp);
	af_flash.t_scan = af_uptime_cycles() - t0;
	if (r < 0) {
		printf("error: recovery: page reads timed out\n");
		return r;
	}
	t0 = af_uptime_cycles();
	af_rec_block_end_filter(&rec, is_block_end_cb, torn_end_cb, NULL);
	if (af_nand.bits_per_cell >= 2)
		af_rec_mlc_filter(&rec, af_nand.pages_per_block, upper_state_cb, NULL);
	if (!ck)
		af_rec_map_clear(&af_flash.map); /* else the checkpoint's map is loaded */
	scan.data_ppa = AF_PPA_UNMAPPED; /* the sync slot may hold anything by now */
	r = af_rec_finish(&rec, ck, &af_flash.map, &af_flash.report);
	af_flash.map.tally = NULL; /* the counts array is the checkpointer's scratch from now on */
	af_flash.map.need = NULL;
	af_flash.lost = af_flash.tally.lost;
	af_flash.bound = af_flash.tally.bound;
	for (uint32_t b = 0; b < af_flash.nblocks; b++)
		af_flash.blocks[b].valid = af_flash.counts[b];
	af_flash.t_finish = af_uptime_cycles() - t0;
	af_ram_release(pages); /* the scan table is boot-time only */
	if (r != AF_REC_OK) {
		printf("error: recovery: af_rec_finish returned %d\n", r);
		return -1;
	}
	af_flash.scanned = 1;

	const af_rec_report_t *rp = &af_flash.report;
	printf("recovery: %lu pages scanned (", (unsigned long)rp->pages_scanned);
	af_print_u64(af_flash.t_scan / (rp->pages_scanned ? rp->pages_scanned : 1));
	printf(" cycles/page): %lu erased, %lu data, %lu record, %lu torn\n", (unsigned long)rp->erased,
	       (unsigned long)rp->data_pages, (unsigned long)rp->record_pages, (unsigned long)rp->torn);
	if (rec.mlc_dropped)
		printf("recovery: %lu pages on MLC lower pages of incomplete word lines not trusted (trap 4)\n",
		       (unsigned long)rec.mlc_dropped);
	printf("recovery: kept %lu writes, %lu groups, %lu tx, %lu remaps, %lu trims; discarded %lu groups, "
	       "%lu tx, %lu remaps, %lu incomplete records\n",
	       (unsigned long)rp->writes_kept, (unsigned long)rp->groups_kept, (unsigned long)rp->tx_kept,
	       (unsigned long)rp->remaps_kept, (unsigned long)rp->trims_kept, (unsigned long)rp->groups_discarded,
	       (unsigned long)rp->tx_discarded, (unsigned long)rp->remaps_discarded,
	       (unsigned long)rp->records_incomplete);
	printf("recovery: %lu LBAs bound of %lu, %lu lost; next seq ", (unsigned long)af_flash.bound,
	       (unsigned long)af_flash.nlba, (unsigned long)af_flash.lost);
	af_print_u64(rp->next_seq);
	if (af_flash.scan_full)
		printf("; error: %lu pages not scanned (table of %lu entries full)", (unsigned long)af_flash.scan_full,
		       (unsigned long)af_flash.scan_cap);
	if (af_flash.read_errors)
		printf("; %lu read errors", (unsigned long)af_flash.read_errors);
	printf("\nrecovery: %lu of %lu good blocks scanned\n", (unsigned long)af_flash.blocks_scanned,
	       (unsigned long)(af_flash.nblocks - af_flash.bad_blocks));
	return 0;
}

#endif /* AFNAND_BASE */
