/* Host-side driver for firmware/recovery.c (tb/firmware_recovery).
 *
 * Reads cases from stdin (little-endian binary, written by crecover.py),
 * runs the firmware's recovery on each through its page-read callbacks, and
 * prints the result as text.  Everything here may malloc; recovery.c does not.
 *
 * case:  u32 'CASE'; u32 nlba, page_data, ppb, nblocks, cap, runs, mlc (pages per block; 0: SLC)
 *        u32 npages; npages x { u32 addr, u32 unreadable, u8 oob[40], u32 dlen, u8 data[dlen] }
 *        (unreadable: bit 0 the whole page, bit 1 its data area only -- an intact OOB over torn data)
 *        u32 has_ckpt; [ u64 seq; u32 nmap; nmap x { u32 lba, u64 vseq, u32 ppa }
 *                        u32 ntx; ntx x { u32 tag, u64 first, u32 npages, u32 nlive,
 *                                         nlive x { u64 lba, u64 vseq, u32 ppa } }
 *                        u32 napp; napp x { u64 first, u32 nlb, nlb x u32 ppa } ]
 * end:   u32 0
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "recovery.h"

#define CASE_MAGIC 0x45534143u

static void die(const char *why)
{
	fprintf(stderr, "driver: %s\n", why);
	exit(2);
}

static void rd(void *p, size_t n)
{
	if (n && fread(p, 1, n, stdin) != n)
		die("short input");
}
static uint32_t u32(void)
{
	uint32_t v;
	rd(&v, 4);
	return v;
}
static uint64_t u64(void)
{
	uint64_t v;
	rd(&v, 8);
	return v;
}
static void *xcalloc(size_t n, size_t s)
{
	void *p = calloc(n ? n : 1, s ? s : 1);
	if (!p)
		die("out of memory");
	return p;
}

typedef struct {
	uint32_t addr, unreadable, dlen;
	uint8_t oob[AF_OOB_SIZE];
	uint8_t *data;
} page_t;

typedef struct {
	page_t *pages;
	uint32_t npages;
	int32_t *by_addr; /* addr -> page index */
	uint32_t naddr;
	uint32_t ppb;
	uint32_t mlc;       /* af_rec_mlc_filter with these pages per block (addresses are spec.PPA); 0: SLC */
	int *result;        /* af_rec_scan's answer per page index */
	uint8_t *torn_end;  /* per page index: af_rec_block_end_filter dropped it */
	uint32_t oob_reads, data_reads, data_reads_nonrecord;
} flash_t;

/* af_rec_mlc_filter: the upper page absent (past its block's first missing or erased page), intact,
 * or -- in a block with a torn page before it -- unknown, so the library's own re-read decides. */
static int upper_state(void *ctx, uint32_t ppa)
{
	flash_t *f = ctx;
	uint32_t base = ppa & ~(uint32_t)AF_PPA_PPA_PAGE_MASK, page = ppa - base;
	int torn = 0;
	for (uint32_t k = 0; k <= page; k++) {
		uint32_t a = base + k;
		int32_t i = a < f->naddr ? f->by_addr[a] : -1;
		if (i < 0 || f->result[i] == AF_REC_PAGE_ERASED || (k == page && f->torn_end[i]))
			return AF_REC_UPPER_ABSENT;
		torn |= f->result[i] == AF_REC_PAGE_TORN;
	}
	return torn ? AF_REC_UPPER_UNKNOWN : AF_REC_UPPER_INTACT;
}

static page_t *find(flash_t *f, uint32_t ppa)
{
	return ppa < f->naddr && f->by_addr[ppa] >= 0 ? &f->pages[f->by_addr[ppa]] : NULL;
}

/* af_rec_block_end_filter: the last page of its block's written prefix (blocks by spec.PPA, as the
 * model's rule; the prefix from the scan's answers). */
static int is_block_end(void *ctx, uint32_t ppa)
{
	flash_t *f = ctx;
	uint32_t base = ppa & ~(uint32_t)AF_PPA_PPA_PAGE_MASK, prefix = 0;
	for (;; prefix++) {
		uint32_t a = base + prefix;
		int32_t i = a < f->naddr ? f->by_addr[a] : -1;
		if (i < 0 || f->result[i] == AF_REC_PAGE_ERASED || prefix > AF_PPA_PPA_PAGE_MASK)
			break;
	}
	return prefix && ppa == base + prefix - 1;
}

static void torn_end(void *ctx, uint32_t ppa)
{
	flash_t *f = ctx;
	f->torn_end[f->by_addr[ppa]] = 1;
}

static int read_oob(void *ctx, uint32_t ppa, void *oob)
{
	flash_t *f = ctx;
	page_t *p = find(f, ppa);
	f->oob_reads++;
	if (!p || (p->unreadable & 1))
		return 1;
	memcpy(oob, p->oob, AF_OOB_SIZE);
	return 0;
}

static int read_data(void *ctx, uint32_t ppa, uint32_t offset, void *buf, uint32_t len)
{
	flash_t *f = ctx;
	page_t *p = find(f, ppa);
	f->data_reads++;
	if (!p)
		return 1;
	unsigned kind = p->oob[offsetof(af_oob_t, kind)];
	if (kind != AF_KIND_COMMIT && kind != AF_KIND_REMAP && kind != AF_KIND_TRIM && !is_block_end(f, ppa))
		f->data_reads_nonrecord++;
	if (p->unreadable || offset > p->dlen || len > p->dlen - offset)
		return 1;
	memcpy(buf, p->data + offset, len);
	return 0;
}

static uint32_t block_of(void *ctx, uint32_t ppa)
{
	return ppa / ((flash_t *)ctx)->ppb;
}

typedef struct {
	uint64_t seq;
	uint32_t nmap;
	uint32_t *map_lba, *map_ppa;
	uint64_t *map_vseq;
	af_rec_checkpoint_t ck;
} ckpt_t;

typedef struct {
	int rc;
	af_rec_report_t rep;
	uint32_t *ppa, *valid, lost;
	uint64_t *vseq, *cseq;
} result_t;

/* A lazy load, as the firmware's (af_map_need): the checkpoint's entries come
 * into the map a segment (LAZY_SEG LBAs) at a time, when recovery first needs
 * one; the rest after af_rec_finish. */
#define LAZY_SEG 4u
typedef struct {
	const ckpt_t *ck;
	af_rec_map_t *map;
	uint8_t *loaded;
	uint32_t nseg;
} lazy_t;

static void lazy_load(lazy_t *z, uint32_t s)
{
	if (z->loaded[s])
		return;
	z->loaded[s] = 1;
	uint32_t first = s * LAZY_SEG;
	for (uint32_t lba = first; lba < first + LAZY_SEG && lba < z->map->nlba; lba++) {
		z->map->ppa[lba] = AF_REC_PPA_NONE;
		z->map->vseq[lba] = AF_REC_VSEQ_NONE;
		z->map->cseq[lba] = 0;
	}
	for (uint32_t i = 0; z->ck && i < z->ck->nmap; i++)
		if (z->ck->map_lba[i] / LAZY_SEG == s) {
			z->map->ppa[z->ck->map_lba[i]] = z->ck->map_ppa[i];
			z->map->vseq[z->ck->map_lba[i]] = z->ck->map_vseq[i];
		}
}

static void lazy_need(void *ctx, uint32_t lba)
{
	lazy_t *z = ctx;
	if (lba >= z->map->nlba)
		die("need() for an LBA past the map");
	lazy_load(z, lba / LAZY_SEG);
}

static void run(flash_t *fl, uint32_t nlba, uint32_t page_data, uint32_t nblocks, uint32_t cap, const ckpt_t *ck,
		result_t *out, int lazy)
{
	af_rec_io_t io = {read_oob, read_data, fl};
	af_rec_page_t *tab = xcalloc(cap, sizeof *tab);
	uint32_t *idx = xcalloc(2 * (size_t)cap, sizeof *idx);
	af_rec_t r;
	af_rec_init(&r, &io, page_data, tab, idx, cap);
	out->rc = 0;
	memset(&out->rep, 0, sizeof out->rep);
	for (uint32_t i = 0; i < fl->npages; i++) {
		int got = af_rec_scan(&r, fl->pages[i].addr);
		fl->result[i] = got;
		if (got < 0) {
			out->rc = got;
			break;
		}
	}
	memset(fl->torn_end, 0, fl->npages);
	if (out->rc == 0)
		af_rec_block_end_filter(&r, is_block_end, torn_end, fl);
	if (fl->mlc && out->rc == 0)
		af_rec_mlc_filter(&r, fl->mlc, upper_state, fl);
	out->ppa = xcalloc(nlba, 4);
	out->vseq = xcalloc(nlba, 8);
	out->cseq = xcalloc(nlba, 8);
	out->valid = xcalloc(nblocks, 4);
	/* As the firmware boots: a tally of the valid counts started from the loaded
	 * checkpoint's entries, cseq zeroed by the loader; checked below against a
	 * pass over the recovered map. */
	uint32_t *tally_counts = xcalloc(nblocks, 4);
	af_rec_tally_t tally = {tally_counts, nblocks, block_of, fl, 0, 0};
	af_rec_map_t map = {nlba, out->ppa, out->vseq, out->cseq, &tally, 1, NULL, NULL};
	af_rec_map_clear(&map);
	if (ck)
		for (uint32_t i = 0; i < ck->nmap; i++) {
			if (ck->map_lba[i] >= nlba)
				die("checkpoint lba out of range");
			map.ppa[ck->map_lba[i]] = ck->map_ppa[i];
			map.vseq[ck->map_lba[i]] = ck->map_vseq[i];
			af_rec_tally_entry(&tally, ck->map_vseq[i], ck->map_ppa[i], +1);
		}
	lazy_t z = {ck, &map, NULL, (nlba + LAZY_SEG - 1) / LAZY_SEG};
	if (lazy) { /* the counts stay the checkpoint's (its valid-count pages); the entries go */
		z.loaded = xcalloc(z.nseg ? z.nseg : 1, 1);
		memset(out->ppa, 0xa5, 4 * (size_t)nlba);
		memset(out->vseq, 0xa5, 8 * (size_t)nlba);
		memset(out->cseq, 0xa5, 8 * (size_t)nlba);
		map.need = lazy_need;
		map.need_ctx = &z;
	}
	if (out->rc == 0)
		out->rc = af_rec_finish(&r, ck ? &ck->ck : NULL, &map, &out->rep);
	for (uint32_t s = 0; lazy && s < z.nseg; s++) /* the idle loop's part */
		lazy_load(&z, s);
	free(z.loaded);
	uint32_t bound;
	out->lost = af_rec_valid_counts(&map, block_of, fl, out->valid, nblocks, &bound);
	if (out->rc == 0 && (memcmp(tally_counts, out->valid, 4 * (size_t)nblocks) || tally.bound != bound ||
			     tally.lost != out->lost))
		die("the tally kept through af_rec_finish differs from a pass over the recovered map");
	free(tally_counts);
	free(tab);
	free(idx);
}

static int same(const result_t *a, const result_t *b, uint32_t nlba, uint32_t nblocks)
{
	return a->rc == b->rc && !memcmp(&a->rep, &b->rep, sizeof a->rep) && !memcmp(a->ppa, b->ppa, 4 * (size_t)nlba) &&
	       !memcmp(a->vseq, b->vseq, 8 * (size_t)nlba) && !memcmp(a->cseq, b->cseq, 8 * (size_t)nlba) &&
	       !memcmp(a->valid, b->valid, 4 * (size_t)nblocks) && a->lost == b->lost;
}

static void free_result(result_t *r)
{
	free(r->ppa);
	free(r->vseq);
	free(r->cseq);
	free(r->valid);
}

int main(void)
{
	uint32_t magic;
	while ((magic = u32()) != 0) {
		if (magic != CASE_MAGIC)
			die("bad case magic");
		uint32_t nlba = u32(), page_data = u32(), ppb = u32(), nblocks = u32(), cap = u32(), runs = u32();
		flash_t fl = {0};
		fl.ppb = ppb;
		fl.mlc = u32();
		fl.npages = u32();
		fl.pages = xcalloc(fl.npages, sizeof *fl.pages);
		fl.result = xcalloc(fl.npages, sizeof *fl.result);
		fl.torn_end = xcalloc(fl.npages, 1);
		for (uint32_t i = 0; i < fl.npages; i++) {
			page_t *p = &fl.pages[i];
			p->addr = u32();
			p->unreadable = u32();
			rd(p->oob, AF_OOB_SIZE);
			p->dlen = u32();
			p->data = xcalloc(p->dlen, 1);
			rd(p->data, p->dlen);
			if (p->addr >= fl.naddr)
				fl.naddr = p->addr + 1;
		}
		fl.by_addr = xcalloc(fl.naddr, sizeof *fl.by_addr);
		for (uint32_t a = 0; a < fl.naddr; a++)
			fl.by_addr[a] = -1;
		for (uint32_t i = 0; i < fl.npages; i++)
			fl.by_addr[fl.pages[i].addr] = (int32_t)i;

		ckpt_t ck = {0};
		int has_ck = (int)u32();
		af_rec_pending_tx_t *tx = NULL;
		af_rec_live_t *live = NULL;
		af_rec_pending_append_t *app = NULL;
		uint32_t *app_ppa = NULL;
		if (has_ck) {
			ck.seq = u64();
			ck.nmap = u32();
			ck.map_lba = xcalloc(ck.nmap, 4);
			ck.map_ppa = xcalloc(ck.nmap, 4);
			ck.map_vseq = xcalloc(ck.nmap, 8);
			for (uint32_t i = 0; i < ck.nmap; i++) {
				ck.map_lba[i] = u32();
				ck.map_vseq[i] = u64();
				ck.map_ppa[i] = u32();
			}
			uint32_t ntx = u32(), nlive = 0;
			tx = xcalloc(ntx, sizeof *tx);
			live = xcalloc(1, sizeof *live);
			for (uint32_t i = 0; i < ntx; i++) {
				tx[i].tag = u32();
				tx[i].first_vseq = u64();
				tx[i].npages = u32();
				tx[i].live_count = u32();
				tx[i].live_first = nlive;
				live = realloc(live, (nlive + tx[i].live_count + 1) * sizeof *live);
				for (uint32_t k = 0; k < tx[i].live_count; k++, nlive++) {
					live[nlive].lba = u64();
					live[nlive].vseq = u64();
					live[nlive].ppa = u32();
				}
			}
			uint32_t napp = u32(), nppa = 0;
			app = xcalloc(napp, sizeof *app);
			app_ppa = xcalloc(1, 4);
			for (uint32_t i = 0; i < napp; i++) {
				app[i].first_vseq = u64();
				app[i].nlb = u32();
				app[i].ppa_first = nppa;
				app_ppa = realloc(app_ppa, (nppa + app[i].nlb + 1) * 4);
				for (uint32_t k = 0; k < app[i].nlb; k++)
					app_ppa[nppa++] = u32();
			}
			int published_below = (int)u32();
			ck.ck = (af_rec_checkpoint_t){ck.seq, tx, ntx, live, nlive, app, napp, app_ppa, nppa, published_below};
		}

		result_t res[2];
		run(&fl, nlba, page_data, nblocks, cap, has_ck ? &ck : NULL, &res[0], 0);
		uint32_t oob_reads = fl.oob_reads, data_reads = fl.data_reads, nonrec = fl.data_reads_nonrecord;
		int idem = 1;
		for (uint32_t k = 1; k < runs; k++) { /* trap 6: the same input gives the same result */
			run(&fl, nlba, page_data, nblocks, cap, has_ck ? &ck : NULL, &res[1], 0);
			idem &= same(&res[0], &res[1], nlba, nblocks);
			free_result(&res[1]);
		}
		/* the map loaded lazily must come out the same, tally included */
		run(&fl, nlba, page_data, nblocks, cap, has_ck ? &ck : NULL, &res[1], 1);
		if (!same(&res[0], &res[1], nlba, nblocks))
			die("recovery over a lazily loaded checkpoint map differs from the same over the whole map");
		free_result(&res[1]);

		const result_t *o = &res[0];
		const af_rec_report_t *p = &o->rep;
		printf("rc %d\n", o->rc);
		printf("report pages_scanned=%u erased=%u torn=%u data_pages=%u record_pages=%u writes_kept=%u "
		       "groups_kept=%u groups_discarded=%u tx_kept=%u tx_discarded=%u remaps_kept=%u "
		       "remaps_discarded=%u trims_kept=%u records_incomplete=%u out_of_range=%u lost=%u "
		       "high_seq=%" PRIu64 " next_seq=%" PRIu64 " oob_reads=%u data_reads=%u "
		       "data_reads_nonrecord=%u idempotent=%d\n",
		       p->pages_scanned, p->erased, p->torn, p->data_pages, p->record_pages, p->writes_kept,
		       p->groups_kept, p->groups_discarded, p->tx_kept, p->tx_discarded, p->remaps_kept,
		       p->remaps_discarded, p->trims_kept, p->records_incomplete, p->out_of_range, o->lost,
		       p->high_seq, p->next_seq, oob_reads, data_reads, nonrec, idem);
		for (uint32_t lba = 0; lba < nlba; lba++)
			if (o->vseq[lba] != AF_REC_VSEQ_NONE)
				printf("map %u %" PRIu64 " %" PRIu64 " %u\n", lba, o->vseq[lba], o->cseq[lba], o->ppa[lba]);
		for (uint32_t b = 0; b < nblocks; b++)
			if (o->valid[b])
				printf("valid %u %u\n", b, o->valid[b]);
		printf("end\n");
		fflush(stdout);

		free_result(&res[0]);
		for (uint32_t i = 0; i < fl.npages; i++)
			free(fl.pages[i].data);
		free(fl.pages);
		free(fl.by_addr);
		free(fl.result);
		free(fl.torn_end);
		free(ck.map_lba);
		free(ck.map_ppa);
		free(ck.map_vseq);
		free(tx);
		free(live);
		free(app);
		free(app_ppa);
	}
	return 0;
}
