/* atomflash firmware: the checkpoint format, and loading the newest at boot (see ckpt.h). */
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include <system.h>

#include "ckpt.h"
#include "flash.h"
#include "ftlcore.h"
#include "mapload.h"
#include "nand.h"
#include "pending.h"

af_ckpt_t af_ckpt = { .interval = AF_CKPT_DEFAULT_INTERVAL };

#ifdef AFCTRL_FTL

#define COUNTS_PER_PAGE (af_nand.page_data / 4)

/* Pages of erase counts (one u32 per global block) after the map pages. */
uint32_t af_ckpt_wear_pages(uint32_t nblocks)
{
	return (nblocks + COUNTS_PER_PAGE - 1) / COUNTS_PER_PAGE;
}

/* Pages of a checkpoint of `nlba` LBAs on a device of `nblocks` blocks: header, map, wear, valid counts,
 * map CRCs, and the pending bindings at most (pending.h). */
uint32_t af_ckpt_pages_for(uint64_t nlba, uint32_t nblocks)
{
	uint32_t map_pages = af_ckpt_map_pages(nlba);
	return 1 + map_pages + 2 * af_ckpt_wear_pages(nblocks) + af_ckpt_crc_pages(map_pages) + af_pend_max_pages();
}

int af_ckpt_program_page(uint32_t ppa, const void *data, const af_oob_t *oob)
{
	unsigned ch = AF_PPA_PPA_CHANNEL_GET(ppa), slot = af_nand_sync_slot();
	uint8_t spare[AF_NAND_BBM_BYTES + AF_OOB_SIZE] __attribute__((aligned(4)));
	memset(spare, 0xff, AF_NAND_BBM_BYTES);
	memcpy(spare + AF_NAND_BBM_BYTES, oob, AF_OOB_SIZE);
	af_nand_buf_write(ch, slot, 0, data, af_nand.page_data);
	af_nand_buf_write(ch, slot, af_nand.oob_col, spare, sizeof(spare));
	return af_nand_program(ppa, 0, NULL, af_nand.user_bytes, 0, NULL) == AF_NANDRESULT_OK ? 0 : -1;
}

void af_ckpt_oob(af_oob_t *oob, uint32_t index, uint32_t total, uint64_t seq, uint64_t number)
{
	memset(oob, 0, sizeof(*oob));
	oob->kind = AF_KIND_CHECKPOINT;
	oob->group_len = (uint16_t)total;
	oob->group_idx = (uint16_t)index;
	oob->format = AF_OOB_FORMAT;
	oob->lba = index;
	oob->seq = seq;
	oob->vseq = number;
	oob->crc = af_crc32(oob, AF_OOB_CRC_SPAN);
}

/* --- boot ------------------------------------------------------------------------- */

/* Boot reads payload pages two at a time: one in flight while the CPU takes
 * the previous one from its slot.  Before the FTL core runs every slot is the
 * firmware's (flash.c's pipeline uses them too); otherwise one page at a time
 * in the sync slot. */
#define LOAD_TAG(k) ((uint16_t)(0x1000u | ((k) & 0xffu))) /* below AF_NAND_TAG_SYNC */

static struct {
	af_ckpt_hdr_t h;
	unsigned slot[2], depth;
	uint32_t pcrc, shift;   /* the payload CRC so far (chained page CRCs), af_crc32_shift(page_data) */
	int counts_ok;          /* erase and valid counts are this device's (same number of blocks) */
	int bad;                /* a map page whose CRC is not the one the checkpoint recorded */
} ld;

static unsigned load_slot_of(uint32_t k)
{
	return ld.slot[k % ld.depth];
}

/* Payload page `idx` (1-based page of the checkpoint) as it arrives. */
static void take_page(uint32_t idx, const af_nand_cpl_t *c, const volatile uint32_t *w)
{
	const af_ckpt_hdr_t *h = &ld.h;
	uint32_t map_end = h->map_pages, wear_end = map_end + h->wear_pages;
	uint32_t count_end = wear_end + (h->format >= 3 ? h->wear_pages : 0);
	uint32_t crc_end = count_end + (h->format >= 3 ? af_ckpt_crc_pages(h->map_pages) : 0);
	if (idx <= map_end) {
		if (h->format >= 3 && c->crc != af_ckpt.map_crc[idx - 1])
			ld.bad = 1;
		if (h->format < 3)
			ld.pcrc = af_crc32_extend(ld.pcrc, c->crc, ld.shift);
		af_map_take_page(idx - 1, (uint32_t)h->nlba, w);
		return;
	}
	ld.pcrc = af_crc32_extend(ld.pcrc, c->crc, ld.shift);
	if (idx <= wear_end) {
		/* count and retired bit whole in `erases` until the CRC checks */
		uint32_t b = (idx - 1 - map_end) * COUNTS_PER_PAGE;
		for (uint32_t i = 0; ld.counts_ok && i < COUNTS_PER_PAGE && b < h->nblocks; i++, b++)
			af_flash.blocks[b].erases = w[i];
	} else if (idx <= count_end) {
		uint32_t b = (idx - 1 - wear_end) * COUNTS_PER_PAGE;
		for (uint32_t i = 0; ld.counts_ok && af_flash.map.tally && i < COUNTS_PER_PAGE && b < h->nblocks; i++, b++)
			af_flash.map.tally->counts[b] = w[i];
	} else if (idx <= crc_end) {
		uint32_t q = (idx - 1 - count_end) * COUNTS_PER_PAGE;
		for (uint32_t i = 0; i < COUNTS_PER_PAGE && q < h->map_pages; i++, q++)
			af_ckpt.map_crc[q] = w[i];
	} else {
		af_pend_take_page(idx - 1 - crc_end, w); /* format 6: pending bindings */
	}
}

/* Pages first .. first+count-1 of the checkpoint in area ld.h.area, read
 * ld.depth at a time, each handed to take_page in order.  0, or -1 when one
 * did not read (every read issued is collected). */
static int load_run(uint32_t first, uint32_t count)
{
	uint32_t issued = 0, k;
	for (k = 0; k < count; k++) {
		for (; issued < count && issued < k + ld.depth; issued++) {
			af_nand_desc_t d AF_NAND_ALIGNED;
			af_nand_desc_init(&d, AF_NANDOP_READ, af_ckpt_page_ppa(ld.h.area, first + issued));
			d.length = (uint16_t)af_nand.page_data;
			d.slot = (uint16_t)load_slot_of(issued);
			d.tag = LOAD_TAG(issued);
			if (af_nand_submit(&d) < 0)
				goto drain;
		}
		af_nand_cpl_t c AF_NAND_ALIGNED;
		if (af_nand_wait(LOAD_TAG(k), &c) < 0 || c.result != AF_NANDRESULT_OK) {
			k++;
			goto drain;
		}
		take_page(first + k, &c, af_nand_buf_words(c.channel, load_slot_of(k)));
	}
	return 0;
drain:
	for (; k < issued; k++)
		af_nand_wait(LOAD_TAG(k), NULL);
	return -1;
}

int af_ckpt_load(uint32_t g, const af_ckpt_where_t *where)
{
	af_ckpt_hdr_t h;
	uint8_t *page = af_ckpt.page;
	uint32_t ppa0 = af_nand_block_ppa(g);
	unsigned ch = AF_PPA_PPA_CHANNEL_GET(ppa0), slot = af_nand_sync_slot();
	if (af_nand_read(ppa0, 0, af_nand.page_data, NULL, 0, NULL) != AF_NANDRESULT_OK)
		return -1;
	af_nand_buf_read(ch, slot, 0, page, sizeof(h));
	memcpy(&h, page, sizeof(h));
	uint32_t nlist = h.nopen + AF_CKPT_AREAS * h.narea;
	uint32_t nwords = nlist + (h.format >= 5); /* format 5: the anchor record word after the lists */
	/* format 3 adds the valid-count and map-CRC pages; a format-2 checkpoint (older firmware) loads
	 * whole, its counts taken from the map after */
	uint32_t pend_pages = h.format >= AF_CKPT_FORMAT_PENDING ? h.pend_pages : 0;
	uint32_t tail = h.format >= 3 ? 2 * h.wear_pages + af_ckpt_crc_pages(h.map_pages) + pend_pages : h.wear_pages;
	if (h.magic != AF_CKPT_MAGIC || h.format < AF_CKPT_FORMAT_OLDEST || h.format > AF_CKPT_FORMAT ||
	    h.area >= AF_CKPT_AREAS || h.narea == 0 || h.narea > AF_CKPT_MAX_AREA_BLOCKS || h.nlba > af_flash.nlba ||
	    sizeof(h) + 4 * (uint64_t)nwords > af_nand.page_data || h.map_pages != af_ckpt_map_pages(h.nlba) ||
	    h.wear_pages != af_ckpt_wear_pages(h.nblocks) || h.bound > h.nlba ||
	    1 + (uint64_t)h.map_pages + tail > h.narea * af_nand.pages_per_block)
		return -1;
	af_nand_buf_read(ch, slot, sizeof(h), page + sizeof(h), 4 * nwords); /* the lists */
	uint32_t crc = af_crc32_update(AF_CRC32_INIT, page, offsetof(af_ckpt_hdr_t, crc));
	crc = af_crc32_update(crc, page + sizeof(h), 4 * nwords) ^ AF_CRC32_XOROUT;
	if (crc != h.crc)
		return -1;
	const uint32_t *list = (const uint32_t *)(page + sizeof(h));
	if (where) {
		/* the boot read page 0 of no block but the anchor's: only a checkpoint the newest record belongs to
		 * (its base, or the record its header names), in the record's areas */
		uint32_t word = h.format >= 5 ? list[nlist] : 0;
		if (h.format < 5 || h.narea != where->narea ||
		    !(where->base == h.number || (word != 0 && word == (uint32_t)where->seq)))
			return -2;
		for (uint32_t i = 0; i < h.narea; i++)
			if (af_nand_block_of(list[h.nopen + h.area * h.narea + i]) != where->area[h.area][i])
				return -2;
	}
	static uint32_t open[AF_CKPT_MAX_OPEN];
	if (h.nopen > AF_CKPT_MAX_OPEN)
		return -1;
	memcpy(open, list, 4 * h.nopen);
	af_ckpt.narea = h.narea;
	for (uint32_t a = 0; a < AF_CKPT_AREAS; a++)
		for (uint32_t i = 0; i < h.narea; i++)
			af_ckpt.area_block[a][i] = af_nand_block_of(list[h.nopen + a * h.narea + i]);
	if (af_ckpt.area_block[h.area][0] != g) {
		af_ckpt.narea = 0;
		return -1;
	}
	/* The other area's blocks as this header names them may have moved on since (rotation, an erase
	 * failure): a block now holding anything but checkpoint pages is not an area block any more, and the
	 * next checkpoint takes a fresh one for it (never erasing what is there now).  The fast path: the
	 * anchor's record says where they are now. */
	for (uint32_t a = 0; where && a < AF_CKPT_AREAS; a++)
		for (uint32_t i = 0; a != h.area && i < h.narea; i++)
			af_ckpt.area_block[a][i] = where->area[a][i];
	for (uint32_t a = 0; !where && a < AF_CKPT_AREAS; a++)
		for (uint32_t i = 0; a != h.area && i < h.narea; i++) {
			uint32_t g = af_ckpt.area_block[a][i];
			const af_block_t *b = &af_flash.blocks[g];
			if (b->flags || !(b->p0 == AF_P0_ERASED ||
					  ((b->p0 == AF_P0_CKPT || b->p0 == AF_P0_INTACT) && af_flash.p0[g].kind == AF_KIND_CHECKPOINT))) {
				af_ckpt.area_block[a][i] = AF_CKPT_NO_BLOCK;
				af_ckpt.areas_dropped++;
			}
		}

	/* The payload.  Its CRC needs no pass over the data: a READ's completion
	 * carries OOB_CRC of exactly the bytes it left in the slot (computed by the
	 * channel after ECC correction: nand_channel.md), and af_crc32_extend
	 * chains those page CRCs into the payload's.  Format 3: the pages after the
	 * map first (erase counts, valid counts, the map pages' CRCs; the payload
	 * CRC covers them), then the map pages, each checked against its CRC --
	 * or, when the map is loaded lazily, none now (af_map_need). */
	if (!af_ckpt.map_crc) /* the map pages' CRCs (format 3), for as long as the map may be loading */
		af_ckpt.map_crc = af_ram_alloc(4 * af_ckpt_map_pages(af_flash.nlba), 4);
	if (!af_ckpt.map_crc)
		return -1;
	memset(&ld, 0, sizeof(ld));
	ld.h = h;
	ld.depth = af_ftl.running ? 1 : 2;
	ld.slot[0] = slot;
	ld.slot[1] = (slot + 1) % af_nand.slots;
	ld.shift = af_crc32_shift(af_nand.page_data);
	ld.pcrc = AF_CRC32_INIT;
	ld.counts_ok = h.nblocks == af_flash.nblocks; /* erase and valid counts only for this device's blocks */
	af_rec_tally_t *tally = af_flash.map.tally;
	int lazy = 0;
	if (h.format >= AF_CKPT_FORMAT_PENDING && af_pend_begin_load(pend_pages) < 0)
		return -1;
	if (h.format >= 3) {
		if (load_run(1 + h.map_pages, tail) < 0 || (ld.pcrc ^ AF_CRC32_XOROUT) != h.payload_crc)
			goto torn;
		if (h.format >= AF_CKPT_FORMAT_PENDING && af_pend_parse() < 0)
			goto torn;
		lazy = ld.counts_ok && tally &&
		       af_map_lazy_begin(af_ckpt.area_block[h.area], h.map_pages, af_ckpt.map_crc, h.nlba, h.number) == 0;
		if (!lazy && (load_run(1, h.map_pages) < 0 || ld.bad))
			goto torn;
	} else if (load_run(1, h.map_pages + h.wear_pages) < 0 || (ld.pcrc ^ AF_CRC32_XOROUT) != h.payload_crc) {
		goto torn;
	}
	if (!lazy)
		for (uint32_t lba = (uint32_t)h.nlba; lba < af_flash.map.nlba; lba++) { /* LBAs past the checkpoint's */
			af_flash.map.ppa[lba] = AF_REC_PPA_NONE;
			af_flash.map.vseq[lba] = AF_REC_VSEQ_NONE;
			af_flash.map.cseq[lba] = 0;
		}
	if (tally) {
		if (h.format >= 3 && ld.counts_ok) {
			tally->bound = h.bound;
			tally->lost = 0; /* a checkpoint stores a lost LBA as unbound (entry()) */
		} else { /* format 2, or another device's counts: one pass over the map */
			tally->lost = af_rec_valid_counts(&af_flash.map, tally->block_of, tally->ctx, tally->counts,
							  tally->nblocks, &tally->bound);
		}
	}
	/* factory bad blocks (format 4: the boot reads no markers) and grown ones it names (their data had
	 * moved: nothing to scan in them) */
	af_ckpt.bbt = ld.counts_ok && h.format >= 4;
	for (uint32_t k = 0; ld.counts_ok && k < af_flash.nblocks; k++) {
		af_block_t *b = &af_flash.blocks[k];
		uint32_t v = b->erases;
		b->erases = v & AF_CKPT_WEAR_COUNT_MASK;
		b->ckpt_free = h.format >= 5 && (v & AF_CKPT_WEAR_FREE);
		if (af_ckpt.bbt && (v & AF_CKPT_WEAR_FACTORY_BAD)) {
			if (!b->flags)
				af_flash.bad_blocks++;
			b->flags |= AF_BLOCK_BAD;
			continue;
		}
		if (v & AF_CKPT_WEAR_RETIRING) {
			/* its data may not have moved: recovery scans it like any block; af_ftl_start retires it
			 * once GC has moved that data (gc.c), and never hands it out again */
			b->retire = 1;
			af_ckpt.retiring++;
			continue;
		}
		if (!(v & AF_CKPT_WEAR_RETIRED))
			continue;
		if (!b->flags)
			af_flash.bad_blocks++;
		if (!(b->flags & AF_BLOCK_RETIRED))
			af_flash.retired_marks++;
		b->flags |= AF_BLOCK_RETIRED;
		b->state = AF_BSTATE_RETIRED;
		af_ckpt.retired++;
	}
	af_ckpt.valid = af_ckpt.loaded = 1;
	af_ckpt.format = h.format;
	af_ckpt.seq = af_ckpt.at = h.seq;
	af_ckpt.number = h.number;
	af_ckpt.area = h.area;
	af_ckpt.pages = 1 + h.map_pages + tail;
	af_ckpt.nopen = h.nopen;
	af_ckpt.open_ppa = open;
	for (uint32_t i = 0; i < h.nopen; i++) {
		af_block_t *b = &af_flash.blocks[af_nand_block_of(open[i])];
		b->scan = b->cand = 1; /* the fast path reads its page 0 */
	}
	return 0;
torn:
	af_map_lazy_abort();
	af_ckpt.narea = 0;
	af_rec_map_clear(&af_flash.map);
	for (uint32_t k = 0; k < af_flash.nblocks; k++)
		af_flash.blocks[k].erases = 0;
	return -1;
}

void af_ckpt_shadow_erases(void)
{
	for (uint32_t g = 0; g < af_flash.nblocks; g++)
		af_ckpt.shadow_erases[g] = af_flash.blocks[g].erases;
}

#endif /* AFCTRL_FTL */
