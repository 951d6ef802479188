/* atomflash firmware: the anchor log and the allocation plan (see anchor.h). */
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "anchor.h"
#include "console.h"
#include "flash.h"
#include "ftlcore.h"
#include "nand.h"

af_anchor_t af_anchor;

#ifdef AFCTRL_FTL

/* Records go on the pages a cut cannot damage afterwards: on MLC parts the lower pages only (programming
 * an upper page can destroy its lower page, DESIGN.md trap 4, which would hold an older record). */
uint32_t af_anchor_usable_pages(void)
{
	if (af_nand.bits_per_cell < 2)
		return af_nand.pages_per_block;
	uint32_t n = 0;
	for (uint32_t p = 0; p < af_nand.pages_per_block; p++)
		n += af_mlc_upper_of(p, af_nand.pages_per_block) >= 0;
	return n;
}

static uint32_t page_of(uint32_t i)
{
	if (af_nand.bits_per_cell < 2)
		return i;
	for (uint32_t p = 0;; p++)
		if (af_mlc_upper_of(p, af_nand.pages_per_block) >= 0 && i-- == 0)
			return p;
}

static uint32_t record_ppa(uint32_t b, uint32_t i)
{
	return AF_PPA_PPA_PAGE_SET(af_nand_block_ppa(af_anchor.block[b]), page_of(i));
}

/* Retired with nothing bound in it (an erase failed, or GC moved its data out): the records list it. */
static int is_grown_bad(const af_block_t *b)
{
	return (b->flags & AF_BLOCK_RETIRED) && b->state == AF_BSTATE_RETIRED && !b->anchor;
}

static int is_anchor_oob(const af_oob_t *o)
{
	return af_crc32(o, AF_OOB_CRC_SPAN) == o->crc && o->format == AF_OOB_FORMAT && o->kind == AF_KIND_CHECKPOINT &&
	       o->lba == AF_ANCHOR_OOB_LBA;
}

/* Page `ppa`'s OOB: 1 an anchor record's (*seq its seq), 0 erased, -1 anything else (torn, unreadable). */
static int read_oob(uint32_t ppa, uint64_t *seq)
{
	uint8_t buf[AF_NAND_BBM_BYTES + AF_OOB_SIZE] __attribute__((aligned(4)));
	af_oob_t oob;
	af_anchor.reads++;
	int r = af_nand_read(ppa, af_nand.oob_col, af_nand.oob_bytes, buf, 0, NULL);
	if (r == AF_NANDRESULT_ERASED)
		return 0;
	memcpy(&oob, buf + AF_NAND_BBM_BYTES, sizeof(oob));
	if (r != AF_NANDRESULT_OK || !is_anchor_oob(&oob))
		return -1;
	*seq = oob.vseq;
	return 1;
}

/* The record at `ppa` into af_anchor (0), or -1 when it is not an intact record. */
static int read_record(uint32_t ppa)
{
	uint8_t oobbuf[AF_NAND_BBM_BYTES + AF_OOB_SIZE] __attribute__((aligned(4)));
	af_oob_t oob;
	af_anchor_hdr_t h;
	unsigned ch = AF_PPA_PPA_CHANNEL_GET(ppa), slot = af_nand_sync_slot();
	af_anchor.reads++;
	if (af_nand_read(ppa, 0, af_nand.user_bytes, NULL, 0, NULL) != AF_NANDRESULT_OK)
		return -1;
	af_nand_buf_read(ch, slot, af_nand.oob_col, oobbuf, sizeof(oobbuf));
	memcpy(&oob, oobbuf + AF_NAND_BBM_BYTES, sizeof(oob));
	if (!is_anchor_oob(&oob))
		return -1;
	uint8_t *page = af_anchor.page;
	af_nand_buf_read(ch, slot, 0, page, af_nand.page_data);
	memcpy(&h, page, sizeof(h));
	if (h.magic != AF_ANCHOR_MAGIC || h.format < AF_ANCHOR_FORMAT_OLDEST || h.format > AF_ANCHOR_FORMAT)
		return -1;
	/* format 1: the header ends before the counters, and its CRC covers the bytes before crc, then the
	 * lists; format 2: every header byte but crc's, then the lists */
	uint32_t hdr = h.format < 2 ? offsetof(af_anchor_hdr_t, power_cycles) : sizeof(h);
	uint64_t nlist = AF_CKPT_AREAS * (uint64_t)h.narea + h.nplan + h.nbad;
	if (h.seq != oob.vseq || h.narea > AF_CKPT_MAX_AREA_BLOCKS || hdr + 4 * nlist > af_nand.page_data ||
	    (uint64_t)h.nplan + h.nbad > af_anchor.cap)
		return -1;
	uint32_t crc = af_crc32_update(AF_CRC32_INIT, page, offsetof(af_anchor_hdr_t, crc));
	if (h.format >= 2)
		crc = af_crc32_update(crc, page + offsetof(af_anchor_hdr_t, crc) + sizeof(h.crc),
				      sizeof(h) - offsetof(af_anchor_hdr_t, crc) - sizeof(h.crc));
	if ((af_crc32_update(crc, page + hdr, 4 * (uint32_t)nlist) ^ AF_CRC32_XOROUT) != h.crc)
		return -1;
	if (h.format < 2) { /* no counters yet, never a clean shutdown */
		h.power_cycles = h.unsafe_shutdowns = 0;
		h.flags &= (uint8_t)~AF_ANCHOR_FLAG_SHUTDOWN_CLEAN;
	}
	const uint32_t *list = (const uint32_t *)(page + hdr);
	for (uint32_t a = 0; a < AF_CKPT_AREAS; a++)
		for (uint32_t i = 0; i < h.narea; i++) {
			uint32_t p = list[a * h.narea + i];
			af_anchor.area[a][i] = p == AF_PPA_UNMAPPED ? AF_CKPT_NO_BLOCK : af_nand_block_of(p);
		}
	for (uint32_t i = 0; i < h.nplan + h.nbad; i++) /* the bad list right after the plan */
		af_anchor.plan[i] = af_nand_block_of(list[AF_CKPT_AREAS * h.narea + i]);
	af_anchor.bad = af_anchor.plan + h.nplan;
	af_anchor.nbad = h.nbad;
	af_anchor.have = 1;
	af_anchor.seq = h.seq;
	af_anchor.flags = h.flags;
	af_anchor.base = h.base;
	af_anchor.narea = h.narea;
	af_anchor.nplan = h.nplan;
	af_anchor.power_cycles = h.power_cycles;
	af_anchor.unsafe_shutdowns = h.unsafe_shutdowns;
	return 0;
}

/* This boot's power-on counters from the newest record's (none: the device's first boot we know of). */
static void count_boot(void)
{
	af_anchor.boot_record = af_anchor.have;
	if (!af_anchor.have) {
		af_anchor.power_cycles = 1;
		af_anchor.unsafe_shutdowns = 0;
		return;
	}
	af_anchor.boot_clean = !!(af_anchor.flags & AF_ANCHOR_FLAG_SHUTDOWN_CLEAN);
	af_anchor.power_cycles++;
	af_anchor.unsafe_shutdowns += !af_anchor.boot_clean;
}

void af_anchor_boot(void)
{
	memset(&af_anchor, 0, sizeof(af_anchor));
	af_anchor.power_cycles = 1; /* no record: counted from this boot */
	if (!AF_ANCHOR_ENABLED)
		return;
	uint64_t t0 = af_uptime_cycles();
	af_anchor.cap = af_nand.page_data / 4;
	af_anchor.page = af_ram_alloc(af_nand.page_data, 64);
	af_anchor.plan = af_ram_alloc(4 * af_anchor.cap, 4);
	if (!af_anchor.page || !af_anchor.plan)
		return;
	/* the first good blocks of LUN 0 of target 0, by factory marker (global block k is block k there) */
	uint32_t n = 0;
	for (uint32_t k = 0; k < AF_ANCHOR_SEARCH && k < af_nand.blocks_per_lun && n < AF_ANCHOR_BLOCKS; k++) {
		uint8_t m[AF_NAND_BBM_BYTES + 4] __attribute__((aligned(4)));
		af_anchor.reads++;
		int r = af_nand_read(af_nand_block_ppa(k), af_nand.page_data, AF_NAND_BBM_BYTES, m,
				     AF_NAND_DESC_FLAGS_RAW_MASK, NULL);
		int good = r == AF_NANDRESULT_ERASED;
		if (r == AF_NANDRESULT_OK) {
			good = 1;
			for (unsigned i = 0; i < AF_NAND_BBM_BYTES; i++)
				good &= m[i] == 0xff;
		}
		if (good)
			af_anchor.block[n++] = k;
	}
	if (n < AF_ANCHOR_BLOCKS) {
		af_anchor.t_boot = af_uptime_cycles() - t0;
		return;
	}
	af_anchor.found = 1;
	for (uint32_t i = 0; i < AF_ANCHOR_BLOCKS; i++)
		af_flash.blocks[af_anchor.block[i]].anchor = 1;
	/* the block whose first record is newer holds the newest (the other is erased only when it is full) */
	uint32_t pages = af_anchor_usable_pages();
	uint64_t first[AF_ANCHOR_BLOCKS];
	int state[AF_ANCHOR_BLOCKS];
	for (uint32_t b = 0; b < AF_ANCHOR_BLOCKS; b++)
		state[b] = read_oob(record_ppa(b, 0), &first[b]);
	af_anchor.cur = 1;
	af_anchor.next_page = pages; /* no record: the first write erases block 0 and starts there */
	for (uint32_t tries = 0; tries < AF_ANCHOR_BLOCKS; tries++) {
		int b = -1;
		for (uint32_t i = 0; i < AF_ANCHOR_BLOCKS; i++)
			if (state[i] == 1 && (b < 0 || first[i] > first[b]))
				b = (int)i;
		if (b < 0)
			break;
		state[b] = -1; /* tried */
		/* records are programmed in page order: the first erased page by bisection, then back to an intact one */
		uint32_t lo = 1, hi = pages;
		while (lo < hi) {
			uint32_t mid = (lo + hi) / 2;
			uint64_t s;
			if (read_oob(record_ppa(b, mid), &s) == 0)
				hi = mid;
			else
				lo = mid + 1;
		}
		if (tries == 0) {
			af_anchor.cur = (uint32_t)b;
			af_anchor.next_page = lo;
		}
		for (uint32_t i = lo; i-- > 0;) {
			if (read_record(record_ppa(b, i)) == 0)
				break;
			af_anchor.boot_torn++;
		}
		if (af_anchor.have)
			break;
	}
	count_boot(); /* before this boot's first record (af_plan_boot), which carries them */
	af_anchor.mode = AF_PLAN_ON; /* mount.c may turn it off (an older checkpoint format, blocks in use) */
	af_anchor.t_boot = af_uptime_cycles() - t0;
}

void af_anchor_where(af_ckpt_where_t *w)
{
	w->base = af_anchor.base;
	w->seq = af_anchor.seq;
	w->narea = af_anchor.narea;
	memcpy(w->area, af_anchor.area, sizeof(w->area));
}

int af_anchor_areas_changed(void)
{
	if (!af_anchor.have || af_anchor.narea != af_ckpt.narea)
		return 1;
	for (uint32_t a = 0; a < AF_CKPT_AREAS; a++)
		for (uint32_t i = 0; i < af_ckpt.narea; i++)
			if (af_anchor.area[a][i] != af_ckpt.area_block[a][i])
				return 1;
	return 0;
}

uint32_t af_anchor_header_word(void)
{
	return af_anchor.mode == AF_PLAN_ON || af_anchor.mode == AF_PLAN_NONE ? (af_anchor.have ? (uint32_t)af_anchor.seq : 0)
									      : 0;
}

static void dead(const char *why)
{
	af_anchor.mode = AF_PLAN_DEAD;
	printf("warning: anchor: %s: no more records; checkpoint areas stay where they are, and the next boots read "
	       "page 0 of every block once a checkpoint is taken\n", why);
}

int af_anchor_write(uint8_t flags)
{
	if (!af_anchor.found || af_anchor.mode == AF_PLAN_OFF || af_anchor.mode == AF_PLAN_DEAD)
		return -2;
	af_anchor_hdr_t h;
	uint8_t *page = af_anchor.page;
	uint32_t narea = af_ckpt.narea;
	uint32_t room = (af_nand.page_data - sizeof(h)) / 4 - AF_CKPT_AREAS * narea, n = 0;
	uint32_t *list = (uint32_t *)(page + sizeof(h));
	memset(page, 0, af_nand.page_data);
	for (uint32_t a = 0; a < AF_CKPT_AREAS; a++)
		for (uint32_t i = 0; i < narea; i++)
			list[a * narea + i] = af_ckpt.area_block[a][i] == AF_CKPT_NO_BLOCK
						      ? AF_PPA_UNMAPPED
						      : af_nand_block_ppa(af_ckpt.area_block[a][i]);
	/* the plan from the front (the dense array: a boot's cost grows with every pass over the block
	 * table), the grown bad blocks from the back (a planned block takes a bad one's place: the plan must
	 * fit, the bad blocks only as many as fit -- a boot that misses one finds it again when its erase
	 * fails); the table's lines only when a block was retired at all */
	uint32_t nbad = 0, *back = list + AF_CKPT_AREAS * narea + room; /* bad i at back[-1 - i] */
	const uint8_t *planned = af_flash.planned;
	int plan = !(flags & AF_ANCHOR_FLAG_NO_PLAN), any_retired = af_flash.retired_marks != 0;
	for (uint32_t g = 0; g < af_flash.nblocks; g++) {
		if (plan && planned[g]) {
			if (n + nbad == room && !nbad--)
				return -1;
			list[AF_CKPT_AREAS * narea + n++] = g;
		}
		if (any_retired && is_grown_bad(&af_flash.blocks[g]) && n + nbad < room) /* retired while planned: in both */
			back[-1 - (int32_t)nbad++] = g;
	}
	/* as PPAs, the plan then the bad blocks in ascending order */
	uint32_t *bad = back - nbad;
	for (uint32_t i = 0, j = nbad; i + 1 < j; i++, j--) {
		uint32_t t = bad[i];
		bad[i] = bad[j - 1];
		bad[j - 1] = t;
	}
	memmove(list + AF_CKPT_AREAS * narea + n, bad, 4 * nbad);
	for (uint32_t i = 0; i < n + nbad; i++)
		list[AF_CKPT_AREAS * narea + i] = af_nand_block_ppa(list[AF_CKPT_AREAS * narea + i]);
	af_anchor.bad_dirty = 0;
	memset(&h, 0, sizeof(h));
	h.magic = AF_ANCHOR_MAGIC;
	h.format = AF_ANCHOR_FORMAT;
	h.flags = flags;
	h.seq = af_anchor.seq + 1;
	h.base = af_ckpt.valid ? af_ckpt.number : 0;
	h.narea = narea;
	h.nplan = n;
	h.nbad = nbad;
	h.power_cycles = af_anchor.power_cycles;
	h.unsafe_shutdowns = af_anchor.unsafe_shutdowns;
	/* the header but its crc field, then the lists */
	const uint8_t *hb = (const uint8_t *)&h;
	uint32_t crc = af_crc32_update(AF_CRC32_INIT, hb, offsetof(af_anchor_hdr_t, crc));
	crc = af_crc32_update(crc, hb + offsetof(af_anchor_hdr_t, crc) + sizeof(h.crc),
			      sizeof(h) - offsetof(af_anchor_hdr_t, crc) - sizeof(h.crc));
	h.crc = af_crc32_update(crc, list, 4 * (AF_CKPT_AREAS * narea + n + nbad)) ^ AF_CRC32_XOROUT;
	memcpy(page, &h, sizeof(h));
	af_oob_t oob;
	memset(&oob, 0, sizeof(oob));
	oob.kind = AF_KIND_CHECKPOINT;
	oob.group_len = 1;
	oob.format = AF_OOB_FORMAT;
	oob.lba = AF_ANCHOR_OOB_LBA;
	oob.vseq = h.seq;
	oob.crc = af_crc32(&oob, AF_OOB_CRC_SPAN);
	uint32_t pages = af_anchor_usable_pages();
	for (uint32_t tries = 0; tries < 2 * pages + 2; tries++) {
		if (af_anchor.next_page >= pages) {
			/* this block is full: the other one, erased, takes the next record (this one keeps the newest
			 * until then) */
			uint32_t other = (af_anchor.cur + 1) % AF_ANCHOR_BLOCKS;
			af_block_t *b = &af_flash.blocks[af_anchor.block[other]];
			b->erases++;
			af_flash.erased_since_boot++;
			af_anchor.erases++;
			if (af_nand_erase(af_nand_block_ppa(af_anchor.block[other]), NULL) != AF_NANDRESULT_OK) {
				dead("the erase of an anchor block failed");
				return -2;
			}
			af_anchor.cur = other;
			af_anchor.next_page = 0;
		}
		if (af_ckpt_program_page(record_ppa(af_anchor.cur, af_anchor.next_page++), page, &oob) == 0) {
			af_anchor.have = 1;
			af_anchor.seq = h.seq;
			af_anchor.flags = flags;
			af_anchor.base = h.base;
			af_anchor.narea = narea;
			for (uint32_t a = 0; a < AF_CKPT_AREAS; a++)
				for (uint32_t i = 0; i < narea; i++)
					af_anchor.area[a][i] = af_ckpt.area_block[a][i];
			af_anchor.written++;
			return 0;
		}
		af_anchor.program_failures++;
	}
	dead("no page of the anchor blocks could be programmed");
	return -2;
}

int af_anchor_shutdown(void)
{
	if (af_anchor.mode != AF_PLAN_ON && af_anchor.mode != AF_PLAN_NONE)
		return -2;
	uint8_t flags = AF_ANCHOR_FLAG_SHUTDOWN_CLEAN;
	int r = af_anchor_write(flags | (af_anchor.mode == AF_PLAN_NONE ? AF_ANCHOR_FLAG_NO_PLAN : 0));
	if (r == -1 && af_anchor_write(flags | AF_ANCHOR_FLAG_NO_PLAN) == 0) { /* the plan outgrew a page */
		af_anchor.mode = AF_PLAN_NONE;
		r = 0;
	}
	return r;
}

void af_anchor_retired(void)
{
	af_anchor.bad_dirty = 1;
}

void af_anchor_poll(void)
{
	if (af_anchor.bad_dirty && (af_anchor.mode == AF_PLAN_ON || af_anchor.mode == AF_PLAN_NONE))
		af_anchor_write(af_anchor.mode == AF_PLAN_NONE ? AF_ANCHOR_FLAG_NO_PLAN : 0);
}

uint32_t af_anchor_apply_bad(void)
{
	uint32_t n = 0;
	for (uint32_t i = 0; af_anchor.have && i < af_anchor.nbad; i++) {
		uint32_t g = af_anchor.bad[i];
		if (g >= af_flash.nblocks || af_flash.blocks[g].flags || af_flash.blocks[g].anchor)
			continue;
		af_flash.blocks[g].flags |= AF_BLOCK_RETIRED;
		af_flash.blocks[g].state = AF_BSTATE_RETIRED;
		if (af_flash.blocks[g].retire) { /* retiring at the checkpoint, retired (its data moved) since */
			af_flash.blocks[g].retire = 0;
			af_ckpt.retiring--;
		}
		af_flash.bad_blocks++;
		af_flash.retired_marks++;
		n++;
	}
	return n;
}

/* --- the plan ------------------------------------------------------------------------------------- */

int af_plan_allows(uint32_t g)
{
	/* planned == 1: in a durable record; 2: in the one being written */
	return af_anchor.mode == AF_PLAN_OFF || af_anchor.mode == AF_PLAN_NONE || af_flash.planned[g] == 1;
}

int af_plan_extend(void)
{
	if (af_anchor.mode != AF_PLAN_ON)
		return af_anchor.mode == AF_PLAN_DEAD ? -1 : 0;
	uint32_t bpl = af_nand.blocks_per_lun, added = 0, fresh[AF_FTL_MAX_DIES * AF_ANCHOR_TOP_UP];
	for (uint32_t d = 0; d < af_ftl.dies; d++) {
		const uint16_t *pool = &af_ftl.pool[d * bpl];
		const uint32_t *wear = &af_ftl.pool_wear[d * bpl];
		/* a die's blocks are consecutive global blocks: one af_ftl_gblock (two divisions) per die */
		uint32_t g0 = af_ftl_gblock(d, 0), have = 0;
		const uint8_t *planned = &af_flash.planned[g0];
		/* one pass over the pool: how many are planned, and the least-worn unplanned ones (the order
		 * dynamic wear levelling hands them out in; ties: the stack's top, as af_policy_least_worn), best first */
		uint32_t best[AF_ANCHOR_TOP_UP], nbest = 0;
		for (uint32_t i = af_ftl.pool_n[d]; i-- > 0;) {
			if (planned[pool[i]]) {
				have++;
				continue;
			}
			uint32_t j = nbest < AF_ANCHOR_TOP_UP ? nbest++ : AF_ANCHOR_TOP_UP;
			for (; j > 0 && wear[i] < wear[best[j - 1]]; j--)
				if (j < AF_ANCHOR_TOP_UP)
					best[j] = best[j - 1];
			if (j < AF_ANCHOR_TOP_UP)
				best[j] = i;
		}
		for (uint32_t k = 0; k < nbest && have < AF_ANCHOR_TOP_UP; k++, have++) {
			fresh[added] = g0 + pool[best[k]];
			af_flash.planned[fresh[added++]] = 2;
		}
	}
	if (!added)
		return 0;
	int r = af_anchor_write(0);
	if (r == -1) /* the plan outgrew a page (no checkpoint for long): hand out freely, boots read every page 0 */
		r = af_anchor_write(AF_ANCHOR_FLAG_NO_PLAN) == 0 ? 1 : -2;
	for (uint32_t k = 0; k < added; k++)
		af_flash.planned[fresh[k]] = r == 0 ? 1 : 0;
	if (r == 1) {
		af_anchor.mode = AF_PLAN_NONE;
		printf("warning: anchor: the plan does not fit a record: blocks are handed out without one until the "
		       "next checkpoint (a boot before it reads page 0 of every block)\n");
		return 0;
	}
	if (r == 0)
		af_anchor.extends++;
	return r == 0 ? 0 : -1;
}

void af_plan_checkpointed(void)
{
	if (af_anchor.mode == AF_PLAN_DEAD && af_anchor_header_word() == 0) {
		/* a checkpoint naming no record is durable: every boot from now on reads page 0 of every block */
		af_anchor.mode = AF_PLAN_OFF;
		return;
	}
	if (af_anchor.mode != AF_PLAN_ON && af_anchor.mode != AF_PLAN_NONE)
		return;
	/* handed out before the header: open then (its list) or closed below its floor */
	for (uint32_t g = 0; g < af_flash.nblocks; g++)
		if (af_flash.planned[g] && af_flash.blocks[g].state != AF_BSTATE_FREE)
			af_flash.planned[g] = 0;
	if (af_anchor.mode == AF_PLAN_NONE)
		af_anchor.mode = AF_PLAN_ON;
	af_plan_extend();
	if (af_anchor.mode == AF_PLAN_ON && (!af_anchor.have || af_anchor.base != af_ckpt.number))
		af_anchor_write(0); /* a record with this base even when no block was added */
}

void af_plan_boot(void)
{
	if (af_anchor.mode != AF_PLAN_ON)
		return;
	/* what the boot scanned holds pages from the checkpoint's floor on, so the next boot must read it again:
	 * planned already (af_plan_boot_mark) */
	uint64_t seq = af_anchor.seq;
	af_plan_extend();
	if (af_anchor.mode == AF_PLAN_ON && (!af_anchor.have || af_anchor.seq == seq))
		af_anchor_write(0);
}

/* --- console ---------------------------------------------------------------------------------------- */

void af_anchor_print(const char *prefix)
{
	static const char *const modes[] = { "off", "on", "none (a record said the plan did not fit)", "dead" };
	if (!af_anchor.found) {
		printf("%sno anchor: fewer than %u good blocks among the first %u of target 0: boots read page 0 of "
		       "every block\n", prefix, (unsigned)AF_ANCHOR_BLOCKS, (unsigned)AF_ANCHOR_SEARCH);
		return;
	}
	uint32_t planned = 0;
	for (uint32_t g = 0; g < af_flash.nblocks; g++)
		planned += af_flash.planned[g] == 1;
	printf("%sblocks %lu %lu, record ", prefix, (unsigned long)af_anchor.block[0], (unsigned long)af_anchor.block[1]);
	af_print_u64(af_anchor.seq);
	printf(" (base checkpoint ");
	af_print_u64(af_anchor.base);
	printf(") in block %lu, next page %lu of %lu; plan %s, %lu blocks\n",
	       (unsigned long)af_anchor.block[af_anchor.cur], (unsigned long)af_anchor.next_page,
	       (unsigned long)af_anchor_usable_pages(), modes[af_anchor.mode & 3], (unsigned long)planned);
	printf("%srecords written %lu (%lu plan extensions), program failures %lu, erases %lu since boot\n", prefix,
	       (unsigned long)af_anchor.written, (unsigned long)af_anchor.extends,
	       (unsigned long)af_anchor.program_failures, (unsigned long)af_anchor.erases);
	printf("%spower cycles ", prefix);
	af_print_u64(af_anchor.power_cycles);
	printf(", unsafe shutdowns ");
	af_print_u64(af_anchor.unsafe_shutdowns);
	printf(" (this boot's: the previous power-off was %s)%s\n",
	       !af_anchor.boot_record ? "not on record" : af_anchor.boot_clean ? "a completed shutdown" : "unsafe",
	       af_anchor.flags & AF_ANCHOR_FLAG_SHUTDOWN_CLEAN ? "; shut down cleanly since" : "");
}

#endif /* AFCTRL_FTL */
