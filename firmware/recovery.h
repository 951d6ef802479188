/* atomflash firmware: recovery at boot.
 *
 * Rebuilds the L2P map from the newest checkpoint plus the pages written
 * after it, keeping exactly the commit points the commit-flag log proves:
 * the same result as the Python reference `atomflash.model.recover`
 * (host/atomflash/model/recover.py, whose docstring states the proof rules;
 * docs/recovery.md describes this implementation and its cross-check test).
 *
 * No malloc, no floating point: every table is the caller's, sized from the
 * geometry read at boot.  Page reads go through callbacks, so the scan can
 * read the OOB record alone (CHANGE READ COLUMN) and read a page's data only
 * for record pages (COMMIT/REMAP/TRIM), in small pieces.
 *
 * Use:
 *     af_rec_t r;
 *     af_rec_init(&r, &io, page_data, pages, index, cap);
 *     for each page written since the checkpoint: af_rec_scan(&r, ppa);
 *     af_rec_block_end_filter(&r, is_block_end, torn_end, ctx);
 *     MLC parts: af_rec_mlc_filter(&r, pages_per_block, upper_state, ctx);
 *     load the checkpoint into map.ppa / map.vseq (or af_rec_map_clear);
 *     af_rec_finish(&r, &checkpoint_or_NULL, &map, &report);
 *     af_rec_valid_counts(&map, block_of, ctx, counts, nblocks, &bound);
 *
 * Recovery writes nothing to flash and its result depends only on the intact
 * pages scanned and the checkpoint, so it can be cut and rerun (trap 6).
 */
#ifndef AF_RECOVERY_H
#define AF_RECOVERY_H

#include <stddef.h>
#include <stdint.h>

#include "atomflash_spec.h"

/* map.vseq of an unbound LBA (no real seq ever reaches it). */
#define AF_REC_VSEQ_NONE UINT64_MAX
/* map.ppa of an unbound LBA, and of a bound one no page holds (lost). */
#define AF_REC_PPA_NONE ((uint32_t)AF_PPA_UNMAPPED)

/* Return codes. */
#define AF_REC_OK 0
#define AF_REC_EFULL (-1) /* af_rec_scan: the page table is full (size it for the pages you scan) */
#define AF_REC_EIO (-2)   /* af_rec_finish: a record page read intact in the scan but not on re-read */
#define AF_REC_EARG (-3)  /* bad argument */

/* What af_rec_scan found (>= 0). */
#define AF_REC_PAGE_ERASED 0 /* all-FFh OOB: never programmed */
#define AF_REC_PAGE_TORN 1   /* present but not intact (bad CRC/format/kind, unreadable, bad record body) */
#define AF_REC_PAGE_DATA 2   /* intact DATA / GC_COPY / APPEND page */
#define AF_REC_PAGE_RECORD 3 /* intact COMMIT / REMAP / TRIM record page */
#define AF_REC_PAGE_OTHER 4  /* intact page of another kind (CHECKPOINT): counts for the seq only */

/* Page access.  Each returns 0 on success, nonzero when the page cannot be
 * read (uncorrectable): the page is then torn ("absent, never data"). */
typedef struct {
	/* the page's OOB record, AF_OOB_SIZE bytes, raw (CRC not checked by the reader) */
	int (*read_oob)(void *ctx, uint32_t ppa, void *oob);
	/* len bytes of the page's data area from byte offset (record pages, and the
	 * block ends af_rec_block_end_filter checks) */
	int (*read_data)(void *ctx, uint32_t ppa, uint32_t offset, void *buf, uint32_t len);
	void *ctx;
} af_rec_io_t;

/* One scanned page the proofs may need (intact data and record pages, and the
 * raw seq of torn pages whose format byte is right).  Caller-provided table:
 * one entry per page scanned is always enough. */
typedef struct {
	uint64_t vseq;  /* version (data), seq (record), raw seq (torn-page hint) */
	uint64_t lba;   /* data: OOB lba; record: its OOB seq (the payload must repeat it) */
	uint32_t ppa;
	uint32_t tid;
	uint32_t order; /* scan order: among copies of one version the first scanned is used */
	uint16_t group_len;
	uint16_t group_idx;
	uint8_t kind;   /* AF_KIND_*, or 0 for a torn-page seq hint */
	uint8_t flags;  /* OOB flags */
} af_rec_page_t;

/* The checkpoint's part beyond the map (trap 8).  The map itself is loaded by
 * the caller into af_rec_map_t (ppa and vseq of every bound LBA). */
typedef struct {
	uint64_t lba;
	uint64_t vseq;
	uint32_t ppa; /* where the version is (AF_REC_PPA_NONE if unknown) */
} af_rec_live_t;

typedef struct {
	uint32_t tag;        /* OOB.tid of its pages: first_vseq & AF_LOG_TAG_MASK */
	uint32_t npages;     /* pages it had programmed before the checkpoint, superseded ones included */
	uint64_t first_vseq;
	uint32_t live_first; /* its latest writes so far: live[live_first .. live_first+live_count) */
	uint32_t live_count;
} af_rec_pending_tx_t;

typedef struct {
	uint64_t first_vseq;
	uint32_t nlb;
	uint32_t ppa_first; /* where its pages are: app_ppa[ppa_first .. ppa_first+nlb) */
} af_rec_pending_append_t;

typedef struct {
	uint64_t seq; /* every commit point with seq < this is reflected in the map */
	const af_rec_pending_tx_t *tx;          /* transactions open at the checkpoint */
	uint32_t ntx;
	const af_rec_live_t *live;              /* their live bindings */
	uint32_t nlive;
	const af_rec_pending_append_t *app;     /* live (not yet remapped) appends */
	uint32_t napp;
	const uint32_t *app_ppa;
	uint32_t napp_ppa;
	/* the firmware's checkpoint: no open transactions recorded, its floor held at or below the first
	 * page of every transaction unpublished when the floor was read, the map read after that.  A
	 * transaction begun below seq that committed at or above it was published whole before the map
	 * was read: kept without counting its pages, and the map's entries with vseq in [its first, seq)
	 * take its commit point (atomflash.model.recover's Checkpoint.published_below) */
	int published_below;
} af_rec_checkpoint_t;

/* Optional running counts of a map (af_rec_map_t.tally): what
 * af_rec_valid_counts would return, kept up to date entry by entry as
 * af_rec_map_clear and af_rec_finish change the map, so a boot needs no pass
 * over the whole map for them.  The caller starts them at the counts of the
 * map it loaded (a checkpoint carries them: spec.CKPT). */
typedef struct {
	uint32_t *counts; /* per block: bound LBAs whose version a page of it holds */
	uint32_t nblocks; /* block_of results >= this are not counted */
	uint32_t (*block_of)(void *ctx, uint32_t ppa);
	void *ctx;
	uint32_t bound;   /* bound LBAs, lost ones included */
	uint32_t lost;    /* bound LBAs no page holds (ppa AF_REC_PPA_NONE) */
} af_rec_tally_t;

/* The map, one entry per LBA in each array (caller's memory).
 * In: ppa/vseq hold the checkpoint's map (af_rec_map_clear for none).
 * Out: the recovered map.  cseq needs no initialisation unless cseq_zeroed
 * says the caller did it (af_rec_map_clear does; a checkpoint loader can as
 * it fills the map, saving af_rec_finish a pass); on return it holds
 * 1 + the commit seq of each LBA's binding or unbinding, 0 where the
 * checkpoint's entry stands. */
typedef struct {
	uint32_t nlba;
	uint32_t *ppa;  /* AF_REC_PPA_NONE: unbound, or bound but lost */
	uint64_t *vseq; /* AF_REC_VSEQ_NONE: unbound */
	uint64_t *cseq;
	af_rec_tally_t *tally; /* NULL: none kept */
	int cseq_zeroed;       /* every cseq is 0 on entry to af_rec_finish */
	/* NULL, or called before af_rec_finish reads or changes entry lba: a caller
	 * that loads the checkpoint's map lazily brings that part in (and zeroes its
	 * cseq).  Entries it is never called for are the checkpoint's, untouched. */
	void (*need)(void *ctx, uint32_t lba);
	void *need_ctx;
} af_rec_map_t;

/* Counts for the boot report (also what the cross-check compares). */
typedef struct {
	uint32_t pages_scanned;
	uint32_t erased;
	uint32_t torn;               /* present, not intact: absent (trap 3) */
	uint32_t data_pages;         /* intact data pages (any kind of copy) */
	uint32_t record_pages;       /* intact record pages */
	uint32_t writes_kept;        /* plain writes applied (commit points >= checkpoint seq) */
	uint32_t groups_kept;        /* atomic groups of >= 2 pages applied */
	uint32_t groups_discarded;   /* groups (any length) with a member not proven present (trap 1) */
	uint32_t tx_kept;            /* transactions committed (COMMIT record entries, tx_final pages) */
	uint32_t tx_discarded;       /* commit points whose transaction is not proven complete */
	uint32_t remaps_kept;
	uint32_t remaps_discarded;   /* remap records naming an append page not present */
	uint32_t trims_kept;
	uint32_t records_incomplete; /* record groups with a page missing */
	uint32_t out_of_range;       /* bindings to LBAs >= nlba, ignored */
	uint64_t high_seq;           /* highest seq seen (intact, checkpoint, plausible torn) */
	uint64_t next_seq;           /* where the log resumes: high_seq + AF_LOG_SEQ_RESUME_GAP (trap 5) */
} af_rec_report_t;

typedef struct {
	const af_rec_io_t *io;
	uint32_t page_data;  /* bytes in a page's data area (record pages are checked against it) */
	af_rec_page_t *pages;
	uint32_t *index;     /* 2 x cap entries of scratch (partitions, and the sort's) */
	uint32_t cap;
	uint32_t n;
	uint32_t scanned;
	uint32_t erased;
	uint32_t torn;
	uint32_t data_pages;
	uint32_t record_pages;
	uint64_t max_seq;    /* highest intact seq scanned (0: none) */
	uint32_t mlc_dropped; /* data/record pages on lower pages of incomplete word lines (af_rec_mlc_filter) */
	/* set by af_rec_finish */
	uint32_t ngroup, ntx, nrec; /* index partitions */
} af_rec_t;

/* Start a scan.  pages: cap entries (the pages you will scan); index: 2 x cap. */
void af_rec_init(af_rec_t *r, const af_rec_io_t *io, uint32_t page_data, af_rec_page_t *pages,
		 uint32_t *index, uint32_t cap);

/* Scan one page: reads its OOB, and for a record page its header and entries
 * (to check the payload CRC).  Pages may be scanned in any order; scanning a
 * page twice counts it twice (harmless for the map).  Returns AF_REC_PAGE_*
 * or AF_REC_EFULL. */
int af_rec_scan(af_rec_t *r, uint32_t ppa);

/* MLC paired pages (DESIGN.md trap 4): after the scan, forget every data or
 * record page on a lower page whose word line is not complete: its upper page
 * (af_mlc_upper_of) not in the block's written prefix, or not intact.  A cut in
 * the upper page may have damaged the lower page behind an intact OOB, and the
 * core acknowledges nothing on a lower page before its upper page programmed
 * successfully (rtl/ftl/pairing.py; a failed upper page fails its lower page
 * too, which is then written again elsewhere).  upper_state(ctx, upper_ppa)
 * says what the caller knows of the upper page: AF_REC_UPPER_ABSENT (past the
 * written prefix), AF_REC_UPPER_INTACT, or AF_REC_UPPER_UNKNOWN (in the
 * prefix of a block with torn pages: the filter reads its OOB, and a record
 * page's payload, again).  Their seqs still count for the resume (max_seq).
 * The Python reference: recover(..., mlc=pages_per_block).  Returns the pages
 * dropped. */
#define AF_REC_UPPER_ABSENT 0
#define AF_REC_UPPER_INTACT 1
#define AF_REC_UPPER_UNKNOWN 2
uint32_t af_rec_mlc_filter(af_rec_t *r, uint32_t pages_per_block, int (*upper_state)(void *ctx, uint32_t ppa),
			   void *ctx);

/* A cut tears the page being programmed: the last page of its block's written
 * prefix (the pages before the first erased one).  Its OOB record can survive
 * while its data does not (an intact OOB over an uncorrectable page), so every
 * intact data page `is_block_end` names is read (io->read_data); one whose data
 * does not read is torn: dropped (counted in torn, its seq stays in max_seq),
 * and `torn_end` (may be NULL) is told, so an MLC caller can treat its word
 * line as incomplete.  Call after the scan, before af_rec_mlc_filter.  Returns
 * how many it dropped.  Same rule as the model ("Torn under an intact OOB"). */
uint32_t af_rec_block_end_filter(af_rec_t *r, int (*is_block_end)(void *ctx, uint32_t ppa),
				 void (*torn_end)(void *ctx, uint32_t ppa), void *ctx);

/* Every LBA unbound (a boot with no checkpoint); cseq zeroed, the tally's counts too. */
void af_rec_map_clear(af_rec_map_t *map);

/* Decide every commit point and rebuild the map in place (see the header
 * comment).  ck may be NULL (no valid checkpoint).  Reads record pages again
 * through io.  Returns AF_REC_OK, AF_REC_EIO or AF_REC_EARG. */
int af_rec_finish(af_rec_t *r, const af_rec_checkpoint_t *ck, af_rec_map_t *map, af_rec_report_t *rep);

/* The contribution of one entry to a tally: dir +1 adds it, -1 takes it out
 * (a loader adding entries it fills in; af_rec_finish around each change). */
void af_rec_tally_entry(af_rec_tally_t *t, uint64_t vseq, uint32_t ppa, int dir);

/* Per-block valid page counts from a recovered map: counts[block_of(ppa)]++
 * for every bound LBA whose version a page holds (block_of results >= nblocks
 * are ignored); *bound (if not NULL): the bound LBAs, lost ones included.
 * Returns the number of bound LBAs no page holds (lost). */
uint32_t af_rec_valid_counts(const af_rec_map_t *map, uint32_t (*block_of)(void *ctx, uint32_t ppa), void *ctx,
			     uint32_t *counts, uint32_t nblocks, uint32_t *bound);

#endif
