/* atomflash firmware: the pending bindings a checkpoint records (see pending.h). */
#include <stdio.h>
#include <string.h>

#include <system.h>

#include "ftlcore.h"
#include "nand.h"
#include "pending.h"

af_pend_t af_pend;

#ifdef AFCTRL_FTL

#define PER_PAGE (af_nand.page_data / sizeof(af_ckpt_pend_t))

static uint32_t tx_slots(void)
{
	return (ftl_rd(AF_FTL_TX_LIMITS) & AF_FTL_TX_LIMITS_MAX_OPEN_TX) >> AF_FTL_TX_LIMITS_MAX_OPEN_TX_SHIFT;
}

static uint32_t table_entries(void)
{
	return (ftl_rd(AF_FTL_TX_LIMITS) & AF_FTL_TX_LIMITS_MAX_PENDING) >> AF_FTL_TX_LIMITS_MAX_PENDING_SHIFT;
}

static uint32_t append_slots(void)
{
	return (ftl_rd(AF_FTL_APPEND_LIMITS) & AF_FTL_APPEND_LIMITS_MAX_APPENDS) >> AF_FTL_APPEND_LIMITS_MAX_APPENDS_SHIFT;
}

/* Records at most: a TX per transaction slot, an APPEND per append slot, a LIVE or APPEND_PAGE per entry. */
static uint32_t max_records(void)
{
	return tx_slots() + append_slots() + table_entries();
}

uint32_t af_pend_max_pages(void)
{
	return (max_records() + PER_PAGE - 1) / PER_PAGE;
}

/* Room for n records (once: at the boot's checkpoint load or the first snapshot, for whichever is more
 * of n and what this core's tables can hold). */
static int reserve(uint32_t n)
{
	if (af_pend.rec && af_pend.max >= n)
		return 0;
	if (af_pend.rec)
		return -1; /* a checkpoint of another core's build: more than this one's tables can hold */
	uint32_t want = n > max_records() ? n : max_records();
	af_pend.rec = af_ram_alloc(want * sizeof(af_ckpt_pend_t), 8);
	af_pend.max = af_pend.rec ? want : 0;
	return af_pend.rec ? 0 : -1;
}

static af_ckpt_pend_t *add(uint8_t kind, uint32_t count, uint64_t vseq, uint32_t lba, uint32_t ppa)
{
	if (af_pend.n >= af_pend.max)
		return NULL;
	af_ckpt_pend_t *r = &af_pend.rec[af_pend.n++];
	memset(r, 0, sizeof(*r));
	r->kind = kind;
	r->count = count;
	r->vseq = vseq;
	r->lba = lba;
	r->ppa = ppa;
	return r;
}

/* The OOB record of a staged page: its version, and for an append page its index. */
static int staged_oob(uint32_t ppa, af_oob_t *oob)
{
	uint8_t buf[AF_NAND_BBM_BYTES + AF_OOB_SIZE] __attribute__((aligned(4)));
	af_pend.oob_reads++;
	if (af_nand_read(ppa, af_nand.oob_col, af_nand.oob_bytes, buf, 0, NULL) != AF_NANDRESULT_OK)
		return -1;
	memcpy(oob, buf + AF_NAND_BBM_BYTES, sizeof(*oob));
	return af_crc32(oob, AF_OOB_CRC_SPAN) == oob->crc ? 0 : -1;
}

/* The snapshot page: SNAP_HDR, then the slot and entry records (spec.LogPage.SNAPSHOT). */
static uint8_t *snap;

int af_pend_snapshot(uint64_t *floor, const char **why)
{
	uint32_t T = tx_slots(), A = append_slots(), E = table_entries();
	uint32_t bytes = AF_SNAP_HDR_SIZE + T * AF_SNAP_TX_SIZE + A * AF_SNAP_APPEND_SIZE + E * AF_SNAP_ENTRY_SIZE;
	if (!snap)
		snap = af_ram_alloc(bytes, 64);
	if (!snap || reserve(max_records()) < 0) {
		*why = "main RAM too small for the pending-bindings snapshot";
		return -1;
	}
	af_cmd_t cmd;
	memset(&cmd, 0, sizeof(cmd));
	cmd.opcode = AF_OPCODE_GET_LOG;
	cmd.log_page = AF_LOGPAGE_SNAPSHOT;
	cmd.nlb = 1;
	cmd.buf = (uint32_t)(uintptr_t)snap;
	if (af_ftl_io(&cmd, NULL) != AF_STATUS_SUCCESS) {
		*why = "GET_LOG SNAPSHOT through the firmware's queue failed";
		return -1;
	}
	af_dcache_invalidate();
	af_snap_hdr_t h;
	memcpy(&h, snap, sizeof(h));
	if (h.tx_slots != T || h.append_slots != A || h.entries != E) {
		*why = "the snapshot's table sizes are not the core's";
		return -1;
	}
	const uint8_t *tx = snap + sizeof(h), *app = tx + T * AF_SNAP_TX_SIZE, *ent = app + A * AF_SNAP_APPEND_SIZE;
	af_pend.n = af_pend.tx = af_pend.appends = 0;
	af_pend.snapshots++;
	/* owners: transaction slots 0..T-1, then append slots T..T+A-1 */
	for (uint32_t o = 0; o < T + A; o++) {
		uint64_t first;
		uint32_t count;
		uint8_t kind, page_kind;
		if (o < T) {
			af_snap_tx_t s;
			memcpy(&s, tx + o * AF_SNAP_TX_SIZE, sizeof(s));
			/* started: every page it wrote has a seq below the floor (nothing is in flight) */
			if (!AF_SNAP_TX_FLAGS_OPEN_GET(s.flags) || !AF_SNAP_TX_FLAGS_STARTED_GET(s.flags))
				continue;
			first = s.first_vseq, count = s.npages, kind = AF_CKPTPEND_TX, page_kind = AF_CKPTPEND_LIVE;
			af_pend.tx++;
		} else {
			af_snap_append_t s;
			memcpy(&s, app + (o - T) * AF_SNAP_APPEND_SIZE, sizeof(s));
			if (!AF_SNAP_APPEND_FLAGS_LIVE_GET(s.flags))
				continue; /* remapped or released: published, its entries freed */
			first = s.first_vseq, count = s.nlb, kind = AF_CKPTPEND_APPEND, page_kind = AF_CKPTPEND_APPEND_PAGE;
			af_pend.appends++;
		}
		if (!add(kind, count, first, 0, AF_PPA_UNMAPPED))
			goto full;
		for (uint32_t i = 0; i < E; i++) {
			af_snap_entry_t e;
			memcpy(&e, ent + i * AF_SNAP_ENTRY_SIZE, sizeof(e));
			if (!AF_SNAP_ENTRY_FLAGS_VALID_GET(e.flags) || AF_SNAP_ENTRY_FLAGS_OWNER_GET(e.flags) != o ||
			    e.ppa == AF_PPA_UNMAPPED)
				continue;
			af_oob_t oob;
			if (staged_oob(e.ppa, &oob) < 0 || oob.tid != (uint32_t)(first & AF_LOG_TAG_MASK)) {
				*why = "a staged page's OOB does not read as its transaction's or append's";
				return -1;
			}
			if (!add(page_kind, kind == AF_CKPTPEND_TX ? 0 : oob.group_idx, oob.vseq,
				 kind == AF_CKPTPEND_TX ? e.lba : 0, e.ppa))
				goto full;
		}
	}
	*floor = h.seq;
	return 0;
full:
	*why = "more pending records than the core's tables can hold";
	return -1;
}

uint32_t af_pend_pages(void)
{
	return (af_pend.n + PER_PAGE - 1) / PER_PAGE;
}

void af_pend_page(uint32_t p, uint8_t *page)
{
	memset(page, 0, af_nand.page_data);
	uint32_t first = p * PER_PAGE, n = af_pend.n - first < PER_PAGE ? af_pend.n - first : PER_PAGE;
	memcpy(page, &af_pend.rec[first], n * sizeof(af_ckpt_pend_t));
}

/* --- boot ----------------------------------------------------------------------------- */

static uint32_t load_pages;

int af_pend_begin_load(uint32_t pages)
{
	af_pend.n = 0;
	load_pages = pages;
	return reserve(pages * PER_PAGE);
}

void af_pend_take_page(uint32_t p, const volatile uint32_t *w)
{
	uint32_t words = sizeof(af_ckpt_pend_t) / 4;
	uint32_t *dst = (uint32_t *)&af_pend.rec[p * PER_PAGE];
	for (uint32_t i = 0; p < load_pages && i < PER_PAGE * words; i++)
		dst[i] = w[i];
}

/* Records of the kinds a TX or APPEND record is followed by. */
static uint32_t run_after(uint32_t i, uint8_t kind)
{
	uint32_t k = i + 1;
	while (k < af_pend.max && k < load_pages * PER_PAGE && af_pend.rec[k].kind == kind)
		k++;
	return k - i - 1;
}

int af_pend_parse(void)
{
	uint32_t total = load_pages * PER_PAGE, ntx = 0, nlive = 0, napp = 0, nppa = 0, i;
	/* count, then lay out in af_rec_checkpoint_t's shape */
	for (i = 0; i < total && af_pend.rec[i].kind != AF_CKPTPEND_END;) {
		const af_ckpt_pend_t *r = &af_pend.rec[i];
		if (r->kind == AF_CKPTPEND_TX) {
			uint32_t k = run_after(i, AF_CKPTPEND_LIVE);
			ntx++, nlive += k, i += 1 + k;
		} else if (r->kind == AF_CKPTPEND_APPEND) {
			uint32_t k = run_after(i, AF_CKPTPEND_APPEND_PAGE);
			if (k != r->count)
				return -1; /* an append with pages missing or extra */
			napp++, nppa += k, i += 1 + k;
		} else {
			return -1;
		}
	}
	af_pend.n = i;
	/* boot-time lists, for af_rec_finish (allocated before the boot's scan table, which is released) */
	af_pend.ck_tx = af_ram_alloc((ntx + 1) * sizeof(af_rec_pending_tx_t), 8);
	af_pend.ck_live = af_ram_alloc((nlive + 1) * sizeof(af_rec_live_t), 8);
	af_pend.ck_app = af_ram_alloc((napp + 1) * sizeof(af_rec_pending_append_t), 8);
	af_pend.ck_app_ppa = af_ram_alloc((nppa + 1) * sizeof(uint32_t), 4);
	if (!af_pend.ck_tx || !af_pend.ck_live || !af_pend.ck_app || !af_pend.ck_app_ppa)
		return -1;
	ntx = nlive = napp = nppa = 0;
	af_pend.tx = af_pend.appends = 0;
	for (i = 0; i < af_pend.n;) {
		const af_ckpt_pend_t *r = &af_pend.rec[i];
		if (r->kind == AF_CKPTPEND_TX) {
			uint32_t k = run_after(i, AF_CKPTPEND_LIVE);
			af_rec_pending_tx_t *t = &af_pend.ck_tx[ntx++];
			t->tag = (uint32_t)(r->vseq & AF_LOG_TAG_MASK);
			t->npages = r->count;
			t->first_vseq = r->vseq;
			t->live_first = nlive;
			t->live_count = k;
			for (uint32_t j = 1; j <= k; j++) {
				af_rec_live_t *l = &af_pend.ck_live[nlive++];
				l->lba = af_pend.rec[i + j].lba;
				l->vseq = af_pend.rec[i + j].vseq;
				l->ppa = af_pend.rec[i + j].ppa;
			}
			af_pend.tx++;
			i += 1 + k;
		} else {
			uint32_t k = r->count;
			af_rec_pending_append_t *a = &af_pend.ck_app[napp++];
			a->first_vseq = r->vseq;
			a->nlb = k;
			a->ppa_first = nppa;
			for (uint32_t j = 0; j < k; j++)
				af_pend.ck_app_ppa[nppa + j] = AF_PPA_UNMAPPED;
			for (uint32_t j = 1; j <= k; j++) { /* by page index: the snapshot lists them by table entry */
				const af_ckpt_pend_t *pg = &af_pend.rec[i + j];
				if (pg->count >= k || pg->vseq != r->vseq + pg->count)
					return -1;
				af_pend.ck_app_ppa[nppa + pg->count] = pg->ppa;
			}
			nppa += k;
			af_pend.appends++;
			i += 1 + k;
		}
	}
	af_pend.ck_ntx = ntx, af_pend.ck_nlive = nlive, af_pend.ck_napp = napp, af_pend.ck_napp_ppa = nppa;
	return 0;
}

void af_pend_fill(af_rec_checkpoint_t *ck)
{
	ck->tx = af_pend.ck_tx;
	ck->ntx = af_pend.ck_ntx;
	ck->live = af_pend.ck_live;
	ck->nlive = af_pend.ck_nlive;
	ck->app = af_pend.ck_app;
	ck->napp = af_pend.ck_napp;
	ck->app_ppa = af_pend.ck_app_ppa;
	ck->napp_ppa = af_pend.ck_napp_ppa;
	ck->published_below = 0;
}

#endif /* AFCTRL_FTL */
