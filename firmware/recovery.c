/* atomflash firmware: recovery at boot.  See recovery.h and docs/recovery.md.
 *
 * This is a transcription of atomflash.model.recover (recover.py) into C with
 * bounded, caller-provided memory.  Where the two are shaped differently the
 * comment says why the result is the same:
 *
 *  - The model keeps dicts of versions, transaction pages and record groups.
 *    Here one table holds every useful scanned page, sorted by (vseq, scan
 *    order); an index table holds three sorted partitions of it: atomic-group
 *    candidates by (first, len), transaction pages by (tag, vseq), record pages
 *    by (first seq, group_idx).  "The first copy in scan order" of the model is
 *    the first entry of a vseq run.
 *  - The model sorts its events by commit seq (stable) and applies them in
 *    order; per LBA the last event applied wins.  Here every event is applied
 *    as soon as it is proven, and an LBA takes a binding only if its commit
 *    seq is >= the one it holds (map.cseq).  Equal commit seqs happen only
 *    inside one record (several COMMIT entries, one TRIM or REMAP record) and
 *    one transaction, where both apply in the same order, so per LBA the
 *    winner is the same.  No event list is needed.
 *  - Record payloads are not kept: the scan checks them (magic, kind, format,
 *    seq, CRC) and finishing reads them again, entry by entry.
 *  - Seqs are assumed < 2^63 (the model's arithmetic is on unbounded ints;
 *    the few places where a forged page could make it negative use int64).
 */
#include "recovery.h"

#define F_COMMIT AF_OOB_FLAGS_COMMIT_MASK
#define F_TX_FINAL AF_OOB_FLAGS_TX_FINAL_MASK
#define F_TX AF_OOB_FLAGS_TX_MASK
#define F_APPEND AF_OOB_FLAGS_APPEND_MASK

#define KIND_HINT 0u /* table entry holding the raw seq of a torn page (not a spec kind) */

/* ---------------------------------------------------------------------------
 * small helpers
 * ------------------------------------------------------------------------- */

static int is_data_kind(unsigned k)
{
	return k == AF_KIND_DATA || k == AF_KIND_GC_COPY || k == AF_KIND_APPEND;
}

static int is_record_kind(unsigned k)
{
	return k == AF_KIND_COMMIT || k == AF_KIND_REMAP || k == AF_KIND_TRIM;
}

/* A kind the spec defines (the model's `rec.kind in Kind`): the generated
 * name table is the one list of kinds, so a new kind needs no edit here. */
static int kind_known(unsigned k)
{
	return af_kind_name(k)[0] != '?';
}

static uint32_t entry_size(unsigned kind)
{
	switch (kind) {
	case AF_KIND_COMMIT:
		return AF_COMMIT_BODY_SIZE;
	case AF_KIND_REMAP:
		return AF_REMAP_REC_ENTRY_SIZE;
	case AF_KIND_TRIM:
		return AF_TRIM_REC_ENTRY_SIZE;
	default:
		return 0;
	}
}

static uint64_t max_u64(uint64_t a, uint64_t b)
{
	return a > b ? a : b;
}

static uint32_t tag_of(uint64_t first_vseq)
{
	return (uint32_t)(first_vseq & AF_LOG_TAG_MASK);
}

/* spec.first_vseq_of: the largest value <= vseq whose low bits are the tag
 * (may be negative for a forged page, like the model's). */
static int64_t first_vseq_of(uint32_t tag, uint64_t vseq)
{
	return (int64_t)vseq - (int64_t)((vseq - tag) & AF_LOG_TAG_MASK);
}

/* ---------------------------------------------------------------------------
 * sorting: natural merge sort of page positions (no recursion, no allocation)
 *
 * The scan reads block after block and the log writes each block in seq
 * order, so the page table arrives as a few ascending runs (about one per
 * block scanned), and each partition below is nearly sorted once the table
 * is.  Merging those runs costs n log2(runs) comparisons, in sequential
 * passes; the heapsort it replaces cost 2 n log2(n) in random order, which
 * made it most of a reboot's recovery time on VexRiscv.
 * ------------------------------------------------------------------------- */

/* page positions x, y of the table p: x sorts before y */
typedef int (*less_fn)(const af_rec_page_t *p, uint32_t x, uint32_t y);

/* end of the ascending run of a[] starting at i */
static uint32_t run_end(const af_rec_page_t *p, const uint32_t *a, uint32_t i, uint32_t n, less_fn less)
{
	while (++i < n && !less(p, a[i], a[i - 1]))
		;
	return i;
}

/* a[0..n) by `less`, stable; tmp: n entries of scratch */
static void merge_sort(const af_rec_page_t *p, uint32_t *a, uint32_t *tmp, uint32_t n, less_fn less)
{
	uint32_t *src = a, *dst = tmp;
	for (;;) {
		uint32_t i = 0, runs = 0;
		while (i < n) {
			uint32_t mid = run_end(p, src, i, n, less), end = mid < n ? run_end(p, src, mid, n, less) : n;
			uint32_t x = i, y = mid, o = i;
			while (x < mid && y < end)
				dst[o++] = less(p, src[y], src[x]) ? src[y++] : src[x++];
			while (x < mid)
				dst[o++] = src[x++];
			while (y < end)
				dst[o++] = src[y++];
			i = end;
			runs++;
		}
		uint32_t *t = src;
		src = dst;
		dst = t;
		if (runs <= 1)
			break;
	}
	if (src != a)
		for (uint32_t i = 0; i < n; i++)
			a[i] = src[i];
}

/* the page table, by (vseq, order) */
static int page_less(const af_rec_page_t *p, uint32_t x, uint32_t y)
{
	if (p[x].vseq != p[y].vseq)
		return p[x].vseq < p[y].vseq;
	return p[x].order < p[y].order;
}

/* pages[] by (vseq, order): sort positions, then move every 40-byte entry
 * once, along the permutation's cycles.  index[] is scratch here (the
 * partitions are built after). */
static void sort_pages(af_rec_t *r)
{
	uint32_t *a = r->index;
	for (uint32_t i = 0; i < r->n; i++)
		a[i] = i;
	merge_sort(r->pages, a, r->index + r->cap, r->n, page_less);
	/* pages[j] must become the old pages[a[j]]; a[j] = j marks j done */
	for (uint32_t i = 0; i < r->n; i++) {
		if (a[i] == i)
			continue;
		af_rec_page_t held = r->pages[i];
		uint32_t j = i;
		for (;;) {
			uint32_t k = a[j];
			a[j] = j;
			if (k == i)
				break;
			r->pages[j] = r->pages[k];
			j = k;
		}
		r->pages[j] = held;
	}
}

/* groups and records are keyed by their first seq, vseq - group_idx (u64
 * wrap-around is a bijection, so equal keys are equal model keys) */
static uint64_t first_of(const af_rec_page_t *e)
{
	return e->vseq - e->group_idx;
}

/* atomic-group candidates: (first, group_len, order) */
static int group_less(const af_rec_page_t *p, uint32_t i, uint32_t j)
{
	const af_rec_page_t *x = &p[i], *y = &p[j];
	if (first_of(x) != first_of(y))
		return first_of(x) < first_of(y);
	if (x->group_len != y->group_len)
		return x->group_len < y->group_len;
	return x->order < y->order;
}

/* transaction pages: (tag, vseq, order) */
static int tx_less(const af_rec_page_t *p, uint32_t i, uint32_t j)
{
	const af_rec_page_t *x = &p[i], *y = &p[j];
	if (x->tid != y->tid)
		return x->tid < y->tid;
	if (x->vseq != y->vseq)
		return x->vseq < y->vseq;
	return x->order < y->order;
}

/* record pages: (first, group_idx, order) */
static int rec_less(const af_rec_page_t *p, uint32_t i, uint32_t j)
{
	const af_rec_page_t *x = &p[i], *y = &p[j];
	if (first_of(x) != first_of(y))
		return first_of(x) < first_of(y);
	if (x->group_idx != y->group_idx)
		return x->group_idx < y->group_idx;
	return x->order < y->order;
}

/* ---------------------------------------------------------------------------
 * scan
 * ------------------------------------------------------------------------- */

void af_rec_init(af_rec_t *r, const af_rec_io_t *io, uint32_t page_data, af_rec_page_t *pages,
		 uint32_t *index, uint32_t cap)
{
	r->io = io;
	r->page_data = page_data;
	r->pages = pages;
	r->index = index;
	r->cap = cap;
	r->n = 0;
	r->scanned = r->erased = r->torn = r->data_pages = r->record_pages = r->mlc_dropped = 0;
	r->max_seq = 0;
	r->ngroup = r->ntx = r->nrec = 0;
}

/* Check a record page's payload against its OOB (spec.unpack_record_page):
 * entry count, or -1 when it is not an intact `kind` record page for `seq`. */
static int32_t record_check(const af_rec_t *r, uint32_t ppa, unsigned kind, uint64_t seq)
{
	uint32_t esize = entry_size(kind);
	af_rec_hdr_t hdr;
	if (esize == 0 || r->page_data < AF_REC_HDR_SIZE)
		return -1;
	if (r->io->read_data(r->io->ctx, ppa, 0, &hdr, AF_REC_HDR_SIZE))
		return -1;
	if (hdr.magic != AF_LOG_REC_MAGIC || hdr.kind != kind || hdr.format != AF_LOG_REC_FORMAT || hdr.seq != seq ||
	    AF_REC_HDR_SIZE + (uint32_t)hdr.count * esize > r->page_data)
		return -1;
	uint32_t crc = af_crc32_update(AF_CRC32_INIT, &hdr, offsetof(af_rec_hdr_t, crc));
	uint32_t off = AF_REC_HDR_SIZE, left = (uint32_t)hdr.count * esize;
	uint8_t buf[64];
	while (left) {
		uint32_t k = left < sizeof buf ? left : (uint32_t)sizeof buf;
		if (r->io->read_data(r->io->ctx, ppa, off, buf, k))
			return -1;
		crc = af_crc32_update(crc, buf, k);
		off += k;
		left -= k;
	}
	if ((crc ^ AF_CRC32_XOROUT) != hdr.crc)
		return -1;
	return hdr.count;
}

static int all_ff(const uint8_t *b, uint32_t n)
{
	for (uint32_t i = 0; i < n; i++)
		if (b[i] != 0xFF)
			return 0;
	return 1;
}

int af_rec_scan(af_rec_t *r, uint32_t ppa)
{
	af_oob_t oob;
	uint32_t order = r->scanned;
	if (r->io->read_oob(r->io->ctx, ppa, &oob)) {
		r->scanned++;
		r->torn++;
		return AF_REC_PAGE_TORN;
	}
	/* Erased (all FFh) first: most pages of a young device are, and the CRC
	 * below costs ~3000 cycles on the VexRiscv.  Same decision as the full
	 * path: an all-FFh OOB has format FFh, so it is neither intact nor a
	 * torn-page hint, and takes no table entry. */
	_Static_assert(AF_OOB_FORMAT != 0xFF, "an erased OOB must not carry a valid format byte");
	if (all_ff((const uint8_t *)&oob, AF_OOB_SIZE)) {
		r->scanned++;
		r->erased++;
		return AF_REC_PAGE_ERASED;
	}
	int intact = af_crc32(&oob, AF_OOB_CRC_SPAN) == oob.crc && oob.format == AF_OOB_FORMAT && kind_known(oob.kind);
	int record = intact && is_record_kind(oob.kind);
	int body_ok = record && record_check(r, ppa, oob.kind, oob.seq) >= 0;
	int keep = (intact && is_data_kind(oob.kind)) || body_ok ||
		   (!intact && oob.format == AF_OOB_FORMAT) ||
		   (record && !body_ok);
	if (keep && r->n == r->cap)
		return AF_REC_EFULL; /* nothing counted: the caller may grow the table and rescan */
	r->scanned++;
	if (!intact) {
		r->torn++;
		if (oob.format == AF_OOB_FORMAT) { /* its seq may have been used: a resume hint (trap 5) */
			af_rec_page_t *h = &r->pages[r->n++];
			*h = (af_rec_page_t){.vseq = oob.seq, .ppa = ppa, .order = order, .kind = KIND_HINT};
		}
		return AF_REC_PAGE_TORN;
	}
	if (record && !body_ok) { /* the OOB is intact, so its seq was certainly used */
		r->torn++;
		af_rec_page_t *h = &r->pages[r->n++];
		*h = (af_rec_page_t){.vseq = oob.seq, .ppa = ppa, .order = order, .kind = KIND_HINT};
		return AF_REC_PAGE_TORN;
	}
	r->max_seq = max_u64(r->max_seq, oob.seq);
	if (!is_data_kind(oob.kind) && !record)
		return AF_REC_PAGE_OTHER;
	af_rec_page_t *e = &r->pages[r->n++];
	*e = (af_rec_page_t){
		.vseq = oob.vseq,
		.lba = record ? oob.seq : oob.lba, /* records: their seq (the payload must repeat it) */
		.ppa = ppa,
		.tid = oob.tid,
		.order = order,
		.group_len = oob.group_len,
		.group_idx = oob.group_idx,
		.kind = oob.kind,
		.flags = oob.flags,
	};
	if (record) {
		r->record_pages++;
		return AF_REC_PAGE_RECORD;
	}
	r->data_pages++;
	return AF_REC_PAGE_DATA;
}

/* Does `ppa` read as an intact page (the scan's decision, without counting it)? */
static int page_intact(af_rec_t *r, uint32_t ppa)
{
	af_oob_t oob;
	if (r->io->read_oob(r->io->ctx, ppa, &oob) || all_ff((const uint8_t *)&oob, AF_OOB_SIZE))
		return 0;
	if (af_crc32(&oob, AF_OOB_CRC_SPAN) != oob.crc || oob.format != AF_OOB_FORMAT || !kind_known(oob.kind))
		return 0;
	return !is_record_kind(oob.kind) || record_check(r, ppa, oob.kind, oob.seq) >= 0;
}

uint32_t af_rec_mlc_filter(af_rec_t *r, uint32_t pages_per_block, int (*upper_state)(void *ctx, uint32_t ppa),
			   void *ctx)
{
	uint32_t kept = 0, dropped = 0;
	for (uint32_t i = 0; i < r->n; i++) {
		af_rec_page_t *e = &r->pages[i];
		if (e->kind != KIND_HINT) {
			int64_t upper = af_mlc_upper_of(AF_PPA_PPA_PAGE_GET(e->ppa), pages_per_block);
			if (upper >= 0) {
				uint32_t u = AF_PPA_PPA_PAGE_SET(e->ppa, (uint32_t)upper);
				int st = upper_state(ctx, u);
				if (st == AF_REC_UPPER_ABSENT || (st == AF_REC_UPPER_UNKNOWN && !page_intact(r, u))) {
					if (is_record_kind(e->kind))
						r->record_pages--;
					else
						r->data_pages--;
					dropped++;
					continue; /* its seq is in max_seq already */
				}
			}
		}
		r->pages[kept++] = *e;
	}
	r->n = kept;
	r->mlc_dropped += dropped;
	return dropped;
}

uint32_t af_rec_block_end_filter(af_rec_t *r, int (*is_block_end)(void *ctx, uint32_t ppa),
				 void (*torn_end)(void *ctx, uint32_t ppa), void *ctx)
{
	uint32_t kept = 0, dropped = 0;
	for (uint32_t i = 0; i < r->n; i++) {
		af_rec_page_t *e = &r->pages[i];
		uint8_t probe;
		/* a one-byte read: the reader decodes the whole data area (ECC works on whole codewords) */
		if (is_data_kind(e->kind) && is_block_end(ctx, e->ppa) &&
		    r->io->read_data(r->io->ctx, e->ppa, 0, &probe, 1)) {
			r->data_pages--;
			r->torn++;
			dropped++;
			if (torn_end)
				torn_end(ctx, e->ppa);
			continue; /* its seq is in max_seq already */
		}
		r->pages[kept++] = *e;
	}
	r->n = kept;
	return dropped;
}

void af_rec_map_clear(af_rec_map_t *map)
{
	for (uint32_t i = 0; i < map->nlba; i++) {
		map->ppa[i] = AF_REC_PPA_NONE;
		map->vseq[i] = AF_REC_VSEQ_NONE;
		map->cseq[i] = 0;
	}
	af_rec_tally_t *t = map->tally;
	if (t) {
		for (uint32_t b = 0; b < t->nblocks; b++)
			t->counts[b] = 0;
		t->bound = t->lost = 0;
	}
}

void af_rec_tally_entry(af_rec_tally_t *t, uint64_t vseq, uint32_t ppa, int dir)
{
	if (vseq == AF_REC_VSEQ_NONE)
		return;
	t->bound += (uint32_t)dir;
	if (ppa == AF_REC_PPA_NONE) {
		t->lost += (uint32_t)dir;
		return;
	}
	uint32_t b = t->block_of(t->ctx, ppa);
	if (b < t->nblocks)
		t->counts[b] += (uint32_t)dir;
}

/* Entry lba becomes (v, ppa), its tally following. */
static void set_entry(af_rec_map_t *m, uint32_t lba, uint64_t v, uint32_t ppa)
{
	if (m->tally)
		af_rec_tally_entry(m->tally, m->vseq[lba], m->ppa[lba], -1);
	m->vseq[lba] = v;
	m->ppa[lba] = ppa;
	if (m->tally)
		af_rec_tally_entry(m->tally, v, ppa, +1);
}

/* ---------------------------------------------------------------------------
 * finish: decide every commit point
 * ------------------------------------------------------------------------- */

typedef struct {
	af_rec_t *r;
	const af_rec_checkpoint_t *ck;
	af_rec_map_t *map;
	af_rec_report_t *rep;
	uint64_t floor; /* checkpoint seq: older commit points are the checkpoint's */
	int err;
	int prepass;         /* published_below(): commit points only noted, nothing bound */
	int pub_any;         /* transactions begun below the floor, published before it was read: */
	uint64_t pub_first;  /* the oldest first vseq */
	uint64_t pub_cseq;   /* the newest commit point */
} fin_t;

/* first position in [lo, hi) of the page table with vseq >= v (hi if none) */
static uint32_t lower_bound_in(const af_rec_t *r, uint32_t lo, uint32_t hi, uint64_t v)
{
	while (lo < hi) {
		uint32_t mid = lo + (hi - lo) / 2;
		if (r->pages[mid].vseq < v)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

/* first position in the page table with vseq >= v */
static uint32_t lower_bound(const af_rec_t *r, uint64_t v)
{
	return lower_bound_in(r, 0, r->n, v);
}

/* lower_bound(r, v) when every page before `from` has a vseq below v:
 * galloping from there, so a lookup near the last one costs a step or two */
static uint32_t seek(const af_rec_t *r, uint32_t from, uint64_t v)
{
	if (from == 0)
		return lower_bound(r, v);
	uint32_t lo = from, hi = from, step = 1;
	while (hi < r->n && r->pages[hi].vseq < v) {
		lo = hi + 1;
		hi = r->n - hi > step ? hi + step : r->n;
		step *= 2;
	}
	return lower_bound_in(r, lo, hi, v);
}

/* The page holding version v for lba (model: first copy with lba == lba or
 * flags.append), else fallback.  from: as for seek(). */
static uint32_t locate(const af_rec_t *r, uint32_t from, uint64_t v, uint64_t lba, uint32_t fallback)
{
	for (uint32_t i = seek(r, from, v); i < r->n && r->pages[i].vseq == v; i++) {
		const af_rec_page_t *c = &r->pages[i];
		if (is_data_kind(c->kind) && (c->lba == lba || (c->flags & F_APPEND)))
			return c->ppa;
	}
	return fallback;
}

/* Bind (or with v == NONE unbind) lba at commit point cseq.  from: as for seek(). */
static void bind(fin_t *f, uint32_t from, uint64_t lba, uint64_t v, uint64_t cseq, uint32_t fallback)
{
	af_rec_map_t *m = f->map;
	if (lba >= m->nlba) {
		f->rep->out_of_range++;
		return;
	}
	uint64_t c1 = cseq + 1; /* 0 is the checkpoint's */
	if (m->need)
		m->need(m->need_ctx, (uint32_t)lba);
	if (m->cseq[lba] > c1)
		return; /* a newer commit point holds it */
	m->cseq[lba] = c1;
	set_entry(m, (uint32_t)lba, v, v == AF_REC_VSEQ_NONE ? AF_REC_PPA_NONE : locate(f->r, from, v, lba, fallback));
}

/* -- plain writes and atomic groups ------------------------------------------ */

/* The first copy of member i of group (first, n) with matching group fields.
 * *at: as seek()'s `from`; becomes the position of the member's version. */
static const af_rec_page_t *group_member(const af_rec_t *r, uint32_t *at, uint64_t first, uint16_t n, uint16_t i)
{
	uint64_t v = first + i;
	uint8_t commit = i == n - 1 ? F_COMMIT : 0;
	*at = seek(r, v < first ? 0 : *at, v); /* a forged group_idx > vseq wraps around */
	for (uint32_t k = *at; k < r->n && r->pages[k].vseq == v; k++) {
		const af_rec_page_t *c = &r->pages[k];
		if (is_data_kind(c->kind) && c->group_len == n && c->group_idx == i && !(c->flags & (F_TX | F_APPEND)) &&
		    (c->flags & F_COMMIT) == commit)
			return c;
	}
	return NULL;
}

static void groups(fin_t *f)
{
	const af_rec_t *r = f->r;
	const uint32_t *a = r->index;
	uint32_t base = 0; /* seek()'s `from` for the next group: candidates come by first seq */
	for (uint32_t i = 0; i < r->ngroup;) {
		const af_rec_page_t *e = &r->pages[a[i]];
		uint64_t first = first_of(e);
		uint16_t n = e->group_len;
		while (i < r->ngroup && first_of(&r->pages[a[i]]) == first && r->pages[a[i]].group_len == n)
			i++;
		/* cseq = first + n - 1, negative for a forged group_idx > vseq */
		int64_t cseq = (int64_t)e->vseq - (int64_t)e->group_idx + (int64_t)n - 1;
		if (cseq < (int64_t)f->floor)
			continue; /* decided by the checkpoint */
		base = seek(r, base, first);
		uint32_t at = base;
		uint16_t k;
		for (k = 0; k < n; k++)
			if (!group_member(r, &at, first, n, k))
				break;
		if (k < n) {
			f->rep->groups_discarded++; /* trap 1: a member is not present */
			continue;
		}
		if (n == 1)
			f->rep->writes_kept++;
		else
			f->rep->groups_kept++;
		at = base;
		for (k = 0; k < n; k++) {
			uint64_t lba = group_member(r, &at, first, n, k)->lba;
			bind(f, at, lba, first + k, (uint64_t)cseq, AF_REC_PPA_NONE);
		}
	}
}

/* -- transactions ------------------------------------------------------------ */

/* first position in the transaction partition at or after (tag, v) */
static uint32_t tx_lower_bound(const af_rec_t *r, uint32_t tag, uint64_t v)
{
	const uint32_t *a = r->index + r->ngroup;
	uint32_t lo = 0, hi = r->ntx;
	while (lo < hi) {
		uint32_t mid = lo + (hi - lo) / 2;
		const af_rec_page_t *e = &r->pages[a[mid]];
		if (e->tid < tag || (e->tid == tag && e->vseq < v))
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

static const af_rec_pending_tx_t *pending_tx(const af_rec_checkpoint_t *ck, uint32_t tag)
{
	for (uint32_t i = 0; ck && i < ck->ntx; i++)
		if (ck->tx[i].tag == tag)
			return &ck->tx[i];
	return NULL;
}

/* A transaction's commit point at cseq: kept when exactly npages distinct
 * versions tagged `tag` lie in [max(first, floor), cseq], plus the pages the
 * checkpoint counted if it opened before the checkpoint (trap 8). */
static void tx_event(fin_t *f, uint32_t tag, int64_t first, uint32_t npages, uint64_t cseq)
{
	const af_rec_t *r = f->r;
	const uint32_t *a = r->index + r->ngroup;
	uint64_t lo = first > (int64_t)f->floor ? (uint64_t)first : f->floor;
	uint32_t start = tx_lower_bound(r, tag, lo), end = start;
	uint64_t counted = 0;
	for (uint64_t last = 0; end < r->ntx; end++) {
		const af_rec_page_t *e = &r->pages[a[end]];
		if (e->tid != tag || e->vseq > cseq)
			break;
		if (end == start || e->vseq != last)
			counted++;
		last = e->vseq;
	}
	const af_rec_pending_tx_t *p = NULL;
	int published = 0;
	if (first < (int64_t)f->floor) {
		p = pending_tx(f->ck, tag);
		published = !p && first >= 0 && f->ck && f->ck->published_below; /* a forged first_vseq >= 2^63 is negative here */
		if (f->prepass) {
			if (published) {
				f->pub_first = !f->pub_any || (uint64_t)first < f->pub_first ? (uint64_t)first : f->pub_first;
				f->pub_cseq = !f->pub_any || cseq > f->pub_cseq ? cseq : f->pub_cseq;
				f->pub_any = 1;
			}
			return;
		}
		if (!published && (!p || (int64_t)p->first_vseq != first)) {
			f->rep->tx_discarded++; /* opened before a checkpoint that does not record it */
			return;
		}
		if (p)
			counted += p->npages;
	} else if (f->prepass) {
		return;
	}
	if (!published && counted != npages) {
		f->rep->tx_discarded++;
		return;
	}
	f->rep->tx_kept++;
	if (p)
		for (uint32_t i = 0; i < p->live_count; i++) {
			uint32_t li = p->live_first + i;
			if (li < f->ck->nlive)
				bind(f, 0, f->ck->live[li].lba, f->ck->live[li].vseq, cseq, f->ck->live[li].ppa);
		}
	for (uint32_t k = start; k < end; k++) { /* later writes of the transaction win */
		const af_rec_page_t *e = &r->pages[a[k]];
		if (k == start || e->vseq != r->pages[a[k - 1]].vseq)
			bind(f, 0, e->lba, e->vseq, cseq, AF_REC_PPA_NONE);
	}
}

static void tx_finals(fin_t *f)
{
	const af_rec_t *r = f->r;
	for (uint32_t i = 0; i < r->n;) {
		uint64_t v = r->pages[i].vseq;
		const af_rec_page_t *fin = NULL;
		for (; i < r->n && r->pages[i].vseq == v; i++) {
			const af_rec_page_t *c = &r->pages[i];
			if (!fin && is_data_kind(c->kind) && (c->flags & (F_TX | F_TX_FINAL | F_COMMIT)) == (F_TX | F_TX_FINAL | F_COMMIT))
				fin = c;
		}
		if (fin && v >= f->floor)
			tx_event(f, fin->tid, first_vseq_of(fin->tid, v), fin->group_len, v);
	}
}

/* -- records ----------------------------------------------------------------- */

/* Re-read a record page's payload for use: entry count, or -1 (sets f->err). */
static int32_t rec_open(fin_t *f, const af_rec_page_t *e)
{
	int32_t count = record_check(f->r, e->ppa, e->kind, e->lba);
	if (count < 0)
		f->err = AF_REC_EIO;
	return count;
}

static int rec_entry(fin_t *f, const af_rec_page_t *e, uint32_t i, void *buf)
{
	uint32_t size = entry_size(e->kind);
	if (f->r->io->read_data(f->r->io->ctx, e->ppa, AF_REC_HDR_SIZE + i * size, buf, size)) {
		f->err = AF_REC_EIO;
		return -1;
	}
	return 0;
}

static const af_rec_pending_append_t *pending_append(const af_rec_checkpoint_t *ck, uint64_t first)
{
	for (uint32_t i = 0; ck && i < ck->napp; i++)
		if (ck->app[i].first_vseq == first)
			return &ck->app[i];
	return NULL;
}

/* Is an append staged before the checkpoint vouched for by it? */
static const af_rec_pending_append_t *vouched(fin_t *f, uint64_t first_vseq, uint32_t nlb)
{
	if (!f->ck || first_vseq >= f->floor)
		return NULL;
	const af_rec_pending_append_t *p = pending_append(f->ck, first_vseq);
	return p && p->nlb == nlb ? p : NULL;
}

static int append_page_present(const af_rec_t *r, uint64_t first, uint32_t nlb, uint32_t i)
{
	uint64_t v = first + i;
	for (uint32_t k = lower_bound(r, v); k < r->n && r->pages[k].vseq == v; k++) {
		const af_rec_page_t *c = &r->pages[k];
		if (is_data_kind(c->kind) && (c->flags & F_APPEND) && c->group_len == nlb && c->group_idx == i &&
		    c->tid == tag_of(first))
			return 1;
	}
	return 0;
}

/* The record group [i, j) of the record partition (one first seq): the page
 * used for each group_idx is the last scanned (the model's dict keeps the
 * last), the group's kind and length are those of the group_idx scanned
 * first.  Returns the number of pages K of a complete group, else 0; the
 * pages used are the last of each group_idx run, in idx order 0..K-1. */
static uint32_t record_group(const af_rec_t *r, uint32_t i, uint32_t j, uint8_t *kind)
{
	const uint32_t *a = r->index + r->ngroup + r->ntx;
	const af_rec_page_t *head = NULL; /* the last page of the idx scanned first */
	uint32_t head_order = UINT32_MAX, distinct = 0;
	for (uint32_t k = i, run = i; k < j; k++) {
		const af_rec_page_t *e = &r->pages[a[k]];
		if (k == i || r->pages[a[k - 1]].group_idx != e->group_idx)
			run = k; /* the run of this group_idx starts here (its first scanned page) */
		if (k + 1 < j && r->pages[a[k + 1]].group_idx == e->group_idx)
			continue;
		distinct++;
		if (r->pages[a[run]].order < head_order) {
			head_order = r->pages[a[run]].order;
			head = e;
		}
	}
	uint32_t len = head->group_len;
	*kind = head->kind;
	if (len == 0 || distinct != len)
		return 0;
	uint64_t first = first_of(head);
	uint32_t idx = 0;
	for (uint32_t k = i; k < j; k++) {
		const af_rec_page_t *e = &r->pages[a[k]];
		if (k + 1 < j && r->pages[a[k + 1]].group_idx == e->group_idx)
			continue; /* not the last of its run */
		if (e->group_idx != idx || e->kind != *kind || e->group_len != len || e->vseq != first + idx ||
		    (e->flags & F_COMMIT) != (idx == len - 1 ? F_COMMIT : 0))
			return 0;
		idx++;
	}
	return len;
}

static void record_commit(fin_t *f, uint32_t i, uint32_t j, uint64_t cseq)
{
	const af_rec_t *r = f->r;
	const uint32_t *a = r->index + r->ngroup + r->ntx;
	for (uint32_t k = i; k < j && !f->err; k++) {
		const af_rec_page_t *e = &r->pages[a[k]];
		if (k + 1 < j && r->pages[a[k + 1]].group_idx == e->group_idx)
			continue;
		int32_t count = rec_open(f, e);
		for (int32_t x = 0; x < count; x++) {
			af_commit_body_t b;
			if (rec_entry(f, e, (uint32_t)x, &b))
				return;
			tx_event(f, tag_of(b.first_vseq), (int64_t)b.first_vseq, b.npages, cseq);
		}
	}
}

static void record_trim(fin_t *f, uint32_t i, uint32_t j, uint64_t cseq)
{
	const af_rec_t *r = f->r;
	const uint32_t *a = r->index + r->ngroup + r->ntx;
	f->rep->trims_kept++;
	for (uint32_t k = i; k < j && !f->err; k++) {
		const af_rec_page_t *e = &r->pages[a[k]];
		if (k + 1 < j && r->pages[a[k + 1]].group_idx == e->group_idx)
			continue;
		int32_t count = rec_open(f, e);
		for (int32_t x = 0; x < count; x++) {
			af_trim_rec_entry_t t;
			if (rec_entry(f, e, (uint32_t)x, &t))
				return;
			if (t.lba >= f->map->nlba)
				continue; /* unbinding what is not there: nothing */
			uint64_t end = t.nlb > f->map->nlba - t.lba ? f->map->nlba : t.lba + t.nlb;
			for (uint64_t lba = t.lba; lba < end; lba++)
				bind(f, 0, lba, AF_REC_VSEQ_NONE, cseq, AF_REC_PPA_NONE);
		}
	}
}

/* pass 0: prove every append page present (or vouched); pass 1: bind */
static void record_remap(fin_t *f, uint32_t i, uint32_t j, uint64_t cseq)
{
	const af_rec_t *r = f->r;
	const uint32_t *a = r->index + r->ngroup + r->ntx;
	for (int pass = 0; pass < 2; pass++) {
		for (uint32_t k = i; k < j; k++) {
			const af_rec_page_t *e = &r->pages[a[k]];
			if (k + 1 < j && r->pages[a[k + 1]].group_idx == e->group_idx)
				continue;
			int32_t count = rec_open(f, e);
			for (int32_t x = 0; x < count; x++) {
				af_remap_rec_entry_t m;
				if (rec_entry(f, e, (uint32_t)x, &m))
					return;
				const af_rec_pending_append_t *p = vouched(f, m.first_vseq, m.nlb);
				for (uint32_t b = 0; b < m.nlb; b++) {
					if (pass == 0) {
						if (!p && (m.nlb > 0xFFFFu || !append_page_present(r, m.first_vseq, m.nlb, b))) {
							f->rep->remaps_discarded++;
							return;
						}
						continue;
					}
					if (m.lba + b >= f->map->nlba) {
						f->rep->out_of_range += m.nlb - b;
						break;
					}
					uint32_t fb = AF_REC_PPA_NONE;
					if (p && f->ck->app_ppa && p->ppa_first + b < f->ck->napp_ppa)
						fb = f->ck->app_ppa[p->ppa_first + b];
					bind(f, 0, m.lba + b, m.first_vseq + b, cseq, fb);
				}
			}
			if (f->err)
				return;
		}
	}
	f->rep->remaps_kept++;
}

/* Transactions published before the floor was read (af_rec_checkpoint_t.published_below): the
 * checkpoint's entries with vseq in [the oldest one's first, floor) are bound at the newest one's
 * commit point, before anything else binds (an entry there is what the map held after every such
 * commit, so no proven event below that point is newer than it).  One pass over the map, only when
 * such a transaction exists (a lazy map loads whole then). */
static void records(fin_t *f);
static void tx_finals(fin_t *f);

static void published_below(fin_t *f)
{
	if (!f->ck || !f->ck->published_below)
		return;
	f->prepass = 1;
	records(f);
	tx_finals(f);
	f->prepass = 0;
	if (f->err || !f->pub_any)
		return;
	af_rec_map_t *m = f->map;
	for (uint32_t lba = 0; lba < m->nlba; lba++) {
		if (m->need)
			m->need(m->need_ctx, lba);
		uint64_t v = m->vseq[lba];
		if (v != AF_REC_VSEQ_NONE && v >= f->pub_first && v < f->floor)
			bind(f, 0, lba, v, f->pub_cseq, m->ppa[lba]);
	}
}

static void records(fin_t *f)
{
	const af_rec_t *r = f->r;
	const uint32_t *a = r->index + r->ngroup + r->ntx;
	for (uint32_t i = 0; i < r->nrec && !f->err;) {
		uint64_t first = first_of(&r->pages[a[i]]);
		uint32_t j = i + 1;
		while (j < r->nrec && first_of(&r->pages[a[j]]) == first)
			j++;
		uint8_t kind;
		uint32_t len = record_group(r, i, j, &kind);
		if (len == 0) {
			if (!f->prepass)
				f->rep->records_incomplete++;
		} else {
			uint64_t cseq = first + len - 1;
			if (cseq >= f->floor) {
				if (kind == AF_KIND_COMMIT)
					record_commit(f, i, j, cseq);
				else if (f->prepass)
					; /* commit records only */
				else if (kind == AF_KIND_TRIM)
					record_trim(f, i, j, cseq);
				else
					record_remap(f, i, j, cseq);
			}
		}
		i = j;
	}
}

/* -- checkpoint-bound LBAs whose version GC copied after the checkpoint ------ */

static void checkpoint_moves(fin_t *f)
{
	const af_rec_t *r = f->r;
	af_rec_map_t *m = f->map;
	int any_append = 0; /* an append copy of a pre-checkpoint version names no LBA */
	for (uint32_t i = 0; i < r->n && r->pages[i].vseq < f->floor; i++)
		if (is_data_kind(r->pages[i].kind) && (r->pages[i].flags & F_APPEND))
			any_append = 1;
	if (any_append) { /* per LBA: O(nlba log n), only when such copies exist (a lazy map loads whole) */
		for (uint32_t lba = 0; lba < m->nlba; lba++) {
			if (m->need)
				m->need(m->need_ctx, lba);
			if (m->cseq[lba] == 0 && m->vseq[lba] != AF_REC_VSEQ_NONE)
				set_entry(m, lba, m->vseq[lba], locate(r, 0, m->vseq[lba], lba, m->ppa[lba]));
		}
		return;
	}
	/* per scanned page, newest first, so the first copy scanned is written last */
	for (uint32_t i = r->n; i-- > 0;) {
		const af_rec_page_t *e = &r->pages[i];
		if (!is_data_kind(e->kind) || e->lba >= m->nlba)
			continue;
		if (m->need)
			m->need(m->need_ctx, (uint32_t)e->lba);
		if (m->cseq[e->lba] == 0 && m->vseq[e->lba] == e->vseq)
			set_entry(m, (uint32_t)e->lba, e->vseq, e->ppa);
	}
}

int af_rec_finish(af_rec_t *r, const af_rec_checkpoint_t *ck, af_rec_map_t *map, af_rec_report_t *rep)
{
	if (!r || !map || !rep || (map->nlba && (!map->ppa || !map->vseq || !map->cseq)))
		return AF_REC_EARG;
	*rep = (af_rec_report_t){
		.pages_scanned = r->scanned,
		.erased = r->erased,
		.torn = r->torn,
		.data_pages = r->data_pages,
		.record_pages = r->record_pages,
	};
	fin_t f = {.r = r, .ck = ck, .map = map, .rep = rep, .floor = ck ? ck->seq : 0, .err = 0};

	for (uint32_t i = 0; !map->cseq_zeroed && i < map->nlba; i++)
		map->cseq[i] = 0; /* every entry is the checkpoint's until a commit point takes it */

	sort_pages(r);
	uint32_t ng = 0, nt = 0, nr = 0;
	for (uint32_t i = 0; i < r->n; i++) { /* partitions: groups, then tx, then records */
		const af_rec_page_t *e = &r->pages[i];
		if (is_data_kind(e->kind) && !(e->flags & (F_TX | F_APPEND)) && e->group_len != 0)
			r->index[ng++] = i;
	}
	for (uint32_t i = 0; i < r->n; i++) {
		const af_rec_page_t *e = &r->pages[i];
		if (is_data_kind(e->kind) && (e->flags & (F_TX | F_APPEND)) == F_TX)
			r->index[ng + nt++] = i;
	}
	for (uint32_t i = 0; i < r->n; i++)
		if (is_record_kind(r->pages[i].kind))
			r->index[ng + nt + nr++] = i;
	r->ngroup = ng;
	r->ntx = nt;
	r->nrec = nr;
	uint32_t *tmp = r->index + r->cap;
	merge_sort(r->pages, r->index, tmp, ng, group_less);
	merge_sort(r->pages, r->index + ng, tmp, nt, tx_less);
	merge_sort(r->pages, r->index + ng + nt, tmp, nr, rec_less);

	published_below(&f);
	if (f.err)
		return f.err;
	groups(&f);
	records(&f);
	if (f.err)
		return f.err;
	tx_finals(&f);
	if (ck)
		checkpoint_moves(&f);

	/* trap 5: resume past everything seen, torn pages' plausible seqs included */
	uint64_t high = r->max_seq;
	if (ck && ck->seq > 0)
		high = max_u64(high, ck->seq - 1);
	uint64_t limit = high + AF_LOG_SEQ_RESUME_GAP, hint = high;
	for (uint32_t i = 0; i < r->n; i++)
		if (r->pages[i].kind == KIND_HINT && r->pages[i].vseq <= limit)
			hint = max_u64(hint, r->pages[i].vseq);
	rep->high_seq = hint;
	rep->next_seq = hint + AF_LOG_SEQ_RESUME_GAP;
	return AF_REC_OK;
}

uint32_t af_rec_valid_counts(const af_rec_map_t *map, uint32_t (*block_of)(void *ctx, uint32_t ppa), void *ctx,
			     uint32_t *counts, uint32_t nblocks, uint32_t *bound)
{
	uint32_t lost = 0, unbound = 0;
	for (uint32_t b = 0; b < nblocks; b++)
		counts[b] = 0;
	for (uint32_t lba = 0; lba < map->nlba; lba++) {
		if (map->vseq[lba] == AF_REC_VSEQ_NONE) {
			unbound++;
			continue;
		}
		if (map->ppa[lba] == AF_REC_PPA_NONE) {
			lost++;
			continue;
		}
		uint32_t b = block_of(ctx, map->ppa[lba]);
		if (b < nblocks)
			counts[b]++;
	}
	if (bound)
		*bound = map->nlba - unbound;
	return lost;
}
