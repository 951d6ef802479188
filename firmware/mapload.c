/* atomflash firmware: the checkpoint's map pages into the map, and the map loaded lazily (see mapload.h). */
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "flash.h"
#include "ftlcore.h"
#include "mapload.h"
#include "nand.h"

af_mapload_t af_mapload;

#ifdef AFCTRL_FTL

#define ENTRIES_PER_PAGE AF_MAP_ENTRIES_PER_PAGE

/* CKPT_ENTRY as words (little-endian, like the CPU): vseq low, high, ppa. */
#define ENTRY_WORDS (sizeof(af_ckpt_entry_t) / 4)
#define ENTRY_VSEQ (offsetof(af_ckpt_entry_t, vseq) / 4)
#define ENTRY_PPA (offsetof(af_ckpt_entry_t, ppa) / 4)
_Static_assert(sizeof(af_ckpt_entry_t) % 4 == 0 && offsetof(af_ckpt_entry_t, vseq) % 4 == 0 &&
		       offsetof(af_ckpt_entry_t, ppa) % 4 == 0,
	       "checkpoint entries are read from the page buffer as words");

/* One entry read from a page buffer: its vseq into *vseq, its PPA returned (none for an unbound LBA). */
static uint32_t decode_entry(const volatile uint32_t *e, uint64_t *vseq)
{
	uint32_t lo = e[ENTRY_VSEQ], hi = e[ENTRY_VSEQ + 1];
	*vseq = (uint64_t)hi << 32 | lo;
	return (lo & hi) == UINT32_MAX ? AF_REC_PPA_NONE : e[ENTRY_PPA]; /* vseq NONE: unbound */
}

void af_map_take_page(uint32_t q, uint32_t nlba, const volatile uint32_t *w)
{
	uint32_t *map_ppa = af_flash.map.ppa;
	uint64_t *map_vseq = af_flash.map.vseq, *map_cseq = af_flash.map.cseq;
	uint32_t lba = q * ENTRIES_PER_PAGE;
	uint32_t end = nlba - lba < ENTRIES_PER_PAGE ? nlba : lba + ENTRIES_PER_PAGE;
	for (; lba < end; lba++, w += ENTRY_WORDS) {
		map_ppa[lba] = decode_entry(w, &map_vseq[lba]);
		map_cseq[lba] = 0;
	}
}

/* Lazily: entry lba becomes the checkpoint's (vseq, ppa) unless something wrote it while its segment was not
 * loaded (it no longer holds AF_PPA_NOT_LOADED): that value is newer than the checkpoint's and stays (1).
 * The checkpointer's view gets the checkpoint's page either way, so the next checkpoint reads the version
 * of whatever the table holds. */
static int take_entry(uint32_t lba, uint64_t vseq, uint32_t ppa)
{
	int kept = af_flash.map.ppa[lba] != AF_PPA_NOT_LOADED;
	if (!kept)
		af_flash.map.ppa[lba] = ppa;
	af_flash.map.vseq[lba] = vseq;
	af_flash.map.cseq[lba] = 0;
	if (af_mapload.shadow && lba < af_ftl.capacity)
		af_mapload.shadow[lba] = ppa;
	return kept;
}

/* --- the map, loaded lazily (format 3) ---------------------------------------------------- */

/* While segments remain to load, the firmware's waits on the core load them too (ftlcore.h). */
static void set_active(int on)
{
	af_mapload.active = on;
	af_ftl_hooks.map_need = on ? af_map_need : NULL;
	af_ftl_hooks.map_fault = on ? af_map_serve_fault : NULL;
}

int af_map_lazy_begin(const uint32_t *area_blocks, uint32_t map_pages, const uint32_t *crc, uint64_t nlba,
		      uint64_t number)
{
	af_mapload_t *ml = &af_mapload;
	if (!af_ftl.present)
		return -1; /* no gate to hold the host with: load it whole */
	uint32_t gate = ftl_rd(AF_FTL_MAP_SEGMENTS), page_shift = 0;
	while ((1u << page_shift) < ENTRIES_PER_PAGE)
		page_shift++;
	if ((1u << page_shift) != ENTRIES_PER_PAGE || gate == 0)
		return -1;
	uint32_t shift = page_shift;
	while (((af_flash.map.nlba - 1) >> shift) + 1 > gate)
		shift++; /* several map pages per segment: the gate has too few bits for one each */
	uint32_t nseg = ((af_flash.map.nlba - 1) >> shift) + 1;
	if (!ml->loaded || nseg > ml->cap) {
		ml->loaded = af_ram_alloc(nseg, 4);
		ml->cap = nseg;
		if (!ml->loaded)
			return -1;
	}
	memset(ml->loaded, 0, nseg);
	/* what no load has written yet reads as such (a load keeps anything else: take_entry) */
	for (uint32_t lba = 0; lba < af_flash.map.nlba; lba++)
		af_flash.map.ppa[lba] = AF_PPA_NOT_LOADED;
	set_active(1);
	ml->area_blocks = area_blocks;
	ml->map_pages = map_pages;
	ml->crc = crc;
	ml->number = number;
	ml->ck_nlba = (uint32_t)nlba;
	ml->seg_shift = shift;
	ml->nseg = ml->left = nseg;
	ml->cursor = 0;
	ml->at_boot = ml->on_demand = ml->page_errors = ml->kept = 0;
	ml->paused = 0;
	return 0;
}

void af_map_lazy_abort(void)
{
	set_active(0);
}

/* Page q (0-based) of the checkpoint's map pages. */
static uint32_t map_page_ppa(uint32_t q)
{
	uint32_t index = 1 + q, g = af_mapload.area_blocks[index / af_nand.pages_per_block];
	return AF_PPA_PPA_PAGE_SET(af_nand_block_ppa(g), index % af_nand.pages_per_block);
}

/* Segment s from the checkpoint: its map pages read one at a time (the sync
 * slot) and checked against their recorded CRC; LBAs past the checkpoint's
 * unbound.  A page that does not read or check: its LBAs are lost (unbound; a
 * host read returns what an unbound LBA returns), said on the console. */
static void load_segment(uint32_t s)
{
	af_mapload_t *ml = &af_mapload;
	uint32_t first = s << ml->seg_shift, end = first + (1u << ml->seg_shift), kept = 0, first_kept = 0;
	if (end > af_flash.map.nlba || end < first)
		end = af_flash.map.nlba;
	for (uint32_t lba = first; lba < end;) {
		uint32_t q = lba / ENTRIES_PER_PAGE, next = (q + 1) * ENTRIES_PER_PAGE;
		if (next > end)
			next = end;
		af_nand_cpl_t c AF_NAND_ALIGNED;
		int ok = 0;
		if (lba < ml->ck_nlba) {
			ok = af_nand_read(map_page_ppa(q), 0, af_nand.page_data, NULL, 0, &c) == AF_NANDRESULT_OK &&
			     c.crc == ml->crc[q];
			if (!ok) {
				ml->page_errors++;
				printf("error: ckpt: map page %lu of checkpoint %lu does not %s: LBAs %lu..%lu lost\n",
				       (unsigned long)(1 + q), (unsigned long)ml->number,
				       c.result == AF_NANDRESULT_OK ? "check" : "read", (unsigned long)lba,
				       (unsigned long)(next - 1));
			}
		}
		const volatile uint32_t *w = ok ? af_nand_buf_words(c.channel, af_nand_sync_slot()) : NULL;
		uint32_t ck_end = next < ml->ck_nlba ? next : ml->ck_nlba;
		for (uint32_t l = lba; l < next; l++) {
			uint64_t vseq = AF_REC_VSEQ_NONE;
			uint32_t ppa = AF_REC_PPA_NONE;
			if (w && l < ck_end)
				ppa = decode_entry(w + (l - q * ENTRIES_PER_PAGE) * ENTRY_WORDS, &vseq);
			if (take_entry(l, vseq, ppa) && kept++ == 0)
				first_kept = l;
		}
		lba = next;
	}
	if (kept) {
		/* the gate should have held whatever wrote them until now: said, and the newer values kept */
		ml->kept += kept;
		printf("error: map: segment %lu: %lu entries written before it was loaded (LBA %lu: 0x%08lx), kept\n",
		       (unsigned long)s, (unsigned long)kept, (unsigned long)first_kept,
		       (unsigned long)af_flash.map.ppa[first_kept]);
	}
	ml->loaded[s] = 1;
	ml->left--;
	ftl_wr(AF_FTL_MAP_SEG, s | AF_FTL_MAP_SEG_LOADED);
	if (ml->left == 0) {
		set_active(0);
		ml->t_done = af_uptime_cycles();
		ftl_wr(AF_FTL_MAP_LAZY, 0); /* every segment in memory: the gate off */
	}
}

void af_map_need(uint32_t lba)
{
	af_mapload_t *ml = &af_mapload;
	if (!ml->active || lba >= af_flash.map.nlba)
		return;
	uint32_t s = lba >> ml->seg_shift;
	if (!ml->loaded[s]) {
		if (!af_ftl.running)
			ml->at_boot++;
		load_segment(s);
	}
}

void af_map_load_all(void)
{
	af_mapload_t *ml = &af_mapload;
	for (uint32_t s = 0; ml->active && s < ml->nseg; s++)
		if (!ml->loaded[s])
			load_segment(s);
}

int af_map_serve_fault(void)
{
	af_mapload_t *ml = &af_mapload;
	if (!ml->active || !af_ftl.running)
		return 0;
	uint32_t f = ftl_rd(AF_FTL_MAP_FAULT);
	uint32_t s = (f & AF_FTL_MAP_FAULT_INDEX) >> AF_FTL_MAP_FAULT_INDEX_SHIFT;
	if (!(f & AF_FTL_MAP_FAULT_WAITING) || s >= ml->nseg)
		return 0;
	if (ml->loaded[s]) { /* in memory already: the gate missed the news */
		ftl_wr(AF_FTL_MAP_SEG, s | AF_FTL_MAP_SEG_LOADED);
		return 1;
	}
	ml->on_demand++;
	load_segment(s);
	return 1;
}

void af_map_poll(void)
{
	af_mapload_t *ml = &af_mapload;
	if (!ml->active || af_map_serve_fault())
		return;
	if (ml->paused)
		return;
	while (ml->cursor < ml->nseg && ml->loaded[ml->cursor])
		ml->cursor++;
	if (ml->cursor < ml->nseg)
		load_segment(ml->cursor);
}

void af_map_start_core(void)
{
	af_mapload_t *ml = &af_mapload;
	if (!ml->active) {
		ftl_wr(AF_FTL_MAP_LAZY, 0);
		return;
	}
	/* the gate's bits survive a reset: every segment's, loaded or not */
	for (uint32_t s = 0; s < ml->nseg; s++)
		ftl_wr(AF_FTL_MAP_SEG, s | (ml->loaded[s] ? AF_FTL_MAP_SEG_LOADED : 0));
	ftl_wr(AF_FTL_MAP_LAZY, AF_FTL_MAP_LAZY_ENABLE | ml->seg_shift << AF_FTL_MAP_LAZY_SEG_SHIFT_SHIFT);
}

void af_map_copy_shadow(uint32_t *shadow)
{
	af_mapload_t *ml = &af_mapload;
	ml->shadow = shadow;
	if (!ml->active) {
		memcpy(shadow, af_flash.map.ppa, 4 * (size_t)af_ftl.capacity);
		return;
	}
	for (uint32_t s = 0; s < ml->nseg; s++) {
		uint32_t first = s << ml->seg_shift, n = 1u << ml->seg_shift;
		if (!ml->loaded[s] || first >= af_ftl.capacity)
			continue;
		if (n > af_ftl.capacity - first)
			n = (uint32_t)af_ftl.capacity - first;
		memcpy(shadow + first, af_flash.map.ppa + first, 4 * (size_t)n);
	}
}

#endif /* AFCTRL_FTL */
